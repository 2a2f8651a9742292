# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Golden report files (issue 19): every format rendered from a stored fleet.json is byte
for byte what was stored (fixtures/report_golden/<fleet>/), and the fleets built today
from the unit tests' fixtures are the stored fleet.json (each workload's own ``metrics``
aside). A refactor of the report layer
keeps both; a change meant to alter a value regenerates them with

    .venv/bin/python tests/unit/fixtures/report_golden/golden_fleets.py --write

and says in its commit which value changed and why. The test itself never writes them."""
from __future__ import annotations

import difflib
import json
import os
import sys

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet_json import to_json

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "report_golden")
sys.path.insert(0, GOLDEN)
import golden_fleets  # noqa: E402

NAMES = sorted(d for d in os.listdir(GOLDEN) if os.path.isfile(os.path.join(GOLDEN, d, "fleet.json")))
EXPECTED_FILES = {"fleet.json", "junit.xml", "report.html", "report.md", "not-passed.limit", "fleet.prom",
                  "table-110.txt", "table-72.txt"}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _same(name, fname, want, got):
    if want != got:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "stored", "now"))[:40])
        pytest.fail("%s/%s differs from the stored golden file:\n%s" % (name, fname, diff))


def test_the_golden_fleets_cover_every_verdict_and_section():
    assert len(NAMES) >= 5
    text = "".join(_read(os.path.join(GOLDEN, n, "fleet.json")) for n in NAMES)
    for verdict in ("PASS", "FAIL", "ERROR", "UNREACHABLE"):
        assert '"verdict": "%s"' % verdict in text
    for needle in ('"target": "nvme"', '"kind": "firmware"', '"metric": "iops"', '"delta_pct"', '"slice": {',
                   '"detail": null', '"cache_proof"'):
        assert needle in text, needle


@pytest.mark.parametrize("name", NAMES)
def test_every_format_rendered_from_a_stored_fleet_json_is_unchanged(name, tmp_path):
    stored = _read(os.path.join(GOLDEN, name, "fleet.json"))
    got = golden_fleets.renders(stored, str(tmp_path))
    assert set(got) == EXPECTED_FILES
    for fname in sorted(got):
        _same(name, fname, _read(os.path.join(GOLDEN, name, fname)), got[fname])


def _without_metrics(text):
    """fleet.json text without each workload's ``metrics`` (the record's own figures, passed
    through as they are: metrics.py's, not the report's; a new metric there is no change of
    the report)."""
    fleet = json.loads(text)
    for h in fleet["hosts"]:
        for w in h["workloads"]:
            w.pop("metrics", None)
    return to_json(fleet)


def test_the_fleets_built_from_the_fixtures_are_the_stored_fleet_json():
    built = golden_fleets.fleets()
    assert sorted(built) == NAMES
    for name in NAMES:
        stored = _read(os.path.join(GOLDEN, name, "fleet.json"))
        assert '"metrics": {' in stored
        _same(name, "fleet.json", _without_metrics(stored), _without_metrics(built[name]))
