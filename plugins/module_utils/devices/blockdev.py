# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The raw block device guard: may the benchmark write over this device?

``check_raw_device(device, options)`` only reads. It returns every reason to
refuse (an empty list means the device may be written), in this order:

1. the target does not say ``destroy_data: true`` (the other checks still
   run, so the report says everything that is wrong at once);
2. the path does not exist or is not a block device (``/dev/disk/by-id``
   symlinks are resolved);
3. ``size:`` larger than the device;
4. ``serial:`` given and not the drive's serial (or the serial is unreadable); a SAN LUN
   (``wwid:``, ``alias:``, ``expected_paths:``) that is not a dm-multipath map of that WWID
   or alias, or has fewer usable paths than expected (multipath.py);
5. it backs the root filesystem (``/`` resolved through disks.py);
6. it, a partition of it, or a device stacked on it is mounted
   (``/proc/self/mountinfo``);
7. it, or something on it, is used as swap (``/proc/swaps``);
8. it holds partitions;
9. it or a partition has holders (dm, md, bcache...: ``/sys/class/block/X/holders``);
10. a signature: filesystem, RAID, LVM, partition table, swap, LUKS..., seen
    by ``blkid -p`` and ``wipefs --no-act`` when they are installed, AND by a
    built-in reader of the well-known magic offsets, so it works without them.
"""

from __future__ import annotations

import json
import os
import stat
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import multipath, sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import parse_mountinfo, resolve_devices
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import identity
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size, parse_size

MD_MAGIC = b"\xfc\x4e\x2b\xa9"  # 0xa92b4efc little-endian

# (type, offset from the start, magic bytes). Offsets as blkid's probes use them.
HEAD_MAGICS = (
    ("ext2/ext3/ext4", 0x438, b"\x53\xef"),
    ("xfs", 0, b"XFSB"),
    ("btrfs", 0x10040, b"_BHRfS_M"),
    ("gpt", 512, b"EFI PART"),
    ("gpt", 4096, b"EFI PART"),
    ("LVM2_member", 512 + 24, b"LVM2 001"),
    ("LVM2_member", 0 + 24, b"LVM2 001"),
    ("LVM2_member", 1024 + 24, b"LVM2 001"),
    ("LVM2_member", 1536 + 24, b"LVM2 001"),
    ("linux_raid_member (md 1.1)", 0, MD_MAGIC),
    ("linux_raid_member (md 1.2)", 4096, MD_MAGIC),
    ("swap", 4096 - 10, b"SWAPSPACE2"),
    ("swap", 4096 - 10, b"SWAP-SPACE"),
    ("swap", 8192 - 10, b"SWAPSPACE2"),
    ("swap", 16384 - 10, b"SWAPSPACE2"),
    ("swap", 65536 - 10, b"SWAPSPACE2"),
    ("crypto_LUKS", 0, b"LUKS\xba\xbe"),
    ("crypto_LUKS (LUKS2 secondary header)", 0x4000, b"SKUL\xba\xbe"),
    ("vfat", 0x52, b"FAT32   "),
    ("vfat", 0x36, b"FAT16   "),
    ("vfat", 0x36, b"FAT12   "),
    ("ntfs", 3, b"NTFS    "),
    ("exfat", 3, b"EXFAT   "),
    ("iso9660", 0x8001, b"CD001"),
    ("bcache", 0x1018, b"\xc6\x85\x73\xf6\x4e\x1a\x45\xca\x82\x65\xf5\x7f\x48\xba\x6d\x81"),
    ("ceph_bluestore", 0, b"bluestore block device"),
)
HEAD_BYTES = 0x11000  # covers every offset above (btrfs at 64K + 64 is the farthest)


def scan_magic(path, size_bytes=None):
    """Read-only scan of the well-known signature offsets. Returns a list of
    ``{"type", "offset", "source": "builtin"}``."""
    found = []
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        head = os.pread(fd, HEAD_BYTES, 0)
        if size_bytes is None:
            size_bytes = os.lseek(fd, 0, os.SEEK_END)
        for typ, off, magic in HEAD_MAGICS:
            if head[off:off + len(magic)] == magic:
                found.append({"type": typ, "offset": off, "source": "builtin"})
        # LVM2 label: LABELONE in one of the first four sectors (lvm2 checks the type too, above).
        for sector in range(4):
            if head[sector * 512:sector * 512 + 8] == b"LABELONE" and not any(
                    f["type"] == "LVM2_member" for f in found):
                found.append({"type": "LVM2_member", "offset": sector * 512, "source": "builtin"})
        # DOS partition table / boot sector: 0x55AA at 510 (FAT/NTFS boot sectors too: reported once).
        if head[510:512] == b"\x55\xaa" and not any(f["type"] in ("vfat", "ntfs", "exfat") for f in found):
            found.append({"type": "dos (MBR partition table or boot sector)", "offset": 510, "source": "builtin"})
        # md 0.90 (at the end, 64K-aligned) and md 1.0 (8K from the end, 4K-aligned) superblocks.
        if size_bytes and size_bytes >= 128 * 1024:
            for typ, off in (("linux_raid_member (md 0.90)", (size_bytes & ~0xFFFF) - 0x10000),
                             ("linux_raid_member (md 1.0)", ((size_bytes - 8192) & ~0xFFF))):
                if off >= 0 and os.pread(fd, 4, off) == MD_MAGIC:
                    found.append({"type": typ, "offset": off, "source": "builtin"})
            # GPT backup header in the last sector (512-byte and 4K logical sectors).
            for ss in (512, 4096):
                if os.pread(fd, 8, size_bytes - ss) == b"EFI PART":
                    found.append({"type": "gpt (backup header)", "offset": size_bytes - ss, "source": "builtin"})
    finally:
        os.close(fd)
    return found


def parse_blkid_export(text):
    """``blkid -p -o export DEV`` -> list of signatures (TYPE / PTTYPE)."""
    kv = {}
    for line in (text or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            kv[k.strip()] = v.strip()
    out = []
    if kv.get("TYPE"):
        out.append({"type": kv["TYPE"], "offset": None, "source": "blkid",
                    "usage": kv.get("USAGE"), "label": kv.get("LABEL"), "uuid": kv.get("UUID")})
    if kv.get("PTTYPE"):
        out.append({"type": "%s partition table" % kv["PTTYPE"], "offset": None, "source": "blkid"})
    return out


def parse_wipefs_json(text):
    """``wipefs --no-act --json DEV`` -> list of signatures."""
    try:
        data = json.loads(text) if text and text.strip() else {}
    except ValueError:
        return []
    out = []
    for s in data.get("signatures") or []:
        off = s.get("offset")
        try:
            off = int(off, 0) if isinstance(off, str) else off
        except ValueError:
            pass
        out.append({"type": s.get("type"), "offset": off, "source": "wipefs", "usage": s.get("usage")})
    return out


def _tool_signatures(path, run, which):
    """Signatures the installed tools see, and notes about tools not used."""
    sigs, notes = [], []
    blkid = which("blkid") if which else None
    if blkid and run:
        rc, out, err = run([blkid, "-p", "-o", "export", path])
        # blkid exits 2 when nothing was found; 0 with the values otherwise.
        if rc == 0:
            sigs.extend(parse_blkid_export(out))
        elif rc != 2:
            notes.append("blkid -p exit %d: %s" % (rc, (err or "").strip()[:200]))
    else:
        notes.append("blkid not installed: built-in signature check only")
    wipefs = which("wipefs") if which else None
    if wipefs and run:
        rc, out, err = run([wipefs, "--no-act", "--json", path])
        if rc == 0:
            sigs.extend(parse_wipefs_json(out))
        else:
            notes.append("wipefs --no-act exit %d: %s" % (rc, (err or "").strip()[:200]))
    else:
        notes.append("wipefs not installed")
    return sigs, notes


def _chain_of_devnum(major, minor, sysfs_root):
    r = resolve_devices("/", sysfs_root=sysfs_root, mountinfo_path=None, st_dev=os.makedev(major, minor))
    return r["chain"]


def mounted_on(name, sysfs_root="/sys", mountinfo_path="/proc/self/mountinfo"):
    """Mount points whose device is ``name`` or sits on it (partition, dm, md)."""
    hits = []
    for m in parse_mountinfo(sysfs.read_text(mountinfo_path, "")):
        chain = []
        if m["major"] != 0:
            chain = _chain_of_devnum(m["major"], m["minor"], sysfs_root)
        elif m["source"].startswith("/dev/"):
            try:
                rdev = os.stat(m["source"]).st_rdev
                chain = _chain_of_devnum(os.major(rdev), os.minor(rdev), sysfs_root)
            except OSError:
                chain = []
        if name in chain:
            hits.append("%s (%s on %s)" % (m["mount_point"], m["fstype"], chain[0]))
    return hits


def swaps_on(name, sysfs_root="/sys", swaps_path="/proc/swaps"):
    """Swap areas (devices or files) that are ``name`` or sit on it."""
    hits = []
    for line in sysfs.read_text(swaps_path, "").splitlines()[1:]:
        parts = line.split()
        if not parts:
            continue
        src = parts[0].replace("\\040", " ")
        try:
            st = os.stat(src)
        except OSError:
            continue
        num = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
        if os.major(num) == 0:
            continue
        if name in _chain_of_devnum(os.major(num), os.minor(num), sysfs_root):
            hits.append(src)
    return hits


def root_chain(sysfs_root="/sys", mountinfo_path="/proc/self/mountinfo", root="/"):
    r = resolve_devices(root, sysfs_root=sysfs_root, mountinfo_path=mountinfo_path)
    return r["chain"]


def check_raw_device(device, options, sysfs_root="/sys", dev_root="/dev",
                     mountinfo_path="/proc/self/mountinfo", swaps_path="/proc/swaps",
                     run=None, which=None, drive_serial=None, root="/"):
    """Every reason to refuse writing over ``device``. Never writes; never raises
    for a bad device (only reports). Returns::

        {"device": given path, "resolved": /dev/X, "name": X, "ok": bool,
         "reasons": [...], "signatures": [...], "notes": [...], "serial": ..,
         "size_bytes": .., "partition_of": parent or None}

    ``drive_serial``: the serial to compare ``options['serial']`` with when
    sysfs has none (smartctl's); sysfs is used otherwise.
    """
    options = options or {}
    res = {"device": device, "resolved": None, "name": None, "ok": False, "reasons": [],
           "signatures": [], "notes": [], "serial": None, "size_bytes": None, "partition_of": None,
           "multipath": None}
    reasons = res["reasons"]

    destroy = options.get("destroy_data")
    if destroy is not True:
        reasons.append("destroy_data is %r on this target, not true: a raw device target destroys the "
                       "device's contents and must say destroy_data: true" % (destroy,))

    if not isinstance(device, str) or not device.startswith("/"):
        reasons.append("device must be an absolute path like /dev/disk/by-id/..., got %r" % (device,))
        return res
    resolved = os.path.realpath(device)
    res["resolved"] = resolved
    try:
        st = os.stat(resolved)
    except OSError as e:
        shown = device if device == resolved else "%s -> %s" % (device, resolved)
        reasons.append("%s does not exist (%s)%s" % (shown, e.strerror, multipath.missing_lun(options, sysfs_root)))
        return res
    if not stat.S_ISBLK(st.st_mode):
        reasons.append("%s is not a block device" % resolved)
        return res
    node = sysfs.node_for_rdev(st.st_rdev, sysfs_root)
    if node is None:
        reasons.append("%s (%d:%d) has no entry under %s/dev/block" % (
            resolved, os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root))
        return res
    name = os.path.basename(node)
    res["name"] = name
    is_partition = sysfs.is_partition(node)
    disk = os.path.basename(os.path.dirname(node)) if is_partition else name
    if is_partition:
        res["partition_of"] = disk
    sectors = sysfs.read_int(os.path.join(node, "size"))
    capacity = sectors * 512 if sectors is not None and sectors >= 0 else None
    res["size_bytes"] = capacity
    if capacity == 0:
        reasons.append("%s has no capacity (0 bytes: a detached loop device or no medium)" % resolved)

    if options.get("size") not in (None, "", 0):
        try:
            want = parse_size(options["size"], "size")
        except ValueError as e:
            reasons.append(str(e))
        else:
            if capacity is not None and want > capacity:
                reasons.append("size %s (%d bytes) is larger than %s (%s, %d bytes)" % (
                    options["size"], want, resolved, human_size(capacity), capacity))

    ident = identity(disk, sysfs_root, dev_root)
    serial = ident.get("serial") or drive_serial
    res["serial"] = serial
    want_serial = options.get("serial")
    if want_serial not in (None, ""):
        if serial is None:
            reasons.append("serial %r was given but the serial of %s cannot be read (sysfs has none%s): "
                           "refusing rather than guessing" % (want_serial, disk,
                                                              "" if which and which("smartctl")
                                                              else ", smartctl not installed"))
        elif str(want_serial).strip().lower() != serial.strip().lower():
            reasons.append("serial mismatch: the target says %r but %s has serial %r" % (
                want_serial, disk, serial))

    # a dm-multipath map (a SAN LUN): its WWID, alias and paths, and the LUN target's checks
    res["multipath"] = None
    if sysfs.read_text(os.path.join(node, "dm", "uuid"), "").startswith(multipath.MPATH_UUID_PREFIX):
        alias = sysfs.read_text(os.path.join(node, "dm", "name")) or name
        status, note = multipath.status_line(alias, run, which) if sysfs_root == "/sys" else (None, None)
        if note:
            res["notes"].append(note)
        try:
            res["multipath"] = multipath.map_of(name, sysfs_root, status)
        except ValueError as e:
            res["notes"].append(str(e))
            res["multipath"] = multipath.map_of(name, sysfs_root)
    reasons.extend(multipath.lun_check(res["multipath"], resolved, options))

    chain = root_chain(sysfs_root, mountinfo_path, root)
    if name in chain:
        reasons.append("%s backs the root filesystem (/ resolves to %s)" % (resolved, " -> ".join(chain)))

    mounts = mounted_on(name, sysfs_root, mountinfo_path)
    if mounts:
        reasons.append("%s or something on it is mounted: %s" % (resolved, ", ".join(mounts)))

    swaps = swaps_on(name, sysfs_root, swaps_path)
    if swaps:
        reasons.append("%s or something on it is used as swap: %s" % (resolved, ", ".join(swaps)))

    parts = sysfs.partitions(node)
    if parts:
        reasons.append("%s holds partitions: %s" % (resolved, ", ".join(parts)))

    holders = sysfs.holders(node)
    for p in parts:
        holders.extend("%s (on %s)" % (h, p) for h in sysfs.holders(os.path.join(node, p)))
    if holders:
        reasons.append("%s has holders (something is stacked on it): %s" % (resolved, ", ".join(holders)))

    try:
        sigs = scan_magic(resolved, capacity)
    except OSError as e:
        sigs = []
        reasons.append("cannot read %s to look for signatures (%s): refusing" % (resolved, e.strerror))
    tool_sigs, notes = _tool_signatures(resolved, run, which)
    res["notes"].extend(notes)
    sigs.extend(tool_sigs)
    res["signatures"] = sigs
    if sigs:
        kinds = []
        for s in sigs:
            label = "%s%s" % (s["type"], " at offset %s" % s["offset"] if s.get("offset") is not None else "")
            label += " (%s)" % s["source"]
            if label not in kinds:
                kinds.append(label)
        reasons.append("%s holds a signature: %s" % (resolved, "; ".join(kinds)))

    res["ok"] = not reasons
    return res


def refusal_message(result):
    return "raw device target %s refused: %s" % (
        result["device"] if result["device"] == result.get("resolved") or not result.get("resolved")
        else "%s (%s)" % (result["device"], result["resolved"]),
        "; ".join(result["reasons"]))


# --------------------------------------------------------------------------- regions a job wrote
# A device target's job records, before it writes a byte, the regions it will write
# (job.Job.begin: status.json "regions"); its cleanup zeroes them. A job killed before its
# cleanup (SIGKILL, OOM, power) leaves them written: the next run's preflight
# (modules/bench_dir.py) zeroes each one whose device is again an opted-in target of that run
# (the same drive: serial, else WWID, else a loop device's backing file), or refuses.

def region_label(device, size, offset=0):
    """How the job's cleanup names a zeroed region: ``<device>[<offset>+<size>|all]``."""
    return "%s[%d+%s]" % (device, int(offset or 0), size or "all")


def device_identity(device, sysfs_root="/sys", dev_root="/dev"):
    """What identifies ``device`` across runs (never raises)::

        {"device": given path, "resolved": /dev/X, "name": X, "serial", "wwid",
         "backing_file" (a loop device's), "size_bytes"}
    """
    out = {"device": device, "resolved": None, "name": None, "serial": None, "wwid": None,
           "backing_file": None, "size_bytes": None}
    try:
        resolved = os.path.realpath(device)
        st = os.stat(resolved)
    except (OSError, TypeError, ValueError):
        return out
    out["resolved"] = resolved
    node = sysfs.node_for_rdev(st.st_rdev, sysfs_root) if stat.S_ISBLK(st.st_mode) else None
    if node is None:
        return out
    name = os.path.basename(node)
    disk = os.path.basename(os.path.dirname(node)) if sysfs.is_partition(node) else name
    ident = identity(disk, sysfs_root, dev_root)
    sectors = sysfs.read_int(os.path.join(node, "size"))
    out.update(name=name, serial=ident.get("serial"), wwid=ident.get("wwid"),
               backing_file=ident.get("backing_file"), size_bytes=sectors * 512 if sectors is not None else None)
    return out


def same_device(recorded, current):
    """Whether ``current`` (:func:`device_identity`) is the device a job recorded: the same
    serial, else the same WWID, else (no serial, no WWID: a loop device) the same backing
    file, device node and size. A device that says nothing about itself is never the same."""
    def norm(v):
        return str(v).strip().lower() if v not in (None, "") else None
    for key in ("serial", "wwid"):
        if norm(recorded.get(key)) or norm(current.get(key)):
            return norm(recorded.get(key)) == norm(current.get(key))
    if recorded.get("backing_file") and current.get("backing_file"):
        return (recorded["backing_file"] == current["backing_file"]
                and recorded.get("resolved") == current.get("resolved")
                and recorded.get("size_bytes") == current.get("size_bytes"))
    return False


def describe_device(ident):
    shown = ident.get("device") or "?"
    if ident.get("resolved") and ident["resolved"] != shown:
        shown += " (%s)" % ident["resolved"]
    for key in ("serial", "wwid", "backing_file"):
        if ident.get(key):
            return "%s, %s %s" % (shown, key.replace("_", " "), ident[key])
    return shown


def leftover_regions(status):
    """The device regions of a job status (``regions``) that its cleanup did not zero: all
    of them when the job ended without a cleanup (killed), those missing from
    ``cleanup.removed`` otherwise."""
    if not status:
        return []
    regions = [r for r in status.get("regions") or [] if isinstance(r, dict) and r.get("device")]
    removed = set(((status.get("cleanup") or {}).get("removed")) or [])
    return [r for r in regions if region_label(r["device"], r.get("size"), r.get("offset")) not in removed]


def match_regions(regions, devices, sysfs_root="/sys", dev_root="/dev"):
    """Decide, for each region a dead job left written, what this run may do:
    ``(zero, refuse)``; ``zero``: ``[(region, device path of this run)]`` for each region
    whose drive is one of ``devices`` (the device targets this run opted in by name and
    whose guard passed); ``refuse``: ``[(region, current identity)]`` for the others. A
    device that is not opted in by name in this run is never zeroed."""
    idents = [device_identity(d, sysfs_root, dev_root) for d in devices or []]
    zero, refuse = [], []
    for region in regions:
        match = next((i for i in idents if i["resolved"] and same_device(region, i)), None)
        if match is not None:
            zero.append((region, match["device"]))
        else:
            refuse.append((region, device_identity(region.get("resolved") or region["device"], sysfs_root, dev_root)))
    return zero, refuse


def region_refusal(region, current, status, job_directory, binary, last_alive=None):
    """Why a dead job's region is refused, what happened and how to clear it (one sentence
    each). ``last_alive``: when the job last wrote its status (the status file's mtime)."""
    size, offset = region.get("size") or 0, region.get("offset") or 0
    span = ("bytes [%d, %d)" % (offset, offset + size)) if size else (
        "the device from byte %d" % offset if offset else "the whole device")
    when = last_alive or status.get("workload_started_epoch") or status.get("started_epoch")
    now_ident = ""
    if current.get("resolved") and not same_device(region, current):
        now_ident = "; %s is now %s" % (region["device"], describe_device(current))
    zero_cmd = "%s cleanup --device %s%s%s" % (binary or "iobench", region["device"],
                                               " --offset %d" % offset if offset else "", " --size %d" % size if size else "")
    return ("device %s holds benchmark data: the measurement job of run %s (pid %s) stopped without its cleanup "
            "(last alive %s, state %s, workload %s of %s) and left %s of it written, not zeroed%s. It is not an "
            "opted-in device target of this run, so it is not touched. To clear: list it in fleetqual_targets "
            "(destroy_data: true%s) so the next run zeroes that region, or zero it yourself (%s) and remove %s."
            % (describe_device(region), status.get("run_id"), status.get("pid"),
               time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when or 0)),
               "died: killed" if status.get("state") == "running" else status.get("state"),
               status.get("index"), status.get("of"), span, now_ident,
               ", serial: %s" % region["serial"] if region.get("serial") else "", zero_cmd, job_directory))
