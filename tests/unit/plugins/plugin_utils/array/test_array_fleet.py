"""fleet.json's ``arrays``: computed when the report is aggregated from the hosts'
stored records, gating their verdicts through verdict.final_verdict, in every format, the
same when rendered again from fleet.json alone and when merged from slices."""
import datetime
import json
import os
import sys

import pytest

from test_array_report import HOSTS, _runs
import unitpaths

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
import report_tools as tools  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.module_utils.common import atomic  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store  # noqa: E402

RUN_ID = "20261125T020000Z"
NOW = datetime.datetime(2026, 11, 25, 2, 30, tzinfo=datetime.timezone.utc)


def records(results_dir, thresholds, lost=None):
    """Host records as store.yml writes them: the three array hosts (no workloads of their
    own) and db1, a host in no array."""
    runs = _runs(thresholds, lost)
    out = {}
    for host in HOSTS + ["db1"]:
        out[host] = {"schema_version": 1, "host": host, "run_id": RUN_ID, "profile": "quick", "groups": ["san"],
                     "facts": {}, "test_dir": "/var/tmp/fleetqual", "workloads": [] if host in runs else [
                         {"id": "w", "workload": "cache", "mode": "rndrd", "threads": 1, "metrics": {"iops": 10.0}}],
                     "verdict": "PASS", "reasons": [], "checks": [], "warnings": [], "diagnostics": {},
                     "array_run": runs.get(host),
                     "results_file": os.path.join(results_dir, RUN_ID, "%s.json" % host)}
    return out


def test_array_verdict_gates_its_hosts_only(tmp_path):
    f = fleet.aggregate(records(str(tmp_path), [{"initiators": 3, "min_aggregate_iops": 1e9}]), now=NOW,
                        run_id=RUN_ID)
    (arr,) = f["arrays"]
    assert arr["name"] == "san" and arr["verdict"] == "FAIL" and arr["hosts"] == HOSTS
    by_host = {h["host"]: h for h in f["hosts"]}
    for host in HOSTS:
        assert by_host[host]["verdict"] == "FAIL"
        assert by_host[host]["reasons"][0].startswith("array san: min_aggregate_iops@*/i3: step 3")
        assert by_host[host]["array"] == "san"
    assert by_host["db1"]["verdict"] == "PASS" and "array" not in by_host["db1"]
    assert f["summary"]["arrays"] == 1 and f["summary"]["arrays_passed"] == 0
    json.loads(json.dumps(f, allow_nan=False))           # no NaN in fleet.json

    ok = fleet.aggregate(records(str(tmp_path), [{"min_fairness": 0.5}]), now=NOW, run_id=RUN_ID)
    # an array host needs no workloads of its own: PASS through the array
    assert {h["host"]: h["verdict"] for h in ok["hosts"]} == dict.fromkeys(HOSTS + ["db1"], "PASS")
    plain = fleet.aggregate({"db1": records(str(tmp_path), [])["db1"]}, now=NOW, run_id=RUN_ID)
    assert "arrays" not in plain and "arrays" not in plain["summary"]


def test_every_format_shows_the_array_and_rerenders_from_fleet_json(tmp_path):
    f = fleet.aggregate(records(str(tmp_path), [{"initiators": 3, "min_aggregate_iops": 1e9}], lost=("h2", 2)),
                        now=NOW, run_id=RUN_ID)
    out = str(tmp_path / "out")
    written = report.write_reports(f, out, ("json", "junit", "html", "md"))
    files = {k: open(p, encoding="utf-8").read() for k, p in written.items() if k != "limit"}
    assert '"arrays": [' in files["json"]
    assert 'name="fleetqual.array.san"' in files["junit"] and 'name="san step 2 rndrd 2x2"' in files["junit"]
    suites = {s.get("name"): s for s in tools.xmllint_junit(files["junit"]).iter("testsuite")}   # junit-10.xsd
    assert (suites["fleetqual.array.san"].get("tests"), suites["fleetqual.array.san"].get("failures")) == ("4", "2")
    assert "<h2>Arrays</h2>" in files["html"] and "aggregate IOPS by outstanding I/O" in files["html"]
    assert "## Arrays" in files["md"] and "incomplete: h2" in files["md"]
    again = str(tmp_path / "again")
    os.makedirs(again)
    re = report.rerender(written["json"], again, ("junit", "html", "md"))
    for k, p in re.items():
        if k != "limit":
            assert open(p, encoding="utf-8").read() == files[k], k
    prometheus_client = pytest.importorskip("prometheus_client")
    assert prometheus_client is not None
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.prometheus import prometheus_text
    text = prometheus_text(f)
    assert 'fleetqual_array_pass{array="san"} 0.0' in text
    tools.promtool_check(text)                            # names, units, labels as Prometheus wants them
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_text import detail_lines
    assert any(line.startswith("array san: FAIL") for line in detail_lines(f, width=110))


def test_a_report_merged_from_slices_keeps_the_array(tmp_path):
    """Slice 1 (h1, h2) and slice 2 (h3, db1) each store their records and entries; the
    merge reads the entries, and the array members' records again for their array_run."""
    results = str(tmp_path / "results")
    recs = records(results, [{"initiators": 3, "min_aggregate_iops": 1e9}])
    run_dir = os.path.join(results, RUN_ID)
    for number, hosts in ((1, ["h1", "h2"]), (2, ["h3", "db1"])):
        part = {h: recs[h] for h in hosts}
        for rec in part.values():
            os.makedirs(os.path.dirname(rec["results_file"]), exist_ok=True)
            atomic.write_atomic(rec["results_file"], json.dumps(rec) + "\n")
        sink = run_store.EntryWriter(run_dir, "slice-%d" % number)
        fleet.aggregate(part, now=NOW, run_id=RUN_ID, entry_sink=sink)
        sink.close()
    merged = run_store.aggregate_run(run_dir, now=NOW, store_entries=False)
    whole = fleet.aggregate(recs, now=NOW, run_id=RUN_ID)
    assert merged["arrays"] == whole["arrays"]
    assert merged["arrays"][0]["steps_complete"] == 3
    assert {h["host"]: h["verdict"] for h in merged["hosts"]} == {"h1": "FAIL", "h2": "FAIL", "h3": "FAIL", "db1": "PASS"}


def test_the_gate_fails_the_members_of_a_failing_array(tmp_path):
    """The gate play's verdicts (action fleet_verdicts) come from the same aggregation as the
    report: an array that fails its rule fails its members at the gate, so the exit code."""
    sys.path.insert(0, os.path.join(unitpaths.ROOT,
                                    "plugins", "action"))
    from ansible_collections.fleetqual.storage.plugins.action.fleet_verdicts import final_verdicts
    defaults = dict(fleet.DEFAULT_OPTIONS)
    warnings = []
    failing = final_verdicts(records(str(tmp_path), [{"initiators": 3, "min_aggregate_iops": 1e9}]),
                             defaults.get, warnings.append)
    assert {h: v["verdict"] for h, v in failing.items()} == dict(dict.fromkeys(HOSTS, "FAIL"), db1="PASS")
    assert failing[HOSTS[0]]["reasons"][0].startswith("array san: min_aggregate_iops@*/i3: step 3")
    passing = final_verdicts(records(str(tmp_path), [{"min_fairness": 0.5}]), defaults.get, warnings.append)
    assert {v["verdict"] for v in passing.values()} == {"PASS"} and warnings == []
