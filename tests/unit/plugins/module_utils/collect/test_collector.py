"""The background collector, on the real machine: iostat/vmstat children and /proc sampling."""
import os
import shutil
import subprocess
import time

import loopdev
import pytest
from proctree import poll_until
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.collector import (
    Collector,
    _ProcfsSampler,
    choose_source,
    probe_iostat,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import parse_diskstats
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import resolve_devices

HAVE_SYSSTAT = shutil.which("iostat") is not None and shutil.which("vmstat") is not None
needs_sysstat = pytest.mark.skipif(not HAVE_SYSSTAT, reason="iostat/vmstat not installed")


def _fake_which(present):
    return lambda name: "/usr/bin/" + name if name in present else None


@pytest.mark.parametrize("requested,present,source,reason_word", [
    ("auto", {"iostat", "vmstat"}, "sysstat", None),
    ("auto", {"vmstat"}, "procfs", "iostat not found"),
    ("auto", set(), "procfs", "iostat not found"),
    ("auto", {"iostat"}, "sysstat", "vmstat not found"),
    ("sysstat", {"iostat", "vmstat"}, "sysstat", None),
    ("procfs", {"iostat", "vmstat"}, "procfs", "collect: procfs"),
    ("none", {"iostat", "vmstat"}, "none", "disabled"),
])
def test_choose_source(requested, present, source, reason_word):
    src, reason, tools = choose_source(requested, which=_fake_which(present), probe=lambda p: (True, None))
    assert src == source
    if reason_word is None:
        assert reason is None
    else:
        assert reason_word in reason
    if src == "sysstat":
        assert tools["iostat"] == "/usr/bin/iostat"


def test_choose_source_sysstat_missing_is_an_error():
    with pytest.raises(ValueError) as e:
        choose_source("sysstat", which=_fake_which({"vmstat"}))
    assert "iostat" in str(e.value) and "sysstat" in str(e.value)


def test_choose_source_old_sysstat_falls_back():
    def old(path):
        return False, "'iostat -dx -o JSON' failed (exit 1: Usage: iostat ...)"
    src, reason, _tools = choose_source("auto", which=_fake_which({"iostat", "vmstat"}), probe=old)
    assert src == "procfs" and "unusable" in reason and "/proc/diskstats" in reason
    with pytest.raises(ValueError) as e:
        choose_source("sysstat", which=_fake_which({"iostat", "vmstat"}), probe=old)
    assert "11.5" in str(e.value)


@needs_sysstat
def test_probe_real_iostat():
    assert probe_iostat(shutil.which("iostat")) == (True, None)


def test_probe_iostat_that_is_not_iostat():
    ok, why = probe_iostat(shutil.which("false") or "/bin/false")
    assert not ok and "11.5" in why
    ok, why = probe_iostat("/nonexistent/iostat")
    assert not ok and "cannot be run" in why


def _root_disks():
    r = resolve_devices("/var/tmp")
    if not r["devices"]:
        pytest.skip("/var/tmp has no block device here: %s" % r["reason"])
    return r["devices"]


def _assert_reaped(pids):
    for pid in pids:
        with pytest.raises(OSError):
            os.kill(pid, 0)


@needs_sysstat
def test_sysstat_collector_real():
    devs = _root_disks()
    src, _reason, tools = choose_source("sysstat")
    c = Collector(devs, 1, src, tools)
    t0 = time.monotonic()
    c.start()
    pids = [ch.proc.pid for ch in c.children]
    assert len(pids) == 2
    # until each tool has reported twice (bounded): how soon is the machine's, not the
    # collector's. A fixed 3.4 s with a cadence asserted failed a loaded run: iostat, itself
    # unscheduled, reported twice 2.245 s apart
    poll_until(lambda: len(c.iostat_parser.samples) >= 2 * len(devs) and len(c.vmstat_parser.samples) >= 2, 60)
    out = c.stop()
    elapsed = time.monotonic() - t0
    _assert_reaped(pids)
    assert out["errors"] == []
    assert out["source"] == "sysstat"
    assert [cmd[1:5] for cmd in out["commands"]][0] == ["-dxy", "-o", "JSON", "1"]
    io = out["iostat"]
    assert [s["index"] for s in io] == [i for i in range(len(io) // len(devs)) for _dev in devs]
    # iostat reports once a second at most, however loaded the machine
    assert 2 <= len(io) // len(devs) <= elapsed + 1, (len(io), elapsed)
    assert set(s["device"] for s in io) == set(devs)
    # each sample stamped when the collector read it: in the order read, inside the run, and
    # none before iostat's first interval (-y: the since-boot report is not one of them)
    epochs = [s["epoch"] for s in io]
    assert epochs == sorted(epochs), epochs
    assert out["started_epoch"] + 0.8 < epochs[0] and epochs[-1] <= out["stopped_epoch"], (out, epochs)
    vm = out["vmstat"]
    assert 2 <= len(vm) <= elapsed + 1, (len(vm), elapsed)
    assert all(95 <= v["us"] + v["sy"] + v["id"] + v["wa"] + v.get("st", 0) <= 105 for v in vm)
    # stopping twice is harmless
    assert c.stop()["iostat"] == io


def test_procfs_collector_real():
    devs = _root_disks()
    c = Collector(devs, 1, "procfs")
    t0 = time.monotonic()
    c.start()
    # until two samples (bounded), not a fixed 2.5 s: a loaded machine may wake the sampler late
    poll_until(lambda: len(c.sampler.vmstat) >= 2, 60)
    out = c.stop()
    elapsed = time.monotonic() - t0
    assert not c.sampler.thread.is_alive()
    assert out["errors"] == []
    # one sample a second from the start to the stop, never more; each with every device
    assert 2 <= len(out["vmstat"]) <= int(elapsed), (len(out["vmstat"]), elapsed)
    assert len(out["iostat"]) == len(out["vmstat"]) * len(devs)
    for s in out["iostat"]:
        assert set(["r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "aqu-sz", "%util",
                    "rareq-sz", "wareq-sz"]) <= set(s)
    # each sample's rates are over its own window, [start_epoch, epoch], and the windows follow
    # each other without a gap or an overlap: a sample read late on a loaded machine (a
    # fresh-clone run: 1.27 s after the one before) is a longer window, never a lost second
    vm = out["vmstat"]
    assert all(v["start_epoch"] < v["epoch"] for v in vm), vm
    assert vm[1]["start_epoch"] == vm[0]["epoch"], vm
    for s in out["iostat"]:
        assert (s["start_epoch"], s["epoch"]) == (vm[s["index"]]["start_epoch"], vm[s["index"]]["epoch"]), (s, vm)


DISKSTATS = "   7       0 loop0 %d 0 %d 0 0 0 0 0 0 %d %d 0 0 0 0 0 0\n"


@settings(max_examples=60, deadline=None)
@given(late=st.floats(0, 3), reads=st.integers(0, 10 ** 6))
def test_a_sample_read_late_is_a_rate_over_its_own_window(late, reads):
    """However late the sampling thread reads (a loaded machine), the sample's rates are the
    counters' deltas over the time that really passed, and its window says which time."""
    smp = _ProcfsSampler(["loop0"], 1, want_vmstat=False)
    dt = 1.0 + late
    prev = {"mono": 100.0, "epoch": 1000.0, "disk": parse_diskstats(DISKSTATS % (0, 0, 0, 0))}
    cur = {"mono": 100.0 + dt, "epoch": 1000.0 + dt, "disk": parse_diskstats(DISKSTATS % (reads, reads * 32, 0, 0))}
    smp.add(prev, cur, 0)
    [rec] = smp.iostat
    # iostat's two decimals
    assert rec["r/s"] == pytest.approx(reads / dt, rel=1e-6, abs=0.006)
    assert rec["rkB/s"] == pytest.approx(reads * 16 / dt, rel=1e-6, abs=0.006)
    assert (rec["start_epoch"], rec["epoch"]) == (1000.0, round(1000.0 + dt, 3))


@needs_sysstat
def test_no_device_runs_vmstat_only():
    src, _reason, tools = choose_source("sysstat")
    c = Collector([], 1, src, tools)
    c.start()
    assert [os.path.basename(ch.argv[0]) for ch in c.children] == ["vmstat"]
    # until vmstat's first report after its start (bounded): a fixed 1.3 s is a premise a
    # loaded machine that starts vmstat late does not keep
    poll_until(lambda: c.vmstat_parser.samples, 30)
    out = c.stop()
    assert out["iostat"] == [] and len(out["vmstat"]) >= 1


def test_dead_collector_is_reported():
    c = Collector(["vda"], 1, "sysstat", {"iostat": shutil.which("false") or "/bin/false", "vmstat": None})
    c.start()
    # the premise: it died before the stop (a fixed 0.3 s was not enough on a loaded machine: the
    # stop's SIGTERM found `false` not yet run, and a collector we stopped is no error)
    (child,) = c.children
    poll_until(lambda: child.proc.poll() is not None, 30)
    assert child.proc.returncode == 1, child.proc.returncode
    out = c.stop()
    assert any("exited 1" in e for e in out["errors"]), out["errors"]


def test_none_collects_nothing():
    c = Collector(["vda"], 1, "none")
    c.start()
    out = c.stop()
    assert out["iostat"] == [] and out["vmstat"] == [] and out["commands"] == []


@pytest.mark.slow
@needs_sysstat
def test_procfs_agrees_with_iostat_under_direct_writes():
    """Behaviour check: iostat and our /proc sampler, running side by side while dd
    writes 4000 x 16 KiB with O_DIRECT, must count the same device writes.

    The two samplers are not in phase, so per-sample w/s differ; the sum of
    w/s * interval over all complete samples (writes the device completed while
    both ran) must agree, and both must see at least dd's writes.

    On an ext4 of its own (a loop device nobody else writes): on the shared root disk,
    gigabytes of other writers' requests made the samplers' phase, not their counting, the
    difference.
    """
    why = loopdev.missing_tools()
    if why:
        pytest.skip(why)
    with loopdev.loop_ext4(128, prefix="fq-cmp-") as loop:
        devs = resolve_devices(loop["mnt"])["devices"]
        assert devs == [loop["name"]], (devs, loop)
        _src, _reason, tools = choose_source("sysstat")
        a = Collector(devs, 1, "sysstat", dict(tools, vmstat=None))
        b = Collector(devs, 1, "procfs")
        try:
            b.start()
            a.start()
            # dd once both samplers have reported: their counts then start before it, however
            # late a loaded machine ran their threads (a fixed 1.3 s was no premise)
            poll_until(lambda: a.iostat_parser.samples and b.sampler.iostat, 60)
            assert a.iostat_parser.samples and b.sampler.iostat, "the samplers did not report within 60 s"
            dd_start = time.time()
            dd = subprocess.run(["dd", "if=/dev/zero", "of=%s/f" % loop["mnt"], "bs=16k", "count=4000",
                                 "oflag=direct"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
            if dd.returncode != 0:
                pytest.skip("dd oflag=direct refused on the loop device's ext4: %s" % dd.stderr)
            dd_end = time.time()
            # until each has reported twice after dd ended (bounded), not a fixed 2.6 s: a report
            # that arrives after dd ended may have been sampled before (a loaded machine delivered
            # iostat's 0.15 s after its sample, and dd's last 890 writes were in the next report);
            # the one after it was sampled a whole interval later
            poll_until(lambda: sum(x["epoch"] >= dd_end for x in a.iostat_parser.samples) >= 2
                       and sum(x["epoch"] >= dd_end for x in b.sampler.iostat) >= 2, 60)
        finally:
            ra = a.stop()
            rb = b.stop()
    # each collector's reports follow each other from its start to its last report, after dd
    # ended: their counts (each rate over its own interval, from the report before it to its
    # arrival) add up to what the device did meanwhile. Report i of each covers the same second
    # only when the machine runs both on time: a loaded one ran iostat late (2 reports in 3.4 s)
    ia, ib = ra["iostat"], rb["iostat"]
    assert ia and ib, (ia, ib)
    assert ia[-1]["start_epoch"] >= dd_end and ib[-1]["start_epoch"] >= dd_end, (dd_end, ia[-1], ib[-1])
    assert ia[0]["start_epoch"] <= dd_start and ib[0]["start_epoch"] <= dd_start, (dd_start, ia[0], ib[0])

    def count(samples, key):
        return sum(s[key] * (s["epoch"] - s["start_epoch"]) for s in samples)

    def unknown(samples, key):
        """What iostat's count cannot be told to better than: iostat computes each report's
        rates over its own interval, which it does not print (its -t stamps are whole seconds);
        the count multiplies them by the interval between the reports' arrivals here, which
        differs from iostat's own by how much later one report arrived than the one before it.
        Each report's rate times how far its arrival interval is from iostat's nominal 1 s (a
        fresh-clone run's loaded machine: 4,254 writes counted from iostat's rates, the device's
        counters 4,000)."""
        return sum(s[key] * abs((s["epoch"] - s["start_epoch"]) - 1.0) for s in samples)

    def shown(samples, key):
        """Each report's interval, the rate asked for, and what tells merged requests from lost
        ones: its write kB/s and merged writes/s."""
        return [(round(s["epoch"] - s["start_epoch"], 3), round(s[key], 1), round(s.get("wkB/s", 0), 1),
                 round(s.get("wrqm/s", 0), 1)) for s in samples]
    wa, wb = count(ia, "w/s"), count(ib, "w/s")
    # our sampler's rates are its counters' differences over its own intervals: their count
    # is the device's, dd's 4000 writes (and a few of the journal's)
    assert 4000 * 0.99 <= wb <= 4000 * 1.05, (wb, shown(ib, "w/s"), dd.stderr)
    assert wa >= 4000 * 0.95, (wa, shown(ia, "w/s"))
    assert abs(wa - wb) <= max(0.05 * wa, 50) + unknown(ia, "w/s"), (wa, wb, shown(ia, "w/s"), shown(ib, "w/s"))
    kba, kbb = count(ia, "wkB/s"), count(ib, "wkB/s")
    assert abs(kba - kbb) <= max(0.05 * kba, 1024) + unknown(ia, "wkB/s"), (kba, kbb, shown(ia, "wkB/s"))
