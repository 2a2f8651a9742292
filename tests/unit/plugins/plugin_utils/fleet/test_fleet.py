"""Unit tests of plugins/plugin_utils/fleet/aggregate.py: aggregation, verdict rules, outliers,
baseline deltas, history.jsonl and the Prometheus textfile (synthetic records only)."""
from __future__ import annotations

import datetime
import json
import math
import os
import sys

import pytest
import unitpaths
from hypothesis import given, settings, strategies as st

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))

import report_synth as synth  # noqa: E402
import report_tools as tools  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import baseline
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import fleet_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import rows as fleet_rows
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import outliers
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import plain
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import stats
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import verdict  # noqa: E402

NOW = datetime.datetime(2026, 11, 21, 12, 30, 0, tzinfo=datetime.timezone.utc)
SMALL = (("cache", "rndrd", 1), ("cache", "rndrd", 64), ("log", "seqwr", 1))


def records(n=5, group="db", scale=None, matrix=SMALL):
    out = {}
    for i in range(n):
        host = "%s%d" % (group, i + 1)
        out[host] = synth.make_record(host, group=group, matrix=matrix,
                                      scale=(scale or {}).get(host, 1.0 + 0.01 * i), samples=3, seed=i)
    return out


def host(f, name):
    return next(h for h in f["hosts"] if h["host"] == name)


# --------------------------------------------------------------------------- helpers

def test_num_and_plain():
    assert stats.to_float(float("nan")) is None
    assert stats.to_float(float("inf")) is None
    assert stats.to_float("12.5") == 12.5
    assert stats.to_float(None) is None and stats.to_float(True) is None and stats.to_float("x") is None

    class Tagged(str):
        pass

    class TDict(dict):
        pass

    p = plain.plain(TDict(a=Tagged("x"), b=(1, 2.0, None)))
    # exactly the built-in types, not the subclasses
    assert p.__class__ is dict and p["a"].__class__ is str and p["b"] == [1, 2.0, None]


def test_median_and_natural_sort():
    assert stats.median([]) is None
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    assert sorted(["db10", "db2", "db1"], key=plain.natural_key) == ["db1", "db2", "db10"]


def test_robust_scale_mad_zero_never_divides_by_zero():
    scale, method, mad = stats.robust_scale([100.0, 100.0, 100.0, 100.0, 40.0], 100.0)
    assert mad == 0 and method == "meanad" and scale > 0
    scale, method, _mad = stats.robust_scale([5.0, 5.0, 5.0], 5.0)
    assert scale == 0 and method == "none"


def test_workload_summary_latency_and_await():
    w = synth.make_workload("over_cache", "rndrw", 16, 1000.0, 2.0)
    w["metrics"].update(read_p99_ms=2.0, write_p99_ms=5.0, dev_r_s=300.0, dev_w_s=100.0,
                        dev_r_await_ms=1.0, dev_w_await_ms=5.0)
    s = fleet_rows.summarize_workload(w)
    # a record without latency_op: metrics.latency_op's rule over its counts (rates here)
    assert s["latency_op"] == "read" and s["p99_ms"] == 2.0
    w["metrics"].update(read_iops=100.0, write_iops=900.0)
    assert fleet_rows.summarize_workload(w)["latency_op"] == "write"
    assert fleet_rows.summarize_workload(w)["p99_ms"] == 5.0
    w["metrics"].update(read_count=0, write_count=10, fsync_count=10, commit_count=10, commit_p99_ms=7.0)
    assert fleet_rows.summarize_workload(w)["latency_op"] == "commit"
    assert fleet_rows.summarize_workload(w)["p99_ms"] == 7.0
    w["metrics"]["latency_op"] = "fsync"          # the record's own latency_op wins
    assert fleet_rows.summarize_workload(w)["latency_op"] == "fsync"
    assert s["await_ms"] == pytest.approx((300 * 1.0 + 100 * 5.0) / 400)
    r = fleet_rows.summarize_workload(synth.make_workload("c", "rndrd", 1, 500.0, 1.5))
    assert r["latency_op"] == "read" and r["p99_ms"] == 1.5 and r["threads"] == 1


def test_nan_and_missing_metrics():
    w = synth.make_workload("c", "rndrd", 1, float("nan"), None)
    w["metrics"]["dev_util_pct"] = float("nan")
    del w["metrics"]["mibps"]
    s = fleet_rows.summarize_workload(w)
    assert s["iops"] is None and s["p99_ms"] is None and s["util_pct"] is None and s["mibps"] is None
    assert fleet_rows.summarize_workload({})["id"] == "workload"
    json.dumps(s, allow_nan=False)


def test_iostat_samples_weighted_await():
    w = {"result": {"iostat": {"samples": [
        {"t": 1.0, "device": "a", "r/s": 100.0, "w/s": 0.0, "r_await": 2.0, "w_await": 0.0, "%util": 50.0},
        {"t": 1.0, "device": "b", "r/s": 100.0, "w/s": 0.0, "r_await": 4.0, "w_await": 0.0, "%util": 90.0},
        {"t": 2.0, "device": "a", "r/s": 0.0, "w/s": 0.0, "r_await": None, "w_await": 0.0, "%util": None},
        {"t": None}, "garbage"]}}}
    s = fleet_rows.iostat_samples(w)
    assert s[0] == (1.0, 90.0, 3.0)
    assert s[1] == (2.0, None, 0.0)
    assert fleet_rows.iostat_samples({}) == []


# --------------------------------------------------------------------------- verdicts

def test_empty_fleet():
    f = fleet.aggregate({}, now=NOW)
    assert f["summary"]["hosts"] == 0 and f["summary"]["passed"] == 0
    assert f["run_id"] == "20261121T123000Z"
    assert f["schema"] == "fleetqual.fleet" and f["schema_version"] == fleet_json.SCHEMA_VERSION == 2
    json.loads(fleet_json.to_json(f))


def test_unreachable_and_failed_hosts_never_missing_never_pass():
    recs = records(2)
    play = {
        "web9": {"counts": {"unreachable": 1},
                 "unreachable": [{"task": "Gathering Facts", "msg": "ssh: No route to host"}]},
        "db7": {"counts": {"failures": 1, "ok": 3},
                "failed": [{"task": "qualify : preflight | test dir is writable", "msg": "not writable"}]},
    }
    inventory = {"db1": ["db"], "db2": ["db"], "web9": ["web"], "db7": ["db"], "db8": ["db"]}
    f = fleet.aggregate(recs, play=play, inventory=inventory, now=NOW)
    assert [h["host"] for h in f["hosts"]] == ["db1", "db2", "db7", "db8", "web9"]
    assert host(f, "web9")["verdict"] == "UNREACHABLE"
    assert "Gathering Facts" in host(f, "web9")["reasons"][0]
    assert host(f, "web9")["group"] == "web"
    db7 = host(f, "db7")
    assert db7["verdict"] == "ERROR" and "preflight" in db7["reasons"][0] and "not writable" in db7["reasons"][0]
    assert host(f, "db8")["verdict"] == "ERROR" and "no fleetqual_report record" in host(f, "db8")["reasons"][0]
    assert f["summary"]["by_verdict"] == dict.fromkeys(verdict.VERDICTS, 0) | {"PASS": 2, "UNREACHABLE": 1, "ERROR": 2}


def test_record_fail_kept_when_gate_fails_host():
    recs = records(1)
    recs["db1"]["verdict"] = "FAIL"
    recs["db1"]["reasons"] = ["cache-rndrd-t1 iops 850 < 5000"]
    play = {"db1": {"counts": {"failures": 1},
                    "failed": [{"task": "verdict gate", "msg": "db1: FAIL"}]}}
    f = fleet.aggregate(recs, play=play, now=NOW)
    h = host(f, "db1")
    assert h["verdict"] == "FAIL" and h["record_verdict"] == "FAIL"
    assert h["reasons"] == ["cache-rndrd-t1 iops 850 < 5000"]
    assert "verdict gate" in h["notes"][0]


def test_record_pass_then_failure_or_unreachable_is_error():
    recs = records(2)
    play = {"db1": {"counts": {"failures": 1}, "failed": [{"task": "qualify : cleanup", "msg": "rm failed"}]},
            "db2": {"counts": {"unreachable": 1}, "unreachable": [{"task": "qualify : cleanup", "msg": "timeout"}]}}
    f = fleet.aggregate(recs, play=play, now=NOW)
    for name in ("db1", "db2"):
        h = host(f, name)
        assert h["verdict"] == "ERROR" and h["record_verdict"] == "PASS"
        assert h["workloads"], "measurements are kept"
        assert any("cleanup" in r for r in h["reasons"])


_MSGS = ["Connection timed out during banner exchange", "No route to host", "exit 3"]
_EVENT = st.fixed_dictionaries({"task": st.sampled_from(["qualify : start", "qualify : wait", "gate"]),
                                "msg": st.sampled_from(_MSGS)})


@settings(max_examples=150, deadline=None)
@given(has_record=st.booleans(), record_verdict=st.sampled_from(["PASS", "FAIL", "ERROR", "INCONCLUSIVE"]),
       failed=st.lists(_EVENT, max_size=2), dark=st.lists(_EVENT, max_size=2), ignored=st.lists(_EVENT, max_size=2))
def test_an_ignored_unreachable_explains_only_a_missing_record(has_record, record_verdict, failed, dark, ignored):
    """ansible counts an unreachable under ignore_unreachable ok and ignored (the role's start
    does so to keep its batch going, then ends the host). Without a record, nothing counted
    against the host but such an event: UNREACHABLE, with its message. With a record, the
    ignored events never change the verdict."""
    recs = records(1)
    recs["db1"]["verdict"] = record_verdict
    if not has_record:
        recs = {}
    counted = {"counts": {"failures": len(failed), "unreachable": len(dark)}, "failed": failed, "unreachable": dark}
    without = host(fleet.aggregate(recs, play={"db1": counted}, inventory={"db1": ["db"]}, now=NOW), "db1")
    got = host(fleet.aggregate(recs, play={"db1": dict(counted, unreachable_ignored=ignored)},
                               inventory={"db1": ["db"]}, now=NOW), "db1")
    if has_record or failed or dark or not ignored:
        assert (got["verdict"], got["reasons"]) == (without["verdict"], without["reasons"])
    else:
        assert without["verdict"] == "ERROR" and "no fleetqual_report record" in without["reasons"][0]
        assert got["verdict"] == "UNREACHABLE"
        assert got["reasons"] == ["unreachable at task '%s': %s" % (ignored[-1]["task"], ignored[-1]["msg"])]
    if not has_record:
        assert got["verdict"] != "PASS"


def test_rescued_failure_does_not_count():
    recs = records(1)
    # event seen, but stats.failures is 0 (the failure was rescued by the role)
    play = {"db1": {"counts": {"failures": 0, "rescued": 1}, "failed": []}}
    assert host(fleet.aggregate(recs, play=play, now=NOW), "db1")["verdict"] == "PASS"


def test_unknown_record_verdict_and_empty_workloads():
    recs = records(2)
    recs["db1"]["verdict"] = "MAYBE"
    recs["db2"]["workloads"] = []
    f = fleet.aggregate(recs, now=NOW)
    assert host(f, "db1")["verdict"] == "ERROR"
    assert host(f, "db2")["verdict"] == "ERROR"


def test_first_failing_rule_per_workload():
    recs = records(1)
    recs["db1"]["verdict"] = "FAIL"
    recs["db1"]["checks"] = [
        {"workload": "cache-rndrd-t1", "rule": "min_iops", "passed": True},
        {"workload": "log-seqwr-t1", "rule": "max_write_p99_ms", "passed": False, "value": 9, "limit": 5},
    ]
    h = host(fleet.aggregate(recs, now=NOW), "db1")
    assert h["first_failing_rule"] == "max_write_p99_ms"
    by_id = {w["id"]: w for w in h["workloads"]}
    assert by_id["log-seqwr-t1"]["first_failing_rule"] == "max_write_p99_ms"
    assert by_id["cache-rndrd-t1"]["first_failing_rule"] is None


def test_run_id_and_results_root():
    recs = records(2)
    f = fleet.aggregate(recs, now=NOW)
    assert f["run_id"] == "20261121T120000Z"
    assert fleet_json.results_root(recs) == "/tmp/results"
    assert fleet_json.results_root({}) is None


# --------------------------------------------------------------------------- outliers

def test_outlier_low_iops_flagged_with_score():
    recs = records(6, scale={"db4": 0.5})
    f = fleet.aggregate(recs, now=NOW)
    flagged = {(o["host"], o["metric"]) for o in f["outliers"]}
    assert ("db4", "iops") in flagged and ("db4", "p99_ms") in flagged
    assert all(o["host"] == "db4" for o in f["outliers"])
    o = next(o for o in f["outliers"] if o["metric"] == "iops")
    assert o["direction"] == "low" and o["worse"] and o["score"] > 3.5
    assert o["pct_from_median"] < -20
    assert host(f, "db4")["verdict"] == "PASS", "warn mode keeps the verdict"
    w = host(f, "db4")["workloads"][0]
    assert "iops" in w["outliers"]


def test_outlier_fail_mode_turns_pass_into_fail():
    recs = records(6, scale={"db4": 0.5})
    f = fleet.aggregate(recs, options={"outliers": "fail"}, now=NOW)
    h = host(f, "db4")
    assert h["verdict"] == "FAIL" and h["record_verdict"] == "PASS"
    assert any(r.startswith("fleet outlier:") for r in h["reasons"])
    assert f["summary"]["by_verdict"]["FAIL"] == 1


def test_better_outlier_is_not_a_failure():
    recs = records(6, scale={"db2": 3.0})
    f = fleet.aggregate(recs, options={"outliers": "fail"}, now=NOW)
    o = [o for o in f["outliers"] if o["host"] == "db2" and o["metric"] == "iops"]
    assert o and o[0]["direction"] == "high" and not o[0]["worse"]
    assert host(f, "db2")["verdict"] == "PASS"


def test_pct_rule_flags_when_spread_is_wide():
    # wide natural spread: robust score stays small but 30 % below the median is flagged
    scale = {"db1": 0.7, "db2": 0.8, "db3": 1.0, "db4": 1.2, "db5": 1.3}
    f = fleet.aggregate(records(5, scale=scale), options={"outlier_mad_score": 50}, now=NOW)
    iops = [o for o in f["outliers"] if o["metric"] == "iops"]
    assert {o["host"] for o in iops} == {"db1"}
    assert all(o["by"] == "pct" for o in iops)


def test_mad_zero_group_scores_the_deviating_host():
    scale = {"db1": 1.0, "db2": 1.0, "db3": 1.0, "db4": 1.0, "db5": 0.9}
    recs = records(5, scale=scale)
    f = fleet.aggregate(recs, options={"outlier_pct_below": 50}, now=NOW)
    iops = [o for o in f["outliers"] if o["metric"] == "iops"]
    assert {o["host"] for o in iops} == {"db5"}
    assert iops[0]["scale"] == "meanad" and math.isfinite(iops[0]["score"])


def test_identical_hosts_no_outliers():
    recs = records(4, scale={"db1": 1, "db2": 1, "db3": 1, "db4": 1})
    f = fleet.aggregate(recs, now=NOW)
    assert f["outliers"] == []


def test_small_group_no_judgement_and_said_so():
    recs = records(2, scale={"db1": 1.0, "db2": 0.2})
    f = fleet.aggregate(recs, now=NOW)
    assert f["outliers"] == []
    assert f["groups"][0]["judged"] is False
    assert any("no outlier judgement" in n for n in f["notes"])


def test_groups_by_hardware_when_no_inventory_group():
    recs = records(4, scale={"db3": 0.4})
    for i, r in enumerate(recs.values()):
        r["groups"] = ["all", "ungrouped"]
        r["facts"]["disk_model"] = "PM9A3" if i < 3 else "MZ7L3"
    f = fleet.aggregate(recs, now=NOW)
    assert host(f, "db1")["group"] == "PowerEdge R650 / PM9A3"
    assert host(f, "db1")["group_source"] == "hardware"
    # db4 is alone with its disk model: no judgement there; db3 flagged within its 3
    assert {o["host"] for o in f["outliers"]} == {"db3"}
    assert any(g["name"].endswith("MZ7L3") and not g["judged"] for g in f["groups"])


def test_nan_metrics_are_skipped_by_outliers():
    recs = records(5, scale={"db3": 0.3})
    for w in recs["db3"]["workloads"]:
        w["metrics"]["iops"] = float("nan")
    f = fleet.aggregate(recs, now=NOW)
    assert not [o for o in f["outliers"] if o["metric"] == "iops"]
    json.loads(fleet_json.to_json(f))


def test_errored_workloads_excluded_from_group_stats():
    recs = records(5, scale={"db3": 0.3})
    for w in recs["db3"]["workloads"]:
        w["metrics"]["errors"] = 3
    f = fleet.aggregate(recs, now=NOW)
    assert f["outliers"] == []


def test_outliers_off():
    f = fleet.aggregate(records(6, scale={"db4": 0.5}), options={"outliers": "off"}, now=NOW)
    assert f["outliers"] == [] and f["groups"] == []


# --------------------------------------------------------------------------- baseline

def _baseline_file(tmp_path, recs):
    base = fleet.aggregate(recs, now=NOW - datetime.timedelta(days=7), run_id="20261114T120000Z")
    p = tmp_path / "fleet.json"
    p.write_text(fleet_json.to_json(base))
    return p


def test_baseline_deltas_and_regressions(tmp_path):
    p = _baseline_file(tmp_path, records(3))
    cur = records(3, scale={"db1": 1.0, "db2": 1.01 * 0.8, "db3": 1.02 * 1.05})
    base = baseline.load_baseline(str(p))
    f = fleet.aggregate(cur, baseline=base, now=NOW)
    b = f["baseline"]
    assert b["run_id"] == "20261114T120000Z" and b["compared_workloads"] == 9
    regs = {(r["host"], r["metric"]) for r in b["regressions"]}
    assert ("db2", "iops") in regs and ("db2", "p99_ms") in regs
    assert not any(h == "db3" for h, _metric in regs), "faster is not a regression"
    w = host(f, "db2")["workloads"][0]
    assert w["baseline"]["deltas"]["iops"]["delta_pct"] == pytest.approx(-20.0, abs=0.1)
    assert w["baseline"]["deltas"]["mibps"]["regression"] is False
    assert host(f, "db2")["verdict"] == "PASS"


def test_baseline_fail_mode_and_missing_new_hosts(tmp_path):
    p = _baseline_file(tmp_path, records(3))
    cur = records(3, scale={"db1": 1.0, "db2": 0.5, "db3": 1.02})
    del cur["db3"]
    cur["db9"] = synth.make_record("db9", group="db", matrix=SMALL, samples=3)
    f = fleet.aggregate(cur, baseline=baseline.load_baseline(str(tmp_path)), options={"regressions": "fail"},
                        now=NOW)
    assert host(f, "db2")["verdict"] == "FAIL"
    assert any("regression against baseline" in r for r in host(f, "db2")["reasons"])
    assert f["baseline"]["missing_hosts"] == ["db3"] and f["baseline"]["new_hosts"] == ["db9"]
    assert host(f, "db9")["workloads"][0]["baseline"] == {"status": "new"}
    assert any("db3" in n for n in f["notes"])


def test_baseline_zero_or_missing_values(tmp_path):
    recs = records(1)
    p = _baseline_file(tmp_path, recs)
    data = json.loads(p.read_text())
    data["hosts"][0]["workloads"][0]["iops"] = 0
    data["hosts"][0]["workloads"][1]["p99_ms"] = None
    p.write_text(json.dumps(data))
    f = fleet.aggregate(records(1), baseline=baseline.load_baseline(str(p)), now=NOW)
    d = host(f, "db1")["workloads"][0]["baseline"]["deltas"]
    assert d["iops"]["delta_pct"] is None and d["iops"]["regression"] is False


def test_load_baseline_rejects_other_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(ValueError):
        baseline.load_baseline(str(p))
    p.write_text(json.dumps({"schema": "fleetqual.fleet", "schema_version": 99, "hosts": []}))
    with pytest.raises(ValueError):
        baseline.load_baseline(str(p))


# --------------------------------------------------------------------------- history, prometheus

def test_history_appends_one_line_per_host(tmp_path):
    path = tmp_path / "history.jsonl"
    f = fleet.aggregate(records(3), play={"x": {"counts": {"unreachable": 1}}}, now=NOW)
    baseline.append_history(str(path), f)
    baseline.append_history(str(path), f)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 8
    assert lines[0]["host"] == "db1" and lines[0]["run_id"] == f["run_id"]
    assert lines[0]["workloads"]["cache-rndrd-t1"]["iops"] > 0
    assert lines[3]["host"] == "x" and lines[3]["verdict"] == "UNREACHABLE" and lines[3]["workloads"] == {}


def test_prometheus_textfile(tmp_path):
    """The controller's textfile: fleet summary only, base units, no verdict label on _pass,
    written by prometheus_client; promtool check metrics finds nothing."""
    recs = records(3)
    recs["db2"]["workloads"][0]["metrics"]["iops"] = float("nan")
    f = fleet.aggregate(recs, play={'we"ird\\host': {"counts": {"unreachable": 1}}}, now=NOW)
    text = prometheus.prometheus_text(f)
    assert "# TYPE fleetqual_host_pass gauge" in text
    assert 'fleetqual_host_pass{group="db",host="db1"} 1.0' in text
    assert 'fleetqual_host_pass{group="(none)",host="we\\"ird\\\\host"} 0.0' in text
    assert "verdict=" not in "".join(line for line in text.splitlines() if line.startswith("fleetqual_host_pass"))
    assert 'fleetqual_fleet_hosts{verdict="UNREACHABLE"} 1.0' in text
    assert "NA / ?" not in text and "nan" not in text.lower()
    # no per-workload series on the controller (they were 113 MB at 10,000 hosts)
    assert "fleetqual_workload_" not in text and "mibps" not in text and "_percent" not in text
    path = tmp_path / "tf" / "fleetqual.prom"
    prometheus.write_prometheus(str(path), f)
    prometheus.write_prometheus(str(path), f)
    assert path.read_text() == text
    assert os.listdir(tmp_path / "tf") == ["fleetqual.prom"]
    tools.promtool_check(text)


def test_hardware_group_without_facts_is_none_not_question_marks():
    assert outliers.group_of(["all"], {"product_name": "NA", "disk_model": None}) == ("(none)", "none")
    assert outliers.group_of([], {"product_name": "R650", "disk_model": "NA"}) == ("R650", "hardware")


def test_host_prometheus_series_base_units(tmp_path):
    """A host's own series (for its node_exporter textfile directory): base units, ratio,
    promtool-clean."""
    rec = records(1)["db1"]
    text = prometheus.host_prometheus_text(rec, now=NOW)
    w = rec["workloads"][0]
    line = next(x for x in text.splitlines()
                if x.startswith('fleetqual_workload_throughput_bytes_per_second{mode="rndrd",threads="1",'
                                'workload="cache-rndrd-t1"}'))
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(w["metrics"]["mibps"] * 1048576.0, rel=1e-6)
    util = [float(x.rsplit(" ", 1)[1]) for x in text.splitlines()
            if x.startswith("fleetqual_workload_device_utilization_ratio{")]
    assert util and all(0 <= u <= 1 for u in util)
    assert 'percentile="p99"' in text and "fleetqual_host_pass 1.0" in text and "mibps" not in text
    tools.promtool_check(text)


def test_foreign_share_series_on_the_host_and_the_controller(tmp_path):
    """A workload measured with foreign-I/O detection has its foreign share as
    fleetqual_workload_foreign_share_ratio in the host's own textfile (labels workload,
    mode, threads) and, for the hosts with detail, in the controller's (plus host, group);
    a workload without the figure has none, and both files stay promtool-clean."""
    recs = records(3)
    recs["db2"]["workloads"][0]["metrics"]["foreign_share"] = 0.35
    recs["db2"]["workloads"][1]["metrics"]["foreign_share"] = 0.0
    text = prometheus.host_prometheus_text(recs["db2"], now=NOW)
    assert 'fleetqual_workload_foreign_share_ratio{mode="rndrd",threads="1",workload="cache-rndrd-t1"} 0.35' in text
    assert 'fleetqual_workload_foreign_share_ratio{mode="rndrd",threads="64",workload="cache-rndrd-t64"} 0.0' in text
    assert sum(1 for x in text.splitlines() if x.startswith("fleetqual_workload_foreign_share_ratio{")) == 2
    tools.promtool_check(text)
    assert "foreign_share" not in prometheus.host_prometheus_text(recs["db1"], now=NOW)
    f = fleet.aggregate(recs, now=NOW)
    text = prometheus.prometheus_text(f)
    assert ('fleetqual_workload_foreign_share_ratio{group="db",host="db2",mode="rndrd",threads="1",'
            'workload="cache-rndrd-t1"} 0.35') in text
    assert sum(1 for x in text.splitlines() if x.startswith("fleetqual_workload_foreign_share_ratio{")) == 2
    tools.promtool_check(text)


def test_final_verdict_is_decided_in_one_place():
    """verdict.final_verdict, rule by rule (docs/report.md "What can change a verdict")."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.verdict import final_verdict

    ev = {"task": "qualify : cleanup", "msg": "busy"}
    rec = {"verdict": "PASS", "reasons": [], "workloads": [{"id": "w"}]}
    worse = [{"worse": True, "text": "w iops low"}]
    better = [{"worse": False, "text": "w iops high"}]
    assert final_verdict(None, unreachable=ev)["verdict"] == "UNREACHABLE"
    assert final_verdict(None, failed=ev)["reasons"][0].startswith("failed before storing a record")
    assert final_verdict(None)["verdict"] == "ERROR"
    assert final_verdict(rec)["verdict"] == "PASS"
    assert final_verdict(dict(rec, verdict="weird"))["verdict"] == "ERROR"
    assert final_verdict(rec, failed=ev)["verdict"] == "ERROR"
    assert final_verdict(dict(rec, workloads=[]))["verdict"] == "ERROR"
    assert final_verdict(rec, outliers=worse, options={"outliers": "warn"})["verdict"] == "PASS"
    assert final_verdict(rec, outliers=better, options={"outliers": "fail"})["verdict"] == "PASS"
    out = final_verdict(rec, outliers=worse, options={"outliers": "fail"})
    assert out["verdict"] == "FAIL" and out["first_failing_rule"] == "fleet outlier"
    assert out["reasons"] == ["fleet outlier: w iops low"] and out["record_verdict"] == "PASS"
    reg = final_verdict(rec, regressions=[{"text": "w iops 100 -> 50"}], options={"regressions": "fail"})
    assert reg["verdict"] == "FAIL" and reg["first_failing_rule"] == "baseline regression"
    # never improved: an ERROR record stays ERROR whatever the fleet says
    assert final_verdict(dict(rec, verdict="ERROR"), outliers=worse, options={"outliers": "fail"})["verdict"] == "ERROR"
    kept = final_verdict(dict(rec, verdict="FAIL", reasons=["r"]), failed=ev)
    assert kept["verdict"] == "FAIL" and kept["reasons"] == ["r"] and "cleanup" in kept["notes"][0]
