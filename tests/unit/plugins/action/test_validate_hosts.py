"""The validation play checks the whole fleet in one task (action fleetqual.storage.validate_hosts):
no loop item per host, every refused host named once in one failure with its
variable, the valid hosts not named; the same refusals as the argument spec and
validate_inputs give one host at a time."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
import unitpaths

from ansible_collections.fleetqual.storage.plugins.action.validate_hosts import host_problems
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs

ROOT = unitpaths.ROOT
SPEC = yaml.safe_load(open(os.path.join(ROOT, "roles", "qualify", "meta", "argument_specs.yml")))[
    "argument_specs"]["main"]["options"]
HOSTS = 40


def run_validation(tmp_path, bad):
    hosts = {"db%02d" % i: {"ansible_host": "192.0.2.1"} for i in range(HOSTS)}
    for name, hv in bad.items():
        hosts[name].update(hv)
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "fleetqual.storage.qualify", "tasks_from": "validate.yml"},
         "vars": {"fleetqual_validate_hosts": "{{ groups['all'] }}"}}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml", "pb.yml"],
                       env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.slow
def test_the_fleet_is_checked_in_one_task_and_every_refused_host_is_named_once(tmp_path):
    rc, text = run_validation(tmp_path, {
        "db07": {"fleetqual_cache_size": ["not", "a", "size"]},              # the argument spec: a list, not a str
        "db23": {"fleetqual_profile": "quik"},                               # validate_inputs: did you mean
        "db31": {"fleetqual_inconclusive": "wran"}})                         # the argument spec: a choice
    assert rc != 0, text
    assert "(item=" not in text, text                     # no loop item per host
    (fatal,) = [line for line in text.splitlines() if line.startswith("fatal: [localhost]: FAILED! => ")]
    problems = json.loads(fatal.split(" => ", 1)[1])["problems"]
    assert [line.split(":", 1)[0] for line in problems] == ["db07", "db23", "db31"], problems
    assert "db31: value of fleetqual_inconclusive must be one of: fail, warn, got: wran" in text, text
    assert "db23: fleetqual_profile: unknown profile 'quik'" in text, text
    assert "3 of %d hosts refused before any host was contacted" % HOSTS in text, text
    assert "db00:" not in text and "db39:" not in text


@pytest.mark.slow
def test_a_valid_fleet_passes_in_one_task(tmp_path):
    rc, text = run_validation(tmp_path, {})
    assert rc == 0, text
    assert "(item=" not in text, text


@pytest.mark.parametrize("inputs", [
    {},
    {"fleetqual_profile": "quick"},
    {"fleetqual_profile": "quik"},
    {"fleetqual_inconclusive": "wran"},
    {"fleetqual_cache_size": "64M", "fleetqual_seed": "x"},
    {"fleetqual_test_dir": "/"},
])
def test_host_problems_are_the_spec_s_else_validate_inputs(inputs):
    """A host's problems: the argument spec's messages when it refuses the types or choices,
    else validate_inputs over the defaults updated with the host's values."""
    defaults = {"fleetqual_profile": "quick", "fleetqual_test_dir": "/var/tmp/fleetqual"}
    spec_errors = ArgumentSpecValidator(SPEC).validate(dict(inputs)).error_messages
    got = host_problems(ArgumentSpecValidator(SPEC), dict(inputs), defaults)
    if spec_errors:
        assert got == list(spec_errors)
    else:
        assert got == validate_inputs(dict(defaults, **inputs))
