"""--devstat: the device's own counters at the measured window's edges."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from proctree import poll_until
from iobench_helpers import (SMALL, assert_usage_error, frozen_thread, held_mid_run, loop_device, measured_for,
                             signal_mid_run)

SECTOR = 512


def delta(dev, field):
    return dev["end"][field] - dev["start"][field]


def test_devstat_matches_direct_reads_on_a_loop_device(ib):
    with loop_device(256, fs="ext4") as (_dev, name, _backing, mnt):
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        r = ib("prepare", "--dir", d, "--file-num", "4", "--total-size", "96M")
        assert r.rc == 0, r
        r = ib("run", "--dir", d, "--file-num", "4", "--total-size", "96M", "--mode", "rndrd", "--direct",
               "--block-size", "16K", "--requests", "4000", "--devstat", name, "--warmup", "0.2")
        assert r.rc == 0, r
        w = r.json["window"]
        assert w["devstat_error"] is None
        dev = w["devstat"][name]
        assert dev["source"] == "sysfs" and len(dev["start"]) >= 11 and len(dev["end"]) == len(dev["start"])
        bench = r.json["ops"]["read"]["bytes"]
        assert bench == 4000 * 16384
        dev_bytes = delta(dev, 2) * SECTOR
        assert abs(dev_bytes - bench) <= 0.03 * bench, (dev_bytes, bench)
        assert delta(dev, 0) >= 4000 * 0.97          # read requests completed
        assert delta(dev, 6) * SECTOR < 0.03 * bench   # a read workload writes (next to) nothing
        ib("cleanup", "--dir", d)


def test_devstat_unknown_device_is_reported_not_fatal(ib, prepared):
    r = ib("run", "--dir", prepared, "--file-num", "4", "--total-size", "16M", "--mode", "rndrd",
           "--requests", "200", "--devstat", "no-such-dev0")
    assert r.rc == 0, r
    w = r.json["window"]
    assert w["devstat"] == {}
    assert "no-such-dev0" in w["devstat_error"]
    assert r.json["config"]["devstat"] == ["no-such-dev0"]


def test_devstat_absent_without_the_flag(ib, prepared):
    r = ib("run", "--dir", prepared, "--file-num", "4", "--total-size", "16M", "--mode", "rndrd",
           "--requests", "100")
    assert r.rc == 0, r
    assert "devstat" not in r.json["window"] and "devstat" not in r.json["config"]


def test_devstat_path_refused(ib, tmp_path):
    d = tmp_path / "never"
    r = ib("run", "--dir", d, "--mode", "rndrd", "--devstat", "/dev/sda")
    assert_usage_error(r, "--devstat", d)


HOG = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


def test_devstat_exact_while_the_machine_is_busy(ib):
    """Three CPU hogs per core (each bounded to 60 s, ended by PID): the counters are read by the
    code that opens and closes the window, so the device bytes still match the benchmark's."""
    with loop_device(256, fs="ext4") as (_dev, name, _backing, mnt):
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "64M").rc == 0
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _i in range(3 * (os.cpu_count() or 1))]
        try:
            for _attempt in range(4):
                r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "64M", "--mode", "rndrd", "--direct",
                       "--requests", "1500", "--warmup", "0.1", "--devstat", name)
                assert r.rc == 0, r
                dev = r.json["window"]["devstat"][name]
                bench = r.json["ops"]["read"]["bytes"]
                assert abs(delta(dev, 2) * SECTOR - bench) <= 0.05 * bench, (delta(dev, 2) * SECTOR, bench)
        finally:
            for h in hogs:
                h.kill()
            for h in hogs:
                h.wait()
        ib("cleanup", "--dir", d)


LATE = ["--file-num", "4", "--total-size", "16M", "--mode", "rndrd", "--keep-cache", "--rate-iops", "200",
        "--threads", "2", "--time", "1", "--devstat", "no-such-dev0", "--report-interval", "0.25", "--format", "json"]


def test_a_window_opened_late_still_lasts_its_time(iobench, prepared):
    """With --devstat after a warmup the window opens when the main thread has read the counters.
    That thread held (frozen alone, 5 s from 1 s after the start: past the 3 s warmup's end and
    the planned end of the 1 s window) while the workers go on: the window opens at the reading
    and lasts its whole --time. A deadline fixed at the planned instant measured what was left
    of it (a loaded fleet host PASSed on a window of 10 ms of its planned 4 s)."""
    rc, out, err, thawed = held_mid_run([iobench, "run", "--dir", prepared, "--warmup", "3", *LATE],
                                        time.time() + 1.0, frozen_thread, 5.0)   # the main thread's id is the process's
    assert rc == 0, err
    j = json.loads(out)
    w = j["window"]
    assert w["start_epoch"] >= thawed - 0.05, (w, thawed)
    # (a paced thread stops at its last slot before the deadline: 10 ms at most early)
    assert j["elapsed_s"] >= 0.98 and w["end_epoch"] - w["start_epoch"] >= 0.98, (j["elapsed_s"], w)
    # paced at 200/s: the window holds requests from each of its four 0.25 s reports, so from the
    # whole second and not the few the warmup left, and never more than the pace allows. How many
    # is the machine's: the pacer drops the slots a late wake-up lets pass (200 quiet; 148 and 86
    # in fresh-clone runs beside the suite's other streams)
    # (a loaded run's window ran 1.064 s: a fifth, 64 ms report closes it)
    iv = j["intervals"]
    assert len(iv) >= 4 and all(i["read_ops"] > 0 for i in iv[:4]), iv
    assert sum(i["read_ops"] for i in iv) == j["ops"]["read"]["count"] <= 200 + 2 * 2, (j["ops"]["read"], iv)


def noted(hold, began):
    """``hold`` (a context manager taking a thread id) that appends to ``began`` the epoch it
    took effect: what a test's premise rests on, read rather than assumed."""
    @contextlib.contextmanager
    def held(tid):
        with hold(tid):
            began.append(time.time())
            yield
    return held


def test_on_a_schedule_a_late_window_ends_at_its_planned_instant(iobench, prepared):
    """On a schedule (--start-at: an array's lock-step) the window ends where the other hosts'
    do and before the next step: the same hold makes it shorter, never later. The main thread
    is held from 0.5 s into a 3 s warmup to 1 s past the planned end (a loaded machine once
    froze it only after a 1 s warmup had ended: 2.5 s of slack now, and the premise checked)."""
    start = time.time() + 1.5
    began = []
    rc, out, err, _thawed = held_mid_run([iobench, "run", "--dir", prepared, "--warmup", "3", "--start-at",
                                          "%.3f" % start, *LATE], start + 0.5, noted(frozen_thread, began), 4.5)
    assert rc == 0, err
    assert began and began[0] < start + 3, ("the hold came after the warmup", began, start)
    j = json.loads(out)
    # the workers stopped at the planned end (start + 3 s warmup + 1 s), before the late reading
    # opened the window: an empty window, where a kept length would have measured 1 s after it
    assert j["elapsed_s"] < 0.5 and j["ops"]["read"]["count"] < 100, (j["elapsed_s"], j["ops"]["read"])
    assert j["window"]["start_epoch"] > start + 4, j["window"]


def test_a_main_thread_late_after_the_workers_does_not_stretch_the_window(iobench, prepared):
    """The main thread held from mid-window to 2 s past the window's end, while the paced
    workers measure and stop on their own: the window ends when the last worker stopped (their
    own clock reads), not when the main thread got to run again. Stamped by the main thread, a
    fresh-clone run's 1 s window of 196 requests read 2.27 s and 86 IOPS."""
    start = time.time() + 1.5
    began = []
    live = os.path.join(os.path.dirname(prepared), "late-main-live.jsonl")
    measuring = measured_for(live, 0.2)

    @contextlib.contextmanager
    def once_measuring(tid):
        # held once the main thread has opened the window and 0.2 s of it is measured (its live
        # log says so), not at a planned instant: a loaded machine woke it 0.5 s late from the
        # warmup, and a hold at the planned mid-window came before the window
        poll_until(measuring, 30)
        with frozen_thread(tid):
            yield

    rc, out, err, thawed = held_mid_run([iobench, "run", "--dir", prepared, "--warmup", "1", "--start-at",
                                         "%.3f" % start, "--live-log", live, *LATE], start + 1.0,
                                        noted(once_measuring, began), 2.5)
    assert rc == 0, err
    j = json.loads(out)
    w = j["window"]
    planned_end = start + 2
    assert began and w["start_epoch"] < began[0] and thawed > planned_end + 1, (w, began, thawed)
    # the workers' time: the window ends at the planned end, whenever the main thread woke
    assert w["end_epoch"] < thawed - 0.5 and abs(w["end_epoch"] - planned_end) < 0.5, (w, planned_end, thawed)
    # the rate is the window's count over its 1 s, never the count spread over the main thread's
    # delay (count / 2.27 s in the run above). How many requests the paced workers made is the
    # machine's: a late wake-up drops its slot (196 quiet; 82 beside the suite's other streams)
    reads = j["ops"]["read"]
    assert reads["count"] > 0 and reads["per_sec"] >= 0.8 * reads["count"] / 1.0, (j["elapsed_s"], reads)


def test_a_signal_during_the_warmup_opens_an_empty_window_at_a_real_instant(iobench, prepared):
    """SIGTERM while the main thread waits out the warmup, before it read the counters: the
    window opens at the signal, empty, on the run's own timeline. (With no reading taken, the
    window opened at the monotonic clock's origin: an interrupted run reported an elapsed time
    equal to the machine's uptime, 93,777 s in a fresh-clone run.)"""
    began = time.time()
    # 2 s into a 30 s warmup (the main thread sleeps through it: no live line tells it apart)
    rc, out, err = signal_mid_run([iobench, "run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--warmup", "30",
                                   "--time", "1", "--devstat", "no-such-dev0"], signal.SIGTERM, delay=2.0, timeout=60)
    assert rc == 5, err
    j = json.loads(out)
    assert j["interrupted"] is True and j["signal"] == "SIGTERM"
    assert j["elapsed_s"] < 1.0, j["elapsed_s"]
    w = j["window"]
    assert began <= w["start_epoch"] <= time.time() and w["end_epoch"] >= w["start_epoch"], (w, began)


# the retries of the opening reading (workload.c, devstat_open_window)
EDGE_TRIES = 50


def test_a_host_where_every_reading_of_the_counters_is_slow_opens_the_window_after_a_few(
        iobench, prepared, tmp_path):
    """Every reading slow, made on purpose: strace stops each system call of the run (ptrace), and
    the counters of eight devices are read, so no reading of them takes under the 200 us a
    retry waits for. The retries stop 5 ms after the first. (They ran to the cap of 50, here
    67-152 ms after the window's planned instant; a loaded emulated guest, whose every sysfs
    reading is slow, opened a 16 s array step's window 2 s late that way, out of lock-step.)
    How many readings fit in those 5 ms is the machine's speed: on a quiet one several, under
    a fresh-clone suite's load the first reading alone took them (one reading, no retry)."""
    with loop_device(16) as (_dev, name, _backing, _mnt):
        trace = tmp_path / "openat.trace"
        p = subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", str(trace), iobench, "run", "--dir", prepared,
                            *SMALL, "--mode", "rndrd", "--keep-cache", "--rate-iops", "200", "--threads", "2",
                            "--warmup", "0.3", "--time", "0.5", "--devstat", ",".join([name] * 8), "--format", "json"],
                           capture_output=True, text=True, timeout=120, check=False)
        assert p.returncode == 0, p.stderr
        w = json.loads(p.stdout)["window"]
        assert w["devstat_error"] is None and list(w["devstat"]) == [name], w
        stat = "/sys/block/%s/stat\"" % name
        opened = sum(stat in line and "= -1" not in line for line in trace.read_text().splitlines())
        assert opened % 8 == 0, opened
        # the readings that opened the window; one more closed it
        opening = opened // 8 - 1
        # every reading slow, so retried until the time limit, never to the cap (how many is
        # a timing: one when the first reading alone outlasted the limit)
        assert 1 <= opening < EDGE_TRIES, opening
