# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Golden report files: every format rendered from a stored fleet.json is byte
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
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import to_json

GOLDEN = os.path.join(unitpaths.UNIT, "fixtures", "report_golden")
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
                   '"detail": null', '"cache_proof"', '"verify_first": [{', '"verify_off": "verify: false'):
        assert needle in text, needle


def test_integrity_shows_in_every_format(tmp_path):
    """Blocks read back wrong (docs/integrity.md): the ``bad`` column everywhere, ``verified``
    in report.md and report.html, ``off`` for a workload that did not verify, the first
    mismatches under the failing host, a series per host, the JUnit failure message."""
    got = golden_fleets.renders(_read(os.path.join(GOLDEN, "integrity", "fleet.json")), str(tmp_path))
    lines = got["table-110.txt"].splitlines()
    assert lines[0].split()[7:10] == ["op", "bad", "%util"]
    db2 = [ln for ln in lines if ln.startswith("db2 ")][0].split()
    assert db2[7:9] == ["read", "3"] and db2[11:13] == ["FAIL", "data_corrupt"]
    assert any(ln.split()[6:8] == ["write", "off"] for ln in lines)
    mismatch = ("over_cache-rndwr-t4: stale (verify pass) lost write: /dev/vdb offset 8192 holds generation 2, "
                "the last acknowledged write was generation 5")
    assert "- mismatch: " + mismatch in got["report.md"].splitlines()
    assert "| op | verified | bad | %util |" in got["report.md"]
    assert "| db2 | over_cache-rndrd-t4 | 4 | 40.0k | 625 | 0.525 | 0.700 | read | 52.0k | 3 | 98 | 0.800 | FAIL |" in got["report.md"]
    assert '<li class="mismatch">mismatch: %s</li>' % mismatch in got["report.html"]
    assert 'fleetqual_host_verify_bad_blocks{group="db",host="db2"} 4.0' in got["fleet.prom"]
    assert 'fleetqual_host_io_errors{group="db",host="db4"} 100.0' in got["fleet.prom"]
    assert "[verify off: verify: false in the workload]" in got["junit.xml"]
    assert ('<failure message="over_cache-rndrd-t4: 3 corrupt blocks read (checksum wrong): /dev/vdb offset 1048576: '
            'expected crc32c 0x8f3a21c4, found 0x00000000 (+2 more)" type="data_corrupt"') in got["junit.xml"]


def test_a_fleet_json_without_verification_renders_dashes(tmp_path):
    """A fleet.json written before verification (rows without ``verified``/``bad``) renders
    ``-`` in the new columns and no bad-block series."""
    fleet = json.loads(_read(os.path.join(GOLDEN, "integrity", "fleet.json")))
    for h in fleet["hosts"]:
        for w in h["workloads"]:
            for k in ("verified", "bad", "verify_off", "verify_first"):
                w.pop(k, None)
    got = golden_fleets.renders(to_json(fleet), str(tmp_path))
    assert "mismatch" not in got["report.md"] and "verify_bad_blocks" not in got["fleet.prom"]
    lines = got["table-110.txt"].splitlines()
    end = lines[0].index(" bad") + len(" bad")          # the column is right-aligned under its header
    assert [ln[end - 3:end].strip() for ln in lines[2:12]] == ["-"] * 10


@pytest.mark.parametrize("name", NAMES)
def test_every_format_rendered_from_a_stored_fleet_json_is_unchanged(name, tmp_path):
    stored = _read(os.path.join(GOLDEN, name, "fleet.json"))
    got = golden_fleets.renders(stored, str(tmp_path))
    assert set(got) == EXPECTED_FILES
    for fname in sorted(got):
        _same(name, fname, _read(os.path.join(GOLDEN, name, fname)), got[fname])


def _without_metrics(text):
    """fleet.json text without each workload's ``metrics`` (the record's own figures, passed
    through as they are: the metrics', not the report's; a new metric there is no change of
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


def test_a_target_case_of_junit_quotes_its_integrity_failure(tmp_path):
    """With named targets (one JUnit case per host and target), the case of the target whose
    blocks read back wrong fails with that reason; the other target's case passes."""
    import test_drive_consistency as tdc
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import host as judge
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as metrics
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
    rec = tdc.report_record(tmp_path, "db01", 1)
    bad = [w for w in rec["workloads"] if w["target"] == "data1"][0]
    bench = bad["result"]["bench"]
    bench["verify"] = {"enabled": True, "reason": None, "checked": 900, "corrupt": 0, "misplaced": 0, "stale": 2,
                       "generation_map": {"tracked": True, "blocks": 64, "bytes": 256, "reason": None}, "pass": None,
                       "first": [{"op": "read", "file": "/data1/fleetqual/over_cache-128x8M/f7", "device": None,
                                  "offset": 65536, "kind": "stale", "expected": "gen 4 run 1f", "found": "gen 3 run 1f",
                                  "found_offset": None}]}
    bad["metrics"] = metrics.workload_metrics(bad)
    j = judge.judge(rec["workloads"], [], expected_ids=rec["workloads"], drives=rec["drives"])
    rec.update(verdict=j["verdict"], reasons=j["reasons"], checks=j["checks"])
    cases = {c["name"]: c for _g, group in render_junit.junit_cases(fleet.aggregate({"db01": rec}))
             for c in group}
    assert cases["db01 nvme"]["kind"] is None
    data1 = cases["db01 data1"]
    assert (data1["kind"], data1["type"]) == ("failure", "lost_write")
    assert data1["message"] == (
        "over_cache-rndrd-t64 on data1: 2 stale blocks read (an older generation than the last acknowledged write): "
        "lost write: /data1/fleetqual/over_cache-128x8M/f7 offset 65536 holds generation 3, the last acknowledged "
        "write was generation 4 (+1 more)")
