"""A silence of the benchmark read against the device's own counters, with the real module
and iobench on an ext4 of the test's own (tests/unit/loopdev.py), docs/integrity.md
"Stalls".

iobench is paused (SIGSTOP by its PID, SIGCONT 2.4 s later: at least one whole interval of
its series without a completion) in the middle of its measured window:

* alone, the loop device holds no request and completes none: the silence is ``idle`` (the
  host did not run the job), a warning, not a stall;
* with a neighbour reading the same loop device (O_DIRECT, 4 KiB at a time, for as long as
  the pause) during it, the device completes the neighbour's requests: ``starved``, a
  warning, not a stall.

Both read the device from the job's own sampler, due every 0.2 s. When the machine ran that
sampler too seldom through a silence to say what the device did (a starved test stream), the
silence is a paused host instead, a warning too: never a stall, whatever the load.

A drive that holds requests and completes none (the fault drive's ``stall``) stays a stall:
tests/fleet/test_fleet_integrity.py, fq89.
"""
import json
import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import loopdev
import unitpaths
from proctree import cmdline, wait_stopped

unitpaths.on_path()

import test_module_iobench as tmi  # noqa: E402
from test_module_iobench import iobench_binary  # noqa: E402,F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import record_metrics  # noqa: E402

pytestmark = pytest.mark.slow

PAUSE_S = 2.4


def _children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True, check=False).stdout
    return [int(x) for x in out.split()]


def _window_started(pid):
    """True once iobench's measured window has begun (its warm-up of 1 s is over)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return False
    with open("/proc/uptime") as fh:
        uptime = float(fh.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK") > 2.5


def _pause_iobench(module_pid, neighbour=None, result=None):
    """Find the module's iobench, wait for its window, SIGSTOP it, optionally run the
    neighbour, SIGCONT it PAUSE_S later (always, even if the neighbour fails)."""
    deadline = time.monotonic() + 60
    bench = None
    while time.monotonic() < deadline and bench is None:
        for c in _children(module_pid):
            argv = cmdline(c)
            if argv and argv[0].endswith("iobench"):
                bench = c
        time.sleep(0.05)
    if bench is None:
        result["error"] = "no iobench child of %d" % module_pid
        return
    while time.monotonic() < deadline and not _window_started(bench):
        time.sleep(0.05)
    os.kill(bench, signal.SIGSTOP)
    wait_stopped(bench)          # the pause counts from the group stop, not the kill
    t0 = time.monotonic()
    try:
        if neighbour is not None:
            result["neighbour"] = neighbour(PAUSE_S - 0.1)
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - t0)))
    finally:
        os.kill(bench, signal.SIGCONT)
    result["paused_s"] = time.monotonic() - t0


def direct_reader(dev):
    """A neighbour: O_DIRECT reads of 4 KiB from ``dev`` (past ext4's first metadata) for
    ``seconds``; returns how many it read."""
    def read_for(seconds):
        buf = mmap.mmap(-1, 4096)
        fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
        n, end = 0, time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                os.preadv(fd, [buf], (32 << 20) + (n % 8192) * 4096)
                n += 1
        finally:
            os.close(fd)
            buf.close()
        return n
    return read_for


def _run_paused(binary, d, neighbour=None):
    args = tmi.small(binary, d, time=7, warmup=1, threads=2)
    path = os.path.join(d, "..", "args.json")
    with open(path, "w") as fh:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, fh)
    env = dict(os.environ, PYTHONPATH=tmi.COLLECTIONS)
    proc = subprocess.Popen([sys.executable, "-m", tmi.MODULE, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    got = {}
    pauser = threading.Thread(target=_pause_iobench, args=(proc.pid, neighbour, got))
    pauser.start()
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        pauser.join(30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "error" not in got, got
    r = json.loads(out)
    assert r.get("failed") is not True, (r.get("msg"), err[-2000:])
    return r, got


@pytest.fixture
def own_loop():
    why = loopdev.missing_tools()
    if why:
        pytest.skip(why)
    with loopdev.loop_ext4(192, prefix="fq-silence-") as loop:
        d = os.path.join(loop["mnt"], "bench")
        os.mkdir(d)
        yield loop, d


def _judged(r):
    rec = {"id": "cache-rndrd-t2", "workload": "cache", "mode": "rndrd", "threads": 2, "result": r}
    rec["metrics"] = record_metrics(rec)
    return rec["metrics"]["stall"], judge([rec], [], expected_ids=None)


def _evidence(stall, r):
    """The figures and the device samples the rule read, whole (for a failure's message)."""
    return json.dumps({"stall": stall, "device_samples": r.get("device_samples"),
                       "window": (r.get("bench") or {}).get("window")}, default=str)


def _never_a_stall(stall, verdict, r):
    """The silences of 1 s or more, after what holds however loaded the machine: no stall, a
    PASS. Whether the job's own sampler read the device on its cadence through a silence
    (``others`` known) is up to how soon the machine ran it; one it read too seldom to say is a
    paused host (docs/integrity.md, "Stalls"), which the returned list leaves out."""
    long_ones = [s for s in stall["silences"] if s["seconds"] >= 1.0]
    assert long_ones, _evidence(stall, r)
    assert stall["stalls"] == 0, _evidence(stall, r)
    assert verdict["verdict"] == "PASS", verdict["reasons"]
    unseen = [s for s in long_ones if s["others"] is None]
    assert all(s["paused"] for s in unseen), _evidence(stall, r)
    if unseen:
        assert any("the host did not run the job's processes" in w for w in verdict["warnings"]), verdict["warnings"]
    return [s for s in long_ones if s["others"] is not None]


def test_a_paused_job_on_an_idle_device_is_idle_not_a_stall(iobench_binary, own_loop):
    loop, d = own_loop
    r, got = _run_paused(iobench_binary, d)
    assert got["paused_s"] >= PAUSE_S
    assert r["device_samples"]["devices"] == [loop["name"]]
    assert r["device_samples"]["samples"], r["device_samples"]
    stall, verdict = _judged(r)
    seen = _never_a_stall(stall, verdict, r)
    assert stall["starved"] == 0 and all(s["idle"] for s in seen), _evidence(stall, r)
    if seen:
        assert any("the job issued no request" in w for w in verdict["warnings"]), verdict["warnings"]


def test_a_paused_job_beside_a_neighbour_on_its_device_is_starved_not_a_stall(iobench_binary, own_loop):
    loop, d = own_loop
    r, got = _run_paused(iobench_binary, d, neighbour=direct_reader(loop["dev"]))
    assert got["neighbour"] > 100, got
    stall, verdict = _judged(r)
    seen = _never_a_stall(stall, verdict, r)
    assert stall["starved"] == len(seen), _evidence(stall, r)
    if seen:
        assert max(s["others"] for s in seen) > 100, _evidence(stall, r)
        assert any("while the device completed" in w for w in verdict["warnings"]), verdict["warnings"]
