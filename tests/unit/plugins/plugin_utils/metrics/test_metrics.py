"""plugin_utils/metrics/workload.py: flat metrics from recorded workload records."""
import copy
import json
import math
import os

import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import METRIC_KEYS, workload_metrics

FIX = os.path.join(unitpaths.UNIT, "fixtures", "controller")
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
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record
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


# ------------------------------------------------------------ latency op, device, concurrency

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import DISKSTATS_KEYS  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import latency_op
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stability import stability_of  # noqa: E402


def with_commit(rec, p99_us):
    """The record as iobench writes it: ops.commit beside ops.fsync."""
    bench = rec["result"]["bench"]
    commit = copy.deepcopy(bench["ops"]["fsync"])
    commit["latency_us"] = {k: v + p99_us - commit["latency_us"]["p99"] if isinstance(v, (int, float)) else v
                            for k, v in commit["latency_us"].items()}
    bench["ops"]["commit"] = commit
    return rec


def test_latency_op_rule():
    assert latency_op(10, 0, 0, False) == "read"
    assert latency_op(90, 10, 1, True) == "read"       # read-dominated mix with fsyncs
    assert latency_op(50, 50, 0, False) == "read"      # a tie is the read op
    assert latency_op(20, 80, 0, False) == "write"     # write-dominated mix, no fsync
    assert latency_op(0, 10, 0, False) == "write"      # plain or O_DSYNC writes
    assert latency_op(0, 10, 10, True) == "commit"
    assert latency_op(0, 10, 10, False) == "fsync"     # an iobench without ops.commit
    assert latency_op(0, 0, 5, False) == "fsync"
    assert latency_op(0, 0, 0, False) is None and latency_op(None, None, None, False) is None


def test_log_workload_shows_its_commit_latency():
    rec = with_commit(load("nvme_log-seqwr-t1"), 3000.0)
    m = workload_metrics(rec)
    assert m["latency_op"] == "commit" and m["latency_note"] is None
    assert m["lat_p99_ms"] == m["commit_p99_ms"] == pytest.approx(3.0)
    assert m["lat_p99_ms"] >= m["fsync_p99_ms"] > m["write_p99_ms"]   # not the page-cache write()
    assert m["commit_count"] == m["fsync_count"] and m["write_p99_ms"] == pytest.approx(0.0118)
    # an iobench without ops.commit: the fsync percentiles, and the record says so
    m = workload_metrics(load("nvme_log-seqwr-t1"))
    assert m["latency_op"] == "fsync" and m["lat_p99_ms"] == m["fsync_p99_ms"] == pytest.approx(0.6901)
    assert "no commit latency" in m["latency_note"]


def test_latency_of_reads_and_mixes():
    m = workload_metrics(load("nvme_over_cache-rndrd-t64"))
    assert m["latency_op"] == "read" and m["lat_p999_ms"] == m["read_p999_ms"]
    m = workload_metrics(load("nvme_mix-rndrw-t64-r90"))
    assert m["latency_op"] == "read" and m["lat_p50_ms"] == m["read_p50_ms"]
    assert m["concurrency"] == {"threads": 64, "iodepth": 1}


def test_bench_and_iostat_device_bytes():
    rec = load("nvme_over_cache-rndrd-t64")
    m = workload_metrics(rec)
    bench, avg = rec["result"]["bench"], rec["result"]["iostat"]["avg"]
    assert m["bench_read_bytes"] == bench["ops"]["read"]["bytes"] and m["bench_write_bytes"] == 0
    assert m["dev_source"] == "iostat" and m["device"] == avg["device"] == "nvme0n1"
    secs = bench["window"]["end_epoch"] - bench["window"]["start_epoch"]   # the window's length
    assert m["dev_read_bytes"] == round(avg["rkB/s"] * 1024 * secs)
    assert m["device_note"] is None


def counters(**delta):
    """/sys/block/<dev>/stat fields (17) with the given deltas added to a busy base."""
    base = dict.fromkeys(DISKSTATS_KEYS, 1000)
    start = [base[k] for k in DISKSTATS_KEYS]
    end = [base[k] + delta.get(k, 0) for k in DISKSTATS_KEYS]
    return start, end


def test_devstat_gives_exact_window_figures_with_iostats_formulas():
    """The busy-host case: iostat's average (0.65x the benchmark's reads) was
    diluted by idle samples; the counters at the window's edges are exact."""
    rec = load("nvme_over_cache-rndrd-t64")
    bench = rec["result"]["bench"]
    secs = bench["window"]["end_epoch"] - bench["window"]["start_epoch"]
    reads = bench["ops"]["read"]["count"]
    start, end = counters(rd_ios=reads, rd_sectors=reads * 32, rd_ticks=reads // 2, tot_ticks=int(secs * 1000),
                          rq_ticks=int(secs * 1000 * 7.5), wr_ios=600, wr_sectors=600 * 8, wr_ticks=300)
    bench["window"]["devstat"] = {"nvme0n1": {"start": start, "end": end, "source": "sysfs"}}
    bench["window"]["devstat_error"] = None
    rec["result"]["iostat"]["avg"]["r/s"] *= 0.65
    m = workload_metrics(rec)
    assert m["dev_source"] == "devstat" and m["device"] == "nvme0n1"
    assert m["dev_read_bytes"] == reads * 32 * 512 == m["bench_read_bytes"]
    assert m["dev_write_bytes"] == 600 * 8 * 512
    assert m["dev_r_s"] == pytest.approx(reads / secs, abs=0.01)
    assert m["dev_read_ratio"] == pytest.approx(1.0, abs=0.001)
    assert m["dev_rkb_s"] == pytest.approx(reads * 16 / secs, abs=0.01)
    assert m["dev_r_await_ms"] == pytest.approx(0.5, abs=0.01)
    assert m["dev_w_await_ms"] == 0.5 and m["dev_wareq_sz_kb"] == 4.0 and m["dev_rareq_sz_kb"] == 16.0
    assert m["dev_util_pct"] == pytest.approx(100.0, abs=0.01) and m["dev_aqu_sz"] == pytest.approx(7.5, abs=0.01)


def test_two_devices_sum_rates_and_a_devstat_error_falls_back_to_iostat():
    rec = load("nvme_over_cache-rndrd-t64")
    bench = rec["result"]["bench"]
    a = counters(rd_ios=6000, rd_sectors=6000 * 32, rd_ticks=3000, tot_ticks=30000)
    b = counters(rd_ios=2000, rd_sectors=2000 * 32, rd_ticks=3000, tot_ticks=60004)
    bench["window"]["devstat"] = {"sda": {"start": a[0], "end": a[1], "source": "sysfs"},
                                  "sdb": {"start": b[0], "end": b[1], "source": "diskstats"}}
    m = workload_metrics(rec)
    assert m["device"] == "sda,sdb" and m["dev_read_bytes"] == 8000 * 32 * 512
    assert m["dev_r_s"] == pytest.approx(8000 / 60.004, abs=0.01)
    assert m["dev_r_await_ms"] == pytest.approx(6000 / 8000, abs=0.01)   # weighted by ops
    assert m["dev_util_pct"] == pytest.approx(100.0, abs=0.01)           # the busiest device
    del bench["window"]["devstat"]
    bench["window"]["devstat_error"] = "/sys/block/nvme0n1/stat: No such file or directory"
    m = workload_metrics(rec)
    assert m["dev_source"] == "iostat" and m["dev_r_s"] == 182391.0
    assert m["device_note"].startswith("device counters at the window's edges unavailable (/sys/block/nvme0n1")
    assert m["device_note"].endswith("iostat average used")
    # malformed counters are ignored, never raise
    bench["window"]["devstat"] = {"x": {"start": [1, 2], "end": "oops"}, "y": None}
    assert workload_metrics(rec)["dev_source"] == "iostat"


def test_search_concurrency_is_the_found_step():
    rec = load("nvme_over_cache-rndrd-t64")
    bench = rec["result"]["bench"]
    rec["threads"] = 1
    bench["config"]["threads"] = 1
    steps = [{"threads": t, "iodepth": 1, "iops": 1000.0 * t, "p99_us": 900.0 * t, "elapsed_s": 10.0}
             for t in (1, 2, 4, 8, 16, 32, 64)]
    bench["search"] = {"knob": "threads", "percentile": "p99", "bound_ms": 50.0, "stopped": "max_reached",
                       "steps": steps, "best": dict(steps[-1])}
    m = workload_metrics(rec)
    assert m["concurrency"] == {"threads": 64, "iodepth": 1}
    assert m["search"]["best"]["threads"] == 64 and m["search"]["steps"][0]["p99_ms"] == pytest.approx(0.9)
    bench["search"]["best"] = 2          # an index into steps
    assert workload_metrics(rec)["concurrency"]["threads"] == 4
    bench["search"]["best"] = None       # nothing within the bound: the last step ran
    assert workload_metrics(rec)["concurrency"]["threads"] == 64


def test_steady_state_and_stability_figures():
    rec = load("nvme_over_cache-rndrd-t64")
    bench = rec["result"]["bench"]
    assert workload_metrics(rec)["steady_state"] is None
    rounds = [{"round": i + 1, "iops": v, "mib_per_sec": v / 64, "lat_p99_us": 900.0}
              for i, v in enumerate([9000.0, 8000.0, 7000.0, 6900.0, 7000.0, 7100.0, 6950.0])]
    bench["steady_state"] = {"enabled": True, "reached": True, "round": 7, "rounds": rounds, "window": 5,
                             "range_pct": 20, "slope_pct": 10, "max_rounds": 25, "metric": "iops"}
    ss = workload_metrics(rec)["steady_state"]
    assert ss == {"reached": True, "round": 7, "rounds": 7, "max_rounds": 25, "metric": "iops",
                  "values": [9000.0, 8000.0, 7000.0, 6900.0, 7000.0, 7100.0, 6950.0]}
    st = workload_metrics(rec)["stability"]
    assert st["intervals"] == len(bench["intervals"]) == 60 and len(st["series"]) == 12
    assert stability_of([100.0] * 5) is None
    drop = stability_of([100.0] * 4 + [90.0] * 4 + [50.0] * 4)
    assert drop["first_iops"] == 100.0 and drop["last_iops"] == 50.0 and drop["change_pct"] == -50.0
    assert drop["series"] == [100.0] * 4 + [90.0] * 4 + [50.0] * 4


# ------------------------------------------------ the one module of formatters and of small statistics

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import fmt
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import stats  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num  # noqa: E402


@pytest.mark.parametrize("value, num, ms, x, k", [
    (None, "n/a", "n/a", "n/a", "n/a"),
    (812.4, "812", "812 ms", "812x", "812"),
    (9.834, "9.8", "9.83 ms", "9.8x", "9.8"),
    (0.2345, "0.23", "0.234 ms", "0.23x", "0.23"),
    (20, "20", "20 ms", "20x", "20"),
    (12345.0, "12345", "12345 ms", "12345x", "12.3k"),
    (1234567.0, "1234567", "1234567 ms", "1234567x", "1.23M"),
])
def test_sentence_formatters(value, num, ms, x, k):
    assert (fmt_num(value), fmt.fmt_ms(value), fmt.fmt_x(value), fmt.fmt_k(value)) == (num, ms, x, k)


def test_share_and_table_formatters():
    assert fmt.fmt_pct(0.9) == "90 %" and fmt.fmt_pct(0.125) == "12.5 %" and fmt.fmt_pct(None) == "n/a"
    assert [fmt.cell_num(v) for v in (None, float("nan"), 0, 812, 12345, 812345, 1234567, 2.5e9, 0.5, "42")] == [
        "-", "-", "0", "812", "12.3k", "812k", "1.23M", "2.50G", "0.50", "42.0"]
    assert [fmt.cell_ms(v) for v in (None, 0, 0.1234, 3.456, 34.56, 345.6, 3456.7)] == [
        "-", "0", "0.123", "3.46", "34.6", "346", "3457"]
    assert fmt.cell_pct(99.64) == "99.6" and fmt.cell_pct(99.64, 0) == "100" and fmt.cell_pct("x") == "-"


def test_small_statistics():
    assert stats.as_number(True) is None and stats.as_number(float("inf")) is None and stats.as_number(3) == 3
    assert stats.to_float("12.5") == 12.5 and stats.to_float(2) == 2.0 and stats.to_float("nan") is None
    assert stats.to_float(False) is None and stats.to_float([1]) is None
    assert stats.median([3, 1, 2]) == 2 and stats.median([1, 2, 3, 4]) == 2.5 and stats.median([]) is None
    assert stats.median([1, None, "x", 3]) == 2
    assert stats.mean([1, 2, 3, 6]) == 3.0 and stats.mean([None]) is None
    assert stats.ratio(1, 4) == 0.25 and stats.ratio(1, 0) is None and stats.ratio(None, 2) is None
