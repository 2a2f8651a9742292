"""--search threads|iodepth: the latency-bounded maximum (docs/diagnostics.md section 6)."""
import json
import os
import signal
import subprocess

import pytest

from iobench_helpers import assert_usage_error, fill_filesystem, signal_mid_run, BIN, SMALL, make, mounted, run

SEARCH_KEYS = {"knob", "percentile", "bound_ms", "stopped", "steps", "best"}
STEP_KEYS = {"threads", "iodepth", "iops", "p99_us", "elapsed_s"}
BEST_KEYS = {"threads", "iodepth", "iops", "p99_us"}
SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def search(ib, d, *extra, **kw):
    return ib("run", "--dir", d, *SMALL, "--direct", "--search-step-time", "0.3", *extra, **kw)


def check_shape(s):
    assert set(s) == SEARCH_KEYS
    assert s["stopped"] in ("bound_exceeded", "max_reached", "no_gain", "interrupted")
    assert s["steps"]
    for st in s["steps"]:
        assert set(st) == STEP_KEYS
        assert isinstance(st["threads"], int) and isinstance(st["iodepth"], int)
        assert st["iops"] >= 0 and st["p99_us"] >= 0 and st["elapsed_s"] >= 0
    if s["best"] is not None:
        assert set(s["best"]) == BEST_KEYS


def test_huge_bound_runs_to_max_and_best_is_highest_iops(ib, prepared):
    r = search(ib, prepared, "--mode", "rndrd", "--search", "threads", "--search-max", "4",
               "--search-bound-ms", "100000", "--search-min-gain", "0")
    assert r.rc == 0, r
    j = r.json
    s = j["search"]
    check_shape(s)
    assert s["knob"] == "threads" and s["percentile"] == "p99" and s["bound_ms"] == 100000.0
    assert s["stopped"] == "max_reached"
    assert [st["threads"] for st in s["steps"]] == [1, 2, 4]
    assert all(st["iodepth"] == 1 for st in s["steps"])
    assert all(st["elapsed_s"] > 0.25 for st in s["steps"]), s["steps"]    # each step measured its 0.3 s
    top = max(s["steps"], key=lambda st: st["iops"])
    assert s["best"] == {k: top[k] for k in BEST_KEYS}
    # ops / total / threads / config describe the best step
    assert j["total"]["iops"] == pytest.approx(s["best"]["iops"], rel=1e-3)
    assert j["threads"]["count"] == s["best"]["threads"] == j["config"]["threads"]
    assert j["ops"]["read"]["latency_us"]["p99"] == pytest.approx(s["best"]["p99_us"], rel=1e-3)
    assert j["config"]["search"] == "threads" and j["config"]["search_max"] == 4
    assert j["db"] is None and j["exit_code"] == 0


def test_tiny_bound_first_step_exceeds(ib, prepared):
    r = search(ib, prepared, "--mode", "rndrw", "--search", "threads", "--search-bound-ms", "0.001")
    assert r.rc == 0, r
    s = r.json["search"]
    check_shape(s)
    assert s["stopped"] == "bound_exceeded" and s["best"] is None
    assert len(s["steps"]) == 1 and s["steps"][0]["threads"] == 1
    assert s["steps"][0]["p99_us"] > 1.0
    # no step within the bound: the last step is reported
    assert r.json["total"]["count"] > 0 and r.json["threads"]["count"] == 1


def test_iodepth_search_monotone_and_max_not_power_of_two(ib, prepared):
    r = search(ib, prepared, "--mode", "rndrd", "--engine", "io_uring", "--threads", "2", "--search", "iodepth",
               "--search-max", "6", "--search-bound-ms", "100000", "--search-min-gain", "0")
    assert r.rc == 0, r
    s = r.json["search"]
    check_shape(s)
    assert s["knob"] == "iodepth" and s["stopped"] == "max_reached"
    assert [st["iodepth"] for st in s["steps"]] == [1, 2, 4, 6]
    assert all(st["threads"] == 2 for st in s["steps"])
    assert r.json["config"]["iodepth"] == s["best"]["iodepth"]


def test_steps_monotone_when_stopped_early(ib, prepared):
    r = search(ib, prepared, "--mode", "rndwr", "--search", "threads", "--search-max", "16", "--search-bound-ms", "5")
    assert r.rc == 0, r
    s = r.json["search"]
    check_shape(s)
    knobs = [st["threads"] for st in s["steps"]]
    assert knobs == [1, 2, 4, 8, 16][:len(knobs)]
    if s["stopped"] == "bound_exceeded":
        assert s["steps"][-1]["p99_us"] > 5000
    if s["best"] is not None:
        within = [st for st in s["steps"] if st["p99_us"] <= 5000]
        assert s["best"]["iops"] == max(st["iops"] for st in within)


def test_other_percentile_adds_its_key(ib, prepared):
    r = search(ib, prepared, "--mode", "rndrd", "--search", "threads", "--search-max", "2",
               "--search-percentile", "p95", "--search-bound-ms", "100000", "--search-min-gain", "0")
    assert r.rc == 0, r
    s = r.json["search"]
    assert s["percentile"] == "p95"
    for st in s["steps"]:
        assert set(st) == STEP_KEYS | {"p95_us"} and st["p95_us"] <= st["p99_us"]


def test_text_format(ib, prepared):
    r = search(ib, prepared, "--mode", "rndrd", "--search", "threads", "--search-max", "2", "--format", "text",
               "--search-bound-ms", "100000")
    assert r.rc == 0, r
    assert "Latency-bounded search (threads, p99 <= 100000.000 ms)" in r.out and "<- best" in r.out


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_signal_mid_search_gives_valid_json(iobench, prepared, sig, name, tmp_path):
    """The signal comes once the second step measures (its first live-log line), whatever the
    machine's load made of the first step's start: one complete step, one partial."""
    live = tmp_path / "live.jsonl"
    args = [iobench, "run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--direct", "--search", "threads",
            "--search-step-time", "1", "--search-bound-ms", "100000", "--search-min-gain", "0",
            "--live-log", live, "--report-interval", "0.1"]

    def second_step_measures():
        try:
            lines = [json.loads(x) for x in live.read_text().splitlines() if x.strip()]
        except (OSError, ValueError):
            return False
        return any(x.get("run") == 2 and x.get("window") for x in lines)
    rc, out, err = signal_mid_run(args, sig, when=second_step_measures)
    assert rc == 5, err
    j = json.loads(out)
    assert j["interrupted"] is True and j["signal"] == name and j["exit_code"] == 5
    s = j["search"]
    check_shape(s)
    assert s["stopped"] == "interrupted"
    assert [st["threads"] for st in s["steps"]] == [1, 2]
    assert s["steps"][-1]["elapsed_s"] < 1.0          # the interrupted step is partial: short of its 1 s
    assert s["best"] is not None and s["best"]["threads"] == 1   # only complete steps can be best


@pytest.mark.parametrize("extra,flag", [
    (["--search", "threads", "--search-bound-ms", "0"], "--search-bound-ms"),
    (["--search", "threads", "--search-bound-ms", "-3"], "--search-bound-ms"),
    (["--search", "iodepth"], "--search iodepth"),
    (["--search", "threads", "--search-max", "0"], "--search-max"),
    (["--search", "threads", "--search-max", "2000"], "--search-max"),
    (["--search", "iodepth", "--engine", "io_uring", "--search-max", "5000"], "--search-max"),
    (["--search", "threads", "--requests", "100"], "--requests"),
    (["--search", "threads", "--time", "5"], "--time"),
    (["--search", "threads", "--threads", "4"], "--threads"),
    (["--search", "iodepth", "--engine", "io_uring", "--iodepth", "8"], "--iodepth"),
    (["--search", "threads", "--search-step-time", "0"], "--search-step-time"),
    (["--search", "threads", "--search-percentile", "p42"], "--search-percentile"),
    (["--search", "threads", "--search-min-gain", "-1"], "--search-min-gain"),
    (["--search", "sideways"], "--search"),
    (["--search-bound-ms", "5"], "--search-bound-ms"),
    (["--search-max", "8"], "--search-max"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_flags_exit_2(ib, tmp_path, extra, flag):
    d = tmp_path / "never-created"
    assert_usage_error(ib("run", "--dir", d, "--mode", "rndrd", *extra), flag, d)


def test_search_needs_random_mode(ib, tmp_path):
    r = ib("run", "--dir", tmp_path, "--mode", "seqrd", "--search", "threads")
    assert r.rc == 2 and "--search needs --mode rndrd, rndwr or rndrw" in r.err


def test_asan_search(prepared):
    make("asan")
    for extra in (["--mode", "rndrw", "--search", "threads", "--search-max", "4", "--search-min-gain", "0"],
                  ["--mode", "rndrd", "--engine", "io_uring", "--search", "iodepth", "--search-max", "8",
                   "--format", "text"],
                  ["--mode", "rndwr", "--search", "threads", "--search-bound-ms", "0.001"]):
        r = run(BIN + "-asan", "run", "--dir", prepared, *SMALL, "--search-step-time", "0.2",
                "--search-bound-ms", "100000", *extra, env=SAN_ENV)
        assert "AddressSanitizer" not in r.err and "runtime error" not in r.err and "LeakSanitizer" not in r.err, r.err
        assert r.rc == 0, r


def test_tsan_search(prepared):
    make("tsan")
    for extra in (["--mode", "rndrw", "--search", "threads", "--search-max", "16"],
                  ["--mode", "rndrd", "--engine", "io_uring", "--threads", "2", "--search", "iodepth",
                   "--search-max", "8"]):
        r = run(BIN + "-tsan", "run", "--dir", prepared, *SMALL, "--search-step-time", "0.2",
                "--search-bound-ms", "100000", "--search-min-gain", "0", *extra, env={"TSAN_OPTIONS": "halt_on_error=0"})
        assert "WARNING: ThreadSanitizer" not in r.err, r.err[:4000]
        assert r.rc == 0, r
        assert r.json["search"]["stopped"] == "max_reached"


def test_io_error_stops_search_exit_4(ib):
    with mounted("tmpfs", "size=100m") as mnt:
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "16M").rc == 0
        for i in range(2):
            subprocess.run(["fallocate", "--punch-hole", "--offset", "0", "--length", "8M",
                            os.path.join(d, "test_file.%d" % i)], check=True)
        fill_filesystem(mnt)
        r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "16M", "--mode", "rndwr", "--search", "threads",
               "--search-step-time", "0.3", "--search-bound-ms", "100000")
        assert r.rc == 4, r
        s = r.json["search"]
        assert s["stopped"] == "io_error" and s["best"] is None and len(s["steps"]) == 1
        assert r.json["errors"]["by_kind"].get("ENOSPC", 0) >= 1
