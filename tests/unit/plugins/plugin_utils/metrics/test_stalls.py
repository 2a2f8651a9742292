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
    assert f["silences"] == [{"from_s": 2.0, "to_s": 4.0, "seconds": 2.0, "others": None, "idle": False,
                             "paused": False}]
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
    f = stalls.stall_figures(ivs, samples=shared, start_epoch=1000.0)
    assert f["stalls"] == 0 and f["starved"] == 1
    assert f["silences"][0]["others"] == 300
    assert stalls.stall_message("w", f) is None
    # the same silence with the device silent too is a stall of the device
    silent = foreign([(1001.0, 100, 90), (1002.2, 200, 180), (1003.2, 200, 180), (1004.5, 600, 400)])
    f = stalls.stall_figures(ivs, samples=silent, start_epoch=1000.0)
    assert f["stalls"] == 1 and f["starved"] == 0 and f["silences"][0]["others"] == 0
    assert stalls.stall_message("w", f).startswith("w: the device completed no request for 2 s")


def test_without_two_samples_inside_a_silence_it_is_judged_a_stall():
    ivs = series([900, 880, 0, 0, 910])
    one = foreign([(1001.0, 100, 90), (1003.0, 500, 180), (1004.5, 900, 400)])
    f = stalls.stall_figures(ivs, samples=one, start_epoch=1000.0)
    assert f["silences"][0]["others"] is None and f["stalls"] == 1
    assert stalls.stall_figures(ivs)["stalls"] == 1          # no foreign section at all


@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=2, max_size=8))
def test_device_inside_counts_the_device_less_the_jobs_own(steps):
    # cumulative counters sampled every 0.5 s from epoch 10; the job did `mine` of each step's `dev`
    samples, dev_total, mine_total = [], 0, 0
    for i, (dev, mine) in enumerate(steps):
        dev_total += dev + mine
        mine_total += mine
        samples.append((10.0 + 0.5 * i, dev_total, mine_total))
    got, idle = stalls.device_inside(foreign(samples), 10.0, 10.0 + 0.5 * (len(steps) - 1))
    assert got == sum(dev for dev, _mine in steps[1:])
    assert idle is None      # samples without the in-flight gauge do not say


def device_samples(samples):
    """A result's device_samples section (outside a compliance run): (epoch, the device's
    reads+writes so far, requests in flight at that instant)."""
    return {"interval": 0.2, "devices": ["sdb"],
            "samples": [{"e": e, "d": {"sdb": [done, 0, 0, 0, 0, 0, 0, held]}, "c": None} for e, done, held in samples]}


def test_outside_compliance_the_devices_own_counters_tell_a_stall_from_a_wait_and_a_pause():
    # the job completed nothing from 2 s to 4 s into the run (window from epoch 1000)
    ivs = series([900, 880, 0, 0, 910])
    inside = [1002.1, 1002.6, 1003.1, 1003.6, 1003.9]
    # the device held 4 requests and completed none: the device stalled
    held = device_samples([(1001.9, 5000, 4)] + [(e, 5000, 4) for e in inside] + [(1004.1, 5100, 2)])
    f = stalls.stall_figures(ivs, samples=held, start_epoch=1000.0)
    assert (f["stalls"], f["starved"], f["idle"]) == (1, 0, 0)
    assert stalls.silence_notes("w", f) == []
    # it completed 420 requests (someone else's, or the job's own writeback): a wait, no stall
    busy = device_samples([(1001.9, 5000, 4)] + [(e, 5000 + 105 * i, 3) for i, e in enumerate(inside)])
    f = stalls.stall_figures(ivs, samples=busy, start_epoch=1000.0)
    assert (f["stalls"], f["starved"], f["idle"]) == (0, 1, 0) and f["silences"][0]["others"] == 420
    note, = stalls.silence_notes("w", f)
    assert note.startswith("w: no request of the job completed for 2 s (from 2 s to 4 s") and "420 others" in note
    # a compliance run judges a shared window by its foreign-I/O rules: no note of its own
    assert stalls.silence_notes("w", f, shared_judged=True) == []
    # it held nothing and completed nothing: the job issued nothing (the host did not run it)
    idle = device_samples([(e, 5000, 0) for e in inside])
    f = stalls.stall_figures(ivs, samples=idle, start_epoch=1000.0)
    assert (f["stalls"], f["starved"], f["idle"]) == (0, 0, 1) and f["silences"][0]["idle"] is True
    note, = stalls.silence_notes("w", f)
    assert "the job issued no request for 2 s" in note and "did not stall" in note
    # two completions (a journal commit) while it held nothing: still idle, not a wait
    commit = device_samples([(e, 5000 + (2 if i > 2 else 0), 0) for i, e in enumerate(inside)])
    f = stalls.stall_figures(ivs, samples=commit, start_epoch=1000.0)
    assert (f["stalls"], f["starved"], f["idle"]) == (0, 0, 1) and f["silences"][0]["others"] == 2
    # one sample with a request held and not completed by the next is enough to make it the device's
    once = device_samples([(e, 5000, 1 if i == 2 else 0) for i, e in enumerate(inside)])
    assert stalls.stall_figures(ivs, samples=once, start_epoch=1000.0)["stalls"] == 1
    # two requests held at one sample and completed by the next (a metadata read, another
    # process's): the device answered what it held, the job issued nothing
    answered = device_samples([(e, 5000 + (2 if i > 2 else 0), 2 if i == 2 else 0) for i, e in enumerate(inside)])
    f = stalls.stall_figures(ivs, samples=answered, start_epoch=1000.0)
    assert (f["stalls"], f["starved"], f["idle"]) == (0, 0, 1) and f["silences"][0]["others"] == 2
    note, = stalls.silence_notes("w", f)
    assert "answered every request it held and completed 2" in note
    # held at the last sample inside, answered only by the first sample after the silence
    late = device_samples([(e, 5000, 1 if i == 4 else 0) for i, e in enumerate(inside)] + [(1004.1, 5001, 0)])
    assert stalls.stall_figures(ivs, samples=late, start_epoch=1000.0)["idle"] == 1
    # ... and with no sample after it, nothing says it was answered: the device's
    assert stalls.stall_figures(ivs, samples=device_samples([(e, 5000, 1 if i == 4 else 0)
                                                             for i, e in enumerate(inside)]),
                                start_epoch=1000.0)["stalls"] == 1


@settings(max_examples=200, deadline=None)
# zeros often: a silence with a few requests held and answered is a corner of this space
@given(st.lists(st.tuples(st.one_of(st.just(0), st.integers(0, 3)), st.one_of(st.just(0), st.integers(0, 4))),
                min_size=2, max_size=12))
def test_a_silence_is_exactly_one_of_stall_wait_or_pause_by_the_device_counters(steps):
    # samples every 0.2 s inside a 2 s silence: (requests completed since the last, held now)
    ivs = series([900, 0, 0, 700])
    done, rows = 0, []
    for i, (n, held) in enumerate(steps):
        done += n if i else 0
        rows.append((1001.05 + 0.15 * i, done, held))
    f = stalls.stall_figures(ivs, samples=device_samples(rows), start_epoch=1000.0)
    s, = f["silences"]
    spans = rows[-1][0] - rows[0][0] >= 1.0 and rows[-1][0] <= 1003.0
    assert f["stalls"] + f["starved"] + f["idle"] == 1
    if not spans:
        assert f["stalls"] == 1 and s["others"] is None
    elif done >= stalls.MIN_EXPECTED:
        assert f["starved"] == 1 and s["others"] == done
    else:
        # the device answered what it held when each sample inside the silence that held
        # requests is followed by a sample with at least as many more completed
        inside = [k for k, row in enumerate(rows) if 1001.0 <= row[0] <= 1003.0]
        answered = all(not rows[k][2] or (k + 1 < len(rows) and rows[k + 1][1] - rows[k][1] >= rows[k][2])
                       for k in inside)
        assert (f["idle"], f["stalls"]) == ((1, 0) if answered else (0, 1)), rows


@settings(max_examples=100, deadline=None)
@given(st.integers(8, 12), st.data())
def test_requests_held_at_one_sample_are_the_devices_unless_the_next_sample_completed_as_many(n, data):
    # a 2 s silence sampled every 0.15 s; the device held ``held`` requests at one sample and
    # nothing at the others, and completed them one at a time from ``after`` samples later
    k = data.draw(st.integers(0, n - 2))
    held = data.draw(st.integers(1, 2))
    after = data.draw(st.integers(1, 3))
    ivs = series([900, 0, 0, 700])
    times = [1001.05 + 0.15 * i for i in range(n)] + [1003.2, 1003.35, 1003.5]
    done = [sum(1 for j in range(held) if i >= k + after + j) for i in range(len(times))]
    rows = [(e, 5000 + done[i], held if i == k else 0) for i, e in enumerate(times)]
    f = stalls.stall_figures(ivs, samples=device_samples(rows), start_epoch=1000.0)
    answered = after == 1 and held == 1
    assert (f["idle"], f["stalls"]) == ((1, 0) if answered else (0, 1)), rows
    # the same held requests all completed by the next sample: answered, whatever their number
    rows = [(e, 5000 + (held if i > k else 0), held if i == k else 0) for i, e in enumerate(times)]
    assert stalls.stall_figures(ivs, samples=device_samples(rows), start_epoch=1000.0)["idle"] == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=20),
       st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=1, max_size=80, unique=True))
def test_the_job_keeps_exactly_the_device_samples_in_and_beside_empty_intervals(counts, offsets):
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign
    start = 5000.0
    ivs = series(counts)
    samples = [{"e": start + off, "d": {}} for off in sorted(offsets)]   # irregular: a paused sampler's gaps
    kept = foreign.near_silences(samples, ivs, start)
    empty = [(start + i, start + i + 1) for i, n in enumerate(counts) if n == 0]
    want = set()
    for a, b in empty:
        want.update(j for j, x in enumerate(samples) if a <= x["e"] <= b)
        before = [j for j, x in enumerate(samples) if x["e"] < a]
        after = [j for j, x in enumerate(samples) if x["e"] > b]
        want.update(before[-1:] + after[:1])
    assert kept == [samples[j] for j in sorted(want)]
    # no empty interval, nothing kept; no window start, nothing kept
    assert foreign.near_silences(samples, series([1] * len(counts)), start) == []
    assert foreign.near_silences(samples, ivs, None) == []


def test_a_bounded_sampler_keeps_only_its_last_samples():
    import os
    import threading
    import time
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign
    dev = next((d for d in sorted(os.listdir("/sys/block")) if foreign.read_stat(d)), None)
    if dev is None:
        import pytest
        pytest.skip("no readable /sys/block/<dev>/stat here")
    sampler = foreign.Sampler([dev], None, None, {"interval": 0.01}, threading.Event(), keep=3)
    sampler.start()
    time.sleep(0.5)
    got = sampler.finish()
    assert len(got) == 3 and got[0]["e"] <= got[1]["e"] <= got[2]["e"]
    assert len(got[-1]["d"][dev]) == 8          # seven counters and the in-flight gauge


def test_a_silence_the_hosts_own_sampler_did_not_run_through_is_a_paused_host():
    # the job completed nothing from 2 s to 3 s (window from epoch 1000); the sampler, due
    # every 0.2 s, read the device at 1001.9 and next at 1004.4: the host ran none of the
    # job's threads for 2.5 s (a whole-machine pause seen in a loaded CI run)
    ivs = series([900, 880, 0, 910, 905])
    gap = device_samples([(1001.7, 5000, 2), (1001.9, 5100, 3), (1004.4, 5200, 3), (1004.6, 5300, 2)])
    f = stalls.stall_figures(ivs, samples=gap, start_epoch=1000.0)
    assert (f["stalls"], f["paused"]) == (0, 1) and f["silences"][0]["paused"] is True
    note, = stalls.silence_notes("w", f)
    assert "the host did not run the job's processes" in note and "did not stall" in note
    # the same silence with the sampler on time and the device holding requests: a stall
    steady = device_samples([(1001.9 + 0.2 * i, 5100, 3) for i in range(8)])
    f = stalls.stall_figures(ivs, samples=steady, start_epoch=1000.0)
    assert (f["stalls"], f["paused"]) == (1, 0)
    # a gap of half the silence is not a pause of the whole of it
    half = device_samples([(1001.9, 5100, 3), (1002.0, 5100, 3), (1002.5, 5100, 3), (1003.1, 5100, 3)])
    assert stalls.stall_figures(ivs, samples=half, start_epoch=1000.0)["stalls"] == 1


def test_a_silence_the_sampler_ran_once_in_where_it_was_due_five_times_is_a_paused_host():
    """A loaded CI run's quick profile on this machine's disk (its record, epochs from the
    window's start): the sampler, due every 0.2 s, read the device at 2.211 s, 5.392 s and
    6.08 s; the job completed nothing from 3 s to 4 s and from 5 s to 6 s (one write took
    2393 ms). Neither gap alone covers the second silence, and its one sample inside says
    nothing of the device: the host ran the job's sampler once where it was due five times."""
    start = 1000.0
    ivs = [{"t": t, "duration_s": d, "read_ops": 0, "write_ops": w, "fsync_ops": f, "read_max_us": 0.0,
            "write_max_us": m, "fsync_max_us": 0.0}
           for t, d, w, f, m in ((1.0, 1.0, 7358, 74, 95791.7), (2.0, 1.0, 307, 3, 371777.1), (3.0, 1.0, 1112, 11, 108679.3),
                                 (4.0, 1.0, 0, 0, 0.0), (5.0, 1.0, 1, 0, 2392863.3), (6.0, 1.0, 0, 0, 0.0),
                                 (6.224, 0.224, 0, 1, 0.0))]
    ran = device_samples([(start + 2.211, 65721828, 0), (start + 5.392, 65722523, 0), (start + 6.08, 65722584, 1)])
    f = stalls.stall_figures(ivs, samples=ran, start_epoch=start)
    assert [(s["from_s"], s["to_s"], s["others"], s["paused"]) for s in f["silences"]] == [
        (3.0, 4.0, None, True), (5.0, 6.0, None, True)]
    assert (f["stalls"], f["paused"]) == (0, 2) and stalls.stall_message("cache-rndwr-t1", f) is None
    # the same silences with the sampler on time through them, its samples inside too close
    # together to say what the device did: stalls, as before
    kept = device_samples([(start + e, 5000, 2) for e in (2.9, 3.45, 3.5, 4.05, 4.6, 4.9, 5.45, 5.5, 6.05)])
    f = stalls.stall_figures(ivs, samples=kept, start_epoch=start)
    assert [s["others"] for s in f["silences"]] == [None, None] and (f["stalls"], f["paused"]) == (2, 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 4.0, allow_nan=False), min_size=2, max_size=30, unique=True),
       st.floats(0.5, 2.0), st.floats(0.5, 2.5), st.sampled_from([0.2, 0.5, 1.0]))
def test_missed_cadence_is_the_silence_inside_gaps_of_three_cadences(offsets, t0, length, every):
    es = sorted(offsets)
    samples = {"samples": [{"e": e} for e in es]}
    t1 = t0 + length
    got = stalls.missed_cadence(samples, t0, t1, every)
    if es[0] > t0 or es[-1] < t1:
        assert got is None
        return
    # measured on a fine grid: a point of the silence is missed when the samples on each side
    # of it are three cadences apart or more
    step, missed, n = 0.0005, 0, int(length / 0.0005)
    for i in range(n):
        x = t0 + (i + 0.5) * step
        before = max(e for e in es if e <= x)
        after = min(e for e in es if e >= x)
        missed += after - before >= stalls.MISSED_FACTOR * every
    assert abs(got - missed * step) <= 2 * len(es) * step + 1e-9
    assert 0.0 <= got <= length + 1e-9


def test_a_compliance_runs_silence_is_read_from_its_device_samples_not_its_coarser_foreign_ones():
    """A compliance result carries both: its foreign-I/O samples, once a report interval
    (one inside a one-second silence: they cannot say), and the device samples five times a
    second, which can (here the device served others: the job waited, no stall)."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as metrics
    start = 1000.0
    bench = {"intervals": series([900, 880, 0, 910]), "window": {"start_epoch": start}, "config": {}}
    coarse = {"settings": {"interval": 1.0},
              "samples": [{"e": start + e, "d": {"sdb": [5000, 0, 0, 0, 0, 0, 0, 3]}, "c": None} for e in (1.9, 2.5, 3.1)]}
    fine = device_samples([(start + 1.9 + 0.2 * i, 5000 + 40 * i, 3) for i in range(7)])
    alone = metrics.workload_metrics({"bench": bench, "foreign": coarse})["stall"]
    assert alone["silences"][0]["others"] is None and alone["stalls"] == 1
    both = metrics.workload_metrics({"bench": bench, "foreign": coarse, "device_samples": fine})["stall"]
    assert both["silences"][0]["others"] >= 3 and (both["stalls"], both["starved"]) == (0, 1)


def test_a_silence_the_sampler_ran_across_at_half_its_cadence_is_a_paused_host():
    """The job completed nothing from 2 s to 3 s; its sampler, due every 0.2 s, read the device
    at 1.95 s, 2.5 s and 3.05 s (a loaded machine ran it at under half its rate: no gap of three
    cadences, one sample inside, which cannot say what the device did): the host did not run
    the job's processes on time, not a stall. Read on cadence, the same device holding requests
    and completing none is a stall."""
    start = 1000.0
    ivs = series([900, 880, 0, 910])
    slow = device_samples([(start + e, 5000, 2) for e in (1.95, 2.5, 3.05)])
    f = stalls.stall_figures(ivs, samples=slow, start_epoch=start)
    assert f["silences"][0]["others"] is None and (f["stalls"], f["paused"]) == (0, 1)
    assert stalls.stall_message("w", f) is None
    on_time = device_samples([(start + 1.9 + 0.2 * i, 5000, 2) for i in range(7)])
    f = stalls.stall_figures(ivs, samples=on_time, start_epoch=start)
    assert f["silences"][0]["others"] == 0 and (f["stalls"], f["paused"]) == (1, 0)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.05, 1.0), st.floats(0.0, 0.999), st.integers(1, 3))
def test_a_device_holding_requests_is_a_stall_unless_the_sampler_ran_at_half_its_cadence(gap, phase, n):
    """A device that held requests and completed none through a silence of n seconds, read by
    a sampler due every 0.2 s whose reads came ``gap`` s apart: a stall whenever the samples
    inside can say so (always when it ran on cadence), else a paused host exactly when it ran
    at half its cadence or less."""
    start, every = 1000.0, 0.2
    ivs = series([900] + [0] * n + [900])
    t0, t1 = start + 1.0, start + 1.0 + n
    es, e = [], t0 - phase * gap
    while e <= t1 + gap:
        es.append(e)
        e += gap
    f = stalls.stall_figures(ivs, samples=device_samples([(x, 5000, 2) for x in es]), start_epoch=start)
    s, = f["silences"]
    if gap <= every:
        assert s["others"] == 0
    if s["others"] is not None:
        assert (f["stalls"], f["paused"]) == (1, 0)
    else:
        assert (f["stalls"], f["paused"]) == ((0, 1) if gap >= stalls.SLOW_FACTOR * every - 1e-9 else (1, 0))


def test_a_sampler_without_a_live_log_wakes_once_per_sample():
    """The device samples of every workload (``device_samples``) have no live log to watch: the
    thread sleeps until each sample is due instead of looking 20 times a second (a Python
    wake-up costs what a sample costs, and an emulated guest's CPU pays it many times over)."""
    import os
    import threading
    import time
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign
    dev = next((d for d in sorted(os.listdir("/sys/block")) if foreign.read_stat(d)), None)
    if dev is None:
        import pytest
        pytest.skip("no readable /sys/block/<dev>/stat here")

    class Counted(threading.Event):
        waits = 0

        def wait(self, timeout=None):
            Counted.waits += 1
            return super().wait(timeout)

    sampler = foreign.Sampler([dev], None, None, {"interval": 0.1}, threading.Event())
    sampler.done = Counted()
    sampler.start()
    time.sleep(0.6)
    got = sampler.finish()
    # a sample when started, then one at each wake-up (a loaded machine wakes it late, never
    # early), and the last one taken by finish(); the old loop woke 12 times in 0.6 s for 7
    assert len(got) >= 2, got
    assert Counted.waits <= len(got), (Counted.waits, len(got))
