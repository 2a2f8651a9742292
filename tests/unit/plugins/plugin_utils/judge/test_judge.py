"""plugin_utils/judge/host.py: verdicts, checks, reasons, evidence, decisions on missing values."""
import copy
import json
import os

import pytest
import unitpaths
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.workload import evidence
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import (
    first_failing_check,
    first_failing_rule,
    judge,
    target_verdicts,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import validate_rules

FIX = os.path.join(unitpaths.UNIT, "fixtures", "controller")
LAT_KEYS = ["max_%s_%s_ms" % (op, p) for op in ("read", "write", "fsync") for p in ("p50", "p90", "p95", "p99", "p999")]
CHECK_KEYS = {"workload", "rule", "metric", "value", "limit", "op", "passed", "evidence", "status", "kind", "message"}


def load(name):
    with open(os.path.join(FIX, name + ".json")) as fh:
        return json.load(fh)


@pytest.fixture
def nvme():
    return [load("nvme_cache-rndrd-t1"), load("nvme_over_cache-rndrd-t64"), load("nvme_over_cache-rndwr-t64"),
            load("nvme_log-seqwr-t1"), load("nvme_mix-rndrw-t64-r90")]


@pytest.fixture
def slow():
    return load("vda_over_cache-rndrd-t8-slow")


def only(result, status=None):
    return [c for c in result["checks"] if status is None or c["status"] == status]


# --------------------------------------------------------------------------- PASS / FAIL per rule kind

def test_no_rules_is_pass(nvme):
    r = judge(nvme, [], expected_ids=[w["id"] for w in nvme])
    assert r["verdict"] == "PASS" and r["reasons"] == [] and r["checks"] == []
    assert r["summary"] == {"workloads": 5, "checks": 0, "passed": 0, "failed": 0, "not_applicable": 0, "errors": 0,
                            "inconclusive": 0}


@pytest.mark.parametrize("key, metric", [("min_iops", "iops"), ("min_mibps", "mibps")])
def test_min_rules_pass_and_fail(slow, key, metric):
    value = workload_metrics(slow)[metric]
    ok = judge([slow], [{key: value * 0.9}])
    assert ok["verdict"] == "PASS"
    (c,) = ok["checks"]
    assert (c["metric"], c["op"], c["passed"], c["status"], c["kind"]) == (metric, ">=", True, "pass", "limit")
    assert set(c) == CHECK_KEYS
    bad = judge([slow], [{key: value * 2}])
    assert bad["verdict"] == "FAIL"
    assert bad["checks"][0]["passed"] is False and bad["checks"][0]["value"] == value
    assert bad["reasons"] == [bad["checks"][0]["message"]]


def test_min_iops_reason_sentence(slow):
    r = judge([slow], [{"min_iops": 1000}])
    assert r["reasons"] == ["over_cache-rndrd-t8: IOPS 812 < limit 1000 "
                            "(device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)"]
    r = judge([slow], [{"min_mibps": 50}])
    assert r["reasons"] == ["over_cache-rndrd-t8: MiB/s 12.7 < limit 50 "
                            "(device vda: r/s 812, rkB/s 12998, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)"]


@pytest.mark.parametrize("key", LAT_KEYS)
def test_every_latency_family_pass_and_fail(key):
    rec = load("nvme_mix-rndrw-t64-r90")  # does reads, writes and fsyncs
    metric = key[4:]
    value = workload_metrics(rec)[metric]
    assert value
    ok = judge([rec], [{key: value * 1.5}])
    assert ok["verdict"] == "PASS" and ok["checks"][0]["metric"] == metric and ok["checks"][0]["op"] == "<="
    bad = judge([rec], [{key: value / 2}])
    assert bad["verdict"] == "FAIL"
    c = bad["checks"][0]
    assert c["passed"] is False and c["limit"] == value / 2 and c["rule"] == "%s@*" % key
    op = key.split("_")[1]
    assert bad["reasons"][0].startswith("mix-rndrw-t64-r90: %s p" % op)


def test_latency_reason_quotes_value_limit_and_iostat(slow):
    r = judge([slow], [{"workload": "over_cache", "max_read_p99_ms": 20}])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms "
                            "(device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)"]
    c = r["checks"][0]
    assert c["evidence"] == "device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6"
    assert c["rule"] == "max_read_p99_ms@over_cache" and c["value"] == pytest.approx(34.2, abs=0.01)


def test_fsync_reason_uses_write_side_evidence(nvme):
    r = judge(nvme, [{"workload": "log", "max_fsync_p99_ms": 0.5}])
    assert r["reasons"] == ["log-seqwr-t1: fsync p99 0.69 ms > limit 0.5 ms (device nvme0n1: w/s 4975, "
                            "w_await 0.16 ms, wareq-sz 8.1 kB, aqu-sz 0.79, %util 98.4)"]


def test_p999_label(slow):
    r = judge([slow], [{"max_read_p999_ms": 10}])
    assert r["reasons"][0].startswith("over_cache-rndrd-t8: read p99.9 54.8 ms > limit 10 ms")


@pytest.mark.parametrize("bounds, verdict, n", [
    ({"min": 90}, "PASS", 1), ({"min": 99.9}, "FAIL", 1),
    ({"max": 99.9}, "PASS", 1), ({"max": 90}, "FAIL", 1),
    ({"min": 90, "max": 99.9}, "PASS", 2), ({"min": 10, "max": 50}, "FAIL", 2), ({"min": 99.7, "max": 100}, "FAIL", 2),
])
def test_metric_rules(slow, bounds, verdict, n):
    rule = dict({"metric": "metrics.dev_util_pct"}, **bounds)
    r = judge([slow], [rule])
    assert r["verdict"] == verdict
    assert len(r["checks"]) == n
    assert all(c["kind"] == "metric" and c["metric"] == "metrics.dev_util_pct" for c in r["checks"])
    assert [c["op"] for c in r["checks"]] == [op for k, op in (("min", ">="), ("max", "<=")) if k in bounds]


def test_metric_rule_reason_and_names(slow):
    r = judge([slow], [{"name": "util-cap", "metric": "metrics.dev_util_pct", "max": 95},
                       {"metric": "result.iostat.avg.\"aqu-sz\"", "max": 4}])
    assert r["reasons"] == [
        "over_cache-rndrd-t8: metrics.dev_util_pct 99.6 > limit 95 [rule util-cap] "
        "(device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)",
        "over_cache-rndrd-t8: result.iostat.avg.\"aqu-sz\" 7.9 > limit 4 "
        "(device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)"]
    assert [c["rule"] for c in r["checks"]] == ["util-cap", 'max(result.iostat.avg."aqu-sz")@*']


def test_metric_rule_over_raw_bench_json(slow):
    # JMESPath has no arithmetic: such an expression is rejected up front
    with pytest.raises(ValueError, match="does not parse"):
        judge([slow], [{"metric": "result.bench.ops.read.latency_us.\"p99.99\" / `1000`", "max": 1}])
    expr = "result.bench.ops.read.latency_us.\"p99.99\""
    r = judge([slow], [{"metric": expr, "max": 1000000}])
    assert r["verdict"] == "PASS" and r["checks"][0]["value"] > 34000


# --------------------------------------------------------------------------- matching

def test_matching_by_workload_mode_threads(nvme):
    rules = [{"workload": "over_cache", "min_iops": 1},
             {"mode": "rndwr", "min_iops": 1},
             {"threads": 1, "min_iops": 1},
             {"workload": "over_cache", "mode": "rndrd", "threads": 64, "min_iops": 1},
             {"workload": ["cache", "log"], "threads": [1], "min_iops": 1}]
    r = judge(nvme, rules)
    got = {(c["rule"], c["workload"]) for c in r["checks"]}
    assert got == {
        ("min_iops@over_cache", "over_cache-rndrd-t64"), ("min_iops@over_cache", "over_cache-rndwr-t64"),
        ("min_iops@*/rndwr", "over_cache-rndwr-t64"),
        ("min_iops@*/*/t1", "cache-rndrd-t1"), ("min_iops@*/*/t1", "log-seqwr-t1"),
        ("min_iops@over_cache/rndrd/t64", "over_cache-rndrd-t64"),
        ("min_iops@cache,log/*/t1", "cache-rndrd-t1"), ("min_iops@cache,log/*/t1", "log-seqwr-t1")}
    assert r["verdict"] == "PASS"


def test_rule_matching_nothing_is_a_warning_not_a_failure(nvme):
    r = judge(nvme, [{"workload": "over_cache", "threads": 32, "min_iops": 10 ** 9}])
    assert r["verdict"] == "PASS" and r["checks"] == []
    assert r["warnings"] == ["rule min_iops@over_cache/*/t32 matched no workload"]


def test_check_order_is_workload_then_rule_then_limit(nvme):
    rules = [{"max_read_p99_ms": 100, "min_iops": 1}, {"name": "b", "metric": "metrics.iops", "min": 1}]
    r = judge(nvme, rules, expected_ids=[w["id"] for w in reversed(nvme)])
    order = [(c["workload"], c["rule"]) for c in r["checks"]]
    wids = [w["id"] for w in reversed(nvme)]
    expect = []
    for wid in wids:
        expect += [(wid, "min_iops@*"), (wid, "max_read_p99_ms@*"), (wid, "b")]
    assert order == expect
    assert judge(nvme, rules, expected_ids=wids) == r  # deterministic


# --------------------------------------------------------------------------- missing values

def test_latency_limit_on_an_op_not_done_is_not_applicable(nvme):
    r = judge(nvme, [{"workload": "over_cache", "mode": "rndrd", "max_fsync_p99_ms": 1, "max_write_p99_ms": 1}])
    assert r["verdict"] == "PASS"
    statuses = [(c["metric"], c["status"], c["passed"]) for c in r["checks"]]
    assert statuses == [("write_p99_ms", "n/a", None), ("fsync_p99_ms", "n/a", None)]
    assert r["checks"][1]["message"] == ("over_cache-rndrd-t64: does no fsync operations; "
                                         "max_fsync_p99_ms@over_cache/rndrd not applicable")
    assert r["summary"]["not_applicable"] == 2
    assert r["warnings"] == ["rule max_write_p99_ms@over_cache/rndrd matched only workloads where its limits "
                             "do not apply"]


def nothing_completed(record):
    """``record`` as a window in which the device completed no request (a hung drive): every op's
    count 0 and its latencies 0, as iobench writes an op it measured none of."""
    r = copy.deepcopy(record)
    bench = r["result"]["bench"]
    for op in bench["ops"].values():
        op.update(count=0, bytes=0, per_sec=0.0, mib_per_sec=0.0, latency_us=dict.fromkeys(op["latency_us"], 0),
                  histogram=dict(op["histogram"], buckets=[]))
    bench["total"].update(count=0, iops=0.0, mib_per_sec=0.0)
    for iv in bench.get("intervals") or []:
        for k in list(iv):
            if k.endswith("_ops") or k.endswith("_bytes"):
                iv[k] = 0
    return r


@pytest.mark.parametrize("index, op", [(1, "read"), (2, "write"), (4, "read"), (4, "write")])
def test_a_latency_limit_on_the_op_of_a_window_that_completed_nothing_fails(nvme, index, op):
    """The op the workload's mode does (reads of rndrd, writes of rndwr, both of a mix that
    completed nothing at all), none completed: the percentile has no value and the limit FAILS,
    where an op the workload leaves out is n/a. A hung drive judged only on latency must not pass."""
    rec = nothing_completed(nvme[index])
    key = "max_%s_p99_ms" % op
    r = judge([rec], [{key: 1000}])
    assert r["verdict"] == "FAIL", r["checks"]
    (c,) = r["checks"]
    assert (c["metric"], c["status"], c["passed"]) == ("%s_p99_ms" % op, "fail", False)
    assert "%s p99 has no value" % op in c["message"], c["message"]


def test_an_op_a_mix_left_out_stays_not_applicable(nvme):
    """A mix whose window completed reads but no write (a ratio of many reads per write over a short
    window): its write limits are n/a, not failures."""
    rec = copy.deepcopy(nvme[4])
    w = rec["result"]["bench"]["ops"]["write"]
    w.update(count=0, bytes=0, per_sec=0.0, mib_per_sec=0.0, latency_us=dict.fromkeys(w["latency_us"], 0))
    r = judge([rec], [{"max_write_p99_ms": 1000}])
    assert [(c["metric"], c["status"]) for c in r["checks"]] == [("write_p99_ms", "n/a")]


def test_fsync_limit_applies_where_fsyncs_happen(nvme):
    r = judge(nvme, [{"max_fsync_p99_ms": 100}])
    assert [(c["workload"], c["status"]) for c in r["checks"]] == [
        ("cache-rndrd-t1", "n/a"), ("over_cache-rndrd-t64", "n/a"), ("over_cache-rndwr-t64", "pass"),
        ("log-seqwr-t1", "pass"), ("mix-rndrw-t64-r90", "pass")]


def test_builtin_value_missing_although_op_ran_fails(slow):
    slow["result"]["bench"]["ops"]["read"]["latency_us"]["p99"] = float("nan")
    slow["result"]["bench"]["ops"]["read"]["per_sec"] = None
    r = judge([slow], [{"max_read_p99_ms": 20}, {"min_iops": 1}])
    assert r["verdict"] == "FAIL"
    assert [c["status"] for c in r["checks"]] == ["fail", "fail"]
    assert r["reasons"][0].startswith("over_cache-rndrd-t8: read p99 has no value (limit <= 20 ms)")


def test_metric_rule_yielding_null_fails_with_no_value(slow):
    # validation refuses unknown metrics.* names, so reach null through result (open-ended)
    r = judge([slow], [{"metric": "result.bench.ops.read.no_such_field", "max": 5}])
    assert r["verdict"] == "FAIL"
    assert r["reasons"][0].startswith("over_cache-rndrd-t8: result.bench.ops.read.no_such_field has no value (limit <= 5)")
    r = judge([slow], [{"metric": "metrics.fsync_p99_ms", "max": 5}])  # null: the run did no fsyncs
    assert r["verdict"] == "FAIL"


def test_metric_rule_yielding_non_number_fails(slow):
    r = judge([slow], [{"metric": "result.collector.devices", "max": 5}, {"metric": "metrics.interrupted", "max": 1}])
    assert r["verdict"] == "FAIL"
    assert r["reasons"][0] == "over_cache-rndrd-t8: result.collector.devices is not a number (got list ['vda'])"
    assert r["reasons"][1] == "over_cache-rndrd-t8: metrics.interrupted is not a number (got boolean False)"


def test_metric_rule_runtime_error_fails(slow):
    r = judge([slow], [{"metric": "abs(result.collector.devices)", "max": 5}])
    assert r["verdict"] == "FAIL" and "could not be evaluated" in r["reasons"][0]


def test_evidence_without_collector():
    rec = load("vda_cache-rndrd-t1-nocollector")
    r = judge([rec], [{"max_read_p99_ms": 1}])
    assert r["reasons"] == ["cache-rndrd-t1: read p99 2.3 ms > limit 1 ms "
                            "(no device statistics (collector: none; collect: none requested))"]


def test_evidence_for_mixed_workload_shows_both_sides():
    rec = load("nvme_mix-rndrw-t64-r90")
    text = evidence(rec, workload_metrics(rec))
    assert text == ("device nvme0n1: r/s 98150, r_await 0.52 ms, w/s 11010, w_await 0.9 ms, "
                    "aqu-sz 61.9, %util 100")


def test_precomputed_metrics_are_used(slow):
    slow["metrics"] = dict(workload_metrics(slow), iops=5.0)
    r = judge([slow], [{"min_iops": 10}, {"metric": "metrics.iops", "min": 10}])
    assert [c["value"] for c in r["checks"]] == [5.0, 5.0]


# --------------------------------------------------------------------------- ERROR

def test_missing_planned_workload_is_error(nvme):
    plan = [{"id": w["id"]} for w in nvme] + [{"id": "over_cache-rndrd-t1"}]
    r = judge(nvme, [{"min_iops": 1}], expected_ids=plan)
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["over_cache-rndrd-t1: planned workload has no result (missing)"]
    c = first_failing_check(r)
    assert (c["rule"], c["status"], c["kind"], c["passed"]) == ("workload_missing", "error", "error", False)


def test_io_errors_are_error_even_when_limits_pass():
    rec = load("vda_over_cache-rndrd-t64-ioerrors")
    r = judge([rec], [{"min_iops": 1}])
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["over_cache-rndrd-t64: 3 I/O errors during the run (EIO 3); first: op read, "
                            "errno EIO, file /var/tmp/fleetqual/iobench.file.17, offset 21495808, t 41.2"]
    assert [c["status"] for c in r["checks"]] == ["error", "pass"]  # limits still checked
    assert first_failing_rule(r) == "io_errors"


def test_interrupted_is_error():
    r = judge([load("vda_cache-rndwr-t1-interrupted")], [])
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["cache-rndwr-t1: run interrupted by SIGTERM after 12.3 s; partial results"]
    # the operator's stop is said as who stopped it, not as the signal it took
    rec = load("vda_cache-rndwr-t1-interrupted")
    rec["result"]["stopped_by"] = "stopped by the operator (ansible-playbook interrupted by SIGINT)"
    r = judge([rec], [])
    assert r["reasons"] == ["cache-rndwr-t1: run interrupted (stopped by the operator (ansible-playbook interrupted "
                            "by SIGINT)) after 12.3 s; partial results"]


def test_module_failure_is_error():
    r = judge([load("shm_cache-rndrd-t1-failed")], [{"min_iops": 1}])
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["cache-rndrd-t1: benchmark failed (rc 3): iobench: error: --direct: O_DIRECT refused "
                            "on /dev/shm/fq (tmpfs): Invalid argument; use direct: false or another test dir"]
    assert len(r["checks"]) == 1  # no limit checks without data


@pytest.mark.parametrize("result, rule", [
    (None, "no_metrics"),
    ({"rc": 0, "changed": True}, "no_metrics"),
    ({"skipped": True, "skip_reason": "Conditional result was False"}, "skipped"),
])
def test_no_data_is_error(result, rule):
    rec = {"id": "cache-rndrd-t1", "workload": "cache", "mode": "rndrd", "threads": 1, "result": result}
    r = judge([rec], [{"min_iops": 1}])
    assert r["verdict"] == "ERROR" and [c["rule"] for c in r["checks"]] == [rule]


def test_no_workloads_at_all_is_error():
    r = judge([], [{"min_iops": 1}])
    assert r["verdict"] == "ERROR" and r["reasons"] == ["no workload results for this host"]
    assert judge(None, None)["verdict"] == "ERROR"


def test_error_wins_over_fail_and_reasons_list_errors_first(slow):
    recs = [slow, load("vda_cache-rndwr-t1-interrupted")]
    r = judge(recs, [{"max_read_p99_ms": 20}])
    assert r["verdict"] == "ERROR"
    assert r["reasons"][0].startswith("cache-rndwr-t1: run interrupted")
    assert r["reasons"][1].startswith("over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms")
    assert first_failing_rule(r) == "interrupted"


def test_invalid_rules_raise(slow):
    with pytest.raises(ValueError, match=r"fleetqual_thresholds\[0\].max_raed_p99_ms: unknown key"):
        judge([slow], [{"max_raed_p99_ms": 1}])


def test_inputs_are_not_modified(nvme):
    before = copy.deepcopy(nvme)
    judge(nvme, [{"min_iops": 1, "max_write_p99_ms": 5}, {"metric": "metrics.iops", "min": 1}])
    assert nvme == before


# --------------------------------------------------------------------------- first_failing_rule

def test_first_failing_rule(slow, nvme):
    assert first_failing_rule(judge(nvme, [{"min_iops": 1}])) is None
    r = judge(nvme + [slow], [{"min_iops": 1}, {"name": "lat", "max_read_p99_ms": 20}])
    assert r["verdict"] == "FAIL" and first_failing_rule(r) == "lat"
    assert first_failing_rule({}) is None and first_failing_rule(None) is None
    # a stored host record without status fields (older writer)
    host = {"verdict": "FAIL", "checks": [{"rule": "a", "passed": True}, {"rule": "b", "passed": False}]}
    assert first_failing_rule(host) == "b"


# --------------------------------------------------------------------------- host-level error, timeout

def test_host_error_is_error_and_listed_first(nvme):
    r = judge(nvme[:1], [{"min_iops": 1}], expected_ids=[w["id"] for w in nvme[:2]],
              error={"task": "Preflight checks", "msg": "Not enough  space\\n in /var/tmp"})
    assert r["verdict"] == "ERROR"
    assert r["reasons"][0] == "task 'Preflight checks' failed: Not enough space\\n in /var/tmp"
    assert r["reasons"][1] == "over_cache-rndrd-t64: planned workload has no result (missing)"
    assert r["checks"][0]["rule"] == "host_error" and r["checks"][0]["workload"] is None
    assert first_failing_rule(r) == "host_error"
    # no records at all: only the host error, no extra "no workloads" line
    r = judge([], [], error="preflight failed")
    assert r["reasons"] == ["preflight failed"]


def test_module_timeout_is_error(slow):
    slow["result"]["timed_out"] = True
    r = judge([slow], [])
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["over_cache-rndrd-t8: stopped by the module's timeout after 60.0 s; partial results"]


# ---------------------------------------------------------------- require_steady_state

def _steady(reached, values):
    rec = load("nvme_over_cache-rndwr-t64")
    rec["steady_state"] = True
    rounds = [{"round": i + 1, "iops": v, "mib_per_sec": v / 64.0, "lat_p99_us": 3000.0} for i, v in enumerate(values)]
    rec["result"]["bench"]["steady_state"] = {
        "enabled": True, "reached": reached, "round": len(values) if reached else None, "rounds": rounds,
        "window": 5, "range_pct": 20, "slope_pct": 10, "max_rounds": 8, "metric": "iops"}
    return rec


def test_require_steady_state_fails_with_the_rounds_when_not_reached():
    rule = [{"workload": "over_cache", "require_steady_state": True}]
    assert validate_rules(rule) == []
    drifting = _steady(False, [90000, 80000, 70000, 62000, 55000, 50000, 46000, 43000])
    j = judge([drifting], rule)
    assert j["verdict"] == "FAIL"
    (c,) = [c for c in j["checks"] if c["rule"] == "require_steady_state@over_cache"]
    assert c["status"] == "fail" and c["value"] is False and c["limit"] is True
    assert c["message"] == ("over_cache-rndwr-t64: did not reach steady state in 8 rounds (at most 8); "
                            "iops per round: 90000, 80000, 70000, 62000, 55000, 50000, 46000, 43000")
    reached = _steady(True, [90000, 64000, 62000, 61000, 63000, 62500])
    j = judge([reached], rule)
    assert j["verdict"] == "PASS"
    (c,) = [c for c in j["checks"] if c["rule"] == "require_steady_state@over_cache"]
    assert c["message"].startswith("over_cache-rndwr-t64: reached steady state at round 6 of 8; iops per round: ")
    # a workload that ran without steady state cannot satisfy the rule
    j = judge([load("nvme_over_cache-rndwr-t64")], rule)
    assert j["verdict"] == "FAIL" and "ran without steady state" in j["reasons"][0]


def test_require_steady_state_must_be_a_boolean_and_false_is_no_limit():
    assert validate_rules([{"require_steady_state": "yes"}]) == [
        "fleetqual_thresholds[0].require_steady_state: must be true or false, got string 'yes'"]
    errs = validate_rules([{"require_steady_state": False}])
    assert len(errs) == 1 and errs[0].startswith("fleetqual_thresholds[0]: rule sets no limit")


# --------------------------------------------------------------------------- drives

DRIVE_FIX = os.path.join(unitpaths.UNIT, "fixtures", "drives")


def health(name):
    from ansible_collections.fleetqual.storage.plugins.module_utils.devices import drives as dr
    with open(os.path.join(DRIVE_FIX, name)) as fh:
        data = json.load(fh)
    return dr.parse_nvme_smart_log(data) if name.startswith("nvme-cli") else dr.parse_smartctl(data)


def drive(name, model, serial, fixture):
    return {"name": name, "path": "/dev/" + name, "id_path": "/dev/disk/by-id/x-" + serial,
            "by_id": ["/dev/disk/by-id/x-" + serial], "model": model, "serial": serial, "firmware": "F1",
            "size_bytes": 10 ** 12, "health": health(fixture)}


@pytest.fixture
def drives():
    return [drive("nvme0n1", "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R601234", "smartctl-nvme-healthy.json"),
            drive("nvme1n1", "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R609876", "smartctl-nvme-failing.json"),
            drive("sda", "Samsung SSD 870 EVO 1TB", "S6PUNX0T123456A", "smartctl-sata-ssd-healthy.json"),
            drive("vda", None, "overlayblk", "smartctl-virtio-unsupported.json")]


def test_without_drives_the_judge_is_unchanged(nvme):
    a = judge(nvme, [{"min_iops": 1}], expected_ids=[w["id"] for w in nvme])
    b = judge(nvme, [{"min_iops": 1}], expected_ids=[w["id"] for w in nvme], drives=None)
    assert a == b and not [c for c in a["checks"] if c["kind"] == "drive"]


def test_default_check_fails_a_drive_whose_own_verdict_is_failed(slow, drives):
    r = judge([slow], [], drives=drives)
    assert r["verdict"] == "FAIL"
    by = {c["drive"]: c for c in r["checks"] if c["rule"] == "drive_health"}
    assert [by[n]["status"] for n in ("nvme0n1", "nvme1n1", "sda", "vda")] == ["pass", "fail", "pass", "n/a"]
    assert r["reasons"] == [
        "drive nvme1n1 (SAMSUNG MZQL21T9HCJR-00A07, serial S64GNE0R609876): the drive's own health verdict is FAILED "
        "(overall health self-assessment FAILED; critical_warning 0x04 (NVM subsystem reliability degraded); "
        "37 media errors)"]
    assert by["nvme1n1"]["serial"] == "S64GNE0R609876" and by["nvme1n1"]["kind"] == "drive"
    # not collected: n/a with the tool's reason, never a pass, never a fail; and a warning
    assert by["vda"]["passed"] is None
    assert by["vda"]["message"].startswith("drive vda (model unknown, serial overlayblk): own health verdict not "
                                           "applicable: health not collected: smartctl")
    assert by["vda"]["message"] in r["warnings"]


def test_drive_rules_limits_selectors_and_not_reported_values(slow, drives):
    healthy = [d for d in drives if d["name"] != "nvme1n1"]
    r = judge([slow], [{"max_media_errors": 0, "max_temperature_c": 33}], drives=healthy)
    got = [(c["drive"], c["rule"], c["status"]) for c in r["checks"] if c["rule"] != "drive_health"]
    assert got == [("nvme0n1", "max_media_errors@drive:*", "pass"), ("nvme0n1", "max_temperature_c@drive:*", "fail"),
                   ("sda", "max_media_errors@drive:*", "n/a"), ("sda", "max_temperature_c@drive:*", "pass"),
                   ("vda", "max_media_errors@drive:*", "n/a"), ("vda", "max_temperature_c@drive:*", "n/a")]
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["drive nvme0n1 (SAMSUNG MZQL21T9HCJR-00A07, serial S64GNE0R601234): temperature c 34 > "
                            "limit 33 (smartctl: critical warning 0, media errors 0, percentage used 2, available "
                            "spare 100, temperature c 34, power on hours 8123)"]
    sata = [c for c in r["checks"] if c["drive"] == "sda" and c["rule"] == "max_media_errors@drive:*"][0]
    assert sata["message"] == ("drive sda (Samsung SSD 870 EVO 1TB, serial S6PUNX0T123456A): smartctl does not "
                               "report media errors; max_media_errors@drive:* not applicable")
    # a selector by serial, and one whose drives report nothing it limits: a warning, not a silent pass
    r = judge([slow], [{"name": "sata-media", "drive": "S6PUNX0T123456A", "max_media_errors": 0},
                       {"drive": ["nvme1n1", "/dev/nvme0n1"], "max_percentage_used": 80}], drives=drives)
    assert "rule sata-media matched only drives where its limits do not apply (health not collected or not " \
           "reported)" in r["warnings"]
    pct = [(c["drive"], c["status"], c["value"]) for c in r["checks"] if c["metric"] == "health.percentage_used"]
    assert pct == [("nvme0n1", "pass", 2), ("nvme1n1", "fail", 91)]


def test_drive_rule_selecting_no_drive_fails_naming_the_drives(slow, drives):
    r = judge([slow], [{"drive": "nvme9n1", "max_media_errors": 0}], drives=drives[:1])
    (c,) = [c for c in r["checks"] if c["rule"] == "max_media_errors@drive:nvme9n1"]
    assert c["status"] == "fail" and r["verdict"] == "FAIL"
    assert c["message"] == ("max_media_errors@drive:nvme9n1: selects no drive of this host (drive: nvme9n1); its "
                            "drives: nvme0n1 (S64GNE0R601234)")


def test_drive_rule_without_inventory_is_not_applicable(slow):
    r = judge([slow], [{"min_available_spare": 10}], drives=None)
    (c,) = r["checks"]
    assert (c["status"], c["passed"], c["kind"]) == ("n/a", None, "drive") and r["verdict"] == "PASS"
    assert r["warnings"][-1] == ("rule min_available_spare@drive:* matched only drives where its limits do not "
                                 "apply (health not collected or not reported)")
    # the drives module's result is accepted as it is
    nv = {"name": "nvme0n1", "model": "M", "serial": "S", "health": health("nvme-cli-smart-log-failing.json")}
    r = judge([slow], [{"min_available_spare": 10}], drives={"drives": [nv]})
    assert [c["status"] for c in r["checks"]] == ["fail", "fail"]


def test_records_of_several_targets_are_judged_apart(slow):
    a = dict(copy.deepcopy(slow), target="data1", target_kind="path", target_path="/data1")
    b = dict(copy.deepcopy(slow), target="nvme0", target_kind="device", target_device="/dev/nvme0n1")
    wid = slow["id"]
    value = workload_metrics(slow)["iops"]
    r = judge([a, b], [{"min_iops": value * 2}], expected_ids=[dict(a, result=None), dict(b, result=None),
                                                               dict(a, target="data2")])
    fails = [c for c in r["checks"] if c["status"] == "fail"]
    assert [(c["workload"], c["target"]) for c in fails] == [(wid, "data1"), (wid, "nvme0")]
    assert fails[1]["message"].startswith("%s on nvme0: IOPS " % wid)
    (missing,) = [c for c in r["checks"] if c["rule"] == "workload_missing"]
    assert missing["message"] == "%s on data2: planned workload has no result (missing)" % wid
    assert (missing["workload"], missing["target"]) == (wid, "data2")
    assert r["verdict"] == "ERROR" and r["summary"]["workloads"] == 3
    # a row (and a JUnit case) per target
    per = target_verdicts(r)
    assert {t: v["verdict"] for t, v in per.items()} == {"data1": "FAIL", "nvme0": "FAIL", "data2": "ERROR"}
    assert per["data2"]["reasons"] == [missing["message"]] and per["nvme0"]["reasons"] == [fails[1]["message"]]
    assert target_verdicts(judge([slow], [{"min_iops": value * 2}])) == {}


def test_cache_proof_is_judged_per_target():
    from test_diagnostics import devstat, rec
    cached = rec("over_cache-rndrd-t1", "over_cache", "rndrd", reads=1000, dev=devstat(r_s=10, rkb=160),
                 target="data1", target_kind="path", target_path="/data1")
    disk = rec("over_cache-rndrd-t1", "over_cache", "rndrd", reads=1000, dev=devstat(r_s=1000, rkb=16000),
               target="nvme0", target_kind="device", target_device="/dev/nvme0n1")
    for records in ([cached, disk], [disk, cached]):
        r = judge(records, [])
        (c,) = [c for c in r["checks"] if c["rule"] == "cache_proof"]
        assert (c["target"], c["status"]) == ("data1", "fail")
        assert c["message"].startswith("over_cache-rndrd-t1 on data1: served from a cache, not the disk")
    assert [c["rule"] for c in judge([disk], [])["checks"]] == []


# --------------------------------------------------------------------------- a window shorter than planned

def test_a_window_much_shorter_than_planned_is_an_error_naming_both(nvme):
    """A run that measured 10 ms of its planned 60 s, nothing having said why (no signal, no
    timeout, no I/O error): an ERROR naming both lengths, never a PASS on what little it saw."""
    rec = copy.deepcopy(nvme[0])
    rec["result"]["bench"]["elapsed_s"] = 0.01
    r = judge([rec], [{"min_iops": 1}])
    assert r["verdict"] == "ERROR" and first_failing_rule(r) == "short_window"
    assert r["reasons"] == ["cache-rndrd-t1: measured for 0.01 s of its planned 60 s (the window must last "
                            "at least 54 s); its figures are not the workload's"]
    assert judge(nvme[:1], [{"min_iops": 1}])["verdict"] == "PASS"


@settings(max_examples=300, deadline=None)
@given(planned=st.floats(0.5, 600), frac=st.floats(0, 1.2), rate=st.sampled_from([None, 0, 1, 50, 2000]),
       threads=st.integers(1, 64), requests=st.sampled_from([0, 0, 1000]), steady=st.booleans(),
       stopped=st.sampled_from([None, "interrupted", "errors"]))
def test_short_window_is_judged_exactly_when_nothing_else_explains_it(
        planned, frac, rate, threads, requests, steady, stopped):
    """Over the space of runs: ``short_window`` when, and only when, a run bounded by its time
    alone measured under 90% of it less one paced gap, and no signal or I/O error stopped it
    (those have their own error); a request count or steady-state rounds set their own length."""
    rec = load("nvme_cache-rndrd-t1")
    b = rec["result"]["bench"]
    b["config"].update(time_s=planned, rate_iops=rate, threads=threads, requests=requests, steady_state=steady)
    b["elapsed_s"] = planned * frac
    if stopped == "interrupted":
        b.update(interrupted=True, signal="SIGTERM")
    elif stopped == "errors":
        b["errors"] = {"total": 3, "by_kind": {"EIO": 3}}
    rules = [c["rule"] for c in judge([rec], [])["checks"]]
    gap = threads / rate if rate else 0.0
    expected = not requests and not steady and stopped is None and planned * frac < 0.9 * planned - gap
    assert ("short_window" in rules) == expected, rules
