# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory examples of README.md pass the validation play's checks, so the README
cannot show a rule or a target that the collection would refuse."""
import os
import re

import yaml
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import inputs as validate

ROOT = unitpaths.ROOT


def _readme_block(title):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    match = re.search(r"```yaml\n# %s\n(.*?)```" % re.escape(title), text, re.S)
    assert match, "README.md has no yaml block starting with '# %s'" % title
    return yaml.safe_load(match.group(1))


def _profiles():
    with open(os.path.join(ROOT, "roles/qualify/defaults/main/profiles.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["fleetqual_profiles"]


def test_group_vars_example_is_valid():
    inputs = _readme_block("inventory/group_vars/db.yml")
    assert inputs["fleetqual_thresholds"], "the example shows threshold rules"
    inputs["fleetqual_profiles"] = _profiles()
    assert validate.validate_inputs(inputs, host="db01") == []


def test_group_vars_example_would_catch_a_typo():
    inputs = _readme_block("inventory/group_vars/db.yml")
    inputs["fleetqual_profiles"] = _profiles()
    inputs["fleetqual_thresholds"][0]["workload"] = "overcache"
    problems = validate.validate_inputs(inputs, host="db01")
    assert any("did you mean over_cache" in p for p in problems), problems


def test_targets_example_is_valid():
    inputs = _readme_block("host_vars/db01.yml")
    targets, errors = validate.resolve_targets(inputs["fleetqual_targets"], "/var/tmp/fleetqual", host="db01")
    assert errors == []
    assert [t["kind"] for t in targets] == ["path", "device"]
    device = targets[1]
    assert device["device"].startswith("/dev/disk/by-id/") and device["serial"] == "S64HNE0T123456"


def test_targets_example_without_the_opt_in_is_refused():
    inputs = _readme_block("host_vars/db01.yml")
    del inputs["fleetqual_targets"][1]["destroy_data"]
    errors = validate.resolve_targets(inputs["fleetqual_targets"], "/var/tmp/fleetqual", host="db01")[1]
    assert any("destroy_data" in e and "fleetqual_targets[1]" in e for e in errors), errors
