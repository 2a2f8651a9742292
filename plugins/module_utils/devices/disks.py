# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find the disks (as iostat names them) that back a directory.

Walk: ``st_dev`` of the directory (``st_rdev`` when the path is itself a block device
node, a raw device target) -> ``<sysfs>/dev/block/MAJ:MIN`` ->

* a partition (``partition`` file present) resolves to its parent disk;
* a stacked device with ``slaves/`` entries (dm: LVM, crypt, multipath; md
  RAID) resolves to each slave, recursively;
* anything else (a whole disk, a loop device, nvme namespace) is a leaf: iostat
  reports it under that name (``vda``, ``loop0``, ``nvme0n1``).

A filesystem whose ``st_dev`` major is 0 has no block device of its own
(tmpfs, overlay, nfs, and btrfs, which uses anonymous device numbers). For
those we look at the mount source in ``/proc/self/mountinfo``: when it is a
block device (btrfs on ``/dev/sdb``) we walk from there, otherwise we return no
devices and say why.

Everything takes ``sysfs_root`` / ``mountinfo_path`` so it can be tested on a
fake tree.
"""

import os
import stat

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import sysfs


def walk_sysfs(node, sysfs_root="/sys", _seen=None):
    """Walk from a sysfs block node (a real path) to the leaf disks.

    Returns ``(devices, chain)``: ``devices`` the leaf names in discovery
    order without duplicates; ``chain`` every name visited, in order.
    """
    if _seen is None:
        _seen = set()
    devices, chain = [], []
    name = os.path.basename(node)
    if name in _seen:
        return devices, chain
    _seen.add(name)
    chain.append(name)

    if sysfs.is_partition(node):
        parent = os.path.dirname(node)
        d, c = walk_sysfs(parent, sysfs_root, _seen)
        devices.extend(d)
        chain.extend(c)
        return devices, chain

    slaves_dir = os.path.join(node, "slaves")
    slaves = sysfs.slaves(node)
    if slaves:
        for slave in slaves:
            snode = os.path.realpath(os.path.join(slaves_dir, slave))
            if not os.path.isdir(snode):
                snode = sysfs.node_for_name(slave, sysfs_root)
            if snode is None:
                continue
            d, c = walk_sysfs(snode, sysfs_root, _seen)
            for dev in d:
                if dev not in devices:
                    devices.append(dev)
            chain.extend(c)
        return devices, chain

    devices.append(name)
    return devices, chain


def parse_mountinfo(text):
    """Parse /proc/self/mountinfo text into a list of dicts."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if " - " not in line or len(parts) < 10:
            continue
        sep = parts.index("-")
        majmin = parts[2].split(":")
        mounts.append({
            "major": int(majmin[0]),
            "minor": int(majmin[1]),
            "mount_point": parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\"),
            "fstype": parts[sep + 1],
            "source": parts[sep + 2] if len(parts) > sep + 2 else "",
        })
    return mounts


def mount_for_path(path, mountinfo_text):
    """The mountinfo entry whose mount point is the longest prefix of ``path``
    (the last one mounted wins when stacked)."""
    path = os.path.realpath(path)
    best = None
    for m in parse_mountinfo(mountinfo_text):
        mp = m["mount_point"]
        if path == mp or path.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) >= len(best["mount_point"]):
                best = m
    return best


def resolve_devices(path, sysfs_root="/sys", mountinfo_path="/proc/self/mountinfo", st_dev=None):
    """Resolve the disks backing ``path``.

    Returns a dict::

        {"path": ..., "st_dev": "254:1", "fstype": "ext4", "source": "/dev/vda1",
         "devices": ["vda"], "chain": ["vda1", "vda"], "reason": None}

    ``devices`` is empty (and ``reason`` says why) when no block device backs the
    path. Never raises for a missing block device; raises OSError only when
    ``path`` itself cannot be stat'ed (and ``st_dev`` was not given).
    """
    if st_dev is None:
        st = os.stat(path)
        # a block device node (a raw device target) is measured itself: its own major:minor,
        # not the st_dev of the filesystem (devtmpfs) that holds the node
        st_dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    major, minor = os.major(st_dev), os.minor(st_dev)
    result = {"path": path, "st_dev": "%d:%d" % (major, minor), "fstype": None,
              "source": None, "devices": [], "chain": [], "reason": None}

    mount = None
    mi_text = sysfs.read_text(mountinfo_path, "") if mountinfo_path else ""
    if mi_text:
        mount = mount_for_path(path, mi_text)
        if mount:
            result["fstype"] = mount["fstype"]
            result["source"] = mount["source"]

    node = None
    if major != 0:
        node = sysfs.node_for_devnum(major, minor, sysfs_root)
        if node is None:
            result["reason"] = ("device %d:%d of %s has no entry under %s/dev/block"
                                % (major, minor, path, sysfs_root))
            return result
    else:
        src = mount["source"] if mount else ""
        if src.startswith("/dev/") and os.path.exists(src):
            try:
                rdev = os.stat(src).st_rdev
                node = sysfs.node_for_rdev(rdev, sysfs_root)
            except OSError:
                node = None
        if node is None:
            result["reason"] = (
                "%s is on a filesystem without a block device of its own (st_dev %d:%d, fstype %s, "
                "source %s): no disk to sample" % (path, major, minor,
                                                   result["fstype"] or "unknown", src or "unknown"))
            return result

    devices, chain = walk_sysfs(node, sysfs_root)
    result["devices"] = devices
    result["chain"] = chain
    if not devices:
        result["reason"] = "walking %s found no leaf disk" % node
    return result
