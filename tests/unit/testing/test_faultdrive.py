"""The fault-injecting drive (tests/faultdrive, docs/testing.md "The fault-injecting drive"),
proven against readers that are not the drive: dd and cmp through the loop device with
O_DIRECT, the backing file read directly, the kernel's own log (/dev/kmsg) and fio's verify.
Tests that trust the drive later can then trust it without trusting themselves."""
import json
import mmap
import os
import re
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultdrive import (KINDS, FaultDrive, FaultDriveError, FaultRuleError, KernelLog, loop_backing, mount_type,
                        check_rule, faultdrive_available, flip_positions)
from faultdrive.fixtures import faultdrive  # noqa: F401  pylint: disable=unused-import
from proctree import alive
import unitpaths

OK, WHY = faultdrive_available()
# kernel_errors: its eio and vanish tests make the kernel log I/O errors, which it rate-limits
# machine-wide (pytest.ini; run one at a time in make test's fleet stream)
pytestmark = [pytest.mark.skipif(not OK, reason=WHY or "fault drive available"), pytest.mark.kernel_errors]

SIZE = 16 << 20
MiB = 1 << 20


@pytest.fixture(scope="module")
def drive(tmp_path_factory):
    with FaultDrive(size=SIZE, workdir=tmp_path_factory.mktemp("faultdrive"), name="fdu") as fd:
        yield fd


@pytest.fixture
def fd(drive):
    """The module's drive with no rules and known random contents in its backing file."""
    drive.clear()
    data = os.urandom(SIZE)
    with open(drive.backing, "r+b") as fh:
        fh.write(data)
    yield drive
    drive.clear()


def dd(*args):
    return subprocess.run(["dd", "status=none"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, check=False)


def dev_read(device, off, length):
    """Read through the loop device with O_DIRECT (an aligned buffer), as iobench does."""
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, length)
        n = os.preadv(fd, [buf], off)
        assert n == length
        return bytes(buf)
    finally:
        os.close(fd)


def backing(fd, off, length):
    with open(fd.backing, "rb") as fh:
        fh.seek(off)
        return fh.read(length)


def kernel_line(log, device, sector, op, retry):
    """The kernel's I/O error line for this loop device and sector; the block layer rate-limits
    these lines (10 per 5 s, machine-wide), so after a miss wait the interval out and retry."""
    rx = r"I/O error, dev %s, sector %d op 0x[0-9a-f]+:\(%s\)" % (os.path.basename(device), sector, op)
    for _attempt in range(3):
        line = log.wait_for(rx, timeout=2)
        if line:
            return line
        time.sleep(5.5)
        retry()
    return None


# ---------------------------------------------------------------- the drive itself


def test_loop_device_uses_direct_io_and_reads_the_backing_file(fd):
    out = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,DIO,LOG-SEC,BACK-FILE", fd.device],
                         stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    assert out == [fd.device, "1", "512", fd.path]
    assert dev_read(fd.device, 3 * MiB, 64 << 10) == backing(fd, 3 * MiB, 64 << 10)
    before = fd.status()
    dev_read(fd.device, 0, 4096)
    after = fd.status()
    assert after["reads"] > before["reads"] and after["read_bytes"] >= before["read_bytes"] + 4096


def test_eio_read_fails_at_the_region_and_the_kernel_logs_it(fd):
    fd.set([{"kind": "eio", "start": 1 * MiB, "length": 4096, "ops": "read"}])
    with KernelLog() as log:
        def read():
            return dd("if=" + fd.device, "of=/dev/null", "bs=4096", "count=512", "iflag=direct")
        res = read()
        assert res.returncode != 0
        assert b"Input/output error" in res.stderr
        # dd stops at the first failing block: exactly the blocks before the region were read
        full = dd("if=" + fd.device, "of=/dev/stdout", "bs=4096", "count=256", "iflag=direct")
        assert full.returncode == 0 and full.stdout == backing(fd, 0, 1 * MiB)
        line = kernel_line(log, fd.device, 1 * MiB // 512, "READ", read)
    assert line, "no kernel I/O error line for %s sector %d" % (fd.device, MiB // 512)
    rule, = fd.stats()
    assert rule["kind"] == "eio" and rule["hits"] >= 1
    # writes to the region are not affected by a read-only eio rule
    assert dd("if=/dev/zero", "of=" + fd.device, "bs=4096", "count=1", "seek=256", "oflag=direct").returncode == 0
    assert backing(fd, 1 * MiB, 4096) == bytes(4096)


def test_eio_write_fails_and_the_backing_file_is_unchanged(fd):
    fd.set([{"kind": "eio", "start": 2 * MiB, "length": 512, "ops": "write"}])
    old = backing(fd, 2 * MiB, 4096)
    with KernelLog() as log:
        def write():
            return dd("if=/dev/zero", "of=" + fd.device, "bs=4096", "count=1", "seek=512", "oflag=direct")
        res = write()
        assert res.returncode != 0 and b"Input/output error" in res.stderr
        line = kernel_line(log, fd.device, 2 * MiB // 512, "WRITE", write)
    assert line, "no kernel I/O error line for the failed write"
    assert backing(fd, 2 * MiB, 4096) == old
    assert dev_read(fd.device, 2 * MiB, 4096) == old  # reads are not affected


def test_flip_changes_exactly_the_predicted_bits(fd, tmp_path):
    start, length, seed = 64 << 10, 8 << 10, 7
    fd.set([{"kind": "flip", "start": start, "length": length, "seed": seed}])
    before = backing(fd, 0, 256 << 10)
    out = tmp_path / "read.bin"
    assert dd("if=" + fd.device, "of=%s" % out, "bs=64k", "count=4", "iflag=direct").returncode == 0
    ref = tmp_path / "ref.bin"
    ref.write_bytes(before)
    res = subprocess.run(["cmp", "-l", str(out), str(ref)], stdout=subprocess.PIPE, text=True, check=False)
    diffs = [tuple(int(x, 8) if i else int(x) for i, x in enumerate(line.split())) for line in res.stdout.splitlines()]
    got = [(pos - 1, a ^ b) for pos, a, b in diffs]  # cmp counts bytes from 1
    assert got == flip_positions(start, length, seed=seed)
    assert len(got) == length // 512 and all(bin(mask).count("1") == 1 for _at, mask in got)
    assert backing(fd, 0, 256 << 10) == before  # the backing data stays intact
    assert dev_read(fd.device, 0, 256 << 10) == out.read_bytes()  # deterministic per offset


def test_misplace_returns_the_other_offsets_data(fd):
    fd.set([{"kind": "misplace", "start": 1 * MiB, "length": 64 << 10, "from_offset": 4 * MiB},
            {"kind": "misplace", "start": 8 * MiB, "length": 4096, "shift": -4096}])
    res = dd("if=" + fd.device, "of=/dev/stdout", "bs=64k", "skip=16", "count=1", "iflag=direct")
    assert res.returncode == 0 and res.stdout == backing(fd, 4 * MiB, 64 << 10)
    assert res.stdout != backing(fd, 1 * MiB, 64 << 10)
    around = dev_read(fd.device, 8 * MiB - 4096, 3 * 4096)
    assert around == backing(fd, 8 * MiB - 4096, 4096) * 2 + backing(fd, 8 * MiB + 4096, 4096)
    assert [r["hits"] >= 1 for r in fd.stats()] == [True, True]


def test_drop_rewrites_only_keeps_the_older_valid_block(fd):
    region = 2 * MiB
    fd.set([{"kind": "drop", "start": region, "length": 64 << 10, "rewrites_only": True}])
    first, second = b"A" * (64 << 10), b"B" * (64 << 10)
    for data in (first, second):
        res = subprocess.run(["dd", "status=none", "of=" + fd.device, "bs=64k", "seek=32", "oflag=direct", "iflag=fullblock"],
                             input=data, stderr=subprocess.PIPE, timeout=60, check=False)
        assert res.returncode == 0, res.stderr  # both acknowledged
    assert backing(fd, region, 64 << 10) == first  # the prepare landed, the rewrite was lost
    assert dev_read(fd.device, region, 64 << 10) == first  # a reader sees the older block
    rule, = fd.stats()
    assert rule["hits"] >= 1 and rule["bytes"] == 64 << 10
    # without rewrites_only nothing lands; outside the region everything does
    fd.set([{"kind": "drop", "start": region, "length": 4096}])
    res = subprocess.run(["dd", "status=none", "of=" + fd.device, "bs=4096", "seek=%d" % (region // 4096 - 1),
                          "count=2", "oflag=direct", "iflag=fullblock"], input=b"C" * 8192, stderr=subprocess.PIPE, timeout=60, check=False)
    assert res.returncode == 0
    assert backing(fd, region - 4096, 8192) == b"C" * 4096 + first[:4096]


def test_drop_since_start_drops_rewrites_of_sectors_written_before_the_rule(fd):
    off = 5 * MiB
    subprocess.run(["dd", "status=none", "of=" + fd.device, "bs=4096", "seek=%d" % (off // 4096), "oflag=direct", "iflag=fullblock"],
                   input=b"P" * 4096, check=True, timeout=60)
    fd.set([{"kind": "drop", "start": off, "length": 8192, "rewrites_only": True, "since": "start"}])
    subprocess.run(["dd", "status=none", "of=" + fd.device, "bs=8192", "seek=%d" % (off // 8192), "oflag=direct", "iflag=fullblock"],
                   input=b"Q" * 8192, check=True, timeout=60)
    # the first 4 KiB was written before (dropped now); the second 4 KiB is a first write (lands)
    assert backing(fd, off, 8192) == b"P" * 4096 + b"Q" * 4096


def test_delay_adds_at_least_ms_per_request(fd):
    fd.set([{"kind": "delay", "ms": 300, "ops": "read", "start": 6 * MiB, "length": 1 * MiB}])
    t0 = time.monotonic()
    assert dev_read(fd.device, 6 * MiB, 4096) == backing(fd, 6 * MiB, 4096)
    assert time.monotonic() - t0 >= 0.3  # a lower bound: safe on a busy machine
    rule, = fd.stats()
    assert rule["hits"] >= 1 and rule["bytes"] >= 4096


def test_stall_blocks_requests_until_the_window_ends_and_clear_releases_them(fd):
    t0 = time.monotonic()
    fd.set([{"kind": "stall", "for_s": 1.0}])
    dev_read(fd.device, 0, 4096)
    assert time.monotonic() >= t0 + 1.0  # the window opened no earlier than t0 and lasts 1 s
    assert fd.stats()[0]["hits"] >= 1
    # a long stall of one region, released by clear(): the requests complete long before the
    # stall's end; while one waits the rest of the drive answers (requests are served in
    # parallel), and with many waiting (all the kernel sends at once) clear() still gets through
    fd.set([{"kind": "stall", "for_s": 120, "start": 4096, "length": 4096}])
    done = []

    def reader():
        done.append(dev_read(fd.device, 4096, 4096))

    threads = [threading.Thread(target=reader)]
    threads[0].start()
    deadline = time.monotonic() + 30
    while fd.stats()[0]["hits"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not done  # blocked by the stall
    assert dev_read(fd.device, 8 * MiB, 4096) == backing(fd, 8 * MiB, 4096)
    assert not done
    threads += [threading.Thread(target=reader) for _reader in range(23)]
    for th in threads[1:]:
        th.start()
    while fd.stats()[0]["hits"] < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fd.stats()[0]["hits"] >= 10 and not done
    clearing = threading.Thread(target=fd.clear)
    clearing.start()
    clearing.join(60)  # the stall lasts 120 s: a clear() queued behind it would still hang here
    assert not clearing.is_alive(), "clear() waited behind the stalled requests"
    for th in threads:
        th.join(30)
    assert not any(th.is_alive() for th in threads)
    assert done == [backing(fd, 4096, 4096)] * 24


def test_periodic_stall_hits_more_than_one_window(fd):
    t0 = time.monotonic()
    fd.set([{"kind": "stall", "every_s": 0.5, "for_s": 0.2, "start": 7 * MiB, "length": 4096}])
    rule, = fd.stats()
    assert (rule["every_s"], rule["for_s"]) == (0.5, 0.2)
    deadline = time.monotonic() + 30
    while fd.stats()[0]["hits"] < 2 and time.monotonic() < deadline:
        assert dev_read(fd.device, 7 * MiB, 4096) == backing(fd, 7 * MiB, 4096)
    assert fd.stats()[0]["hits"] >= 2
    # the second stalled window opens every_s after the first, and lasts for_s: a lower bound
    assert time.monotonic() >= t0 + 0.7


def test_vanish_fails_every_request_after_at_s(fd):
    at_s = 2.0
    t0 = time.monotonic()
    fd.set([{"kind": "vanish", "at_s": at_s}])
    t1 = time.monotonic()
    try:
        early = dev_read(fd.device, 0, 4096)
    except OSError:
        early = None
    if time.monotonic() < t0 + at_s:  # decided before the rule could be active: it must have worked
        assert early == backing(fd, 0, 4096)
    time.sleep(max(0.0, t1 + at_s - time.monotonic()) + 0.05)
    with KernelLog() as log:
        def read():
            return dd("if=" + fd.device, "of=/dev/null", "bs=4096", "count=1", "skip=300", "iflag=direct")
        assert read().returncode != 0
        assert dd("if=/dev/zero", "of=" + fd.device, "bs=4096", "count=1", "seek=700", "oflag=direct").returncode != 0
        assert kernel_line(log, fd.device, 300 * 8, "READ", read)
    assert fd.status()["errors"] >= 2 and fd.stats()[0]["hits"] >= 2


def test_max_hits_makes_a_transient_error(fd):
    fd.set([{"kind": "eio", "start": 7 * MiB, "length": 4096, "max_hits": 1}])
    with pytest.raises(OSError):
        dev_read(fd.device, 7 * MiB, 4096)
    assert dev_read(fd.device, 7 * MiB, 4096) == backing(fd, 7 * MiB, 4096)
    rule, = fd.stats()
    assert rule["hits"] == 1 and rule["active"] is False


def _fio(device, extra=()):
    argv = ["fio", "--name=verify", "--filename=" + device, "--direct=1", "--rw=randwrite", "--bs=4k", "--size=4M",
            "--ioengine=psync", "--verify=crc32c", "--do_verify=1", "--randrepeat=1", "--output-format=json",
            # no verify state file (local-*-verify.state) left in the working directory
            "--verify_state_save=0"] + list(extra)
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    job = json.loads(res.stdout[res.stdout.index("{"):])["jobs"][0]
    return res, job


def test_fio_verify_sees_flipped_bits_and_nothing_on_a_clean_drive(fd):
    res, job = _fio(fd.device)
    assert res.returncode == 0 and job["error"] == 0 and "verify failed" not in res.stderr
    fd.set([{"kind": "flip", "start": 0, "length": 4 * MiB}])
    res, job = _fio(fd.device)
    assert res.returncode != 0 and job["error"] != 0
    assert re.search(r"crc32c: verify failed at file %s offset \d+" % re.escape(fd.device), res.stderr)


# ---------------------------------------------------------------- control and life cycle


def test_control_file_reports_rules_with_ids_and_counters(fd):
    fd.set([{"kind": "delay", "ms": 1}, {"kind": "eio", "start": 4096, "length": 4096, "ops": "write"}])
    first, second = fd.stats()
    assert (first["kind"], second["kind"], second["ops"]) == ("delay", "eio", "write")
    fd.remove(first["id"])
    assert [r["id"] for r in fd.stats()] == [second["id"]]
    fd.add({"kind": "flip", "start": 0, "length": 512})
    assert [r["kind"] for r in fd.stats()] == ["eio", "flip"]


@pytest.mark.parametrize("rule, words", [
    ({"kind": "eoi"}, ["'kind'", "'eio'"]),
    ({"kind": "eio", "lenght": 4}, ["'lenght'", "'length'"]),
    ({"kind": "flip", "ops": "write"}, ["'ops'", "'read'"]),
    ({"kind": "eio", "start": SIZE}, ["beyond", "'start'"]),
    ({"kind": "drop", "start": 100}, ["sectors", "'start': 0"]),
    ({"kind": "delay"}, ["'ms'"]),
    ({"kind": "stall", "every_s": 1, "for_s": 2}, ["'for_s'", "'every_s'"]),
    ({"kind": "misplace", "start": 0, "length": 4096}, ["'shift'", "'from_offset'"]),
])
def test_bad_rules_are_refused_naming_the_field_and_closest_value(drive, rule, words):
    with pytest.raises(FaultRuleError) as err:
        drive.set([rule])
    for word in words:
        assert word in str(err.value)
    # the daemon refuses the same on its own, with its reason
    with pytest.raises(FaultRuleError) as err:
        drive.control_write(json.dumps(rule) + "\n")
    assert "refused" in str(err.value)


def _rule_space():
    value = st.one_of(st.integers(-4096, SIZE + 4096), st.sampled_from([0, 512, 4096, SIZE - 4096, SIZE]),
                      st.floats(-1, 3, allow_nan=False), st.booleans(), st.sampled_from(["read", "write", "both", "rule", "start", "x"]))
    keys = sorted({k for spec in KINDS.values() for k in spec[2]} | {"start", "length", "ops", "at_s", "max_hits"})
    return st.builds(lambda kind, extra: dict(extra, kind=kind), st.sampled_from(sorted(KINDS) + ["bogus"]),
                     st.dictionaries(st.sampled_from(keys + ["junk"]), value, max_size=4))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rule=_rule_space())
def test_python_and_daemon_agree_on_every_rule(drive, rule):
    """Property: check_rule accepts a rule exactly when the daemon does."""
    try:
        check_rule(rule, SIZE)
        python_ok = True
    except FaultRuleError:
        python_ok = False
    try:
        drive.control_write('{"op": "clear"}\n' + json.dumps(rule) + "\n")
        daemon_ok = True
    except FaultRuleError:
        daemon_ok = False
    drive.clear()
    assert python_ok == daemon_ok, (rule, drive.status()["last_error"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(0, 64 << 10), length=st.integers(1, 16 << 10), every=st.sampled_from([512, 4096, 1000, 1]),
       seed=st.integers(0, 1 << 40))
def test_flips_read_through_the_device_match_the_prediction(drive, start, length, every, seed):
    """Property: for any region, chunk and seed, an O_DIRECT read through the loop device
    differs from the backing file by exactly flip_positions()."""
    drive.set([{"kind": "flip", "start": start, "length": length, "every": every, "seed": seed}])
    got = dev_read(drive.device, 0, 96 << 10)
    ref = backing(drive, 0, 96 << 10)
    drive.clear()
    diff = [(i, a ^ b) for i, (a, b) in enumerate(zip(got, ref)) if a != b]
    assert diff == flip_positions(start, length, every=every, seed=seed)


def _gone(drive, device, pid, mountpoint):
    assert loop_backing(device) != drive.path
    assert not alive(pid)
    assert mount_type(mountpoint) is None
    assert not os.path.exists(mountpoint) and not os.path.exists(drive.backing)


def test_with_block_cleans_up_when_the_body_raises(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with FaultDrive(size=1 * MiB, workdir=tmp_path, name="boom") as drive:
            seen = (drive.device, drive.pid, drive.mountpoint)
            drive.set([{"kind": "stall", "for_s": 30}])  # a stall must not hold the exit up
            1 / 0
    _gone(drive, *seen)


def test_start_stop_outside_with_and_two_drives_at_once(tmp_path):
    a = FaultDrive(size=1 * MiB, workdir=tmp_path, name="a").start()
    b = FaultDrive(size=2 * MiB, workdir=tmp_path, name="b").start()
    try:
        assert a.device != b.device and a.pid != b.pid
        a.set([{"kind": "vanish"}])
        with pytest.raises(OSError):
            dev_read(a.device, 0, 4096)
        assert dev_read(b.device, 0, 4096) == bytes(4096)  # b is unaffected
        seen_a, seen_b = (a.device, a.pid, a.mountpoint), (b.device, b.pid, b.mountpoint)
    finally:
        assert a.stop() == [] and b.stop() == []
    assert a.stop() == []  # idempotent
    _gone(a, *seen_a)
    _gone(b, *seen_b)
    with pytest.raises(FaultDriveError):
        a.set([])


def test_a_mounted_filesystem_on_the_drive_sees_the_faults(tmp_path):
    """ext4 on the drive: mkfs (discards pass through), a file written and read back with
    O_DIRECT; a vanish then fails the filesystem's reads."""
    with FaultDrive(size=32 * MiB, workdir=tmp_path, name="fs") as drive:
        mnt = tmp_path / "fsmnt"
        mnt.mkdir()
        subprocess.run(["mkfs.ext4", "-q", "-F", drive.device], check=True, timeout=120)
        subprocess.run(["mount", drive.device, str(mnt)], check=True, timeout=60)
        try:
            res = dd("if=/dev/urandom", "of=%s/f" % mnt, "bs=64k", "count=4", "oflag=direct")
            assert res.returncode == 0, res.stderr
            drive.set([{"kind": "vanish"}])
            assert dd("if=%s/f" % mnt, "of=/dev/null", "bs=64k", "iflag=direct").returncode != 0
            drive.clear()
        finally:
            subprocess.run(["umount", str(mnt)], check=True, timeout=60)


def test_bad_drive_arguments_name_the_variable():
    with pytest.raises(FaultRuleError, match="size=1000.*closest valid value: 512"):
        FaultDrive(size=1000)
    with pytest.raises(FaultRuleError, match="file='control'"):
        FaultDrive(file="control")


def test_atexit_cleans_up_a_drive_the_process_did_not_stop(tmp_path):
    """A process that exits with a drive still running leaves nothing behind."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from faultdrive import FaultDrive\n"
            "d = FaultDrive(size=1 << 20, workdir=%r, name='left').start()\n"
            "d.set([{'kind': 'stall', 'for_s': 60}])\n"
            "print(d.device, d.pid, d.mountpoint, flush=True)\n") % (unitpaths.TESTS, str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    device, pid, mountpoint = res.stdout.split()
    assert loop_backing(device) != os.path.join(mountpoint, "disk")
    assert not alive(int(pid))
    assert mount_type(mountpoint) is None and not os.path.exists(mountpoint)
    assert not os.path.exists(str(tmp_path / "left.img"))


def test_the_faultdrive_fixture_makes_started_drives(faultdrive):  # pylint: disable=redefined-outer-name
    one, two = faultdrive(size=1 * MiB), faultdrive(size=2 * MiB, name="second")
    assert (one.name, two.name) == ("fd1", "second")
    assert dev_read(two.device, 1 * MiB, 4096) == bytes(4096)
    one.set([{"kind": "eio"}])
    with pytest.raises(OSError):
        dev_read(one.device, 0, 4096)


@pytest.mark.parametrize("sanitizer", ["asan", "tsan"])
def test_daemon_is_clean_under_sanitizers(tmp_path, sanitizer):
    """ASan+UBSan and TSan builds of the daemon under parallel I/O while the rules change;
    stop() raises on any sanitizer report in the daemon's log."""
    rules = [[{"kind": "delay", "ms": 1}], [{"kind": "flip", "start": 0, "length": 1 * MiB}],
             [{"kind": "drop", "start": 1 * MiB, "length": 1 * MiB, "rewrites_only": True}],
             [{"kind": "stall", "every_s": 0.3, "for_s": 0.05}], [{"kind": "misplace", "start": 0, "length": 1 * MiB, "shift": 4 * MiB}],
             [{"kind": "eio", "start": 2 * MiB, "length": 4096, "max_hits": 3}], []]
    with FaultDrive(size=8 * MiB, workdir=tmp_path, name="san", sanitize=sanitizer) as drive:
        fio = subprocess.Popen(["fio", "--name=san", "--filename=" + drive.device, "--direct=1", "--rw=randrw", "--bs=4k",
                                "--ioengine=libaio", "--iodepth=8", "--numjobs=2", "--runtime=1.5", "--time_based",
                                "--continue_on_error=all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            step = 0
            while fio.poll() is None:
                drive.set(rules[step % len(rules)])
                drive.stats()
                step += 1
                time.sleep(0.02)
        finally:
            fio.wait(60)
        assert drive.status()["reads"] > 0 and step >= len(rules)
