"""Array mode, the controller side: the array's figures per step from real iobench
runs of several concurrent processes on one loop device (the "array"), its curve, knee,
bounded maximum, rules and verdict; property tests of the aggregation over synthetic windows."""
import copy
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import unitpaths

sys.path.insert(0, os.path.join(unitpaths.TESTS, "iobench"))
import iobench_helpers as ih  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import figures as arrays_figures
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram as histmod  # noqa: E402

HOSTS = ["h1", "h2", "h10"]          # rank order is natural order: h1, h2, h10
CFG = {"initiators": [1, 3], "threads": [2], "modes": ["rndrd", "rndrw"], "time": 1, "warmup": 0,
       "block_size": "4K", "total_size": "8M", "thresholds": []}
OFFSET_H2 = 5.0                      # h2's clock reads 5 s ahead of the controller's
RATE = 1500                          # per host, so three hosts stay light on a busy machine


def _shift_epochs(bench, delta):
    out = copy.deepcopy(bench)
    for key in ("window", "warmup_window"):
        if isinstance(out.get(key), dict):
            for k in ("start_epoch", "end_epoch"):
                out[key][k] += delta
    if out.get("start_at") is not None:
        out["start_at"] += delta
    return out


def _run_schedule(binary, dirs):
    """Run the array's steps for real: each step's active hosts start iobench together with
    --start-at, on their own directories of the one loop device. Returns {host: [bench|None]}."""
    steps = arrays.plan_steps(CFG, len(HOSTS))
    out = {h: [] for h in HOSTS}
    for step in steps:
        # lock-step is this fixture's precondition, not what the tests check: a step whose
        # processes started late (a loaded machine took longer than the lead to start them)
        # is run again, up to 3 times, and the last attempt is kept whatever it is
        for _attempt in range(3):
            got = _run_step(binary, dirs, step)
            late = [b["start_late_ms"] for b in got.values() if b is not None and b.get("start_late_ms")]
            if not late or max(late) < 100:
                break
        for host in HOSTS:
            out[host].append(got[host])
    return steps, out


def _run_step(binary, dirs, step):
    """One step: its active hosts start iobench together (--start-at a few seconds ahead)."""
    got = {}
    start_at = time.time() + 3.0
    procs = {}
    for rank, host in enumerate(HOSTS):
        if not arrays.active(rank, step):
            got[host] = None
            continue
        args = [binary, "run", "--dir", dirs[host], "--file-num", "1", "--total-size", "8M",
                "--block-size", "4K", "--mode", step["mode"], "--threads", step["threads"],
                "--time", step["time"], "--warmup", step["warmup"], "--direct", "--report-interval", "0.1",
                "--start-at", "%.6f" % start_at, "--rate-iops", RATE, "--seed", 7 + rank]
        procs[host] = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    for host, p in procs.items():
        try:
            so, se = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, se
        got[host] = json.loads(so)
    return got


@pytest.fixture(scope="module")
def real_runs():
    """Three 'hosts' (iobench processes) sharing one loop device with ext4, O_DIRECT."""
    ih.make("iobench")
    with ih.loop_device(192, fs="ext4") as (_dev, _name, _backing, mnt):
        dirs = {}
        for host in HOSTS:
            dirs[host] = os.path.join(mnt, host)
            os.mkdir(dirs[host])
            r = ih.run(ih.BIN, "prepare", "--dir", dirs[host], "--file-num", "1", "--total-size", "8M")
            assert r.rc == 0, r
        steps, benches = _run_schedule(ih.BIN, dirs)
    return steps, benches


def _array_runs(steps, benches, drop=None):
    """What H5b's job stores per host (array_run); h2's clock is OFFSET_H2 ahead and its
    entries carry only iobench's own epochs (converted by the offset); ``drop``: (host,
    step index) lost mid-step."""
    runs = {}
    for rank, host in enumerate(HOSTS):
        offset = OFFSET_H2 if host == "h2" else 0.0
        entries = []
        for step, bench in zip(steps, benches[host]):
            e = {"index": step["index"], "active": bench is not None, "complete": bench is not None, "error": None}
            if bench is not None:
                b = _shift_epochs(bench, offset)
                e["result"] = {"bench": b}
                if host != "h2":
                    e["window_start"] = b["window"]["start_epoch"]
                    e["window_end"] = b["window"]["end_epoch"]
            if drop == (host, step["index"]):
                e.update(complete=False, error="lost mid-step (iobench killed)")
            entries.append(e)
        runs[host] = {"name": "san", "rank": rank, "t0": 1000.0, "members": HOSTS, "config": dict(CFG),
                      "clock": {"offset_s": offset, "uncertainty_s": 0.001, "method": "test", "synchronized": None},
                      "steps": entries}
    return runs


def _controller_intervals(bench, offset):
    start = bench["window"]["start_epoch"] - offset
    return [(start + iv["t"] - iv["duration_s"], start + iv["t"], iv["read_ops"] + iv["write_ops"])
            for iv in bench["intervals"]]


def test_aggregate_count_is_the_hosts_counts_over_the_overlap(real_runs):
    steps, benches = real_runs
    arr = arrays.build_array("san", _array_runs(steps, benches))
    assert arr["hosts"] == HOSTS and arr["steps_complete"] == len(steps) == 4
    assert (arr["data_set_bytes"], arr["total_working_set_bytes"]) == (8 << 20, 3 * (8 << 20))
    for s, step in zip(arr["steps"], steps):
        active = [h for r, h in enumerate(HOSTS) if r < step["initiators"]]
        # the common window, from the hosts' own windows in the controller's clock
        starts = [benches[h][step["index"] - 1]["window"]["start_epoch"] for h in active]
        ends = [benches[h][step["index"] - 1]["window"]["end_epoch"] for h in active]
        lo, hi = max(starts), min(ends)
        assert s["window"]["start"] == pytest.approx(lo, abs=1e-6)
        assert s["window"]["end"] == pytest.approx(hi, abs=1e-6)
        assert s["window"]["start_spread_ms"] == pytest.approx((max(starts) - min(starts)) * 1000, abs=0.01)
        expected = 0.0
        for h in active:
            for a, b, ops in _controller_intervals(benches[h][step["index"] - 1], 0.0):
                if b > a:
                    expected += ops * max(0.0, min(b, hi) - max(a, lo)) / (b - a)
                elif lo <= a <= hi:        # a tail interval of no width at epoch resolution
                    expected += ops
        # the record keeps counts and IOPS to 3 decimals (figures.py): its rounding is the bound,
        # whatever the rate (a loaded run's 50.127 IOPS was 3e-6 off in relative terms)
        assert s["aggregate"]["count"] == pytest.approx(expected, rel=1e-9, abs=1e-3)
        assert s["aggregate"]["iops"] == pytest.approx(expected / (hi - lo), rel=1e-9, abs=1e-3)
        # never more than the hosts did in their whole windows
        assert s["aggregate"]["count"] <= sum(benches[h][step["index"] - 1]["total"]["count"] for h in active) + 1e-6
        assert set(s["hosts"]) == set(active) and s["missing_hosts"] == []
        jn = s["fairness"]["jain"]
        assert 1.0 / len(active) - 1e-9 <= jn <= 1.0 + 1e-9


def test_merged_p99_is_the_p99_of_the_union_of_the_hosts_histograms(real_runs):
    steps, benches = real_runs
    arr = arrays.build_array("san", _array_runs(steps, benches))
    for s, step in zip(arr["steps"], steps):
        union = Counter()
        for h in HOSTS:
            b = benches[h][step["index"] - 1]
            if b is None:
                continue
            for op in ("read", "write"):
                for idx, n in b["ops"][op].get("histogram", {}).get("buckets", []):
                    union[idx] += n
        total = sum(union.values())
        rank = math.ceil(0.99 * total)
        cum = 0
        for idx in sorted(union):
            cum += union[idx]
            if cum >= rank:
                p99_ns = histmod.bucket_value(idx)
                break
        assert s["aggregate"]["p99_ms"] == pytest.approx(p99_ns / 1e6, abs=1e-4)
        # Little's law at the array: outstanding = IOPS x mean latency, never above what was issued
        agg = s["aggregate"]
        assert agg["outstanding"] == pytest.approx(agg["iops"] * agg["mean_ms"] / 1000.0, rel=1e-3)
        assert agg["issued"] == 2 * step["initiators"]
        assert 0 < agg["outstanding"] <= agg["issued"] * 1.05


def test_clock_offset_is_taken_out_of_the_host_windows(real_runs):
    steps, benches = real_runs
    arr = arrays.build_array("san", _array_runs(steps, benches))
    assert arr["clocks"]["h2"]["offset_s"] == OFFSET_H2
    step = arr["steps"][1]                       # 3 initiators
    real_start = benches["h2"][1]["window"]["start_epoch"]
    assert step["hosts"]["h2"]["window_start"] == pytest.approx(real_start, abs=1e-6)
    # had the offset not been taken out, the windows would not overlap at all
    assert step["window"]["overlap_s"] > 0.5


def test_a_lost_host_makes_its_step_incomplete_and_named(real_runs):
    steps, benches = real_runs
    runs = _array_runs(steps, benches, drop=("h10", 2))
    runs["h1"]["config"]["thresholds"] = [{"initiators": 3, "mode": "rndrd", "min_aggregate_iops": 1}]
    for r in runs.values():
        r["config"] = runs["h1"]["config"]
    arr = arrays.build_array("san", runs)
    lost = arr["steps"][1]
    assert not lost["complete"] and lost["missing_hosts"] == ["h10"]
    assert "lost mid-step" in lost["missing"]["h10"]
    assert lost["aggregate"]["iops"] is None           # never summed as if whole
    assert set(lost["hosts"]) == {"h1", "h2"}          # what the others measured stays visible
    assert [s["complete"] for s in arr["steps"]] == [True, False, True, True]   # the other steps stand
    assert arr["verdict"] == "ERROR"
    assert any("step 2" in r and "h10" in r for r in arr["reasons"]), arr["reasons"]


def test_a_host_missing_entirely_is_named(real_runs):
    steps, benches = real_runs
    runs = _array_runs(steps, benches)
    del runs["h10"]                                     # no record at all (unreachable)
    arr = arrays.build_array("san", runs)
    assert arr["hosts"] == HOSTS                        # from the members list the others stored
    assert [s["missing_hosts"] for s in arr["steps"]] == [[], ["h10"], [], ["h10"]]
    assert arr["verdict"] == "PASS"                     # no rule needs the incomplete steps
    assert any("step 2" in n and "h10" in n for n in arr["notes"])


def test_rules_judge_the_named_steps(real_runs):
    steps, benches = real_runs
    runs = _array_runs(steps, benches)
    rules = [{"mode": "rndrd", "initiators": 3, "min_aggregate_iops": 1e9},
             {"min_fairness": 0.0}, {"mode": "rndrw", "max_p99_ms": 1e6, "min_share_pct": 0}]
    for r in runs.values():
        r["config"] = dict(CFG, thresholds=rules)
    arr = arrays.build_array("san", runs)
    assert arr["verdict"] == "FAIL"
    assert len(arr["reasons"]) == 1
    assert arr["reasons"][0].startswith("min_aggregate_iops@rndrd/i3: step 2 (rndrd, 3 initiators x 2 threads)")
    fails = [c for c in arr["checks"] if c["passed"] is False]
    assert [(c["step"], c["limit"]) for c in fails] == [(2, "min_aggregate_iops")]
    assert len([c for c in arr["checks"] if c["limit"] == "min_fairness"]) == 4
    for r in runs.values():
        r["config"] = dict(CFG, thresholds=rules[1:])
    assert arrays.build_array("san", runs)["verdict"] == "PASS"


# --------------------------------------------------------------------------- schedule and members

def test_members_rank_in_natural_order_and_groups_join():
    hv = {"h10": {"fleetqual_array": "san"}, "h2": {"fleetqual_array": ["san"]}, "db1": {"group_names": ["sanhosts"]},
          "x": {"fleetqual_array": "other"}}
    assert arrays.members("san", hv, {"san": {}}) == ["h2", "h10"]
    assert arrays.members("san", hv, {"san": {"groups": ["sanhosts"]}}) == ["db1", "h2", "h10"]


@given(st.lists(st.integers(1, 16), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 64), min_size=1, max_size=4, unique=True),
       st.lists(st.sampled_from(["rndrd", "rndwr", "rndrw"]), min_size=1, max_size=3, unique=True),
       st.integers(1, 60), st.integers(0, 10), st.one_of(st.none(), st.floats(1, 30, allow_nan=False)))
def test_schedule_windows_never_overlap_and_keep_the_gap(inits, threads, modes, t, w, gap):
    cfg = {"initiators": inits, "threads": threads, "modes": modes, "time": t, "warmup": w}
    if gap is not None:
        cfg["step_gap_s"] = gap
    steps = arrays.plan_steps(cfg)
    assert len(steps) == len(inits) * len(threads) * len(modes)
    assert [s["index"] for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0]["offset_s"] == arrays.LEAD_S + w
    for a, b in zip(steps, steps[1:]):
        assert b["offset_s"] - b["warmup"] - a["end_s"] == pytest.approx(arrays.STEP_GAP_S if gap is None else gap)
    for s in steps:
        assert s["end_s"] - s["offset_s"] == pytest.approx(t)
        assert (s["rw_ratio"] is not None) == (s["mode"] == "rndrw")


# --------------------------------------------------------------------------- properties of the aggregation

def _synthetic_entry(start, n, width, rate, lat_buckets, offset=0.0):
    bench = {"config": {"block_size": 4096, "threads": 1, "iodepth": 1, "engine": "sync"},
             "window": {"start_epoch": start + offset, "end_epoch": start + offset + n * width},
             "intervals": [{"t": (k + 1) * width, "duration_s": width, "read_ops": rate[k % len(rate)], "write_ops": 0}
                           for k in range(n)],
             "ops": {"read": {"count": sum(c for _i, c in lat_buckets),
                              "histogram": {"unit": "ns", "sub_bucket_bits": 6, "buckets": lat_buckets}}}}
    return {"index": 1, "active": True, "complete": True, "error": None, "result": {"bench": bench}}


hosts_st = st.lists(st.tuples(st.floats(0, 0.5), st.integers(5, 30), st.lists(st.integers(0, 500), min_size=1, max_size=5),
                              st.lists(st.tuples(st.integers(64, 900), st.integers(1, 50)), min_size=1, max_size=8,
                                       unique_by=lambda p: p[0])),
                    min_size=1, max_size=5)


def test_windows_that_only_touch_have_no_common_window():
    """Windows overlapping by less than fleet.json's resolution (1 us) are not summed: the
    step is incomplete (Hypothesis found 0.1 x 10 and 1.0 + 1e-12 rounding to overlap_s 0)."""
    a = _synthetic_entry(100.0, 10, 0.1, [100], [(500, 10)])
    b = _synthetic_entry(101.0 - 1e-9, 10, 0.1, [100], [(500, 10)])
    fig = arrays.step_figures({"index": 1, "initiators": 2, "threads": 1, "mode": "rndrd"}, {"h1": a, "h2": b},
                              ["h1", "h2"])
    assert fig["window"]["overlap_s"] == 0 and not fig["complete"] and fig["aggregate"]["iops"] is None
    assert "do not overlap" in fig["problem"]
    c = _synthetic_entry(100.5, 10, 0.1, [100], [(500, 10)])
    ok = arrays.step_figures({"index": 1, "initiators": 2, "threads": 1, "mode": "rndrd"}, {"h1": a, "h3": c},
                             ["h1", "h3"])
    assert ok["complete"] and ok["window"]["overlap_s"] == pytest.approx(0.5)


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 2.0), st.lists(st.floats(0.0, 0.5), min_size=2, max_size=5))
def test_lock_step_is_the_members_starts_against_each_other_not_the_schedule(common_late, offsets):
    """A step of 2 s: its members are in lock-step when their measured windows began within
    10 % of it (200 ms) of each other, however late they all were together."""
    step = {"index": 1, "initiators": len(offsets), "threads": 1, "mode": "rndrd", "time": 2, "warmup": 1}
    names = ["h%d" % (i + 1) for i in range(len(offsets))]
    entries = {n: _synthetic_entry(100.0 + common_late + off, 20, 0.1, [100], [(500, 10)])
               for n, off in zip(names, offsets)}
    for n, off in zip(names, offsets):
        entries[n]["start_late_ms"] = round((common_late + off) * 1000.0, 3)     # what iobench says
    fig = arrays.step_figures(step, entries, names)
    spread = max(offsets) - min(offsets)
    if spread > 0.2 + 1e-9:
        assert not fig["complete"] and fig["aggregate"]["iops"] is None
        latest = [n for n, off in zip(names, offsets) if off == max(offsets)]
        assert any(fig["problem"].startswith("not in lock-step: %s began its measured window" % n) for n in latest), \
            fig["problem"]
        assert "over 10 % of the step's 2 s" in fig["problem"]
    elif spread < 0.2 - 1e-6:
        assert fig["complete"] and fig["problem"] is None, fig["problem"]
        assert fig["aggregate"]["iops"] is not None


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(hosts_st)
def test_aggregate_properties(hosts):
    width = 0.1
    entries, names = {}, []
    for i, (start, n, rate, buckets) in enumerate(hosts):
        name = "h%d" % (i + 1)
        names.append(name)
        entries[name] = _synthetic_entry(100.0 + start, n, width, rate, sorted(buckets))
    step = {"index": 1, "initiators": len(names), "threads": 1, "mode": "rndrd"}
    fig = arrays.step_figures(step, entries, names)
    for name in names:
        ws, we = arrays_figures.host_window(entries[name])
        assert fig["window"]["overlap_s"] <= we - ws + 1e-9           # overlap <= each window
    if fig["window"]["overlap_s"] <= 0:
        assert not fig["complete"] and fig["aggregate"]["iops"] is None
        return
    assert fig["complete"]
    agg = fig["aggregate"]
    host_p99 = [histmod.percentile(entries[n]["result"]["bench"]["ops"]["read"]["histogram"]["buckets"], 99) / 1e6
                for n in names]
    assert min(host_p99) - 1e-4 <= agg["p99_ms"] <= max(host_p99) + 1e-4   # merged between the hosts' own
    assert agg["iops"] == pytest.approx(sum(fig["hosts"][n]["iops"] for n in names), rel=1e-6, abs=1e-2)
    if agg["iops"] > 0:
        assert 1.0 / len(names) - 1e-6 <= fig["fairness"]["jain"] <= 1.0 + 1e-6


@given(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=30))
def test_jain_is_between_one_over_n_and_one(values):
    j = arrays_figures.jain(values)
    assert 1.0 / len(values) - 1e-9 <= j <= 1.0 + 1e-9
    assert arrays_figures.jain([values[0]] * len(values)) == pytest.approx(1.0)


@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0.01, 1), st.integers(0, 1000)), min_size=1, max_size=20),
       st.floats(-1, 12), st.floats(0, 12), st.floats(0, 1))
def test_count_in_is_additive_over_a_split_window(raw, lo, length, cut):
    ivs = [(a, a + d, o, o * 4096) for a, d, o in raw]
    hi = lo + length
    mid = lo + cut * length
    whole = arrays_figures.count_in(ivs, lo, hi)[0]
    assert whole == pytest.approx(arrays_figures.count_in(ivs, lo, mid)[0] + arrays_figures.count_in(ivs, mid, hi)[0], abs=1e-6)
    assert arrays_figures.count_in(ivs, -1e9, 1e9)[0] == pytest.approx(sum(o for _a, _b, o, _by in ivs))


def _fig(index, outstanding, iops, p99, complete=True, mode="rndrd"):
    return {"index": index, "mode": mode, "initiators": 1, "threads": index, "complete": complete, "outlier": False,
            "missing_hosts": [] if complete else ["h9"], "missing": {} if complete else {"h9": "lost"}, "problem": None,
            "aggregate": {"iops": iops if complete else None, "outstanding": outstanding if complete else None,
                          "p99_ms": p99 if complete else None, "cv": 0.0, "issued": index},
            "fairness": {"jain": 1.0, "min_share_pct": 100.0}}


curve_st = st.lists(st.tuples(st.floats(0.5, 200), st.floats(10, 1e6), st.floats(0.01, 100)), min_size=1, max_size=10)


@given(curve_st, st.floats(0.01, 100))
def test_knee_and_bounded_maximum(points, bound):
    steps = [_fig(i + 1, o, v, p) for i, (o, v, p) in enumerate(points)]
    arrays.flag_outliers(steps)
    trusted = [s for s in steps if not s["outlier"]]
    k = arrays.array_knee(steps)
    best = max(s["aggregate"]["iops"] for s in trusted)
    assert k["iops"] >= arrays_figures.KNEE_FRACTION * best - 1e-9
    assert not any(s["aggregate"]["iops"] >= arrays_figures.KNEE_FRACTION * best and s["aggregate"]["outstanding"] < k["outstanding"]
                   for s in trusted)
    b = arrays.bounded_max(steps, bound)
    under = [s["aggregate"]["iops"] for s in trusted if s["aggregate"]["p99_ms"] <= bound]
    assert b["iops"] == (max(under) if under else None)


def test_an_outlier_spike_is_flagged_not_trusted():
    steps = [_fig(1, 1, 1000, 1), _fig(2, 2, 1900, 1), _fig(3, 4, 9000, 1), _fig(4, 8, 3800, 1), _fig(5, 16, 3900, 2)]
    arrays.flag_outliers(steps)
    assert [s["outlier"] for s in steps] == [False, False, True, False, False]
    assert arrays.array_knee(steps)["index"] == 4                    # 3800 >= 0.9 x 3900, not the spike
    assert arrays.bounded_max(steps, 1.5)["index"] == 4
    assert "step 3" in steps[2]["outlier_text"]


@given(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4, unique=True),
       st.sampled_from([1, 2, 4, 8, 3]), st.sampled_from(["rndrd", "rndwr", "seqrd"]))
def test_rule_matching_follows_the_planned_steps(inits, want, mode):
    steps = arrays.plan_steps({"initiators": inits, "threads": [1], "modes": ["rndrd", "rndwr"]})
    rule = {"initiators": want, "mode": mode, "min_aggregate_iops": 1}
    matched = [s for s in steps if arrays.array_rule_matches(rule, s)]
    assert bool(matched) == (want in inits and mode in ("rndrd", "rndwr"))
    assert all(s["initiators"] == want and s["mode"] == mode for s in matched)


def test_an_incomplete_step_a_rule_needs_is_not_pass():
    steps = [_fig(1, 1, 1000, 1), _fig(2, 2, None, None, complete=False)]
    checks, verdict, reasons, _notes = arrays.judge_array(steps, [{"min_aggregate_iops": 10}], {})
    assert verdict == "ERROR" and [c["passed"] for c in checks] == [True, None]
    assert "step 2" in reasons[0] and "h9: lost" in reasons[0]


def test_an_array_verdict_gates_its_hosts_through_final_verdict():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.verdict import final_verdict
    rec = {"verdict": "PASS", "reasons": [], "workloads": [{"id": "w"}]}
    failed = {"name": "san", "verdict": "FAIL", "reasons": ["min_aggregate_iops@rndrd/i4: step 7 ..."]}
    errored = {"name": "nas", "verdict": "ERROR", "reasons": ["step 2 incomplete"]}
    passed = {"name": "ok", "verdict": "PASS", "reasons": []}
    assert final_verdict(rec, arrays=[passed])["verdict"] == "PASS"
    out = final_verdict(rec, arrays=[failed])
    assert out["verdict"] == "FAIL" and out["reasons"] == ["array san: min_aggregate_iops@rndrd/i4: step 7 ..."]
    assert out["first_failing_rule"] == "array san"
    assert final_verdict(rec, arrays=[failed, errored])["verdict"] == "ERROR"
    # an array host needs no workloads of its own; without an array it does
    bare = dict(rec, workloads=[])
    assert final_verdict(bare, arrays=[passed])["verdict"] == "PASS"
    assert final_verdict(bare)["verdict"] == "ERROR"
    # never improved
    assert final_verdict(dict(rec, verdict="FAIL"), arrays=[passed])["verdict"] == "FAIL"
    arrays_list = [dict(failed, hosts=["h1", "h2"]), dict(passed, hosts=["h3"])]
    assert [a["name"] for a in arrays.host_arrays(arrays_list, "h2")] == ["san"]


def test_a_host_of_another_schedule_is_missing_and_one_without_start_is_named_by_its_entries(real_runs):
    steps, benches = real_runs
    runs = _array_runs(steps, benches)
    runs["h10"]["t0"] = 2000.0                      # a stale record of another run
    arr = arrays.build_array("san", runs)
    assert arr["t0"] == 1000.0
    assert arr["steps"][1]["missing"] == {"h10": "ran another schedule (t0 2000.0, not 1000.0)"}
    runs["h10"]["t0"] = None                         # never got the common start
    for e in runs["h10"]["steps"]:
        e.update(active=e["active"], complete=False, error="not ready at the start", result=None)
    arr = arrays.build_array("san", runs)
    assert arr["steps"][1]["missing"] == {"h10": "not ready at the start"}
    assert [s["complete"] for s in arr["steps"]] == [True, False, True, False]


def test_an_array_with_no_complete_step_says_why_in_its_first_reason(real_runs):
    """The ERROR's first reason names the first step's cause: the operator sees which host was
    not ready, not only that nothing completed."""
    steps, benches = real_runs
    runs = _array_runs(steps, benches)
    for host, r in runs.items():
        for e in r["steps"]:
            e.update(complete=False, result=None,
                     error="not ready at the start: %s reached step %d late" % (host, e["index"]))
    arr = arrays.build_array("san", runs)
    assert arr["verdict"] == "ERROR" and arr["steps_complete"] == 0
    first = arr["reasons"][0]
    assert first.startswith("no step of the array completed (step 1 ("), first
    step1 = arr["steps"][0]["missing_hosts"]
    assert step1 and all("%s: not ready at the start: %s reached step 1 late" % (h, h) in first for h in step1), first


def _with_device(entry, reads, measured):
    """``entry`` whose window carries its devices' counters: ``reads`` {dev: completed reads}."""
    entry["result"]["bench"]["window"]["devstat"] = {
        d: {"start": [10] + [0] * 10, "end": [10 + n] + [0] * 10} for d, n in reads.items()}
    entry["measured"] = measured
    return entry


def test_each_step_says_what_it_measured_and_the_devices_own_count():
    """A LUN's step on two initiators: each host's figures name its target, the map and the
    paths; the step's ``device_iops`` is what the paths' counters saw over each window, here
    all of the benchmark's requests; a host whose step went to its root disk says so."""
    lun = {"target": "lun", "kind": "device", "device": "/dev/disk/by-id/dm-uuid-mpath-3600a", "wwid": "3600a",
           "device_name": "dm-0", "devices": ["sda", "sdb"]}
    a = _with_device(_synthetic_entry(100.0, 10, 0.1, [100], [(500, 1000)]), {"sda": 600, "sdb": 400}, lun)
    b = _with_device(_synthetic_entry(100.0, 10, 0.1, [100], [(500, 1000)]), {"sda": 500, "sdb": 500}, lun)
    step = {"index": 1, "initiators": 2, "threads": 1, "mode": "rndrd"}
    fig = arrays.step_figures(step, {"h1": a, "h2": b}, ["h1", "h2"])
    assert fig["complete"] and fig["measured"] == ["lun dm-0 (WWID 3600a; paths sda, sdb)"]
    h1 = fig["hosts"]["h1"]
    assert (h1["target"], h1["device"], h1["devices"], h1["wwid"]) == ("lun", "dm-0", ["sda", "sdb"], "3600a")
    assert h1["device_ratio"] == pytest.approx(1.0) and h1["device_iops"] == pytest.approx(1000.0)
    assert fig["aggregate"]["device_iops"] == pytest.approx(fig["aggregate"]["iops"])
    root = {"target": None, "kind": "path", "path": "/var/tmp/fleetqual", "device_name": "vda1", "devices": ["vda"]}
    c = _with_device(_synthetic_entry(100.0, 10, 0.1, [100], [(500, 1000)]), {"vda": 1000}, root)
    fig = arrays.step_figures(step, {"h1": a, "h3": c}, ["h1", "h3"])
    assert fig["measured"] == ["lun dm-0 (WWID 3600a; paths sda, sdb)", "test_dir /var/tmp/fleetqual vda1 (vda)"]
    # a job that did not say: unknown, never a guess
    del b["measured"]
    assert arrays.step_figures(step, {"h2": b}, ["h2"])["measured"] == ["unknown"]
