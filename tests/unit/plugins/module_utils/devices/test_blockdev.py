"""The raw device guard on real loop devices (root + losetup) and on crafted signature images.

Every refused device keeps its backing file byte-identical (sha256 before and after)."""
import hashlib
import os
import shutil
import subprocess
import sys
import time

import loopdev
import pytest
import unitpaths

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures"))
import blockimg  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev as bd
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import resolve_devices

MiB = 1024 * 1024


def _run_tool(argv):
    p = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), timeout=120, check=False)
    return p.returncode, p.stdout, p.stderr


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


def _need_loop():
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    if shutil.which("losetup") is None:
        pytest.skip("losetup (util-linux) is not installed")


def loop(img, partscan=False):
    """Attach ``img`` to a loop device of this process's own (tests/unit/loopdev.py); always
    detached afterwards."""
    return loopdev.attached(img, partscan=partscan)


@pytest.fixture
def image(tmp_path):
    _need_loop()

    def make(name="disk.img", size=64 * MiB):
        path = str(tmp_path / name)
        with open(path, "wb") as f:
            f.truncate(size)
        return path
    return make


def guard(dev, opts, **kw):
    kw.setdefault("run", _run_tool)
    kw.setdefault("which", shutil.which)
    return bd.check_raw_device(dev, opts, **kw)


# --------------------------------------------------------------------------- real loop devices

def test_blank_loop_accepted(image):
    img = image()
    before = sha256(img)
    with loop(img) as dev:
        r = guard(dev, {"destroy_data": True, "size": "32M"})
        assert r["ok"] is True, r["reasons"]
        assert r["reasons"] == [] and r["signatures"] == []
        assert r["name"] == os.path.basename(dev) and r["size_bytes"] == 64 * MiB
    assert sha256(img) == before


def test_blank_loop_through_a_by_id_style_symlink(image, tmp_path):
    img = image()
    with loop(img) as dev:
        link = str(tmp_path / "by-id-link")
        os.symlink(dev, link)
        r = guard(link, {"destroy_data": True})
        assert r["ok"] is True and r["resolved"] == dev


def test_without_opt_in_refused(image):
    img = image()
    before = sha256(img)
    with loop(img) as dev:
        for opts in ({}, {"destroy_data": False}, {"destroy_data": "yes"}):
            r = guard(dev, opts)
            assert r["ok"] is False
            assert len(r["reasons"]) == 1 and r["reasons"][0].startswith("destroy_data is ")
            assert "must say destroy_data: true" in bd.refusal_message(r)
            assert dev in bd.refusal_message(r)
    assert sha256(img) == before


def test_ext4_refused(image):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    img = image()
    with loop(img) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True, timeout=300)
        before = sha256(img)
        r = guard(dev, {"destroy_data": True})
        assert r["ok"] is False
        assert len(r["reasons"]) == 1 and r["reasons"][0].startswith("%s holds a signature: " % dev)
        assert {"type": "ext2/ext3/ext4", "offset": 0x438, "source": "builtin"} in r["signatures"]
        if shutil.which("blkid"):
            assert any(s["source"] == "blkid" and s["type"] == "ext4" for s in r["signatures"])
        # without blkid and wipefs the built-in reader alone still refuses it
        r2 = guard(dev, {"destroy_data": True}, which=lambda name: None)
        assert r2["ok"] is False and [s["source"] for s in r2["signatures"]] == ["builtin"]
        assert "blkid not installed: built-in signature check only" in r2["notes"]
        assert sha256(img) == before


def test_mounted_ext4_refused(image, tmp_path):
    if shutil.which("mkfs.ext4") is None or shutil.which("mount") is None:
        pytest.skip("mkfs.ext4 / mount not installed")
    img = image()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with loop(img) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True, timeout=300)
        if subprocess.run(["mount", dev, str(mnt)], capture_output=True, timeout=60, check=False).returncode != 0:
            pytest.skip("cannot mount a loop device here")
        try:
            r = guard(dev, {"destroy_data": True})
            assert r["ok"] is False
            assert "%s or something on it is mounted: %s (ext4 on %s)" % (dev, mnt, os.path.basename(dev)) \
                in r["reasons"]
        finally:
            subprocess.run(["umount", str(mnt)], timeout=60, check=False)


def test_partition_table_refused(image):
    img = image()
    if shutil.which("sfdisk"):
        subprocess.run(["sfdisk", "--quiet", img], input="label: dos\nstart=2048, type=83\n", text=True,
                       check=True, capture_output=True, timeout=60)
    else:
        blockimg.write_mbr(img, 64 * MiB)
    before = sha256(img)
    with loop(img, partscan=True) as dev:
        part = os.path.basename(dev) + "p1"
        for attempt in range(50):
            if os.path.exists("/sys/class/block/%s" % part):
                break
            if attempt == 10 and shutil.which("partx"):
                # kernels built without the msdos partition parser: add it with BLKPG
                subprocess.run(["partx", "-a", dev], capture_output=True, timeout=60, check=False)
            time.sleep(0.1)
        r = guard(dev, {"destroy_data": True})
        assert r["ok"] is False
        sig = [x for x in r["reasons"] if "holds a signature" in x]
        assert sig and "dos (MBR partition table or boot sector) at offset 510 (builtin)" in sig[0]
        if shutil.which("partx"):
            assert "%s holds partitions: %s" % (dev, part) in r["reasons"]
    assert sha256(img) == before


def _fake_sysfs_for(dev, root, holders, parts):
    """A sysfs tree where ``dev``'s real MAJ:MIN has partitions and holders (dm, md) the
    kernel would show; the guard reads the real device and this tree."""
    rdev = os.stat(dev).st_rdev
    name = os.path.basename(dev)
    node = os.path.join(root, "devices", "virtual", "block", name)
    os.makedirs(os.path.join(node, "holders"))
    with open(os.path.join(node, "size"), "w", encoding="utf-8") as f:
        f.write("%d\n" % (64 * MiB // 512))
    for h in holders:
        os.symlink("../../" + h, os.path.join(node, "holders", h))
    for i, (pname, pholders) in enumerate(parts):
        pn = os.path.join(node, pname)
        os.makedirs(os.path.join(pn, "holders"))
        with open(os.path.join(pn, "partition"), "w", encoding="utf-8") as f:
            f.write("%d\n" % (i + 1))
        for h in pholders:
            os.symlink("../../../" + h, os.path.join(pn, "holders", h))
    os.makedirs(os.path.join(root, "dev", "block"))
    os.symlink(os.path.relpath(node, os.path.join(root, "dev", "block")),
               os.path.join(root, "dev", "block", "%d:%d" % (os.major(rdev), os.minor(rdev))))
    return root


def test_holders_refused(image, tmp_path):
    img = image()
    before = sha256(img)
    empty = tmp_path / "mountinfo"
    empty.write_text("")
    with loop(img) as dev:
        sysfs = _fake_sysfs_for(dev, str(tmp_path / "sys"), ["dm-7"], [(os.path.basename(dev) + "p1", ["md9"])])
        r = guard(dev, {"destroy_data": True}, sysfs_root=sysfs, mountinfo_path=str(empty),
                  which=lambda n: None)
        p1 = os.path.basename(dev) + "p1"
        assert r["reasons"] == ["%s holds partitions: %s" % (dev, p1),
                                "%s has holders (something is stacked on it): dm-7, md9 (on %s)" % (dev, p1)]
    assert sha256(img) == before


def test_serial_mismatch_refused(image):
    img = image()
    before = sha256(img)
    with loop(img) as dev:
        # a loop device has no serial: a serial: on the target cannot be confirmed
        r = guard(dev, {"destroy_data": True, "serial": "S64GNE0R601234"})
        assert r["ok"] is False and len(r["reasons"]) == 1
        assert r["reasons"][0].startswith("serial 'S64GNE0R601234' was given but the serial of %s cannot be read"
                                          % os.path.basename(dev))
        # with the drive's serial known (smartctl's), a different one is refused, the same one accepted
        r = guard(dev, {"destroy_data": True, "serial": "S64GNE0R601234"}, drive_serial="S64GNE0R609876")
        assert r["reasons"] == ["serial mismatch: the target says 'S64GNE0R601234' but %s has serial "
                                "'S64GNE0R609876'" % os.path.basename(dev)]
        r = guard(dev, {"destroy_data": True, "serial": "s64gne0r609876 "}, drive_serial="S64GNE0R609876")
        assert r["ok"] is True
    assert sha256(img) == before


def test_size_larger_than_device_refused(image):
    img = image()
    with loop(img) as dev:
        r = guard(dev, {"destroy_data": True, "size": "1G"})
        assert r["reasons"] == ["size 1G (1073741824 bytes) is larger than %s (64.0 MiB, 67108864 bytes)" % dev]
        r = guard(dev, {"destroy_data": True, "size": "12X"})
        assert r["ok"] is False and r["reasons"][0].startswith("size: unknown size suffix")


def test_swap_signature_refused(image):
    if shutil.which("mkswap") is None:
        pytest.skip("mkswap is not installed")
    img = image()
    with loop(img) as dev:
        subprocess.run(["mkswap", dev], check=True, capture_output=True, timeout=60)
        before = sha256(img)
        r = guard(dev, {"destroy_data": True})
        assert r["ok"] is False
        assert any(s["type"] == "swap" and s["source"] == "builtin" for s in r["signatures"])
        assert sha256(img) == before


def test_swaps_file_entry_refused(image, tmp_path):
    """/proc/swaps naming the device (read from a copy: swapon is not needed to test the parsing)."""
    img = image()
    with loop(img) as dev:
        swaps = tmp_path / "swaps"
        swaps.write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                         "%s                              partition\t65532\t\t0\t\t-2\n" % dev)
        r = guard(dev, {"destroy_data": True}, swaps_path=str(swaps))
        assert r["reasons"] == ["%s or something on it is used as swap: %s" % (dev, dev)]


def test_device_backing_root_refused():
    if os.geteuid() != 0:
        pytest.skip("needs root to open the root device")
    r = resolve_devices("/")
    if not r["devices"]:
        pytest.skip("root fs has no block device here: %s" % r["reason"])
    dev = "/dev/" + r["chain"][0]
    if not os.path.exists(dev):
        pytest.skip("%s has no device node here" % dev)
    res = guard(dev, {"destroy_data": True})
    assert res["ok"] is False
    assert "%s backs the root filesystem (/ resolves to %s)" % (dev, " -> ".join(r["chain"])) in res["reasons"]
    assert any(x.startswith("%s or something on it is mounted: / (" % dev) for x in res["reasons"])
    # the whole disk under it, when / is on a partition, is refused too
    whole = "/dev/" + r["devices"][0]
    if whole != dev and os.path.exists(whole):
        res = guard(whole, {"destroy_data": True})
        assert any("backs the root filesystem" in x for x in res["reasons"])


def test_not_a_block_device_and_missing(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"\0" * 4096)
    r = bd.check_raw_device(str(f), {"destroy_data": True})
    assert r["reasons"] == ["%s is not a block device" % f]
    r = bd.check_raw_device(str(tmp_path / "missing"), {"destroy_data": True})
    assert r["reasons"] == ["%s does not exist (No such file or directory)" % (tmp_path / "missing")]
    r = bd.check_raw_device("sdb", {"destroy_data": True})
    assert r["reasons"] == ["device must be an absolute path like /dev/disk/by-id/..., got 'sdb'"]
    assert f.read_bytes() == b"\0" * 4096


def test_detached_loop_has_no_capacity():
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    dev = loopdev.unbound_device()        # of this process's range: no other stream binds it
    r = bd.check_raw_device(dev, {"destroy_data": True}, which=lambda n: None)
    if r["size_bytes"] != 0:
        pytest.skip("%s got attached meanwhile" % dev)
    assert "%s has no capacity (0 bytes: a detached loop device or no medium)" % dev in r["reasons"]


# --------------------------------------------------------------------------- built-in magic reader

def _img(tmp_path, writes, size=4 * MiB):
    path = str(tmp_path / "sig.img")
    with open(path, "wb") as f:
        f.truncate(size)
        for off, data in writes:
            f.seek(off)
            f.write(data)
    return path


SIZE = 4 * MiB


@pytest.mark.parametrize("writes,expected", [
    ([(0x438, b"\x53\xef")], ("ext2/ext3/ext4", 0x438)),
    ([(0, b"XFSB")], ("xfs", 0)),
    ([(0x10040, b"_BHRfS_M")], ("btrfs", 0x10040)),
    ([(512, b"EFI PART")], ("gpt", 512)),
    ([(SIZE - 512, b"EFI PART")], ("gpt (backup header)", SIZE - 512)),
    ([(512, b"LABELONE"), (512 + 24, b"LVM2 001")], ("LVM2_member", 536)),
    ([(1024, b"LABELONE")], ("LVM2_member", 1024)),
    ([(4096, bd.MD_MAGIC)], ("linux_raid_member (md 1.2)", 4096)),
    ([(0, bd.MD_MAGIC)], ("linux_raid_member (md 1.1)", 0)),
    ([((SIZE - 8192) & ~0xFFF, bd.MD_MAGIC)], ("linux_raid_member (md 1.0)", (SIZE - 8192) & ~0xFFF)),
    ([((SIZE & ~0xFFFF) - 0x10000, bd.MD_MAGIC)], ("linux_raid_member (md 0.90)", (SIZE & ~0xFFFF) - 0x10000)),
    ([(4086, b"SWAPSPACE2")], ("swap", 4086)),
    ([(0, b"LUKS\xba\xbe")], ("crypto_LUKS", 0)),
    ([(510, b"\x55\xaa")], ("dos (MBR partition table or boot sector)", 510)),
    ([(0x52, b"FAT32   "), (510, b"\x55\xaa")], ("vfat", 0x52)),
    ([(0, b"bluestore block device")], ("ceph_bluestore", 0)),
])
def test_builtin_magic(tmp_path, writes, expected):
    path = _img(tmp_path, writes)
    found = [(s["type"], s["offset"]) for s in bd.scan_magic(path)]
    assert expected in found
    assert all(s["source"] == "builtin" for s in bd.scan_magic(path))


def test_builtin_magic_blank_and_vfat_not_double_reported(tmp_path):
    assert bd.scan_magic(_img(tmp_path, [])) == []
    path = _img(tmp_path, [(0x52, b"FAT32   "), (510, b"\x55\xaa")])
    assert [s["type"] for s in bd.scan_magic(path)] == ["vfat"]


def test_tool_output_parsers():
    assert bd.parse_blkid_export("DEVNAME=/dev/loop3\nUUID=abc\nVERSION=1.0\nTYPE=ext4\nUSAGE=filesystem\n") == [
        {"type": "ext4", "offset": None, "source": "blkid", "usage": "filesystem", "label": None, "uuid": "abc"}]
    assert bd.parse_blkid_export("DEVNAME=/dev/loop3\nPTUUID=1a2b\nPTTYPE=gpt\n") == [
        {"type": "gpt partition table", "offset": None, "source": "blkid"}]
    wj = ('{"signatures": [{"device":"loop3", "offset":"0x438", "type":"ext4", "uuid":"x", "label":null},'
          '{"device":"loop3", "offset":"0x1fe", "type":"dos", "uuid":null, "label":null}]}')
    assert [(s["type"], s["offset"]) for s in bd.parse_wipefs_json(wj)] == [("ext4", 0x438), ("dos", 510)]
    assert bd.parse_wipefs_json("") == []


def test_active_swap_refused(image):
    if shutil.which("mkswap") is None or shutil.which("swapon") is None:
        pytest.skip("mkswap / swapon not installed")
    img = image()
    with loop(img) as dev:
        subprocess.run(["mkswap", dev], check=True, capture_output=True, timeout=60)
        p = subprocess.run(["swapon", dev], capture_output=True, text=True, timeout=60, check=False)
        if p.returncode != 0:
            pytest.skip("swapon refused here: %s" % p.stderr.strip())
        try:
            r = guard(dev, {"destroy_data": True})
            assert "%s or something on it is used as swap: %s" % (dev, dev) in r["reasons"]
        finally:
            subprocess.run(["swapoff", dev], capture_output=True, timeout=120, check=False)
