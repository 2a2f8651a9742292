"""The kernel's capability probes are not drive faults (docs/kernel-log.md, "Capability
probes"), through the real playbook on this machine: a loop device over a file on a tmpfs the
test mounts itself, with no fault at all.

* as a raw device target (``destroy_data: true``): the quick profile PASSes with 0 kernel
  errors on the loop device, iobench's cleanup zeroes what it wrote without provoking the
  kernel's WRITE_ZEROES (tmpfs cannot zero a range; the loop device advertises it anyway);
* with ext4 made on it (mkfs.ext4 with its defaults: lazy inode table and journal init) and
  used as a directory target right after mkfs: PASS with 0 kernel errors.

What the kernel logged for the loop device is read independently from ``/dev/kmsg`` (a
plain pattern, not the product's classifier): where it logged a refused WRITE_ZEROES or
DISCARD, the record carries it as a note on the drive (the kernel section's ``notes``, the
drive's kernel check, fleet.json's drive row), never as a kernel storage error.
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from playbook_run import PACE, ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
import loopdev  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.kernel_errors]

QUICK = {"fleetqual_workload_overrides": dict({"time": 2, "warmup": 1}, **PACE)}
PROBE_LINE = r"error, dev %s, sector \d+ op 0x[0-9a-f]+:\((?:WRITE_ZEROES|DISCARD|WRITE_SAME|SECURE_ERASE)\)"


def _cmd(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@contextlib.contextmanager
def tmpfs_loop(file_mb, tmpfs_mb):
    """A loop device over a file of ``file_mb`` MiB (zeros) on a tmpfs of ``tmpfs_mb`` MiB
    mounted under a temporary directory: ``(device, name, directory)``; detached, unmounted
    and removed afterwards."""
    missing = [t for t in ("losetup", "mount", "umount", "mkfs.ext4") if not shutil.which(t)]
    if os.geteuid() != 0 or missing or not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("needs root, /dev/kmsg and %s" % ", ".join(missing or ["losetup, mount"]))
    base = tempfile.mkdtemp(prefix="fq-tmpfs-")
    dev = None
    try:
        with loopdev.tmpfs(os.path.join(base, "tmpfs"), tmpfs_mb) as backing:
            image = os.path.join(backing, "disk.img")
            try:
                with open(image, "wb") as fh:
                    fh.truncate(file_mb << 20)
                dev = loopdev.attach_or_skip(image)
                yield dev, os.path.basename(dev), base
            finally:
                mnt = os.path.join(base, "mnt")
                if os.path.ismount(mnt) and _cmd(["umount", mnt]).returncode != 0:
                    _cmd(["umount", "-l", mnt])
                if dev:
                    loopdev.detach(dev, image)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kmsg_records():
    """Every record /dev/kmsg holds now: [(seq, text)]."""
    out = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                raw = os.read(fd, 16384)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue        # overrun: the next read gives the oldest record left
            if not raw:
                break
            head, _sep, text = raw.decode("utf-8", "replace").partition(";")
            out.append((int(head.split(",")[1]), text.split("\n")[0]))
    finally:
        os.close(fd)
    return out


def last_seq():
    recs = kmsg_records()
    return recs[-1][0] if recs else -1


def probe_lines(name, since):
    """The kernel's lines of a refused probe operation on ``name`` after sequence ``since``."""
    rx = re.compile(PROBE_LINE % re.escape(name))
    return [(seq, text) for seq, text in kmsg_records() if seq > since and rx.search(text)]


def check_no_errors_and_notes(run, name, seen):
    """PASS, 0 kernel storage errors judged on the loop device, and every probe the kernel
    logged for it (``seen``) a note: in the kernel section, the drive's check, fleet.json."""
    assert run.rc == 0, run.out[-4000:]
    rec = run.record()
    assert rec["verdict"] == "PASS", rec["reasons"]
    kernel = rec["kernel"]
    assert kernel["collected"], kernel
    assert kernel["counts"].get(name, {}) == {}, kernel["counts"]
    [check] = [c for c in rec["checks"] if c.get("metric") == "kernel.errors" and c.get("drive") == name]
    assert (check["status"], check["value"]) == ("pass", 0), check
    notes = [n for n in kernel["notes"] if n["drive"] == name]
    with open(os.path.join(run.results_dir(), "fleet.json")) as fh:
        [row] = [d for d in json.load(fh)["drives"] if d["drive"] == name]
    assert row["kernel_errors"] == 0 and row["verdict"] == "PASS", row
    if seen:
        assert notes, (seen, kernel["notes"])
        assert sum(n["count"] + n["count_before"] for n in notes) >= 1
        assert {n["op"] for n in notes} <= {"WRITE_ZEROES", "DISCARD", "WRITE_SAME", "SECURE_ERASE"}
        assert check["notes"] and check["notes"][0].startswith(notes[0]["note"]), check
        assert row["kernel_notes"] == check["notes"]
    return rec, notes


def test_raw_loop_device_over_tmpfs_passes_and_its_cleanup_provokes_no_probe(playbook):
    with tmpfs_loop(192, 256) as (dev, name, base):
        wz = "/sys/block/%s/queue/write_zeroes_max_bytes" % name
        with open(wz) as fh:
            advertised = int(fh.read())
        seq = last_seq()
        run = playbook(dict(QUICK, fleetqual_targets=[{"name": "tmpfs", "device": dev, "destroy_data": True,
                                                       "size": "64M"}]))
        seen = probe_lines(name, seq)
        rec, notes = check_no_errors_and_notes(run, name, seen)
        assert {w["target"] for w in rec["workloads"]} == {"tmpfs"} and len(rec["workloads"]) == 6
        # iobench wrote the zeros itself on the loop device: the kernel was never asked to
        # zero a range the tmpfs file cannot zero, so it logged nothing during the run and
        # still advertises it (a note of the look-back may name an earlier loop0)
        assert seen == [] and sum(n["count"] for n in notes) == 0, (seen, notes)
        with open(wz) as fh:
            assert int(fh.read()) == advertised
        with open(os.path.join(base, "tmpfs", "disk.img"), "rb") as fh:
            assert not fh.read(64 << 20).strip(b"\0"), "the working set is zeroed again"


def test_ext4_on_a_tmpfs_loop_used_right_after_mkfs_passes(playbook):
    with tmpfs_loop(512, 600) as (dev, name, base):
        seq = last_seq()
        p = _cmd(["mkfs.ext4", "-q", "-F", dev])     # its defaults: lazy inode table and journal init
        assert p.returncode == 0, p.stderr
        mnt = os.path.join(base, "mnt")
        os.mkdir(mnt)
        p = _cmd(["mount", dev, mnt])
        assert p.returncode == 0, p.stderr
        run = playbook(dict(QUICK, fleetqual_targets=[{"name": "ext4", "path": os.path.join(mnt, "fq")}]))
        seen = probe_lines(name, seq)
        rec, notes = check_no_errors_and_notes(run, name, seen)
        assert {w["target"] for w in rec["workloads"]} == {"ext4"} and len(rec["workloads"]) == 6
        print("kernel probe lines for %s: %s; notes: %s" % (name, seen, notes))
