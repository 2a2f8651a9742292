"""Foreign I/O on a shared disk, on loop devices this test creates.

Each test builds an ext4 on a loop device over a file of its own (``losetup --direct-io=on``),
runs a workload through ``workload.run_workload`` (the code the detached job runs) with the
job's ``foreign_io`` settings, and judges the record with ``judge.judge``. Neighbours are
Python processes started here that read a file of their own on the same device with
O_DIRECT, count every read themselves (epoch, cumulative count every 50 ms), end by
themselves after a bounded time, and are ended by PID at the latest when the test ends.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import cgroups
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import impact as foreign_impact
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import device as metricsmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record

import loopdev
import test_module_iobench
import faultdrive

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary

pytestmark = pytest.mark.slow

NEIGHBOUR = r"""
import json, mmap, os, signal, sys, threading, time
path, threads, seconds, delay, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
size = os.path.getsize(path)
blocks = size // 16384
counts = [0] * threads
def reader(i):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 16384)
    k = i * 7919
    while not stop.is_set():
        os.preadv(fd, [buf], (k % blocks) * 16384)
        counts[i] += 1
        k += 104729
    os.close(fd)
time.sleep(delay)
log = []
ts = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
for t in ts:
    t.start()
open(out + ".started", "w").close()
end = time.time() + seconds
while time.time() < end and not stop.is_set():
    log.append([time.time(), sum(counts)])
    stop.wait(0.05)
stop.set()
for t in ts:
    t.join()
log.append([time.time(), sum(counts)])
with open(out + ".tmp", "w") as fh:
    json.dump(log, fh)
os.rename(out + ".tmp", out)
"""


def neighbour_file(path, mib):
    """The neighbour's own data, really written (a sparse file would read without the disk)."""
    with open(path, "wb") as fh:
        for _i in range(mib):
            fh.write(os.urandom(1 << 20))
        fh.flush()
        os.fsync(fh.fileno())
    return path


@pytest.fixture
def loop_ext4():
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    if not os.path.isfile(os.path.join(cgroups.BLKIO_V1, "blkio.throttle.io_serviced")):
        pytest.skip("needs the cgroup v1 blkio controller for the neighbour's throttle")
    # on a file in a tmpfs (docs/integrity.md "Stalls"): a loop device over a loaded machine's
    # disk stalls when that disk does (a CI run's quiet workload: no request for 1 s, one of 1.3 s)
    with loopdev.loop_ext4(384, prefix="fq-foreign-", where="/dev/shm") as loop:
        test_dir = os.path.join(loop["mnt"], "fq")
        os.mkdir(test_dir, 0o700)
        yield dict(loop, dir=test_dir, dev=loop["name"], path=loop["dev"],
                   other=neighbour_file(os.path.join(loop["mnt"], "neighbour.dat"), 64))


class Neighbour:
    """A reader of its own file on the device, in its own process (optionally in a blkio
    cgroup with a read IOPS throttle on a device), ended by PID."""

    def __init__(self, path, threads=1, seconds=60.0, delay=0.0, cgroup=None):
        fd, self.out = tempfile.mkstemp(prefix="fq-neighbour-", suffix=".json")
        os.close(fd)
        os.unlink(self.out)
        procs = os.path.join(cgroup, "cgroup.procs") if cgroup else None

        def join():
            if procs:
                with open(procs, "w") as fh:
                    fh.write(str(os.getpid()))
        self.proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, path, str(threads), str(seconds), str(delay),
                                      self.out], preexec_fn=join)

    def started(self, limit_s=60):
        """Wait until it reads (a loaded machine may take seconds to start Python)."""
        end = time.monotonic() + limit_s
        while not os.path.exists(self.out + ".started") and time.monotonic() < end and self.proc.poll() is None:
            time.sleep(0.05)
        assert os.path.exists(self.out + ".started"), "the neighbour did not start"
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            with open(self.out) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return []
        finally:
            for path in (self.out, self.out + ".started"):
                if os.path.exists(path):
                    os.unlink(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def count_at(log, epoch):
    """The neighbour's cumulative read count at ``epoch``, interpolated in its 50 ms log."""
    prev = [log[0][0], 0] if log else [epoch, 0]
    if log and epoch < log[0][0]:
        return 0.0
    for t, n in log:
        if t >= epoch:
            if t == prev[0]:
                return float(n)
            return prev[1] + (n - prev[1]) * (epoch - prev[0]) / (t - prev[0])
        prev = [t, n]
    return float(prev[1])


def params(binary, loop, **kw):
    """The workload's parameters: 3 s measured (a test that counts the neighbour's reads asks
    for longer), the quiet wait sampled every 0.5 s (one round on a quiet device)."""
    p = workload.defaults()
    p.update(dir=os.path.join(loop["dir"], "ds"), mode="rndrd", threads=2, file_num=4, total_size="64M",
             block_size="16K", direct=True, time=3, warmup=1, prepare=True, cleanup=True, binary=binary,
             collect="procfs", foreign_io={"sample_s": 0.5, "wait_s": 5, "max_share": 0.1})
    os.makedirs(p["dir"], exist_ok=True)
    for k, v in kw.items():
        if isinstance(v, dict) and isinstance(p.get(k), dict):
            p[k] = dict(p[k], **v)
        else:
            p[k] = v
    return p


SPEC = {"id": "over_cache-rndrd-t2", "workload": "over_cache", "mode": "rndrd", "threads": 2}
# a 5 s stall limit: even on a tmpfs the loop device's worker waits for a CPU when the suite's
# streams load the machine (a fresh-clone run's quiet workload: one request of 1.29 s, over the
# default 1 s); these tests are of the foreign I/O, stalls have tests of their own
RULES = [{"workload": "over_cache", "min_iops": 1}, {"name": "suite-loaded-machine", "max_stall_s": 5}]


def run(p, spec=None):
    spec = spec or SPEC
    res, failed, msg, warnings = workload.run_workload(p)
    assert not failed, msg
    rec = workload_record(spec, dict(res, failed=False))
    return rec, judge([rec], RULES if spec is SPEC else [], expected_ids=[spec["id"]]), warnings


def test_a_neighbour_makes_the_workload_inconclusive_and_its_share_is_what_it_did(iobench_binary, loop_ext4):
    quiet = params(iobench_binary, loop_ext4)
    rec, verdict, _w = run(quiet)
    m = rec["metrics"]
    assert m["foreign_source"] == "cgroup-v1"
    assert m["foreign_share"] < 0.02, m          # quiet disk: nothing foreign
    assert verdict["verdict"] == "PASS", verdict["reasons"]

    # no wait: share it. 6 s measured: the neighbour's reads counted over the window (~8 s with the
    # samples around it) keep the edges (a sample's instant vs its counters, the 50 ms log) a
    # small part of the 10 % tolerance even when this machine is busy
    p = params(iobench_binary, loop_ext4, time=6, foreign_io={"quiet_util_pct": 100})
    with Neighbour(loop_ext4["other"], threads=1, seconds=60) as nb:
        nb.started()
        rec, verdict, _w = run(p)
        log = nb.stop()
    m = rec["metrics"]
    a, b = metricsmod._delta_span(rec["result"]["foreign"]["samples"], rec["result"]["bench"], "cgroup-v1")
    theirs = count_at(log, b["e"]) - count_at(log, a["e"])
    dev_ios = sum((b["d"][d][0] - a["d"][d][0]) + (b["d"][d][3] - a["d"][d][3]) for d in b["d"])
    assert theirs > 100, (theirs, log[-3:])
    assert abs(m["foreign_reads"] - theirs) <= 0.1 * theirs, (m["foreign_reads"], theirs)
    assert abs(m["foreign_share"] - theirs / dev_ios) <= 0.1 * (theirs / dev_ios), (m["foreign_share"], theirs, dev_ios)
    assert m["foreign_share"] > 0.1
    assert verdict["verdict"] == "INCONCLUSIVE", verdict["reasons"]
    fc = [c for c in verdict["checks"] if c["rule"] == "foreign_io"][0]
    assert fc["status"] == "inconclusive" and "foreign share" in fc["message"]

    # a threshold the shared numbers miss is not a FAIL either
    strict = judge([rec], [{"workload": "over_cache", "min_iops": 10 ** 9}], expected_ids=[SPEC["id"]])
    assert strict["verdict"] == "INCONCLUSIVE"
    assert [c["status"] for c in strict["checks"] if c["rule"] != "foreign_io"] == ["inconclusive"]


# The quiet wait's tests hold the device busy with one read the fault drive stalls
# (tests/faultdrive, docs/testing.md "The fault-injecting drive"): a request in flight counts
# in the device's io_ticks (%util) for as long as it is held, whatever CPU any process gets.
# A neighbour process reading in a loop kept it busy only while it ran: a CI run's busy machine
# left a 2-thread reader without a read for a whole 1 s sample, so the "never quiet" device
# read 0.0 % and the workload ran.
STALL_REGION = 1 << 20                          # the drive's last MiB, outside the ext4 on it
STALL_BOUND_S = 120                             # the stall's own end, should the test not end it


@pytest.fixture
def stalled_ext4(tmp_path):
    """An ext4 on a fault drive (its backing file in a tmpfs of the test's own), the drive's
    last MiB outside it: the region a stalled read holds."""
    ok, why = faultdrive.faultdrive_available()
    if not ok or loopdev.missing_tools():
        pytest.skip(why or loopdev.missing_tools())
    with loopdev.tmpfs(str(tmp_path / "mem"), 256) as mem, \
            faultdrive.FaultDrive(size=192 << 20, workdir=mem, name="quiet") as fd:
        with loopdev.ext4_mounted(fd.device, str(tmp_path / "mnt"), blocks=(fd.size - STALL_REGION) // 4096) as mnt:
            test_dir = os.path.join(mnt, "fq")
            os.mkdir(test_dir, 0o700)
            yield {"drive": fd, "dev": os.path.basename(fd.device), "path": fd.device, "dir": test_dir}


class StalledRead:
    """One O_DIRECT read of the drive's last MiB, held by a ``stall`` rule until :meth:`release`
    (or the rule's own bound): the device has a request in flight from :meth:`__enter__` on.
    The reader (dd) is ended by PID at the latest on exit."""

    def __init__(self, loop):
        self.drive, self.dev, self.path = loop["drive"], loop["dev"], loop["path"]
        self.proc = None

    def in_flight(self):
        with open("/sys/block/%s/inflight" % self.dev) as fh:
            return sum(int(x) for x in fh.read().split())

    def __enter__(self):
        self.drive.set([{"kind": "stall", "ops": "read", "start": self.drive.size - STALL_REGION,
                         "length": STALL_REGION, "for_s": STALL_BOUND_S}])
        self.proc = subprocess.Popen(["dd", "if=" + self.path, "of=/dev/null", "bs=4096", "count=1", "iflag=direct",
                                      "skip=%d" % ((self.drive.size - STALL_REGION) // 4096)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 60
        while self.in_flight() == 0 and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        if self.in_flight() == 0:
            rc = self.release()
            raise AssertionError("the stalled read did not reach %s (dd rc %s)" % (self.dev, rc))
        return self

    def release(self):
        """End the stall: the read completes and the reader exits."""
        self.drive.clear()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.release()


def test_a_read_held_for_one_busy_round_then_released_lets_the_workload_run_and_pass(iobench_binary, stalled_ext4):
    # a busy threshold of 1 % in 1 s samples: the held read makes the first round 100 %; the
    # job's progress hook releases it when it reports that round busy, so the next is quiet
    rounds = []
    with StalledRead(stalled_ext4) as held:
        def busy_round(report):
            rounds.append(report)
            if report["waiting"] and held.proc.poll() is None:
                assert held.release() == 0
        p = params(iobench_binary, stalled_ext4, quiet_progress=busy_round,
                   foreign_io={"wait_s": 40, "quiet_util_pct": 1, "sample_s": 1})
        rec, verdict, _w = run(p)
    m = rec["metrics"]
    assert rounds[0]["waiting"] and rounds[0]["util_pct"] > 50, rounds
    assert m["foreign_quiet"]["ok"] and m["foreign_quiet"]["rounds"] >= 2, m["foreign_quiet"]
    assert m["foreign_share"] < 0.02, m
    assert verdict["verdict"] == "PASS", verdict["reasons"]


def test_a_device_held_busy_past_wait_s_by_a_stalled_read_is_inconclusive_not_run(iobench_binary, stalled_ext4):
    p = params(iobench_binary, stalled_ext4, foreign_io={"wait_s": 3, "quiet_util_pct": 1, "sample_s": 1})
    with StalledRead(stalled_ext4):
        res, failed, _msg, _warnings = workload.run_workload(p)
    assert not failed and "bench" not in res, (res.get("foreign") or {}).get("quiet")
    quiet = res["foreign"]["quiet"]
    # busy through the whole wait (how many rounds filled it is the machine's: a starved round is longer)
    assert not quiet["ok"] and quiet["waited_s"] >= 3 and quiet["util_pct"] > 50, quiet
    assert "never got quiet" in res["foreign"]["skipped"]
    rec = workload_record(SPEC, dict(res, failed=False))
    verdict = judge([rec], RULES, expected_ids=[SPEC["id"]])
    assert verdict["verdict"] == "INCONCLUSIVE"
    assert "never got quiet" in verdict["reasons"][0]
    failing = judge([dict(rec, result=dict(rec["result"], foreign=dict(
        rec["result"]["foreign"], settings=dict(rec["result"]["foreign"]["settings"], on_busy="fail"))),
        metrics=None)], RULES, expected_ids=[SPEC["id"]])
    assert failing["verdict"] == "FAIL"


@pytest.fixture
def nested(loop_ext4):
    """A loop device over a file on the first one's ext4, with its own ext4: the neighbour's
    cgroup has a read IOPS throttle on the *lower* device, so its requests on the upper one
    wait (the loop worker serves them in the neighbour's cgroup) and their await rises,
    while ours (another cgroup) are not slowed."""
    lower = loop_ext4
    cg = os.path.join(cgroups.BLKIO_V1, "fq-test-neighbour-%d" % os.getpid())
    try:
        with loopdev.loop_ext4(200, base=lower["mnt"]) as upper:
            test_dir = os.path.join(upper["mnt"], "fq")
            os.mkdir(test_dir, 0o700)
            other = neighbour_file(os.path.join(upper["mnt"], "neighbour.dat"), 32)
            os.mkdir(cg)
            with open("/sys/block/%s/dev" % lower["dev"]) as fh:
                num = fh.read().strip()
            with open(os.path.join(cg, "blkio.throttle.read_iops_device"), "w") as fh:
                fh.write("%s 40" % num)
            yield {"dir": test_dir, "dev": upper["name"], "other": other, "cgroup": cg}
    finally:
        if os.path.isdir(cg):
            for _i in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)


def test_the_guard_stops_a_run_whose_neighbours_await_rises(iobench_binary, nested):
    # a long run: the guard must stop it well before its end
    p = params(iobench_binary, nested, time=60, rate_iops=500,
               foreign_io={"quiet_util_pct": 100, "guard_await_ms": 20, "guard_samples": 2})
    with Neighbour(nested["other"], threads=4, seconds=90, delay=3, cgroup=nested["cgroup"]):
        began = time.time()
        rec, verdict, warnings = run(p)
        took = time.time() - began
    m = rec["metrics"]
    guard = rec["result"]["foreign"]["guard"]
    assert guard and guard["stopped"] and guard["foreign_await_ms"] > 20, guard
    assert "await" in m["foreign_guard"] and "> 20" in m["foreign_guard"]
    assert took < 60, took                       # stopped, not run to its end (a bound, not a timing)
    assert rec["result"]["timed_out"] is False
    assert verdict["verdict"] == "INCONCLUSIVE", verdict["reasons"]
    assert "stopped: the other I/O's await" in verdict["reasons"][0]
    assert any("foreign-I/O guard" in w for w in warnings)

    # without a neighbour the same guarded run goes to its end and passes
    p = params(iobench_binary, nested, time=4, rate_iops=500,
               foreign_io={"quiet_util_pct": 100, "guard_await_ms": 20, "guard_samples": 2})
    rec, verdict, _w = run(p)
    assert rec["result"]["foreign"]["guard"] is None
    assert verdict["verdict"] == "PASS", verdict["reasons"]


@pytest.mark.parametrize("kind", [
    {"mode": "rndrd", "direct": True},
    {"mode": "rndwr", "direct": True},                                       # fsync every 100 writes
    {"mode": "rndwr", "direct": True, "fsync_freq": 0, "threads": 4},        # the serialization probe
    {"mode": "seqwr", "direct": False, "fsync_freq": 1, "fsync_mode": "fdatasync", "threads": 1,
     "file_num": 1, "total_size": "16M"},                                    # the log workload
    {"mode": "seqrd", "direct": False, "threads": 1, "file_num": 1, "total_size": "32M"},   # read-ahead
], ids=["rndrd", "rndwr", "rndwr-nofsync", "log", "seqrd-buffered"])
def test_quiet_disk_shows_no_foreign_io_for_each_profile_workload_kind(iobench_binary, loop_ext4, kind):
    p = params(iobench_binary, loop_ext4, time=3, **kind)
    # the buffered sequential read is the read-ahead probe, not an over-cache workload (no cache proof)
    rec, verdict, _w = run(p, {"id": "ra", "workload": "readahead", "mode": "seqrd"} if kind["mode"] == "seqrd" else None)
    m = rec["metrics"]
    assert m["foreign_source"] == "cgroup-v1"
    # what the cgroup cannot see is the journal of our fsyncs: a few % at most
    assert m["foreign_share"] <= 0.05 or m["foreign_iops"] < m["foreign_min_iops"], (kind, m["foreign_share"], m["foreign_iops"])
    assert verdict["verdict"] == "PASS", verdict["reasons"]


def test_impact_limits_are_applied_and_recorded(iobench_binary, loop_ext4):
    p = params(iobench_binary, loop_ext4, time=3, threads=8,
               impact={"ioprio": "idle", "nice": 7, "max_mibps": 4, "max_threads": 2})
    rec, _verdict, _w = run(p)
    imp = rec["result"]["foreign"]["impact"]
    assert imp["in_cgroup"] is True and imp["ioprio_class"] == foreign_impact.IOPRIO_CLASS_IDLE and imp["nice"] == 7
    sched = foreign_impact.scheduler(loop_ext4["dev"])
    assert [s["name"] for s in imp["schedulers"]] == [sched["name"]]
    if not sched["idle_honoured"]:
        assert any("not honoured" in n for n in imp["notes"])
    cfg = rec["result"]["bench"]["config"]
    assert cfg["threads"] == 2
    assert cfg["rate_iops"] == pytest.approx(4 * 1048576 / 16384)       # 4 MiB/s of 16K requests
    assert rec["metrics"]["iops"] <= 1.1 * cfg["rate_iops"]
    # beside the foreign-I/O samples, the device's counters five times a second: what the stall
    # rule reads a silence from (docs/integrity.md "Stalls")
    ds = rec["result"]["device_samples"]
    assert ds["interval"] == 0.2 and ds["devices"] == [loop_ext4["dev"]], ds


def test_the_budget_skips_what_it_cannot_start(iobench_binary, loop_ext4):
    p = params(iobench_binary, loop_ext4, time=2, impact={"budget_s": 1}, budget_end_epoch=time.time() - 1)
    res, failed, _msg, warnings = workload.run_workload(p)
    assert not failed and "time budget" in res["foreign"]["skipped"] and warnings
    rec = workload_record(SPEC, dict(res, failed=False))
    assert judge([rec], RULES, expected_ids=[SPEC["id"]])["verdict"] == "INCONCLUSIVE"
