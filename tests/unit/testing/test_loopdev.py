"""The loop devices of the tests' own (tests/unit/loopdev.py) on real devices: a process binds
only numbers of its range, a number someone else holds is skipped, and a detach touches only
a device this process bound whose backing file is still the image it bound. Every device a
test binds here is detached in its ``finally``. The tests take the top 8 numbers of this
process's own range (the session's long-lived devices take its lowest numbers first)."""
import os
import shutil
import subprocess
import threading

import pytest

import loopdev

ROOT_WHY = "loop devices need root and losetup (util-linux)"
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup") or not os.path.exists(
    "/dev/loop-control"), reason=ROOT_WHY)


@pytest.fixture
def own_range(monkeypatch):
    """(first, last): the top 8 numbers of this process's range, as the range in force."""
    first, last = loopdev.loop_range()
    first = max(first, last - 7)
    monkeypatch.setenv(loopdev.RANGE_ENV, "%d-%d" % (first, last))
    return first, last


def image(tmp_path, name, size=1 << 20):
    path = os.path.realpath(str(tmp_path / name))
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def number(dev):
    return int(os.path.basename(dev)[len("loop"):])


def losetup(*argv):
    return subprocess.run(["losetup"] + list(argv), capture_output=True, text=True, timeout=60, check=False)


def plain_detach(dev, img):
    """Undo a test's own plain ``losetup DEV IMG``: only while DEV is still backed by IMG."""
    if loopdev.backing_file(dev) == os.path.realpath(img):
        assert losetup("-d", dev).returncode == 0


def test_the_range_comes_from_the_environment_or_the_pid(monkeypatch):
    monkeypatch.setenv(loopdev.RANGE_ENV, "200-263")
    assert loopdev.loop_range() == (200, 263)
    for bad in ("200", "263-200", "a-b", "-1-5"):
        monkeypatch.setenv(loopdev.RANGE_ENV, bad)
        with pytest.raises(ValueError, match="FLEETQUAL_LOOP_RANGE=.*FIRST-LAST"):
            loopdev.loop_range()
    monkeypatch.delenv(loopdev.RANGE_ENV)
    first = 512 + 64 * (os.getpid() % 64)
    assert loopdev.loop_range() == (first, first + 63)


def test_detach_of_a_device_never_attached_does_nothing():
    assert loopdev.detach("/dev/loop0") is False
    assert loopdev.detach("/dev/loop0", "/nonexistent.img") is False


@needs_root
def test_attach_takes_numbers_of_its_range_and_two_get_two_devices(tmp_path, own_range):
    a, b = image(tmp_path, "a.img"), image(tmp_path, "b.img")
    devs = []
    try:
        devs.append(loopdev.attach(a))
        devs.append(loopdev.attach(b, read_only=True))
        assert devs[0] != devs[1]
        assert all(own_range[0] <= number(d) <= own_range[1] for d in devs), (devs, own_range)
        assert [loopdev.backing_file(d) for d in devs] == [a, b]
        with open("/sys/block/%s/ro" % os.path.basename(devs[1])) as fh:
            assert fh.read().strip() == "1"
    finally:
        detached = [loopdev.detach(d) for d in devs]
    assert detached == [True, True]
    assert [loopdev.backing_file(d) for d in devs] == [None, None]


@needs_root
def test_a_number_someone_else_bound_is_skipped_and_never_detached(tmp_path, own_range):
    theirs_img, ours_img = image(tmp_path, "theirs.img"), image(tmp_path, "ours.img")
    theirs = loopdev.unbound_device()
    assert own_range[0] <= number(theirs) <= own_range[1]
    ours = None
    try:
        p = losetup(theirs, theirs_img)          # someone else's: bound without loopdev
        assert p.returncode == 0, p.stderr
        ours = loopdev.attach(ours_img)
        assert ours != theirs and own_range[0] <= number(ours) <= own_range[1]
        assert loopdev.detach(theirs) is False
        assert loopdev.detach(theirs, theirs_img) is False
        assert loopdev.backing_file(theirs) == theirs_img
    finally:
        if ours:
            loopdev.detach(ours, ours_img)
        plain_detach(theirs, theirs_img)


@needs_root
def test_detach_refuses_a_device_whose_backing_file_changed(tmp_path, own_range):
    """Our device auto-cleared, then the same number bound to another image (by another
    stream): the stale name is not detached."""
    old, new = image(tmp_path, "old.img"), image(tmp_path, "new.img")
    dev = loopdev.attach(old)
    try:
        assert losetup("-d", dev).returncode == 0
        p = losetup(dev, new)
        assert p.returncode == 0, p.stderr
        assert loopdev.detach(dev, old) is False
        assert loopdev.backing_file(dev) == new
        assert loopdev.detach(dev) is False          # and the stale record is gone
    finally:
        plain_detach(dev, new)
        loopdev.detach(dev, old)


@needs_root
def test_detach_checks_the_image_and_takes_a_cleared_or_deleted_one(tmp_path, own_range):
    a, b = image(tmp_path, "a.img"), image(tmp_path, "b.img")
    dev = loopdev.attach(a)
    try:
        assert loopdev.detach(dev, b) is False       # not the image this device was bound to
        assert loopdev.backing_file(dev) == a
        os.unlink(a)
        assert loopdev.backing_file(dev) == a + " (deleted)"
        assert loopdev.detach(dev, a) is True
        assert loopdev.backing_file(dev) is None
    finally:
        loopdev.detach(dev)
    dev = loopdev.attach(b)
    try:
        assert losetup("-d", dev).returncode == 0    # cleared behind our back: nothing left to do
        assert loopdev.detach(dev, b) is True
    finally:
        loopdev.detach(dev)


@needs_root
def test_threads_racing_for_one_number_one_wins_the_other_is_told_the_range_is_exhausted(tmp_path, monkeypatch):
    first, last = loopdev.loop_range()
    monkeypatch.setenv(loopdev.RANGE_ENV, "%d-%d" % (max(first, last - 7), last))
    n = number(loopdev.unbound_device())
    monkeypatch.setenv(loopdev.RANGE_ENV, "%d-%d" % (n, n))
    imgs = [image(tmp_path, "race%d.img" % i) for i in range(2)]
    start = threading.Barrier(2)
    got = [None, None]

    def race(i):
        start.wait()
        try:
            got[i] = loopdev.attach(imgs[i])
        except loopdev.LoopError as exc:
            got[i] = exc

    threads = [threading.Thread(target=race, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    won = [i for i in range(2) if isinstance(got[i], str)]
    try:
        assert len(won) == 1, got
        lost = got[1 - won[0]]
        assert isinstance(lost, loopdev.RangeExhausted), lost
        assert "no free loop device in /dev/loop%d..%d" % (n, n) in str(lost)
        assert got[won[0]] == "/dev/loop%d" % n and loopdev.backing_file(got[won[0]]) == imgs[won[0]]
    finally:
        for i in won:
            loopdev.detach(got[i], imgs[i])


@needs_root
def test_unbound_device_is_made_in_the_range_and_left_unbound(monkeypatch):
    first, last = loopdev.loop_range()
    monkeypatch.setenv(loopdev.RANGE_ENV, "%d-%d" % (last, last))
    if loopdev.backing_file("/dev/loop%d" % last) is not None:
        pytest.skip("/dev/loop%d is bound already" % last)
    dev = loopdev.unbound_device()
    assert dev == "/dev/loop%d" % last and os.path.exists(dev)
    assert loopdev.backing_file(dev) is None


@needs_root
def test_loop_ext4_is_over_a_tmpfs_with_direct_io_by_default(own_range):
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    with loopdev.loop_ext4(16, prefix="fq-loopdev-") as lp:
        assert lp["image"].startswith("/dev/shm/") and loopdev.backing_file(lp["dev"]) == lp["image"]
        assert own_range[0] <= number(lp["dev"]) <= own_range[1]
        assert losetup("-l", "-n", "-O", "DIO", lp["dev"]).stdout.strip() == "1"
    assert loopdev.backing_file(lp["dev"]) is None and not os.path.exists(lp["base"])
