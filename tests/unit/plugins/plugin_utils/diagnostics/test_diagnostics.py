"""Diagnostics that explain a disk (plugins/plugin_utils/diagnostics/diagnose.py, docs/diagnostics.md).

Three kinds of tests:

* the conclusions' logic on recorded real module results
  (tests/unit/fixtures/diagnostics/real_*.json, written by record.py on a loop device of
  their own) and on synthetic records built to the contract shapes (search and db
  sections the C side will produce);
* the diagnostics through the judge, the threshold rules, the filter and the report;
* real runs of the binary through the module (marked slow, about 2 s per run) that create
  each condition or its absence on this machine.
"""
import copy
import json
import os
import sys

import pytest
import unitpaths

HERE = unitpaths.UNIT
FIX = os.path.join(HERE, "fixtures", "diagnostics")
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, FIX)

import realrun as rr  # noqa: E402
import yaml  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as D  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import model
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import rule_name, validate_rules  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.templating import md_cell  # noqa: E402

MIB = 1024 * 1024


def recorded(name):
    with open(os.path.join(FIX, "real_%s.json" % name)) as f:
        return json.load(f)["workloads"]


def stored(record):
    """The record as the role stores it after its result changed: metrics computed again."""
    return workload_record({k: v for k, v in record.items() if k not in ("result", "metrics")}, record["result"])


def by_id(records):
    return {r["id"]: r for r in records}


# --------------------------------------------------------------------------- synthetic records

def _op(count, elapsed, block, p50_ms=None, p99_ms=None, nbytes=True):
    if not count:
        return {"count": 0, "bytes": 0, "per_sec": 0.0, "mib_per_sec": 0.0,
                "latency_us": dict.fromkeys(("min", "mean", "max", "p50", "p90", "p95", "p99", "p99.9"), 0)}
    b = count * block if nbytes else 0
    p50 = (p50_ms if p50_ms is not None else 0.1) * 1000.0
    p99 = (p99_ms if p99_ms is not None else p50 / 1000.0 * 3) * 1000.0
    return {"count": count, "bytes": b, "per_sec": count / elapsed, "mib_per_sec": b / elapsed / MIB,
            "latency_us": {"min": p50 / 4, "mean": p50, "max": p99 * 2, "p50": p50, "p90": p99 / 2,
                           "p95": p99 / 1.5, "p99": p99, "p99.9": p99 * 1.5}}


def rec(wid, workload, mode, threads=1, file_num=1, total=64 * MIB, block=16384, direct=True,
        reads=0.0, writes=0.0, fsyncs=0.0, p50_ms=0.1, p99_ms=None, dev=None, elapsed=10.0,
        collector="sysstat", working_set=None, bench_extra=None, **spec):
    """A workload record as the role stores it; ``reads``/``writes`` are ops/s, ``dev``
    the iostat -x averages (None: no device statistics)."""
    ops = {"read": _op(int(reads * elapsed), elapsed, block, p50_ms, p99_ms),
           "write": _op(int(writes * elapsed), elapsed, block, p50_ms, p99_ms),
           "fsync": _op(int(fsyncs * elapsed), elapsed, block, p50_ms, p99_ms, nbytes=False)}
    bench = {"schema_version": 1, "config": {"mode": mode, "threads": threads, "direct": direct,
                                             "block_size": block, "file_num": file_num, "total_size": total},
             "environment": {"filesystem": "ext4" if dev is not None else "tmpfs"},
             "elapsed_s": elapsed, "ops": ops, "errors": {"total": 0}, "interrupted": False}
    bench.update(bench_extra or {})
    result = {"rc": 0, "bench": bench,
              "collector": {"source": collector if dev is not None else "none", "devices": ["sdb"] if dev else [],
                            "reason": None if dev is not None else "no block device behind the test directory"},
              "iostat": {"samples": [], "avg": dict(dev, device="sdb") if dev is not None else {}}}
    s = {"id": wid, "workload": workload, "mode": mode, "threads": threads, "file_num": file_num,
         "total_size": total, "block_size": block, "direct": direct, "time": int(elapsed), "warmup": 1}
    if working_set:
        s["working_set"] = working_set
    s.update(spec)
    return workload_record(s, result)


def devstat(r_s=0.0, rkb=0.0, w_s=0.0, wkb=0.0, r_await=0.5, w_await=0.5, aqu=1.0, util=50.0,
            rareq=16.0, wareq=16.0):
    return {"r/s": r_s, "rkB/s": rkb, "w/s": w_s, "wkB/s": wkb, "r_await": r_await, "w_await": w_await,
            "aqu-sz": aqu, "%util": util, "rareq-sz": rareq, "wareq-sz": wareq}


# --------------------------------------------------------------------------- 1. cache proof

def test_cache_proof_recorded_buffered_reread_is_flagged_and_direct_reads_pass():
    ws = recorded("cache_proof")
    d = D.diagnose(ws)["cache_proof"]
    assert (d["status"], d["conclusion"]) == ("fail", "cache")
    ev = d["evidence"]["workloads"]
    # the buffered re-read of a warm 16 MiB file: hundreds of thousands of reads/s, the device idle
    reread = ev["over_cache-rndrd-t1"]
    assert reread["bytes_ratio"] < 0.05 and reread["bench_read_iops"] > 50000
    assert d["evidence"]["failed"] == ["over_cache-rndrd-t1"]
    # O_DIRECT reads on the same device reached it
    assert ev["over_cache-rndrd-t4"]["bytes_ratio"] >= 0.8
    assert "served from a cache, not the disk" in d["sentence"] and "over_cache-rndrd-t1" in d["sentence"]


def test_cache_proof_fails_the_judge_with_its_reason():
    ws = recorded("cache_proof")
    j = judge(ws, [])
    assert j["verdict"] == "FAIL"
    (c,) = [c for c in j["checks"] if c["rule"] == "cache_proof"]
    assert c["workload"] == "over_cache-rndrd-t1" and c["status"] == "fail" and c["kind"] == "diagnostic"
    assert c["limit"] == 0.8 and c["value"] < 0.05
    assert j["reasons"] == [c["message"]]
    assert "served from a cache, not the disk" in c["message"] and "not disk numbers" in c["message"]
    assert j["diagnostics"]["cache_proof"]["status"] == "fail"
    # the fleet table names it as the workload's first failing rule
    f = fleet.aggregate({"h1": {"host": "h1", "workloads": ws, "verdict": j["verdict"], "reasons": j["reasons"],
                                "checks": j["checks"], "diagnostics": j["diagnostics"]}})
    (h,) = f["hosts"]
    assert h["verdict"] == "FAIL" and h["first_failing_rule"] == "cache_proof"
    assert {w["id"]: w["first_failing_rule"] for w in h["workloads"]}["over_cache-rndrd-t1"] == "cache_proof"


def test_excess_device_reads_are_not_evidence_of_anything():
    # a shared disk: other processes read 10x what the benchmark read
    w = rec("over_cache-rndrd-t64", "over_cache", "rndrd", 64, reads=2000, dev=devstat(r_s=20000, rkb=320000))
    d = D.diagnose([w])["cache_proof"]
    assert (d["status"], d["conclusion"]) == ("pass", "disk")
    assert d["evidence"]["workloads"][w["id"]]["bytes_ratio"] == 10.0
    assert judge([w], [])["verdict"] == "PASS"


def test_merged_requests_are_proven_by_bytes():
    # 16K reads merged by the block layer into 64K requests: r/s is a quarter, the bytes match
    w = rec("over_cache-seqrd-t1", "over_cache", "seqrd", reads=4000, dev=devstat(r_s=1000, rkb=64000, rareq=64))
    d = D.diagnose([w])["cache_proof"]
    ev = d["evidence"]["workloads"][w["id"]]
    assert (ev["ops_ratio"], ev["bytes_ratio"]) == (0.25, 1.0)
    assert d["status"] == "pass"
    assert D.cache_proof_of(model.WorkloadView(w, 0))["text"].endswith("requests merged to 64 kB)")


def test_shortfall_just_under_the_tolerance_fails_and_tolerance_is_an_option():
    w = rec("over_cache-rndrd-t1", "over_cache", "rndrd", reads=1000, dev=devstat(r_s=790, rkb=790 * 16))
    assert D.diagnose([w])["cache_proof"]["status"] == "fail"
    assert D.diagnose([w], options={"cache_proof_min_ratio": 0.7})["cache_proof"]["status"] == "pass"


def test_cache_proof_unproven_without_device_statistics_warns_but_passes():
    w = rec("over_cache-rndrd-t4", "over_cache", "rndrd", 4, reads=50000, dev=None)
    d = D.diagnose([w])["cache_proof"]
    assert (d["status"], d["conclusion"]) == ("unproven", "unproven")
    assert "no block device" in d["sentence"] and "collector none" in d["sentence"]
    j = judge([w], [])
    assert j["verdict"] == "PASS"
    assert any("Cache proof unproven" in x for x in j["warnings"])
    # ... unless a rule asks for the proof
    j = judge([w], [{"diagnostic": "cache_proof", "expect": "pass"}])
    assert j["verdict"] == "FAIL"
    assert j["reasons"][0].startswith("diagnostic cache_proof is unproven, expected one of pass")


def test_cache_proof_applies_to_over_cache_reads_only():
    cache = rec("cache-rndrd-t1", "cache", "rndrd", reads=90000, dev=devstat(r_s=0, rkb=0))
    write = rec("over_cache-rndwr-t1", "over_cache", "rndwr", writes=1000, dev=devstat(w_s=1000, wkb=16000))
    assert D.diagnose([cache, write])["cache_proof"]["status"] == "n/a"
    # the plan's working_set keyword counts as over-cache whatever the label
    mix = rec("mix-rndrw-t64-r90", "mix", "rndrw", 64, reads=900, writes=100, working_set="over_cache",
              dev=devstat(r_s=0, rkb=0, w_s=100, wkb=1600))
    assert D.diagnose([mix])["cache_proof"]["conclusion"] == "cache"


# --------------------------------------------------------------------------- 2. write amplification

def test_write_amplification_recorded_fsync_every_write_amplifies_more():
    ws = recorded("write_amplification")
    d = D.diagnose(ws)["write_amplification"]
    per = d["evidence"]["workloads"]
    assert per["wamp-fsync1"]["bytes_ratio"] > per["wamp-nofsync"]["bytes_ratio"]
    assert per["wamp-fsync1"]["fsync_per_sec"] > 0 and per["wamp-nofsync"]["fsync_per_sec"] == 0
    assert d["evidence"]["max_workload"] == "wamp-fsync1"
    assert per["wamp-fsync1"]["block_kb"] == 4.0 and per["wamp-fsync1"]["dev_wareq_sz_kb"] is not None
    assert "in wamp-fsync1 the device wrote" in d["sentence"] and "4 kB requests became" in d["sentence"]


def test_write_amplification_classes():
    log = rec("log-seqwr-t1", "log", "seqwr", writes=1000, fsyncs=1000, direct=False,
              dev=devstat(w_s=3000, wkb=48000, wareq=16))
    d = D.diagnose([log])["write_amplification"]
    assert (d["status"], d["conclusion"], d["evidence"]["max_ratio"]) == ("warn", "amplified", 3.0)
    assert "journal and metadata" in d["sentence"]
    plain_wr = rec("over_cache-rndwr-t4", "over_cache", "rndwr", 4, writes=1000, dev=devstat(w_s=1000, wkb=16000))
    assert D.diagnose([plain_wr])["write_amplification"]["conclusion"] == "normal"
    buffered = rec("bulk-seqwr-t1", "bulk", "seqwr", writes=50000, direct=False, dev=devstat(w_s=10, wkb=1000))
    d = D.diagnose([buffered])["write_amplification"]
    assert d["conclusion"] == "deferred" and "page cache held the writes back" in d["sentence"]
    nodev = rec("x-rndwr-t1", "x", "rndwr", writes=100, dev=None)
    assert D.diagnose([nodev])["write_amplification"]["status"] == "unproven"
    reads_only = rec("x-rndrd-t1", "x", "rndrd", reads=100, dev=devstat())
    assert D.diagnose([reads_only])["write_amplification"]["status"] == "n/a"


# --------------------------------------------------------------------------- 3. write serialization

def serial_pair(one_iops, many_iops, threads=64, files=128, total=1024 * MIB):
    return [rec("wser-1file-t%d" % threads, "serial_probe", "rndwr", threads, 1, total, writes=one_iops,
                fsync_freq=0, dev=devstat(w_s=one_iops, wkb=one_iops * 16)),
            rec("wser-%dfiles-t%d" % (files, threads), "serial_probe", "rndwr", threads, files, total,
                writes=many_iops, fsync_freq=0, dev=devstat(w_s=many_iops, wkb=many_iops * 16))]


def test_serialization_detected_below_half_the_many_files_rate():
    d = D.diagnose(serial_pair(9000, 40000))["write_serialization"]
    assert (d["status"], d["conclusion"]) == ("warn", "serialized")
    assert d["evidence"]["ratio"] == 0.225 and d["evidence"]["files"] == 128 and d["evidence"]["threads"] == 64
    assert "one big tablespace file will hit that ceiling" in d["sentence"]
    d = D.diagnose(serial_pair(30000, 40000))["write_serialization"]
    assert (d["status"], d["conclusion"]) == ("pass", "parallel")


def test_serialization_recorded_pair_and_pairing_rules():
    d = D.diagnose(recorded("writes"))["write_serialization"]
    assert d["workloads"] == ["wser-1file-t8", "wser-32files-t8"]
    assert d["evidence"]["one_file_iops"] > 0 and d["evidence"]["many_files_iops"] > 0
    assert d["conclusion"] in ("parallel", "serialized")
    # different total sizes (cache-sized 1 file vs over-cache 128 files) are not a pair
    one, many = serial_pair(9000, 40000)
    many = copy.deepcopy(many)
    many["total_size"] = 4 * 1024 * MIB
    assert D.diagnose([one, many])["write_serialization"]["status"] == "n/a"


# --------------------------------------------------------------------------- 4. write cache

def wc_records(c1_ms, v1_ms, t1_iops, tn_iops, tn=64):
    return [rec("cache-rndwr-t1", "cache", "rndwr", 1, writes=t1_iops, p50_ms=c1_ms, working_set="cache",
                dev=devstat(w_s=t1_iops, wkb=16 * t1_iops)),
            rec("cache-rndwr-t%d" % tn, "cache", "rndwr", tn, writes=tn_iops, p50_ms=c1_ms, working_set="cache",
                dev=devstat(w_s=tn_iops, wkb=16 * tn_iops)),
            rec("over_cache-rndwr-t1", "over_cache", "rndwr", 1, 128, writes=1000.0 / v1_ms, p50_ms=v1_ms,
                working_set="over_cache", dev=devstat(w_s=1000.0 / v1_ms, wkb=16000.0 / v1_ms))]


@pytest.mark.parametrize("c1, v1, t1, tn, conclusion, status, words", [
    (0.05, 0.06, 15000, 120000, "write-back", "pass", "p50 <= 0.2 ms"),                  # fast ack
    (0.4, 4.0, 2500, 3000, "write-back", "pass", "cache set <= 0.5x of over-cache"),      # cache far faster
    (5.0, 5.5, 200, 2400, "write-through", "warn", "suffer badly"),                       # media latency
    (0.5, 0.55, 2000, 2600, "write-back", "pass", "probably write-back"),                 # barely gains
    (0.5, 0.55, 2000, 16000, "unclear", "info", "unclear"),
])
def test_write_cache_conclusions(c1, v1, t1, tn, conclusion, status, words):
    d = D.diagnose(wc_records(c1, v1, t1, tn))["write_cache"]
    assert (d["conclusion"], d["status"]) == (conclusion, status), d["sentence"]
    assert words in d["sentence"]
    ev = d["evidence"]
    assert ev["cache_t1_p50_ms"] == c1 and ev["over_cache_t1_p50_ms"] == v1
    assert ev["tn_threads"] == 64 and ev["thread_gain"] == round(tn / t1, 3)
    assert ev["thresholds"] == {"wb_fast_ms": 0.2, "wt_slow_ms": 1.0, "wb_set_ratio": 0.5, "wb_thread_gain": 2.0}


def test_write_cache_recorded_quick_like_set():
    d = D.diagnose(recorded("writes"))["write_cache"]
    ev = d["evidence"]
    # cache-sized set has only 1 thread: the thread gain comes from the over-cache set (1 -> 4)
    assert ev["cache_t1_p50_ms"] > 0 and ev["over_cache_t1_p50_ms"] > 0 and ev["tn_threads"] == 4
    assert d["workloads"] == ["cache-rndwr-t1", "over_cache-rndwr-t1", "over_cache-rndwr-t4"]
    assert d["conclusion"] in ("write-back", "write-through", "unclear")


# --------------------------------------------------------------------------- 5. tipping point

def sweep(points, bound_field="p99_ms"):
    out = []
    for t, iops, p99, util in points:
        aw = p99 / 3.0
        out.append(rec("over_cache-rndrd-t%d" % t, "over_cache", "rndrd", t, 128, 1024 * MIB, reads=iops,
                       p50_ms=p99 / 4, p99_ms=p99, working_set="over_cache",
                       dev=devstat(r_s=iops, rkb=16 * iops, r_await=aw, aqu=iops * aw / 1000.0, util=util)))
    return out


SWEEP = [(1, 800, 2.0, 60), (2, 1600, 2.5, 90), (4, 3100, 3.0, 100), (8, 6000, 6.0, 100),
         (16, 9000, 20.0, 100), (32, 9500, 60.0, 100), (64, 9600, 130.0, 100)]


def test_tipping_point_bound_saturation_util_and_little():
    ws = sweep(SWEEP)
    d = D.diagnose(list(reversed(ws)))["tipping_point"]            # record order does not matter
    ev = d["evidence"]
    assert [s["threads"] for s in ev["steps"]] == [1, 2, 4, 8, 16, 32, 64]
    assert ev["max_threads_within_bound"] == 16 and ev["max_iops_within_bound"] == 9000
    assert ev["saturation_threads"] == 16                           # 16 -> 32 gains < 10 %
    assert ev["util_full_threads"] == 4 and ev["iops_gain_after_util_full"] == round(9600 / 3100, 3)
    assert ev["little_ratio"] == 1.0 and ev["little_ok"] is True
    assert (d["status"], d["conclusion"]) == ("pass", "within_bound")
    s = d["sentence"]
    assert "p99 stays under 50 ms up to 16 threads" in s and "best 9000 IOPS at 16 threads" in s
    assert "%util reached 100 at 4 threads" in s and "Little's law" in s
    # a tighter bound from the role variable
    d = D.diagnose(ws, latency_bound_ms=5)["tipping_point"]
    assert d["evidence"]["max_threads_within_bound"] == 4 and d["evidence"]["bound_ms"] == 5


def test_tipping_point_over_bound_from_the_start_and_little_disagreement():
    ws = sweep([(1, 100, 80.0, 100), (2, 150, 90.0, 100), (4, 160, 120.0, 100)])
    ws[1]["metrics"]["dev_aqu_sz"] *= 3        # device figures that disagree (other I/O)
    ws[2]["metrics"]["dev_aqu_sz"] *= 3
    d = D.diagnose(ws)["tipping_point"]
    assert (d["status"], d["conclusion"]) == ("warn", "exceeds_bound")
    assert "p99 is over 50 ms already at 1 thread" in d["sentence"]
    assert d["evidence"]["little_ok"] is False and "device figures disagree" in d["sentence"]
    assert D.diagnose(ws)["bounded_max"]["conclusion"] == "exceeds_bound"


def test_tipping_point_recorded_sweep_is_sorted_and_complete():
    d = D.diagnose(recorded("sweep"))["tipping_point"]
    steps = d["evidence"]["steps"]
    assert [s["threads"] for s in steps] == [1, 2, 4, 8]
    for s in steps:
        assert s["iops"] > 0 and s["p99_ms"] > 0 and s["aqu_sz"] is not None and s["await_ms"] is not None
        assert s["util_pct"] is not None and s["little_ratio"] is not None
    assert d["conclusion"] == "within_bound"
    assert 0.5 <= d["evidence"]["little_ratio"] <= 2.0     # own loop device: figures agree


def test_no_sweep_with_two_thread_counts():
    assert D.diagnose(sweep(SWEEP[:2]))["tipping_point"]["status"] == "n/a"


# --------------------------------------------------------------------------- 6. bounded maximum

SEARCH = {"knob": "threads", "bound_ms": 20.0, "percentile": "p99", "stopped": "bound_exceeded",
          "steps": [{"threads": 1, "iodepth": 1, "iops": 900.0, "p99_us": 1900.0, "elapsed_s": 5.0},
                    {"threads": 8, "iodepth": 1, "iops": 6100.0, "p99_us": 9800.0, "elapsed_s": 5.0},
                    {"threads": 16, "iodepth": 1, "iops": 9100.0, "p99_us": 18700.0, "elapsed_s": 5.0},
                    {"threads": 32, "iodepth": 1, "iops": 9700.0, "p99_us": 41000.0, "elapsed_s": 5.0}],
          "best": {"threads": 16, "iodepth": 1, "iops": 9100.0, "p99_us": 18700.0}}


def test_bounded_max_reads_the_search_section():
    w = rec("search-rndrd", "search", "rndrd", 1, 128, reads=9100, p99_ms=18.7,
            dev=devstat(r_s=9100, rkb=9100 * 16), bench_extra={"search": SEARCH})
    d = D.diagnose([w] + sweep(SWEEP))["bounded_max"]
    ev = d["evidence"]
    assert ev["source"] == "search" and ev["bound_ms"] == 20.0 and ev["knob"] == "threads"
    assert ev["iops"] == 9100.0 and ev["p99_ms"] == 18.7 and len(ev["steps"]) == 4
    assert d["sentence"] == ("Latency-bounded maximum (iobench search, search-rndrd): 9100 IOPS at 16 threads "
                             "with p99 18.7 ms <= 20 ms.")
    # without best: computed from the steps
    s2 = dict(SEARCH)
    s2.pop("best")
    w2 = copy.deepcopy(w)
    w2["result"]["bench"]["search"] = s2
    assert D.diagnose([stored(w2)])["bounded_max"]["evidence"]["iops"] == 9100.0
    # best as an index into steps; an incomplete step (interrupted) never counts as best
    s3 = copy.deepcopy(SEARCH)
    s3["best"] = 1
    w2["result"]["bench"]["search"] = s3
    assert D.diagnose([stored(w2)])["bounded_max"]["evidence"]["iops"] == 6100.0
    s3["best"] = None
    s3["steps"][2]["complete"] = False
    for st in s3["steps"]:
        st["pct_us"] = st.pop("p99_us")          # another percentile searched
    d = D.diagnose([stored(w2)])["bounded_max"]
    assert (d["evidence"]["iops"], d["evidence"]["p99_ms"]) == (6100.0, 9.8)
    s3["steps"] = s3["steps"][3:]
    assert D.diagnose([stored(w2)])["bounded_max"]["conclusion"] == "exceeds_bound"


def test_bounded_max_from_the_sweep_without_search():
    d = D.diagnose(sweep(SWEEP))["bounded_max"]
    assert d["evidence"]["source"] == "sweep" and d["evidence"]["iops"] == 9000 and d["evidence"]["threads"] == 16
    assert D.diagnose(recorded("writes"))["bounded_max"]["status"] == "n/a"


# --------------------------------------------------------------------------- 7. database pattern

DB = {"config": {"readers": 16, "page_size": 16384, "log_block_size": 4096, "flusher_threads": 1,
                 "group_commit_max": 16, "working_set": 1073741824},
      "transactions": {"count": 120000, "per_sec": 2000.0},
      "commits": {"count": 36000, "per_sec": 600.0, "txn_per_commit": 3.33,
                  "latency_us": {"min": 200, "mean": 900, "p50": 800, "p90": 1500, "p95": 2000, "p99": 4100,
                                 "p99.9": 9000, "max": 15000}},
      "log_writes": {"count": 36000, "bytes": 147456000, "per_sec": 600.0},
      "page_reads": {"count": 960000, "per_sec": 16000.0,
                     "latency_us": {"p50": 180, "p90": 400, "p95": 600, "p99": 1200, "p99.9": 3500, "max": 9000}},
      "page_writes": {"count": 48000, "per_sec": 800.0,
                      "latency_us": {"p50": 200, "p90": 500, "p95": 700, "p99": 1500, "p99.9": 4000, "max": 9500}}}


def test_db_pattern_reads_the_db_section():
    w = rec("db-pattern", "db", "rndrw", 17, 128, reads=16000, writes=1400, dev=devstat(r_s=16000, rkb=256000),
            bench_extra={"db": DB})
    d = D.diagnose([w])["db_pattern"]
    assert (d["status"], d["conclusion"]) == ("info", "measured")
    ev = d["evidence"]
    assert (ev["commits_per_sec"], ev["commit_p50_ms"], ev["commit_p99_ms"], ev["commit_p999_ms"]) == (
        600.0, 0.8, 4.1, 9.0)
    assert (ev["page_read_p50_ms"], ev["page_read_p99_ms"], ev["page_write_per_sec"]) == (0.18, 1.2, 800.0)
    assert d["sentence"] == ("Database pattern (db-pattern): 600 commits/s (2000 transactions/s); commit latency "
                             "p50 0.8 ms, p99 4.10 ms, p99.9 9 ms; page reads p50 0.18 ms, p99 1.20 ms, p99.9 "
                             "3.50 ms; page writes 800/s.")
    assert D.diagnose(recorded("writes"))["db_pattern"]["status"] == "n/a"


# --------------------------------------------------------------------------- 8. read-ahead

def test_readahead_recorded_pair_is_significant():
    d = D.diagnose(recorded("readahead"))["readahead"]
    assert (d["status"], d["conclusion"]) == ("warn", "significant")
    assert d["evidence"]["ratio"] >= 1.5 and d["workloads"] == ["ra-seqrd-buffered", "ra-seqrd-direct"]
    assert "read-ahead does work a database's own O_DIRECT I/O would not get" in d["sentence"]


def test_readahead_small_and_unproven():
    def pair(buf_mibps, dio_mibps, buf_dev_kb):
        b = rec("ra-seqrd-buffered", "readahead", "seqrd", reads=buf_mibps * 64, direct=False, dataset="ra-1x4G",
                dev=devstat(r_s=buf_dev_kb / 256, rkb=buf_dev_kb, rareq=256))
        d = rec("ra-seqrd-direct", "readahead", "seqrd", reads=dio_mibps * 64, dataset="ra-1x4G",
                dev=devstat(r_s=dio_mibps * 64, rkb=dio_mibps * 1024))
        return [b, d]
    d = D.diagnose(pair(300, 280, 300 * 1024))["readahead"]
    assert (d["status"], d["conclusion"]) == ("pass", "small") and d["evidence"]["ratio"] == round(300 / 280.0, 3)
    assert "device requests 256 kB vs 16 kB" in d["sentence"]
    d = D.diagnose(pair(3000, 280, 100 * 1024))["readahead"]
    assert d["conclusion"] == "unproven" and "the page cache served it" in d["sentence"]
    # different data sets are not a pair
    b, x = pair(300, 280, 300 * 1024)
    x["dataset"] = "other"
    assert D.diagnose([b, x])["readahead"]["status"] == "n/a"


# --------------------------------------------------------------------------- shape, rules, filter

def test_every_entry_has_the_documented_shape():
    for ws in (recorded("writes"), recorded("sweep"), [], [{"id": "junk"}], ["not a dict"]):
        out = D.diagnose(ws)
        assert list(out) == list(D.NAMES)
        for name, e in out.items():
            assert set(e) == {"status", "conclusion", "sentence", "evidence", "workloads"}
            assert e["status"] in model.STATUSES and e["conclusion"] in model.CONCLUSIONS[name]
            assert e["sentence"].endswith(".") and "\n" not in e["sentence"]
            json.dumps(e, allow_nan=False)


def test_diagnostic_rules_validate():
    good = [{"diagnostic": "cache_proof", "expect": "pass"},
            {"diagnostic": "write_cache", "expect": ["write-back", "unclear"]},
            {"diagnostic": "write_amplification", "metric": "evidence.max_ratio", "max": 3},
            {"diagnostic": "tipping_point", "metric": "evidence.max_iops_within_bound", "min": 10000,
             "name": "iops-under-50ms"}]
    assert validate_rules(good) == []
    errs = validate_rules([{"diagnostic": "cache_prof", "expect": "pass"},
                           {"diagnostic": "cache_proof", "expect": "write-back"},
                           {"diagnostic": "cache_proof", "workload": "over_cache", "expect": "pass"},
                           {"diagnostic": "cache_proof"},
                           {"expect": "pass"},
                           {"diagnostic": "write_cache", "min": 1},
                           {"diagnostic": "write_cache", "metric": "evidence.(", "max": 1}])
    assert errs[0] == ("fleetqual_thresholds[0].diagnostic: unknown diagnostic 'cache_prof' (did you mean "
                       "cache_proof?); known: " + ", ".join(D.NAMES))
    assert errs[1].startswith("fleetqual_thresholds[1].expect: 'write-back' is not a status or conclusion of "
                              "cache_proof; known: pass, warn, fail, unproven, info, n/a, disk, cache")
    assert errs[2].startswith("fleetqual_thresholds[2].workload: not allowed in a diagnostic rule")
    assert errs[3] == ("fleetqual_thresholds[3]: diagnostic rule sets no test; give expect (e.g. pass) or "
                       "metric with min/max")
    assert errs[4].startswith("fleetqual_thresholds[4].expect: only valid with diagnostic")
    assert any(e.startswith("fleetqual_thresholds[5]: min/max in a diagnostic rule need metric") for e in errs)
    assert any(e.startswith("fleetqual_thresholds[6].metric: JMESPath 'evidence.(' does not parse") for e in errs)
    assert rule_name(good[1], "expect") == "diagnostic:write_cache=write-back|unclear"
    assert rule_name(good[2], "max") == "max(evidence.max_ratio)@diagnostic:write_amplification"
    assert rule_name(good[3], "min") == "iops-under-50ms"


def test_judge_checks_diagnostic_rules_once_per_host():
    ws = sweep(SWEEP) + wc_records(5.0, 5.5, 200, 2400)
    rules = [{"diagnostic": "write_cache", "expect": "write-back"},
             {"diagnostic": "tipping_point", "metric": "evidence.max_iops_within_bound", "min": 5000},
             {"diagnostic": "tipping_point", "metric": "evidence.max_threads_within_bound", "min": 32},
             {"diagnostic": "readahead", "metric": "evidence.ratio", "max": 2},
             {"workload": "over_cache", "min_iops": 1}]
    j = judge(ws, rules)
    diag = [c for c in j["checks"] if c["kind"] == "diagnostic"]
    assert [(c["rule"], c["status"]) for c in diag] == [
        ("diagnostic:write_cache=write-back", "fail"),
        ("min(evidence.max_iops_within_bound)@diagnostic:tipping_point", "pass"),
        ("min(evidence.max_threads_within_bound)@diagnostic:tipping_point", "fail"),
        ("max(evidence.ratio)@diagnostic:readahead", "fail")]
    assert all(c["workload"] is None for c in diag)
    assert j["verdict"] == "FAIL"
    assert j["reasons"][0].startswith("diagnostic write_cache is warn/write-through, expected one of write-back: "
                                      "Write cache: write-through")
    assert j["reasons"][1].startswith("diagnostic tipping_point: evidence.max_threads_within_bound 16 < limit 32")
    assert j["reasons"][2].startswith("diagnostic readahead: evidence.ratio has no value (limit <= 2)")
    assert not any("matched no workload" in w for w in j["warnings"])
    # given diagnostics are used as they are (the role computes them once)
    j2 = judge(ws, rules[:1], diagnostics={"write_cache": {"status": "pass", "conclusion": "write-back"}})
    assert j2["verdict"] == "PASS"


def test_filter_and_store_expression():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import FILTERS as f
    from ansible.errors import AnsibleFilterError
    out = f["diagnostics"](sweep(SWEEP), latency_bound_ms=5)
    assert out["tipping_point"]["evidence"]["bound_ms"] == 5
    j = f["judge"](sweep(SWEEP), [{"diagnostic": "tipping_point", "expect": "within_bound"}], diagnostics=out)
    assert j["verdict"] == "PASS" and j["diagnostics"] is out
    with pytest.raises(AnsibleFilterError, match=r"latency_bound_ms \(fleetqual_latency_bound_ms\) must be a number"):
        f["diagnostics"]([], latency_bound_ms=0)
    with pytest.raises(AnsibleFilterError, match="must be a number of milliseconds > 0"):
        f["diagnostics"]([], latency_bound_ms="fast")
    for bad in ("nan", "inf", "-inf", -5):
        with pytest.raises(AnsibleFilterError, match="must be a number of milliseconds > 0"):
            f["diagnostics"]([], latency_bound_ms=bad)
    assert f["diagnostics"](sweep(SWEEP), latency_bound_ms="5")["tipping_point"]["evidence"]["bound_ms"] == 5
    with pytest.raises(AnsibleFilterError, match="options.colour: unknown option"):
        f["diagnostics"]([], options={"colour": 1})
    # the action that stores a host's record judges it with these very filters
    # (plugin_utils/judge/record.py): fleetqual_latency_bound_ms reaches the diagnostics,
    # and the judge and the record get the same diagnostics
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import record as HR
    diag, judged = HR.judged(sweep(SWEEP), [], [{"diagnostic": "tipping_point", "expect": "within_bound"}], "5")
    assert diag["tipping_point"]["evidence"]["bound_ms"] == 5
    assert judged["verdict"] == "PASS" and judged["diagnostics"] is diag


# --------------------------------------------------------------------------- profiles

def fake_records(plan_list):
    """Plausible records for every workload of a plan (disk-backed, device agrees)."""
    out = []
    for w in plan_list:
        reads = 1000.0 if w["mode"] in ("rndrd", "seqrd", "rndrw") else 0.0
        writes = 1000.0 if w["mode"] in ("rndwr", "seqwr", "seqrewr", "rndrw") else 0.0
        r = rec(w["id"], w["workload"], w["mode"], w["threads"], w["file_num"], w["total_size"],
                w["block_size"], w["direct"], reads=reads, writes=writes, p99_ms=w["threads"] * 1.0,
                dev=devstat(r_s=reads, rkb=reads * 16, w_s=writes, wkb=writes * 16))
        r.update({k: v for k, v in w.items() if k not in r or k in ("working_set", "dataset")})
        out.append(r)
    return out


@pytest.mark.parametrize("profile, measured", [
    ("quick", {"cache_proof", "write_amplification", "write_cache"}),
    # production-safe: no 64-thread write serialization probe on a host in production
    ("compliance", {"cache_proof", "write_amplification", "write_cache"}),
    ("standard", {"cache_proof", "write_amplification", "write_cache", "write_serialization"}),
    ("san", {"cache_proof", "write_amplification", "write_cache", "write_serialization", "tipping_point",
             "bounded_max", "readahead"}),
])
def test_profiles_run_the_workloads_their_diagnostics_need(profile, measured):
    with open(os.path.join(ROOT, "roles", "qualify", "defaults", "main", "profiles.yml")) as fh:
        profiles = yaml.safe_load(fh)["fleetqual_profiles"]
    p = P.plan(profile, "256M", 8000, profiles=profiles)
    out = D.diagnose(fake_records(p))
    assert {n for n, e in out.items() if e["status"] != "n/a"} == measured
    if profile == "quick":
        assert summary.expected_duration_s(p) <= 40
    if profile == "san":
        assert [s["threads"] for s in out["tipping_point"]["evidence"]["steps"]] == [1, 2, 4, 8, 16, 32, 64]
        assert out["write_serialization"]["workloads"] == ["wser-1file-t64", "wser-128files-t64"]
        assert out["readahead"]["workloads"] == ["ra-seqrd-buffered", "ra-seqrd-direct"]


# --------------------------------------------------------------------------- report

def _fleet(records_by_host):
    recs = {}
    for host, ws in records_by_host.items():
        j = judge(ws, [])
        recs[host] = {"host": host, "groups": ["db"], "workloads": ws, "verdict": j["verdict"],
                      "reasons": j["reasons"], "checks": j["checks"], "diagnostics": j["diagnostics"]}
    return recs, fleet.aggregate(recs)


def test_report_shows_every_sentence_in_terminal_html_md_and_json(tmp_path):
    recs, f = _fleet({"db1": recorded("cache_proof"), "db2": sweep(SWEEP) + serial_pair(9000, 40000),
                      "db3": recorded("readahead")})
    h = {x["host"]: x for x in f["hosts"]}
    assert h["db1"]["diagnostics"]["cache_proof"]["status"] == "fail"
    lines = render_text.detail_lines(f, width=100)
    assert all(len(line) <= 100 for line in lines)
    text = " ".join(" ".join(line.split()) for line in lines)
    files = report.write_reports(f, str(tmp_path), formats=("json", "html", "md"), records=recs)
    html_text = open(files["html"]).read()
    md_text = open(files["md"]).read()
    fj = json.load(open(files["json"]))
    sentences = [(host, d["sentence"]) for host in ("db1", "db2", "db3")
                 for d in h[host]["diagnostics"].values() if d["status"] != "n/a"]
    assert len(sentences) >= 6
    import html as htmlmod
    for host, s in sentences:
        assert s in text, s
        assert htmlmod.escape(s, quote=True) in html_text or htmlmod.escape(s, quote=False) in html_text, s
        assert md_cell(s) in md_text, s
        assert s in [d["sentence"] for d in {x["host"]: x for x in fj["hosts"]}[host]["diagnostics"].values()]
    # failing hosts first, with a status mark
    assert lines[lines.index("diagnostics db1:") + 1].startswith("  [FAIL] Cache proof failed")
    assert '<table id="diagnostics">' in html_text and "## Diagnostics" in md_text
    # the table itself is unchanged: still within 100 columns
    assert all(len(line) <= 100 for line in render_text.render_table(f, width=100).splitlines())


def test_report_limits_terminal_diagnostics_to_a_few_hosts_and_computes_missing_ones():
    recs = {"h%d" % i: {"host": "h%d" % i, "workloads": sweep(SWEEP), "verdict": "PASS", "reasons": [],
                        "checks": []} for i in range(30)}      # records without diagnostics (older role)
    f = fleet.aggregate(recs)
    assert f["hosts"][0]["diagnostics"]["tipping_point"]["conclusion"] == "within_bound"
    lines = render_text.detail_lines(f, width=100, limit=5)
    assert sum(1 for line in lines if line.startswith("diagnostics ")) == 5
    assert lines[-1] == "... diagnostics of 25 more hosts in report.html, report.md and fleet.json"
    assert fleet.aggregate({"x": {"host": "x", "workloads": [], "verdict": "ERROR"}})["hosts"][0]["diagnostics"] == {}


# --------------------------------------------------------------------------- real runs

@pytest.fixture(scope="module")
def binary():
    b, why = rr.build_binary()
    if not b:
        pytest.skip(why)
    return b


@pytest.fixture(scope="module")
def own_disk():
    """(dir, shared): a loop device of its own when possible (root)."""
    with rr.isolated_dir() as (d, shared, why):
        yield d, shared, why


@pytest.mark.slow
def test_real_buffered_reread_of_a_cached_file_is_flagged(binary, own_disk):
    d, _shared, _why = own_disk
    direct = rr.workload(binary, d, rr.spec("over_cache-rndrd-t2", "over_cache", "rndrd", 2, 4, 32 * MIB, time=3))
    rr.workload(binary, d, rr.spec("warm", "over_cache", "rndrd", 1, 1, 8 * MIB, direct=False, time=1))
    reread = rr.workload(binary, d, rr.spec("over_cache-rndrd-t1", "over_cache", "rndrd", 1, 1, 8 * MIB,
                                            direct=False, time=2), keep_cache=True, prepare=False)
    if direct["metrics"]["dev_r_s"] is None:
        pytest.skip("no device statistics here: %s" % direct["result"]["collector"])
    diag = D.diagnose([direct, reread])
    per = diag["cache_proof"]["evidence"]["workloads"]
    assert per["over_cache-rndrd-t1"]["bytes_ratio"] < 0.8 and per["over_cache-rndrd-t2"]["bytes_ratio"] >= 0.8
    j = judge([direct, reread], [], diagnostics=diag)
    assert j["verdict"] == "FAIL" and [c["workload"] for c in j["checks"] if c["rule"] == "cache_proof"] == [
        "over_cache-rndrd-t1"]


@pytest.mark.slow
def test_real_fsync_every_write_amplifies_more_than_none(binary, own_disk):
    d, shared, why = own_disk
    if shared:
        pytest.skip("needs a device of its own (other I/O on a shared disk swamps the ratio): %s" % why)
    sync = rr.workload(binary, d, rr.spec("fsync1", "x", "rndwr", 1, 4, 32 * MIB, block_size=4096, fsync_freq=1))
    nosync = rr.workload(binary, d, rr.spec("nofsync", "x", "rndwr", 1, 4, 32 * MIB, block_size=4096,
                                            fsync_freq=0, fsync_end=False))
    per = D.diagnose([sync, nosync])["write_amplification"]["evidence"]["workloads"]
    assert per["fsync1"]["bytes_ratio"] > per["nofsync"]["bytes_ratio"] > 0.5, per


@pytest.mark.slow
def test_real_thread_sweep_table_is_sorted_with_device_figures(binary, own_disk):
    d, shared, _why = own_disk
    ws = [rr.workload(binary, d, rr.spec("over_cache-rndrd-t%d" % t, "over_cache", "rndrd", t, 4, 32 * MIB))
          for t in (4, 1, 2)]
    tp = D.diagnose(ws)["tipping_point"]
    steps = tp["evidence"]["steps"]
    assert [s["threads"] for s in steps] == [1, 2, 4]
    assert all(s["iops"] > 0 and s["p99_ms"] > 0 for s in steps)
    if not shared:
        assert all(s["aqu_sz"] is not None and s["little_ratio"] is not None for s in steps)
    assert tp["conclusion"] == "within_bound"      # a local disk stays far under 50 ms


@pytest.mark.slow
def test_real_readahead_buffered_pass_beats_direct_pass(binary, own_disk):
    d, _shared, _why = own_disk
    ra = dict(file_num=1, total_size=64 * MIB, requests=4096, time=10, dataset="ra-1x64M")
    buf = rr.workload(binary, d, rr.spec("ra-seqrd-buffered", "readahead", "seqrd", 1, direct=False, **ra))
    dio = rr.workload(binary, d, rr.spec("ra-seqrd-direct", "readahead", "seqrd", 1, **ra), prepare=False)
    assert buf["metrics"]["read_count"] == dio["metrics"]["read_count"] == 4096      # one pass each
    r = D.diagnose([buf, dio])["readahead"]
    assert r["workloads"] == ["ra-seqrd-buffered", "ra-seqrd-direct"]
    ev = r["evidence"]
    # what holds on a loaded machine too: the kernel's read-ahead merged the buffered pass's 16 kB
    # reads into requests several times larger, and the direct pass's stayed 16 kB
    assert ev["buffered_dev_rareq_sz_kb"] >= 4 * ev["direct_dev_rareq_sz_kb"], r["sentence"]
    # the speed-up is measured, and the conclusion is exactly what the measured ratio says (a CPU
    # the other tests keep busy can make the buffered pass's page-cache copies the limit)
    assert r["conclusion"] == ("significant" if ev["ratio"] >= ev["readahead_ratio"] else "small"), r["sentence"]


# ------------------------------------------------- sentences agree with their evidence

import re  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import fmt  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num as _fmt_num  # noqa: E402


def _numbers(node):
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)


def _spellings(v):
    out = {_fmt_num(v), fmt.fmt_k(v), fmt.fmt_x(v)[:-1], fmt.fmt_ms(v)[:-3], "%.2f" % v, str(v)}
    out.add(fmt.fmt_pct(v)[:-2])
    return out


def sentence_disagreements(entry, constants=()):
    """Numbers of an entry's sentence that none of its evidence's numbers (in any of the
    formats the diagnostics print) accounts for. Workload ids and op names (p99, t64) are
    not numbers of the sentence."""
    text = entry["sentence"]
    for wid in sorted(entry["workloads"], key=len, reverse=True):
        text = text.replace(wid, " ")
    allowed = set(constants)
    for v in _numbers(entry["evidence"]):
        allowed |= _spellings(v)
    tokens = re.findall(r"(?<![\w.\-])(\d+(?:\.\d+)?)([kM]?)(?![\w.]*[A-Za-z_]\w*-)", text)
    return [n + k for n, k in tokens if n + k not in allowed and n not in allowed]


SCENARIOS = {
    "writes": lambda: recorded("writes"),
    "sweep": lambda: recorded("sweep"),
    "cache_proof": lambda: recorded("cache_proof"),
    "write_amplification": lambda: recorded("write_amplification"),
    "readahead": lambda: recorded("readahead"),
    "synthetic_sweep": lambda: sweep(SWEEP),
    "search": lambda: [rec("search-rndrd", "search", "rndrd", 1, 128, reads=9100, p99_ms=18.7,
                           dev=devstat(r_s=9100, rkb=9100 * 16), bench_extra={"search": SEARCH})],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_sentence_quotes_only_its_evidence(scenario):
    # "100" of "%util reached 100", "1" of "1 file" / "1 thread" are words of the sentence, not figures
    out = D.diagnose(SCENARIOS[scenario]())
    checked = 0
    for name, entry in out.items():
        if entry["status"] == "n/a":
            continue
        checked += 1
        assert sentence_disagreements(entry, constants={"100", "1"}) == [], (name, entry["sentence"])
    assert checked


def test_sentence_check_catches_a_number_the_evidence_lacks():
    entry = D.diagnose(sweep(SWEEP))["tipping_point"]
    assert sentence_disagreements(entry, {"100", "1"}) == []
    bad = dict(entry, sentence=entry["sentence"].replace("at 16 threads", "at 17 threads", 1))
    assert sentence_disagreements(bad, {"100", "1"}) == ["17"]


NOISY = [(1, 1000, 2.0, 50), (2, 1900, 2.2, 70), (4, 2000, 2.5, 80), (8, 3900, 3.0, 90),
         (16, 4100, 6.0, 95), (32, 4200, 12.0, 99)]


def test_tipping_point_knee_is_judged_from_the_whole_sweep():
    """One noisy step (2 -> 4 threads gains 5 %) no longer ends the growth: later steps
    reach 2x; the knee is the fewest threads reaching 90 % of the best IOPS."""
    d = D.diagnose(sweep(NOISY))["tipping_point"]
    ev = d["evidence"]
    assert ev["saturation_threads"] == 8 and ev["best_iops"] == 4200 and ev["best_threads"] == 32
    assert "IOPS reach 90 % of the sweep's best (4200 at 32 threads) at 8 threads" in d["sentence"]
    # the sentence agrees with the series: every smaller step is below 90 % of the best, this one is not
    steps = {s["threads"]: s["iops"] for s in ev["steps"]}
    assert all(steps[t] < 0.9 * ev["best_iops"] for t in steps if t < ev["saturation_threads"])
    assert steps[ev["saturation_threads"]] >= 0.9 * ev["best_iops"]
    # only the last step reaches it: still growing
    growing = [(t, 1000 * t, 2.0, 50) for t in (1, 2, 4, 8)]
    d = D.diagnose(sweep(growing))["tipping_point"]
    assert "IOPS still growing at 8 threads" in d["sentence"] and d["evidence"]["saturation_threads"] == 8
    # the share is an option
    d = D.diagnose(sweep(NOISY), options={"knee_share": 0.45})["tipping_point"]
    assert d["evidence"]["saturation_threads"] == 2 and "IOPS reach 45 % of the sweep's best" in d["sentence"]


# --------------------------------------------------------------------------- 9. stability

CONTROLLER = os.path.join(unitpaths.UNIT, "fixtures", "controller")


def controller_record(name):
    with open(os.path.join(CONTROLLER, name + ".json")) as f:
        r = json.load(f)
    return workload_record({k: v for k, v in r.items() if k != "result"}, r["result"])


def with_series(record, iops):
    """The record with its per-interval IOPS replaced (1 s intervals) and metrics recomputed."""
    r = copy.deepcopy(record)
    r["result"]["bench"]["intervals"] = [dict(t=float(i + 1), duration_s=1.0, iops=float(v))
                                         for i, v in enumerate(iops)]
    return stored(r)


def test_stability_steady_run_passes_with_its_numbers():
    w = controller_record("nvme_over_cache-rndwr-t64")
    st = w["metrics"]["stability"]
    assert st["intervals"] == 60 and abs(st["change_pct"]) < 10
    d = D.diagnose([w])["stability"]
    assert (d["status"], d["conclusion"]) == ("pass", "steady")
    assert d["evidence"]["checked"] == 1 and d["evidence"]["slowed"] == []
    assert d["sentence"].startswith("Stability: every run kept its pace (no last third of its intervals more "
                                    "than 20 % below the first; largest change ")
    assert "in over_cache-rndwr-t64" in d["sentence"] and sentence_disagreements(d, {"1"}) == []


def test_stability_run_that_spends_its_burst_credits_is_flagged():
    """A cloud volume's burst: 3000 IOPS for 20 s, then its 100 IOPS baseline."""
    base = controller_record("nvme_over_cache-rndwr-t64")
    burst = with_series(base, [3000] * 20 + [100] * 40)
    steady = controller_record("nvme_log-seqwr-t1")
    d = D.diagnose([burst, steady])["stability"]
    assert (d["status"], d["conclusion"]) == ("warn", "slowed")
    st = d["evidence"]["workloads"]["over_cache-rndwr-t64"]
    assert (st["first_iops"], st["last_iops"], st["change_pct"]) == (3000.0, 100.0, -96.7)
    assert d["evidence"]["slowed"] == ["over_cache-rndwr-t64"] and d["evidence"]["checked"] == 2
    assert ("1 of 2 runs changed pace while they ran, the last third of their intervals more than 20 % below "
            "the first: over_cache-rndwr-t64 3000 -> 100 IOPS (-96.7 %) from 20 s into the run; ") in d["sentence"]
    assert st["change_at_s"] == 20.0
    assert sentence_disagreements(d, {"1"}) == []
    # just inside the threshold (-19 %) is steady; the threshold is an option
    mild = with_series(base, [1000] * 20 + [900] * 20 + [810] * 20)
    assert D.diagnose([mild])["stability"]["conclusion"] == "steady"
    assert D.diagnose([mild], options={"stability_drop": 0.1})["stability"]["conclusion"] == "slowed"


def test_stability_ignores_the_tail_interval_and_short_runs():
    w = recorded("writes")          # 2 full intervals and a tail of a few operations: too short
    assert all(r_["metrics"]["stability"] is None for r_ in map(stored, w))
    assert D.diagnose(w)["stability"]["status"] == "n/a"
    base = controller_record("nvme_log-seqwr-t1")
    series = with_series(base, [2400] * 9)
    series["result"]["bench"]["intervals"].append({"t": 9.0004, "duration_s": 0.0004, "iops": 2.0})
    assert stored(series)["metrics"]["stability"]["last_iops"] == 2400.0


# ------------------------------------------- cache proof on a busy host: exact device counters

def test_cache_proof_uses_the_exact_window_counters_over_a_diluted_iostat_average():
    """The flaky case on a busy host: O_DIRECT reads at 9004/s, iostat's average 5819 r/s
    (0.65x: idle samples after the run averaged in) called the disk a cache. The device's
    counters read at the window's edges (window.devstat) say what really happened."""
    reads, elapsed = 9004, 10.0
    w = rec("over_cache-rndrd-t4", "over_cache", "rndrd", 4, 16, reads=reads, elapsed=elapsed,
            working_set="over_cache", dev=devstat(r_s=5819, rkb=5819 * 16))
    assert D.diagnose([w])["cache_proof"]["conclusion"] == "cache"          # the average alone misleads
    n = int(reads * elapsed)
    start = [500, 0, 4000, 100, 0, 0, 0, 0, 0, 2000, 3000, 0, 0, 0, 0, 0, 0]
    end = list(start)
    end[0] += n               # reads completed
    end[2] += n * 32          # 512-byte sectors of 16 KiB reads
    end[3] += n // 4          # read ticks, ms
    end[9] += 9900            # io_ticks, ms
    end[10] += n // 4         # time in queue, ms
    w["result"]["bench"]["window"] = {"start_epoch": 1000.0, "end_epoch": 1000.0 + elapsed,
                                      "devstat": {"sdb": {"start": start, "end": end, "source": "sysfs"}},
                                      "devstat_error": None}
    w = stored(w)
    assert w["metrics"]["dev_source"] == "devstat" and w["metrics"]["dev_read_bytes"] == n * 16384
    d = D.diagnose([w])["cache_proof"]
    ev = d["evidence"]["workloads"]["over_cache-rndrd-t4"]
    assert (d["conclusion"], ev["bytes_ratio"], ev["ops_ratio"]) == ("disk", 1.0, 1.0)
    assert ev["dev_source"] == "devstat"
    assert judge([w], [])["verdict"] == "PASS"


@pytest.mark.slow
def test_real_device_counters_and_commit_latency(binary, own_disk):
    """A real run through the module: the device's counters at the window's edges
    give the device bytes of the O_DIRECT reads, and the log workload shows its
    commit latency, never the page-cache write()."""
    d, shared, why = own_disk
    if shared:
        pytest.skip("no loop device of our own (%s): other I/O would be counted" % why)
    r = rr.workload(binary, d, rr.spec("over_cache-rndrd-t4", "over_cache", "rndrd", 4, 8, 64 * MIB, time=3))
    m = r["metrics"]
    if m["dev_source"] != "devstat":
        pytest.skip("this iobench reads no device counters: %s" % m["device_note"])
    assert m["device"] and m["dev_read_bytes"] >= m["bench_read_bytes"] > 0
    assert m["dev_read_bytes"] <= 1.05 * m["bench_read_bytes"]
    assert 0.95 <= m["dev_read_ratio"] <= 1.05
    assert D.diagnose([r])["cache_proof"]["conclusion"] == "disk"
    log = rr.workload(binary, d, rr.spec("log-seqwr-t1", "log", "seqwr", 1, 1, 16 * MIB, direct=False,
                                         fsync_freq=1, fsync_mode="fdatasync", time=2))
    m = log["metrics"]
    assert m["latency_op"] == "commit" and m["commit_count"] == m["fsync_count"] > 0
    assert m["lat_p99_ms"] == m["commit_p99_ms"] >= m["fsync_p99_ms"] > m["write_p99_ms"]


@pytest.mark.slow
def test_real_steady_state_run_is_judged_with_its_rounds(binary, own_disk):
    """iobench --steady-state for real (short rounds): the metrics carry its rounds, and a rule
    requiring steady state passes or fails exactly as the benchmark decided, quoting them."""
    import subprocess
    from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
    d, _shared, _why = own_disk
    out = os.path.join(os.path.dirname(d), "steady.json")
    p = subprocess.run([binary, "run", "--dir", d, "--mode", "rndrd", "--file-num", "4", "--total-size", "32M",
                        "--direct", "--threads", "2", "--warmup", "0", "--steady-state", "--ss-round-time", "1",
                        "--ss-window", "3", "--ss-max-rounds", "6", "--prepare", "--cleanup", "--format", "json",
                        "--output", out], capture_output=True, text=True, timeout=120, check=False)
    if p.returncode == 2 and "steady" in p.stderr:
        pytest.skip("this iobench has no --steady-state: %s" % p.stderr.strip())
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        bench = json.load(f)
    os.unlink(out)
    spec = rr.spec("fresh-rndrd-t2", "fresh", "rndrd", 2, 4, 32 * MIB, steady_state=True)
    r = workload_record(spec, {"rc": 0, "bench": bench})
    ss, raw = r["metrics"]["steady_state"], bench["steady_state"]
    assert ss["rounds"] == len(raw["rounds"]) <= 6 and ss["reached"] is raw["reached"]
    assert ss["values"] == [x["iops"] for x in raw["rounds"]]
    j = judge([r], [{"workload": "fresh", "require_steady_state": True}])
    (c,) = [c for c in j["checks"] if c["rule"] == "require_steady_state@fresh"]
    assert c["status"] == ("pass" if raw["reached"] else "fail")
    assert all(fmt_num(x["iops"]) in c["message"] for x in raw["rounds"])
