# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of sysfs (and of the small /proc text files) for the target side:
disks.py (which disks back a path), drives.py (drive identity) and blockdev.py (the
raw-device guard) read through these helpers, never with their own ``open``.

Every function takes the path or ``sysfs_root`` it reads, so the callers' fake trees
under a temporary directory work the same as ``/sys``. Nothing here raises for a missing
or unreadable file: the caller gets its ``default`` (sysfs attributes come and go with
the kernel and the device type).
"""

import os


def read_bytes(path, default=None):
    """The raw bytes of a binary sysfs attribute (``device/vpd_pg80``); ``default`` when
    it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (IOError, OSError):
        return default


def read_text(path, default=None):
    """The stripped text of a sysfs attribute (or /proc file), undecodable bytes replaced;
    ``default`` when it cannot be read."""
    raw = read_bytes(path)
    return default if raw is None else raw.decode("utf-8", "replace").strip()


def read_int(path, default=None):
    """A sysfs attribute holding an integer (``size``, ``ro``, ``queue/rotational``)."""
    value = read_text(path)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def listdir(path):
    """Sorted entries of a directory; [] when it does not exist (no ``holders/`` on old
    kernels, no ``slaves/`` on a whole disk)."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def node_for_devnum(major, minor, sysfs_root="/sys"):
    """The real sysfs node of block device ``major:minor`` (``<sysfs>/dev/block/M:m``
    resolved), or None."""
    link = os.path.join(sysfs_root, "dev", "block", "%d:%d" % (major, minor))
    if not os.path.exists(link):
        return None
    return os.path.realpath(link)


def node_for_rdev(rdev, sysfs_root="/sys"):
    """:func:`node_for_devnum` of a ``st_rdev``."""
    return node_for_devnum(os.major(rdev), os.minor(rdev), sysfs_root)


def node_for_name(name, sysfs_root="/sys"):
    """The real sysfs node of block device ``name`` (``class/block`` or ``block``), or None."""
    for sub in (("class", "block", name), ("block", name)):
        p = os.path.join(sysfs_root, *sub)
        if os.path.exists(p):
            return os.path.realpath(p)
    return None


def is_partition(node):
    """Whether a sysfs block node is a partition (it has a ``partition`` attribute)."""
    return os.path.isfile(os.path.join(node, "partition"))


def partitions(node):
    """Partitions of a sysfs block node: its subdirectories that are partitions."""
    return [e for e in listdir(node) if is_partition(os.path.join(node, e))]


def holders(node):
    """Devices stacked on a sysfs block node (dm, md, bcache): ``holders/``."""
    return listdir(os.path.join(node, "holders"))


def slaves(node):
    """Devices a stacked sysfs block node sits on: ``slaves/``."""
    return listdir(os.path.join(node, "slaves"))
