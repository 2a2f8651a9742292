"""Stalls in a run's interval series (plugins/plugin_utils/metrics/stalls.py, docs/integrity.md)."""
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import stalls


def series(counts, dt=1.0, max_us=None):
    out = []
    for i, n in enumerate(counts):
        out.append({"t": round((i + 1) * dt, 3), "duration_s": dt, "read_ops": n, "write_ops": 0, "fsync_ops": 0,
                    "read_max_us": (max_us or {}).get(i, 100.0), "write_max_us": 0.0, "fsync_max_us": 0.0})
    return out


def test_a_two_second_silence_is_a_stall_with_its_place_and_longest_request():
    f = stalls.stall_figures(series([900, 880, 0, 0, 910, 905], max_us={4: 2_010_000.0}))
    assert f["stalls"] == 1 and f["longest_s"] == 2.0
    assert f["silences"] == [{"from_s": 2.0, "to_s": 4.0, "seconds": 2.0, "others": None}]
    assert f["max_request_ms"] == 2010.0 and f["max_request_at_s"] == 5.0
    msg = stalls.stall_message("over_cache-rndrd-t4", f)
    assert msg.startswith("over_cache-rndrd-t4: the device completed no request for 2 s, 1 time (first from 2 s to 4 s")
    assert "2010 ms" in msg


def test_a_busy_but_answering_device_and_a_short_gap_are_no_stall():
    assert stalls.stall_figures(series([5, 1, 3, 2]))["stalls"] == 0
    # 0.1 s intervals: four empty ones are 0.4 s of silence, under the limit
    f = stalls.stall_figures(series([50, 0, 0, 0, 0, 40], dt=0.1))
    assert f["stalls"] == 0 and abs(f["longest_s"] - 0.4) < 1e-9
    assert stalls.stall_message("w", f) is None


def test_a_slowly_paced_run_is_not_judged():
    f = stalls.stall_figures(series([1, 0, 0, 1]), rate_iops=1.0)
    assert f["judged"] is False and f["stalls"] == 0 and "cadence" in f["reason"]


def test_no_series():
    assert stalls.stall_figures(None) is None
    assert stalls.stall_figures([{"t": "x"}]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=40),
       st.sampled_from([0.1, 0.5, 1.0, 2.0]))
def test_silences_are_exactly_the_runs_of_empty_intervals(counts, dt):
    f = stalls.stall_figures(series(counts, dt=dt))
    # an independent count of the runs of zeros and their lengths
    runs, cur = [], 0
    for n in counts + [1]:
        if n == 0:
            cur += 1
        elif cur:
            runs.append(cur * dt)
            cur = 0
    assert [round(s["seconds"], 6) for s in f["silences"]] == [round(r, 6) for r in runs]
    assert f["stalls"] == sum(1 for r in runs if r >= stalls.STALL_S - 1e-9)
    # a stall is reported exactly when there is one
    assert (stalls.stall_message("w", f) is None) == (f["stalls"] == 0)
    # silences never overlap and stay inside the run
    prev = 0.0
    for s in f["silences"]:
        assert prev - 1e-9 <= s["from_s"] < s["to_s"] <= len(counts) * dt + 1e-9
        prev = s["to_s"]


def test_the_judge_fails_a_stalled_workload_and_passes_an_answering_one():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.integrity import stall_check
    stalled = {"stall": stalls.stall_figures(series([900, 0, 0, 0, 910], max_us={4: 3_000_000.0}))}
    check = stall_check("over_cache-rndrd-t4", stalled)
    assert check["status"] == "fail" and check["passed"] is False and check["kind"] == "integrity"
    assert check["value"] == 3.0 and check["limit"] == stalls.STALL_S
    assert "completed no request for 3 s" in check["message"] and "silences: 1-4 s" == check["evidence"]
    assert stall_check("w", {"stall": stalls.stall_figures(series([900, 880, 870]))}) is None
    assert stall_check("w", {}) is None


def foreign(samples, source="cgroup v2"):
    """A result's foreign section: (epoch, device reads+writes so far, the job's own so far)."""
    return {"source": source, "samples": [{"e": e, "d": {"sdb": [dev, 0, 0, 0, 0, 0, 0]},
                                           "c": {"sdb": [mine, 0, 0, 0]}} for e, dev, mine in samples]}


def test_a_silence_in_which_the_device_served_others_is_no_stall():
    # our requests completed nothing from 2 s to 4 s into the run (window from epoch 1000),
    # while the device completed 300 requests that were not ours
    ivs = series([900, 880, 0, 0, 910])
    shared = foreign([(1001.0, 100, 90), (1002.2, 200, 180), (1003.2, 500, 180), (1004.5, 900, 400)])
    f = stalls.stall_figures(ivs, foreign=shared, start_epoch=1000.0)
    assert f["stalls"] == 0 and f["starved"] == 1
    assert f["silences"][0]["others"] == 300
    assert stalls.stall_message("w", f) is None
    # the same silence with the device silent too is a stall of the device
    silent = foreign([(1001.0, 100, 90), (1002.2, 200, 180), (1003.2, 200, 180), (1004.5, 600, 400)])
    f = stalls.stall_figures(ivs, foreign=silent, start_epoch=1000.0)
    assert f["stalls"] == 1 and f["starved"] == 0 and f["silences"][0]["others"] == 0
    assert stalls.stall_message("w", f).startswith("w: the device completed no request for 2 s")


def test_without_two_samples_inside_a_silence_it_is_judged_a_stall():
    ivs = series([900, 880, 0, 0, 910])
    one = foreign([(1001.0, 100, 90), (1003.0, 500, 180), (1004.5, 900, 400)])
    f = stalls.stall_figures(ivs, foreign=one, start_epoch=1000.0)
    assert f["silences"][0]["others"] is None and f["stalls"] == 1
    assert stalls.stall_figures(ivs)["stalls"] == 1          # no foreign section at all


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=2, max_size=8))
def test_others_served_is_the_device_count_less_the_jobs_own(steps):
    # cumulative counters sampled every 0.5 s from epoch 10; the job did `mine` of each step's `dev`
    samples, dev_total, mine_total = [], 0, 0
    for i, (dev, mine) in enumerate(steps):
        dev_total += dev + mine
        mine_total += mine
        samples.append((10.0 + 0.5 * i, dev_total, mine_total))
    got = stalls.others_served(foreign(samples), 10.0, 10.0 + 0.5 * (len(steps) - 1))
    assert got == sum(dev for dev, _mine in steps[1:])
