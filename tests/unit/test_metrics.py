"""plugin_utils/metrics.py: flat metrics from recorded workload records."""
import copy
import json
import math
import os

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import METRIC_KEYS, workload_metrics

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "controller")
CONTRACT_KEYS = (
    ["iops", "mibps", "read_iops", "write_iops", "fsync_per_sec"]
    + ["%s_%s_ms" % (op, p) for op in ("read", "write", "fsync") for p in ("p50", "p90", "p95", "p99", "p999")]
    + ["dev_r_s", "dev_w_s", "dev_rkb_s", "dev_wkb_s", "dev_r_await_ms", "dev_w_await_ms", "dev_aqu_sz",
       "dev_util_pct", "dev_rareq_sz_kb", "dev_wareq_sz_kb", "errors", "interrupted"])


def load(name):
    with open(os.path.join(FIX, name + ".json")) as fh:
        return json.load(fh)


def test_every_contract_key_is_present():
    m = workload_metrics(load("nvme_cache-rndrd-t1"))
    assert set(CONTRACT_KEYS) <= set(m) == set(METRIC_KEYS)


def test_random_read_record():
    rec = load("nvme_over_cache-rndrd-t64")
    m = workload_metrics(rec)
    read = rec["result"]["bench"]["ops"]["read"]
    assert m["read_iops"] == read["per_sec"] == m["iops"]
    assert m["write_iops"] == 0.0 and m["fsync_per_sec"] == 0.0
    assert m["mibps"] == read["mib_per_sec"]
    assert m["read_p99_ms"] == pytest.approx(read["latency_us"]["p99"] / 1000.0)
    assert m["read_p999_ms"] == pytest.approx(read["latency_us"]["p99.9"] / 1000.0)
    assert m["write_p99_ms"] is None and m["fsync_p50_ms"] is None  # ops not done
    assert m["dev_r_s"] == 182391.0 and m["dev_util_pct"] == 100.0 and m["dev_rareq_sz_kb"] == 16.0
    assert m["dev_read_ratio"] == pytest.approx(1.0, abs=0.01)
    assert m["dev_write_ratio"] is None
    assert m["errors"] == 0 and m["interrupted"] is False
    assert m["read_count"] == read["count"] and m["elapsed_s"] == pytest.approx(60.004)


def test_log_record_has_fsync_latencies_and_write_amplification():
    m = workload_metrics(load("nvme_log-seqwr-t1"))
    assert m["fsync_per_sec"] == pytest.approx(m["write_iops"])
    assert m["fsync_p99_ms"] == pytest.approx(0.69, abs=0.01)
    assert m["read_p99_ms"] is None
    assert m["dev_write_ratio"] == pytest.approx(2.0, abs=0.05)  # journal doubles the writes


def test_mixed_record_sums_reads_and_writes():
    m = workload_metrics(load("nvme_mix-rndrw-t64-r90"))
    assert m["iops"] == pytest.approx(m["read_iops"] + m["write_iops"])
    assert m["read_p99_ms"] and m["write_p99_ms"] and m["fsync_p99_ms"]


def test_errors_and_interrupted():
    assert workload_metrics(load("vda_over_cache-rndrd-t64-ioerrors"))["errors"] == 3
    m = workload_metrics(load("vda_cache-rndwr-t1-interrupted"))
    assert m["interrupted"] is True and m["elapsed_s"] == 12.3


def test_no_collector_gives_none_device_figures():
    m = workload_metrics(load("vda_cache-rndrd-t1-nocollector"))
    assert m["iops"] > 0
    assert all(m[k] is None for k in m if k.startswith("dev_"))


def test_failed_module_result_gives_all_none():
    m = workload_metrics(load("shm_cache-rndrd-t1-failed"))
    assert m["interrupted"] is False
    assert all(v is None for k, v in m.items() if k != "interrupted")


@pytest.mark.parametrize("bad", [None, "x", 3, [], {}, {"result": None}, {"result": {"bench": "oops"}},
                                 {"result": {"bench": {"ops": "oops"}, "iostat": {"avg": []}}}])
def test_never_crashes(bad):
    m = workload_metrics(bad)
    assert m["iops"] is None and m["interrupted"] is False


def test_missing_op_and_nan_give_none():
    rec = load("nvme_mix-rndrw-t64-r90")
    bench = rec["result"]["bench"]
    del bench["ops"]["write"]
    bench["ops"]["read"]["latency_us"]["p99"] = float("nan")
    bench["ops"]["read"]["per_sec"] = "fast"
    rec["result"]["iostat"]["avg"]["%util"] = float("inf")
    del rec["result"]["iostat"]["avg"]["r/s"]
    m = workload_metrics(rec)
    assert m["write_iops"] is None and m["write_p99_ms"] is None and m["write_count"] is None
    assert m["read_p99_ms"] is None and m["read_p50_ms"] is not None
    assert m["read_iops"] is None and m["iops"] is None
    assert m["dev_util_pct"] is None and m["dev_r_s"] is None and m["dev_read_ratio"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in m.values())


def test_bare_module_result_is_accepted():
    rec = load("nvme_cache-rndrd-t1")
    assert workload_metrics(rec["result"]) == workload_metrics(rec)


def test_input_not_modified():
    rec = load("nvme_cache-rndrd-t1")
    before = copy.deepcopy(rec)
    workload_metrics(rec)
    assert rec == before


def test_workload_record_adds_result_and_metrics():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload_record
    rec = load("vda_over_cache-rndrd-t8-slow")
    spec = {k: v for k, v in rec.items() if k != "result"}
    registered = dict(rec["result"], invocation={"module_args": {"mode": "rndrd"}}, _ansible_no_log=False)
    out = workload_record(spec, registered)
    assert out["id"] == "over_cache-rndrd-t8" and out["index"] == spec["index"]
    assert "invocation" not in out["result"] and "_ansible_no_log" not in out["result"]
    assert out["result"]["bench"] == rec["result"]["bench"]
    assert out["metrics"] == workload_metrics(rec)
    assert spec == {k: v for k, v in rec.items() if k != "result"}  # spec untouched
    failed = workload_record(spec, {"failed": True, "rc": 3, "msg": "iobench: error: x"})
    assert failed["metrics"]["iops"] is None and failed["result"]["rc"] == 3
