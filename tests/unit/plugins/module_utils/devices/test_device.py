"""Device resolution: fake sysfs tree, the real root fs, a real partitioned loop device and dm."""
import os
import shutil
import time
import subprocess
import sys
import tempfile
import uuid

import loopdev
import pytest
import unitpaths

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures"))
import blockimg  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import (
    mount_for_path,
    parse_mountinfo,
    resolve_devices,
    walk_sysfs,
)


# --------------------------------------------------------------------------- fake sysfs

def _mk(path, content=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content or "")


def _blockdev(sysfs, rel, devnum, partition=False):
    """Create <sysfs>/devices/<rel> with dev (and partition) files and the
    dev/block/MAJ:MIN and class/block/NAME symlinks, as the kernel lays them out."""
    node = os.path.join(sysfs, "devices", rel)
    os.makedirs(node, exist_ok=True)
    _mk(os.path.join(node, "dev"), devnum + "\n")
    if partition:
        _mk(os.path.join(node, "partition"), "1\n")
    for d, name in ((os.path.join(sysfs, "dev", "block"), devnum),
                    (os.path.join(sysfs, "class", "block"), os.path.basename(rel))):
        os.makedirs(d, exist_ok=True)
        os.symlink(os.path.relpath(node, d), os.path.join(d, name))
    return node


def _slave(holder_node, slave_node):
    d = os.path.join(holder_node, "slaves")
    os.makedirs(d, exist_ok=True)
    os.symlink(os.path.relpath(slave_node, d), os.path.join(d, os.path.basename(slave_node)))


@pytest.fixture
def fake_sysfs(tmp_path):
    s = str(tmp_path / "sys")
    # sda with partitions sda1, sda2; sdb whole; nvme0n1 with p1
    sda = _blockdev(s, "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", "8:0")
    sda1 = _blockdev(s, "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda1", "8:1", True)
    sda2 = _blockdev(s, "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2", "8:2", True)
    sdb = _blockdev(s, "pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0/block/sdb", "8:16")
    _blockdev(s, "pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1", "259:0")
    nvp1 = _blockdev(s, "pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/nvme0n1p1", "259:1", True)
    # md0 = raid1 over sda2 + sdb; dm-0 (LVM) on md0; dm-1 (crypt) on dm-0; dm-2 striped over sda1 + nvme0n1p1
    md0 = _blockdev(s, "virtual/block/md0", "9:0")
    _slave(md0, sda2)
    _slave(md0, sdb)
    dm0 = _blockdev(s, "virtual/block/dm-0", "253:0")
    _slave(dm0, md0)
    dm1 = _blockdev(s, "virtual/block/dm-1", "253:1")
    _slave(dm1, dm0)
    dm2 = _blockdev(s, "virtual/block/dm-2", "253:2")
    _slave(dm2, sda1)
    _slave(dm2, nvp1)
    # loop3 with partition loop3p1
    _blockdev(s, "virtual/block/loop3", "7:3")
    _blockdev(s, "virtual/block/loop3/loop3p1", "259:7", True)
    assert sda
    return s


@pytest.mark.parametrize("devnum,devices,chain", [
    ((8, 0), ["sda"], ["sda"]),
    ((8, 1), ["sda"], ["sda1", "sda"]),
    ((259, 1), ["nvme0n1"], ["nvme0n1p1", "nvme0n1"]),
    ((9, 0), ["sda", "sdb"], ["md0", "sda2", "sda", "sdb"]),
    ((253, 1), ["sda", "sdb"], ["dm-1", "dm-0", "md0", "sda2", "sda", "sdb"]),
    ((253, 2), ["nvme0n1", "sda"], ["dm-2", "nvme0n1p1", "nvme0n1", "sda1", "sda"]),
    ((7, 3), ["loop3"], ["loop3"]),
    ((259, 7), ["loop3"], ["loop3p1", "loop3"]),
])
def test_fake_sysfs_walk(fake_sysfs, devnum, devices, chain):
    r = resolve_devices("/", sysfs_root=fake_sysfs, mountinfo_path=None, st_dev=os.makedev(*devnum))
    assert r["devices"] == devices
    assert r["chain"] == chain
    assert r["reason"] is None
    assert r["st_dev"] == "%d:%d" % devnum


def test_fake_sysfs_unknown_devnum(fake_sysfs):
    r = resolve_devices("/x", sysfs_root=fake_sysfs, mountinfo_path=None, st_dev=os.makedev(65, 9))
    assert r["devices"] == []
    assert "65:9" in r["reason"]


def test_walk_sysfs_direct_node(fake_sysfs):
    node = os.path.realpath(os.path.join(fake_sysfs, "class", "block", "dm-0"))
    assert walk_sysfs(node, fake_sysfs) == (["sda", "sdb"], ["dm-0", "md0", "sda2", "sda", "sdb"])


MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:26 / /tmp rw - tmpfs tmpfs rw,size=1024k
31 22 0:40 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/a
32 22 0:41 / /mnt/nfs rw - nfs4 srv:/export rw
33 22 0:42 / /mnt/with\\040space rw - ext4 /dev/vdb rw
"""


def test_mountinfo_parse_and_lookup():
    ms = parse_mountinfo(MOUNTINFO)
    assert [m["fstype"] for m in ms] == ["ext4", "proc", "tmpfs", "overlay", "nfs4", "ext4"]
    assert mount_for_path("/tmp/a/b", MOUNTINFO)["fstype"] == "tmpfs"
    assert mount_for_path("/tmpx", MOUNTINFO)["fstype"] == "ext4"
    assert mount_for_path("/mnt/with space/f", MOUNTINFO)["source"] == "/dev/vdb"


@pytest.mark.parametrize("path,st_dev,fstype", [
    ("/tmp/fq", (0, 26), "tmpfs"),
    ("/var/lib/docker/overlay2/x/merged/data", (0, 40), "overlay"),
    ("/mnt/nfs/data", (0, 41), "nfs4"),
])
def test_major_zero_filesystems_say_why(tmp_path, fake_sysfs, path, st_dev, fstype):
    mi = tmp_path / "mountinfo"
    mi.write_text(MOUNTINFO)
    r = resolve_devices(path, sysfs_root=fake_sysfs, mountinfo_path=str(mi), st_dev=os.makedev(*st_dev))
    assert r["devices"] == [] and r["chain"] == []
    assert r["fstype"] == fstype
    assert "without a block device" in r["reason"] and fstype in r["reason"]


# --------------------------------------------------------------------------- real devices

def test_real_root_filesystem():
    r = resolve_devices("/")
    st = os.stat("/")
    assert r["st_dev"] == "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    if os.major(st.st_dev) == 0:
        pytest.skip("root fs has no block device here (%s)" % r["reason"])
    assert r["devices"], r
    # every leaf is a disk iostat knows: present in /proc/diskstats, not a partition
    names = set(line.split()[2] for line in open("/proc/diskstats"))
    for d in r["devices"]:
        assert d in names
        assert not os.path.exists("/sys/class/block/%s/partition" % d)
    if os.path.exists("/sys/block/vda") and r["chain"][0].startswith("vda"):
        assert r["devices"] == ["vda"]


def test_real_tmpfs_no_device(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting tmpfs needs root")
    mnt = str(tmp_path / "tmpfs")
    os.mkdir(mnt)
    if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt]) != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        r = resolve_devices(mnt)
        assert r["devices"] == []
        assert r["fstype"] == "tmpfs"
        assert "without a block device" in r["reason"]
    finally:
        subprocess.call(["umount", mnt])


def _need_root_tools(*tools):
    if os.geteuid() != 0:
        pytest.skip("needs root (losetup/mount)")
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip("%s not installed" % t)


def _run(*argv, **kw):
    return subprocess.run(list(argv), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw).stdout.strip()


@pytest.fixture
def loop_image():
    _need_root_tools("losetup", "mkfs.ext4", "mount")
    d = tempfile.mkdtemp(prefix="fq-dev-", dir="/var/tmp")
    img = os.path.join(d, "disk.img")
    with open(img, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    yield d, img
    shutil.rmtree(d, ignore_errors=True)


def test_real_partitioned_loop(loop_image):
    d, img = loop_image
    if shutil.which("sfdisk"):
        _run("sfdisk", "--quiet", img, input="label: dos\nstart=2048, type=83\n")
    else:
        blockimg.write_mbr(img, 64 * 1024 * 1024)
    loop = loopdev.attach_or_skip(img, partscan=True)
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    mounted = False
    try:
        part = loop + "p1"
        for attempt in range(40):
            if os.path.exists(part):
                break
            if attempt == 10 and shutil.which("partx"):
                # kernels built without the msdos partition parser: add it with BLKPG
                subprocess.call(["partx", "-a", loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.1)
        if not os.path.exists(part):
            pytest.skip("partition node %s did not appear (no partition scan, no partx, no devtmpfs?)" % part)
        _run("mkfs.ext4", "-q", "-F", part)
        _run("mount", part, mnt)
        mounted = True
        testdir = os.path.join(mnt, "fq")
        os.mkdir(testdir)
        r = resolve_devices(testdir)
        name = os.path.basename(loop)
        assert r["devices"] == [name]
        assert r["chain"] == [name + "p1", name]
        assert r["fstype"] == "ext4"
        assert r["source"] == part
    finally:
        if mounted:
            subprocess.call(["umount", mnt])
        loopdev.detach(loop, img)


def test_real_dm_linear_over_loop(loop_image):
    _need_root_tools("dmsetup")
    d, img = loop_image
    loop = loopdev.attach_or_skip(img)
    name = "fqtest-%s" % uuid.uuid4().hex[:8]
    created = mounted = False
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    try:
        sectors = 64 * 1024 * 1024 // 512
        try:
            _run("dmsetup", "create", name, "--table", "0 %d linear %s 0" % (sectors, loop))
        except subprocess.CalledProcessError as e:
            pytest.skip("dmsetup create failed (no device-mapper in this kernel?): %s"
                        % (e.stderr.strip().splitlines() or [""])[0])
        created = True
        dmdev = "/dev/mapper/" + name
        if not os.path.exists(dmdev):
            _run("dmsetup", "mknodes", name)
        _run("mkfs.ext4", "-q", "-F", dmdev)
        _run("mount", dmdev, mnt)
        mounted = True
        r = resolve_devices(mnt)
        lname = os.path.basename(loop)
        assert r["devices"] == [lname]
        assert r["chain"][0].startswith("dm-") and r["chain"][-1] == lname
        assert len(r["chain"]) == 2
    finally:
        if mounted:
            subprocess.call(["umount", mnt])
        if created:
            subprocess.call(["dmsetup", "remove", "--retry", name])
        loopdev.detach(loop, img)


def test_real_loop_device_node_resolves_to_itself(loop_image):
    """A raw device target: the path is the block device node itself, so the device is its
    own major:minor (st_rdev), not devtmpfs's st_dev that holds the node."""
    _d, img = loop_image
    loop = loopdev.attach_or_skip(img)
    try:
        st = os.stat(loop)
        r = resolve_devices(loop)
        name = os.path.basename(loop)
        assert r["st_dev"] == "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        assert r["st_dev"] != "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
        assert r["devices"] == [name] and r["chain"] == [name], r
        assert r["reason"] is None
    finally:
        loopdev.detach(loop, img)
