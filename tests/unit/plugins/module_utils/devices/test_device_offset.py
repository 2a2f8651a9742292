"""iobench ``--device --offset``: a working set that starts inside the device.

On a real loop device with the real binary: two iobench runs at once, each in a region of
its own of one device (as two initiators of one LUN, each in its region), write and read
back with every block verified, no mismatch; the bytes outside both regions are unchanged
(sha256); each run's cleanup zeroes its own region and nothing else; an error or mismatch
names the device's own byte (the region's start added); an offset off the logical block
size or beyond the device, or a size that ends beyond it, is refused before any write."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest
from hypothesis import assume, given, settings, strategies as st

import loopdev
import test_module_iobench
from test_device_regions import loops, sha  # noqa: F401  # pylint: disable=unused-import

iobench_binary = test_module_iobench.iobench_binary   # the fixture

MIB = 1 << 20
pytestmark = pytest.mark.slow


def bench(binary, *args):
    return subprocess.Popen([binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def region_args(dev, offset, size):
    return ["run", "--device", dev, "--offset", str(offset), "--size", str(size), "--mode", "rndrw", "--threads", "2",
            "--block-size", "4096", "--time", "2", "--verify", "--verify-pass", "--prepare", "--seed", str(offset)]


def test_two_runs_in_regions_of_one_device_verify_and_touch_nothing_else(iobench_binary, loops):  # noqa: F811
    work, devs = loops
    dev, backing = devs[0]
    # a second loop device on the same file: the LUN as a second initiator sees it (iobench
    # opens a device O_EXCL, so two runs on one host's device refuse each other)
    with loopdev.attached(backing, direct_io=True) as other:
        _two_initiators(iobench_binary, (dev, other), backing)


def _two_initiators(iobench_binary, devices, backing):
    # the loop's file: 16M blank, then random bytes to 64M (test_device_regions.loops)
    a, b = (2 * MIB, 4 * MIB), (8 * MIB, 4 * MIB)        # (offset, size): 2-6M, 8-12M; 0-2M, 6-8M, 12-64M outside
    outside = [(0, 2 * MIB), (6 * MIB, 8 * MIB), (12 * MIB, 64 * MIB)]
    before = [sha(backing, s, e) for s, e in outside]
    procs = [bench(iobench_binary, *region_args(dev, off, size)) for dev, (off, size) in zip(devices, (a, b))]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    for res, (off, size) in zip(results, (a, b)):
        v = res["verify"]
        assert v["enabled"] and v["checked"] > 0 and (v["corrupt"], v["misplaced"], v["stale"]) == (0, 0, 0), v
        assert res["errors"]["total"] == 0, res["errors"]
        assert loopdev.nonzero(backing, off, off + size)              # prepared and written: its region
    assert [sha(backing, s, e) for s, e in outside] == before
    # each cleanup zeroes its own region only
    for dev, (off, size) in zip(devices, (a, b)):
        r = subprocess.run([iobench_binary, "cleanup", "--device", dev, "--offset", str(off), "--size", str(size)],
                           capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
        assert not loopdev.nonzero(backing, off, off + size)
    assert [sha(backing, s, e) for s, e in outside] == before


def test_a_mismatch_names_the_devices_own_byte(iobench_binary, loops):  # noqa: F811
    """A block of the region overwritten behind iobench's back between a run that wrote the
    region and one that reads it: the mismatch's offset is the device's (the region's start
    plus the block's place in it), and the bytes outside the region were never written."""
    work, devs = loops
    dev, backing = devs[1]
    off, size, bad = 4 * MIB, 2 * MIB, 4 * MIB + 64 * 1024
    common = ["--device", dev, "--offset", str(off), "--size", str(size), "--block-size", "4096", "--time", "1",
              "--verify"]
    r = subprocess.run([iobench_binary, "run", "--mode", "seqwr", "--prepare"] + common, capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    with open(backing, "r+b") as fh:
        fh.seek(bad)
        fh.write(b"\xff" * 4096)
    subprocess.run(["blockdev", "--flushbufs", dev], check=False)
    r = subprocess.run([iobench_binary, "run", "--mode", "seqrd"] + common, capture_output=True, text=True, check=False)
    res = json.loads(r.stdout)
    v = res["verify"]
    assert v["corrupt"] > 0 and {(x["offset"], x["device"]) for x in v["first"]} == {(bad, dev)}, v["first"]
    assert not loopdev.nonzero(backing, 0, off) and not loopdev.nonzero(backing, off + size, 16 * MIB)


@pytest.fixture(scope="module")
def blank_device():
    """One 64M loop device that no test writes (the refusals below write nothing)."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and losetup for a loop device of its own")
    work = tempfile.mkdtemp(prefix="fq-offset-", dir="/var/tmp")
    backing = os.path.join(work, "disk.img")
    with open(backing, "wb") as fh:
        fh.truncate(64 * MIB)
    try:
        with loopdev.attached(backing) as dev:
            yield dev, backing
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 80 * 8), st.integers(0, 80 * 8), st.sampled_from([0, 1, 512, 1000]))
def test_a_region_off_the_device_is_refused_before_any_write(iobench_binary, blank_device, offset_8th, size_8th,
                                                             odd):  # noqa: F811
    """On a 64M device: an offset at or beyond its end or off 512 bytes, or a size that ends
    beyond the device, is refused (exit 2, naming the option) and nothing is written."""
    dev, backing = blank_device
    offset, size = offset_8th * MIB // 8 + odd, size_8th * MIB // 8
    assume(not (offset % 512 == 0 and offset < 64 * MIB and offset + size <= 64 * MIB))
    r = subprocess.run([iobench_binary, "run", "--device", dev, "--offset", str(offset), "--size", str(size),
                        "--mode", "rndwr", "--prepare", "--time", "1"], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and ("--offset" in r.stderr or "--size" in r.stderr), (r.returncode, r.stderr)
    assert not loopdev.nonzero(backing, 0, 64 * MIB)
