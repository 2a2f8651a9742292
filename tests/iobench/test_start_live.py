"""--start-at (one instant for the windows of many hosts), --live-log (a
live view of iobench's own I/O) and --check (validation without touching a file),
on real runs of the real binary."""
import json
import os
import time

import pytest

from iobench_helpers import BIN, SMALL, make, run

SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=0"}


def lines(path):
    with open(path) as fh:
        return [json.loads(ln) for ln in fh if ln.strip()]


def test_start_at_opens_the_window_after_the_instant(ib, prepared):
    at = time.time() + 1.0
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--time", "0.3", "--warmup", "0.2",
           "--start-at", repr(at))
    assert r.rc == 0, r
    j = r.json
    assert abs(j["start_at"] - at) < 1e-5
    assert j["warmup_window"]["start_epoch"] >= at - 1e-6    # the warmup starts at the instant, never before
    assert j["window"]["start_epoch"] >= at
    assert j["window"]["start_epoch"] >= j["warmup_window"]["start_epoch"]
    assert j["start_late_ms"] >= 0
    assert j["ops"]["read"]["count"] > 0


def test_start_at_in_the_past_starts_at_once_and_says_how_late(ib, prepared):
    at = time.time() - 5.0
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "200", "--start-at", repr(at))
    assert r.rc == 0, r
    # late by at least the 5 s the instant was in the past when the run was started
    assert r.json["start_late_ms"] >= 5000
    assert r.json["window"]["start_epoch"] >= at + 5.0


PACED = ["--mode", "rndrd", "--keep-cache", "--rate-iops", "200", "--threads", "2", "--report-interval", "0"]
DEVSTAT = {"devstat": ["--devstat", "no-such-dev0"], "plain": []}   # a window opened by the main thread's reading, or not


@pytest.mark.parametrize("how", sorted(DEVSTAT))
def test_a_start_later_than_its_warmup_opens_the_window_at_once_and_ends_it_as_planned(ib, prepared, how):
    """On a schedule the window belongs to the instants the other hosts share, --start-at +
    warmup to that + --time, not to when this host got there: a run 2 s late for a 1 s warmup
    warms up not at all, opens its window at once and ends it at the planned end, shorter than
    --time (anchored to its own start, it would warm up 1 s and end 2 s after the others)."""
    at = time.time() - 2.0
    r = ib("run", "--dir", prepared, *SMALL, *PACED, "--warmup", "1", "--time", "3", "--start-at", repr(at),
           *DEVSTAT[how])
    assert r.rc == 0, r
    j = r.json
    assert j["start_late_ms"] >= 2000
    w, warm = j["window"], j["warmup_window"]
    assert abs(w["start_epoch"] - warm["start_epoch"]) < 1e-3, (warm, w)          # no warmup left
    assert w["end_epoch"] >= at + 4.0 - 0.02, (w, at)                          # the planned end (less one paced gap)
    # shorter than --time by at least the second it opened after the planned window start
    # (one anchored to its own start lasts --time from there: 3 s or more)
    assert j["elapsed_s"] < 3.0, (j["elapsed_s"], w, at)


@pytest.mark.parametrize("how", sorted(DEVSTAT))
def test_a_start_later_than_planned_shortens_the_warmup_not_the_window(ib, prepared, how):
    """A run 1 s or more late for a 6 s warmup warms up the rest of it: its window opens at the
    planned instant (or, a loaded host's main thread waking late, after it, never before).
    The warmup is long enough that a loaded machine's slow start (2.3 s once, at load 20)
    leaves the run late by less than it."""
    warmup = 6.0
    at = time.time() - 1.0
    r = ib("run", "--dir", prepared, *SMALL, *PACED, "--warmup", str(warmup), "--time", "0.5",
           "--start-at", repr(at), *DEVSTAT[how])
    assert r.rc == 0, r
    j = r.json
    late = j["start_late_ms"] / 1000.0
    assert 1.0 <= late < warmup, late          # the premise: late, but by less than the warmup
    w, warm = j["window"], j["warmup_window"]
    assert w["start_epoch"] >= at + warmup - 1e-3, (w, at)
    # the warmup ran what was left of it (anchored to its own start it would run all of it)
    assert w["start_epoch"] - warm["start_epoch"] < warmup - 0.5, (warm, w, late)


@pytest.mark.parametrize("how", sorted(DEVSTAT))
def test_only_the_first_step_of_a_search_waits_for_the_instant(ib, prepared, how):
    """--start-at with --search: the first step waits for the instant and warms up, and every
    later step (no warmup: the search warms up once) measures its whole step (it waited for
    nothing, so it is late for nothing; counted late since the instant, a second step lost
    its whole window on the schedule's clock)."""
    at = time.time() + 0.5
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--direct", "--search", "threads",
           "--search-max", "4", "--search-bound-ms", "100000", "--search-min-gain", "0",
           "--search-step-time", "0.3", "--warmup", "0.2", "--start-at", repr(at), *DEVSTAT[how])
    assert r.rc == 0, r
    j = r.json
    s = j["search"]
    assert s["stopped"] == "max_reached", s
    assert [st["threads"] for st in s["steps"]] == [1, 2, 4], s["steps"]
    # the first step's window is on the schedule: it ends at its planned instant, shorter when a
    # loaded host's main thread read the device counters late to open it after the warmup
    # (--devstat; a fresh-clone run at load 20 measured a step shorter than 0.28 s). The later
    # steps waited for no instant: each window is its own 0.3 s (it ends at its last worker's
    # stop, never sooner)
    assert s["steps"][0]["elapsed_s"] > 0, s["steps"]
    assert all(st["elapsed_s"] >= 0.3 - 0.02 for st in s["steps"][1:]), s["steps"]
    assert j["start_late_ms"] is not None and j["start_late_ms"] >= 0


def test_without_start_at_the_fields_are_null(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "50")
    assert r.rc == 0, r
    assert r.json["start_at"] is None and r.json["start_late_ms"] is None


def test_live_log_final_counts_equal_the_result(ib, prepared, tmp_path):
    log = tmp_path / "live.jsonl"
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--threads", "3", "--time", "0.8",
           "--warmup", "0.2", "--report-interval", "0.1", "--live-log", log)
    assert r.rc == 0, r
    ls = lines(log)
    assert len(ls) >= 2 and ls[-1]["final"] is True and not any(x["final"] for x in ls[:-1])
    last, ops = ls[-1], r.json["ops"]
    assert (last["reads"], last["read_bytes"]) == (ops["read"]["count"], ops["read"]["bytes"])
    assert (last["writes"], last["write_bytes"]) == (ops["write"]["count"], ops["write"]["bytes"])
    # summed latency in ns = the result's sum in us (printed with 3 decimals: whole ns)
    assert last["read_lat_ns"] == round(ops["read"]["latency_us"]["sum"] * 1000)
    assert last["write_lat_ns"] == round(ops["write"]["latency_us"]["sum"] * 1000)
    # cumulative: never decreasing, epochs in order, warmup lines carry nothing measured
    for a, b in zip(ls, ls[1:]):
        assert b["epoch"] >= a["epoch"]
        for k in ("reads", "read_bytes", "read_lat_ns", "writes", "write_bytes", "write_lat_ns"):
            assert b[k] >= a[k], (k, a, b)
    for x in ls:
        if not x["window"]:
            assert x["reads"] == x["writes"] == 0, x
    assert ls[-1]["epoch"] >= r.json["window"]["end_epoch"] - 1e-3


def test_live_log_appends(ib, prepared, tmp_path):
    log = tmp_path / "live.jsonl"
    log.write_text('{"mine": 1}\n')
    for _attempt in range(2):
        r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "300", "--live-log", log)
        assert r.rc == 0, r
    ls = lines(log)
    assert ls[0] == {"mine": 1}
    assert sum(1 for x in ls if x.get("final")) == 2


def test_live_log_and_start_at_refusals(ib, prepared, tmp_path):
    r = ib("prepare", "--dir", prepared, *SMALL, "--start-at", "1")
    assert r.rc == 2 and "--start-at" in r.err, r
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--live-log", tmp_path / "l", "--report-interval", "0")
    assert r.rc == 2 and "--live-log" in r.err and "--report-interval" in r.err, r
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--start-at", "-1")
    assert r.rc == 2 and "--start-at" in r.err, r
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "10",
           "--live-log", tmp_path / "no" / "such" / "dir")
    assert r.rc == 3 and "--live-log" in r.err, r


def test_check_validates_without_touching_anything(ib, tmp_path):
    missing = tmp_path / "not-there"
    r = ib("run", "--check", "--dir", missing, "--mode", "rndrd", "--prepare", "--cleanup", "--output", tmp_path / "o",
           "--live-log", tmp_path / "l")
    assert r.rc == 0, r
    assert json.loads(r.out) == {"check": "ok", "command": "run"}
    assert os.listdir(tmp_path) == []                       # no directory, no output, no live log
    r = ib("run", "--check", "--dir", missing, "--mode", "rndrd", "--steady-state", "--ss-window", "1")
    assert r.rc == 2 and "--ss-window" in r.err, r


def test_sanitizers_with_start_at_and_live_log(prepared, tmp_path):
    for target in ("tsan", "asan"):
        make(target)
        log = tmp_path / ("%s.jsonl" % target)
        r = run(BIN + "-" + target, "run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--threads", "8",
                "--time", "0.5", "--report-interval", "0.05", "--live-log", log,
                "--start-at", repr(time.time() + 0.3), env=SAN_ENV)
        assert "WARNING: ThreadSanitizer" not in r.err and "ERROR: AddressSanitizer" not in r.err, r.err[:4000]
        assert r.rc == 0, r
        assert lines(log)[-1]["reads"] == r.json["ops"]["read"]["count"]
