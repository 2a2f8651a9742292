# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive inventory (identity from sysfs, optionally lsblk) and drive health
(``smartctl --json -a`` or ``nvme smart-log -o json``), normalized.

A *drive* is a whole disk the kernel lists in ``<sysfs>/block``: SCSI/SATA/SAS
(``sd*``), NVMe namespaces (``nvme*n*``), virtio (``vd*``), Xen (``xvd*``),
MMC (``mmcblk*``) and attached loop devices. Not drives, but reported under
``virtual`` with what they are stacked on: device-mapper (``dm-*``), md RAID
(``md*``), ``ram*``, ``zram*``, detached loop devices, empty ``nbd*`` and
optical (``sr*``) devices.

Everything takes ``sysfs_root`` / ``dev_root`` so it can be tested on a fake
tree; tools are reached through a ``run(argv) -> (rc, stdout, stderr)``
callable and a ``which(name) -> path|None`` callable, so the parsing can be
tested on recorded outputs.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess

from ansible.module_utils.common.process import get_bin_path

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import resolve_devices

VIRTUAL_PREFIXES = ("dm-", "md", "ram", "zram", "sr", "fd", "nbd")

# NVMe critical warning bits (NVMe base spec, SMART / Health log byte 0).
CRITICAL_WARNING_BITS = (
    (0x01, "available spare below threshold"),
    (0x02, "temperature outside threshold"),
    (0x04, "NVM subsystem reliability degraded"),
    (0x08, "media placed in read-only mode"),
    (0x10, "volatile memory backup device failed"),
    (0x20, "persistent memory region read-only"),
)

# smartctl exit status bits (smartctl(8), RETURN VALUES).
SMARTCTL_EXIT_BITS = (
    (0x01, "command line did not parse"),
    (0x02, "device open failed or device did not return an IDENTIFY DEVICE structure"),
    (0x04, "some SMART or ATA command to the disk failed, or a checksum error"),
    (0x08, "SMART status check returned DISK FAILING"),
    (0x10, "prefail attributes at or below threshold"),
    (0x20, "some attributes were at or below threshold in the past"),
    (0x40, "the device error log contains errors"),
    (0x80, "the self-test log contains errors"),
)

HEALTH_KEYS = ("passed", "critical_warning", "media_errors", "percentage_used", "available_spare",
               "reallocated_sectors", "pending_sectors", "temperature_c", "power_on_hours", "num_err_log_entries")


def _clean(value):
    """Strip a sysfs/tool identity string; '' and None become None."""
    if value is None:
        return None
    value = str(value).strip().strip("\x00").strip()
    return value or None


def vpd_pg80_serial(raw):
    """Unit serial number from a raw SCSI VPD page 0x80 (bytes): 4-byte header,
    byte 3 the length, then the serial (space padded)."""
    if not raw or len(raw) < 4 or raw[1] != 0x80:
        return None
    length = raw[3]
    return _clean(raw[4:4 + length].decode("ascii", "replace"))


def _classify(name, node, sysfs_root):
    """('drive'|'virtual', transport or kind, why-not-a-drive)."""
    if sysfs.read_text(os.path.join(node, "hidden")) == "1":
        return "virtual", "hidden", "hidden path device (NVMe multipath: the namespace is the drive)"
    if name.startswith("loop"):
        backing = sysfs.read_text(os.path.join(sysfs_root, "block", name, "loop", "backing_file"))
        if backing:
            return "drive", "loop", None
        return "virtual", "loop", "loop device not attached"
    for p in VIRTUAL_PREFIXES:
        if name.startswith(p):
            kind = p.rstrip("-")
            if kind == "nbd":
                if (sysfs.read_int(os.path.join(node, "size")) or 0) > 0:
                    return "drive", "nbd", None
                return "virtual", "nbd", "nbd device not connected"
            return "virtual", kind, "%s device, not a physical drive" % kind
    return "drive", transport_of(name, node), None


def transport_of(name, node):
    """Transport from the device path in sysfs (what lsblk's TRAN says, without udev)."""
    real = node.replace("\\", "/")
    if name.startswith("nvme") or "/nvme/" in real:
        return "nvme"
    if "/usb" in real:
        return "usb"
    if "/virtio" in real or name.startswith("vd"):
        return "virtio"
    if name.startswith("xvd"):
        return "xen"
    if name.startswith("mmcblk") or "/mmc_host/" in real:
        return "mmc"
    if "/ata" in real:
        return "sata"
    if "/end_device-" in real or "/sas_" in real or "/port-" in real:
        return "sas"
    if "/iscsi" in real or "/session" in real:
        return "iscsi"
    if "/host" in real and "/target" in real:
        return "scsi"
    return None


def _id_links(dev_root, name):
    """/dev/disk/by-id and by-path symlinks that resolve to /dev/<name>."""
    target = os.path.join(dev_root, name)
    out = {"by_id": [], "by_path": []}
    for sub, key in (("by-id", "by_id"), ("by-path", "by_path")):
        d = os.path.join(dev_root, "disk", sub)
        for e in sysfs.listdir(d):
            p = os.path.join(d, e)
            try:
                link = os.readlink(p)
            except OSError:
                continue
            real = os.path.normpath(os.path.join(d, link))
            if real == target:
                out[key].append(p)
    return out


def _stable_id(links):
    """The by-id path to show: prefer wwn-, then nvme-eui., then the longest
    (most specific) name; then by-path; else None."""
    ids = links["by_id"]
    for prefix in ("wwn-", "nvme-eui.", "nvme-", "scsi-3", "ata-", "scsi-"):
        cands = [p for p in ids if os.path.basename(p).startswith(prefix)]
        if cands:
            return sorted(cands, key=len)[0]
    if ids:
        return ids[0]
    if links["by_path"]:
        return links["by_path"][0]
    return None


# a SCSI disk's cache_type (sd.c, ``device/scsi_disk/H:C:T:L/cache_type``): WCE on -> "write back"
# (also "write back, no read (daddy)"), off -> "write through" or "none" (no read cache either)
SCSI_CACHE_TYPES = {"write back": "write back", "write back, no read (daddy)": "write back",
                    "write through": "write through", "none": "write through"}


def write_cache_of(node):
    """``(write_cache, source)`` of a whole disk's sysfs node: the kernel's ``queue/write_cache``
    (``write back`` or ``write through``: whether the kernel sends the drive flushes; for SCSI
    it reflects the WCE bit of the caching mode page, for NVMe the volatile write cache feature
    6), else a SCSI disk's ``scsi_disk/*/cache_type`` (kernels before 4.7); ``(None, None)``
    when the kernel says neither."""
    value = _clean(sysfs.read_text(os.path.join(node, "queue", "write_cache")))
    if value is not None:
        return value, "queue/write_cache"
    scsi = os.path.join(node, "device", "scsi_disk")
    for entry in sysfs.listdir(scsi):
        value = SCSI_CACHE_TYPES.get(_clean(sysfs.read_text(os.path.join(scsi, entry, "cache_type"))))
        if value is not None:
            return value, "scsi_disk/cache_type"
    return None, None


def declared_write_cache(drive):
    """``write-back`` or ``write-through``: the drive's cache as its kernel declares it (the
    inventory's ``write_cache``), or None when it declared nothing this code knows."""
    text = str((drive or {}).get("write_cache") or "").strip().lower()
    if text.startswith("write back"):
        return "write-back"
    if text in ("write through", "none"):
        return "write-through"
    return None


MEDIA = ("hdd", "ssd")


def drive_media(drive):
    """``hdd`` or ``ssd``: the drive's ``media`` when it has one, else the kernel's
    ``queue/rotational`` (1: spinning media), an NVMe namespace ``ssd`` when the kernel did
    not say; None when nothing says. The controller reads records written before the
    inventory had ``media`` the same way."""
    drive = drive or {}
    if drive.get("media") in MEDIA:
        return drive["media"]
    rotational = drive.get("rotational")
    if rotational is None:
        return "ssd" if drive.get("transport") == "nvme" else None
    return "hdd" if rotational else "ssd"


def identity(name, sysfs_root="/sys", dev_root="/dev"):
    """Identity of one whole disk ``name`` from sysfs alone (no tools)."""
    blk = os.path.join(sysfs_root, "block", name)
    node = os.path.realpath(blk)
    dev = os.path.join(node, "device")
    queue = os.path.join(node, "queue")
    kind, transport, why = _classify(name, node, sysfs_root)

    model = _clean(sysfs.read_text(os.path.join(dev, "model")))
    vendor = _clean(sysfs.read_text(os.path.join(dev, "vendor")))
    serial = _clean(sysfs.read_text(os.path.join(dev, "serial"))) or _clean(sysfs.read_text(os.path.join(node, "serial")))
    if serial is None:
        serial = vpd_pg80_serial(sysfs.read_bytes(os.path.join(dev, "vpd_pg80")))
    firmware = _clean(sysfs.read_text(os.path.join(dev, "firmware_rev"))) or _clean(sysfs.read_text(os.path.join(dev, "rev")))
    wwid = _clean(sysfs.read_text(os.path.join(node, "wwid"))) or _clean(sysfs.read_text(os.path.join(dev, "wwid")))
    sectors = sysfs.read_int(os.path.join(node, "size"))
    write_cache, write_cache_source = write_cache_of(node)
    rot = sysfs.read_int(os.path.join(queue, "rotational"))
    links = _id_links(dev_root, name)
    drive = {
        "name": name,
        "path": os.path.join(dev_root, name),
        "kind": kind,
        "id_path": _stable_id(links),
        "by_id": links["by_id"],
        "by_path": links["by_path"],
        "model": model,
        "vendor": vendor,
        "serial": serial,
        "firmware": firmware,
        "wwid": wwid,
        "size_bytes": sectors * 512 if sectors is not None else None,
        "rotational": None if rot is None else bool(rot),
        "media": None,
        "transport": transport,
        "logical_sector_size": sysfs.read_int(os.path.join(queue, "logical_block_size")),
        "physical_sector_size": sysfs.read_int(os.path.join(queue, "physical_block_size")),
        "write_cache": write_cache,
        "write_cache_source": write_cache_source,
        "removable": bool(sysfs.read_int(os.path.join(node, "removable"))),
        "read_only": bool(sysfs.read_int(os.path.join(node, "ro"))),
        "partitions": sysfs.partitions(node),
        "holders": sysfs.holders(node),
        "slaves": sysfs.slaves(node),
        "backing_file": sysfs.read_text(os.path.join(node, "loop", "backing_file")) if name.startswith("loop") else None,
        "sources": ["sysfs"],
        "why_not_drive": why,
    }
    drive["media"] = drive_media(drive)
    return drive


def parse_lsblk(text):
    """``lsblk -J -O -b`` output -> {kname: entry} for whole disks (children dropped)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out = {}
    for dev in data.get("blockdevices") or []:
        name = dev.get("kname") or dev.get("name")
        if name:
            out[name] = dev
    return out


_LSBLK_FILL = (("model", "model"), ("serial", "serial"), ("firmware", "rev"), ("transport", "tran"),
               ("vendor", "vendor"), ("wwid", "wwn"))


def merge_lsblk(drive, entry):
    """Fill identity fields sysfs left empty from an lsblk entry (udev knows the
    ATA serial sysfs may not show). sysfs values are never overwritten."""
    if not entry:
        return drive
    filled = False
    for key, lkey in _LSBLK_FILL:
        if drive.get(key) is None and _clean(entry.get(lkey)) is not None:
            drive[key] = _clean(entry.get(lkey))
            filled = True
    if filled and "lsblk" not in drive["sources"]:
        drive["sources"].append("lsblk")
        drive["media"] = drive_media(drive)      # the transport may be lsblk's
    return drive


def inventory(sysfs_root="/sys", dev_root="/dev", lsblk_text=None, targets=None,
              mountinfo_path="/proc/self/mountinfo"):
    """Every block device under ``<sysfs_root>/block``: ``drives`` (whole disks
    and attached loop devices) and ``virtual`` (dm, md, ram, zram, detached
    loops, ...), plus ``targets``: for each path or device in ``targets``, the
    drives it sits on (through partitions, dm, md: device.resolve_devices)."""
    lsblk = parse_lsblk(lsblk_text) if lsblk_text else {}
    drives, virtual = [], []
    for name in sysfs.listdir(os.path.join(sysfs_root, "block")):
        d = identity(name, sysfs_root, dev_root)
        if d["kind"] == "drive":
            merge_lsblk(d, lsblk.get(name))
            drives.append(d)
        else:
            virtual.append({"name": name, "kind": d["transport"], "reason": d["why_not_drive"],
                            "slaves": d["slaves"], "holders": d["holders"], "size_bytes": d["size_bytes"]})
    result = {"drives": drives, "virtual": virtual, "targets": []}
    if targets:
        names = set(d["name"] for d in drives)
        for t in targets:
            result["targets"].append(target_drives(t, names, sysfs_root, mountinfo_path))
        for d in drives:
            d["targets"] = [t["target"] for t in result["targets"] if d["name"] in t["drives"]]
    return result


def target_drives(target, drive_names, sysfs_root="/sys", mountinfo_path="/proc/self/mountinfo"):
    """Which drives a target (a directory path, or a block device path) sits on."""
    entry = {"target": target, "drives": [], "not_drives": [], "chain": [], "reason": None}
    try:
        st = os.stat(target)
    except OSError as e:
        entry["reason"] = "cannot stat %s: %s" % (target, e.strerror)
        return entry
    if stat.S_ISBLK(st.st_mode):
        r = resolve_devices(target, sysfs_root=sysfs_root, mountinfo_path=None, st_dev=st.st_rdev)
    else:
        r = resolve_devices(target, sysfs_root=sysfs_root, mountinfo_path=mountinfo_path, st_dev=st.st_dev)
    entry["chain"] = r["chain"]
    entry["reason"] = r["reason"]
    for dev in r["devices"]:
        (entry["drives"] if dev in drive_names else entry["not_drives"]).append(dev)
    if r["devices"] and not entry["drives"]:
        entry["reason"] = "%s sits on %s, which is not a drive" % (target, ", ".join(entry["not_drives"]))
    return entry


# --------------------------------------------------------------------------- health

def empty_health(reason, tool=None):
    h = {"collected": False, "tool": tool, "reason": reason, "protocol": None, "problems": []}
    for k in HEALTH_KEYS:
        h[k] = None
    return h


def _num(v):
    """An integer from a JSON number or a numeric string (nvme-cli prints some
    128-bit counters as strings); None otherwise."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return int(v)
    try:
        return int(str(v).replace(",", "").strip())
    except ValueError:
        try:
            return int(float(str(v)))
        except ValueError:
            return None


def critical_warning_text(value):
    return [text for bit, text in CRITICAL_WARNING_BITS if value & bit]


def _critical_warning(v):
    """nvme-cli prints an int, or with -H an object whose 'value' is the byte."""
    if isinstance(v, dict):
        return _num(v.get("value"))
    return _num(v)


def _problems(h):
    p = []
    if h["passed"] is False:
        p.append("overall health self-assessment FAILED")
    cw = h["critical_warning"]
    if cw:
        p.append("critical_warning 0x%02x (%s)" % (cw, "; ".join(critical_warning_text(cw)) or "reserved bits"))
    if h["media_errors"]:
        p.append("%d media errors" % h["media_errors"])
    if h["reallocated_sectors"]:
        p.append("%d reallocated sectors" % h["reallocated_sectors"])
    if h["pending_sectors"]:
        p.append("%d pending sectors" % h["pending_sectors"])
    if h["percentage_used"] is not None and h["percentage_used"] >= 100:
        p.append("percentage_used %d%% (rated endurance used up)" % h["percentage_used"])
    return p


def _ata_raw(table, attr_id):
    for a in table or []:
        if a.get("id") == attr_id:
            raw = a.get("raw") or {}
            v = _num(raw.get("value"))
            # Several vendors pack extra data in the upper raw bytes of 5/197: the low 32 bits count.
            if v is not None and attr_id in (5, 197, 198):
                v &= 0xFFFFFFFF
            return v
    return None


def parse_smartctl(data):
    """Normalize ``smartctl --json -a`` output (a dict, json_format_version 1)."""
    if not isinstance(data, dict):
        return empty_health("smartctl printed no JSON object", "smartctl")
    sc = data.get("smartctl") or {}
    exit_status = _num(sc.get("exit_status")) or 0
    msgs = [m.get("string") for m in sc.get("messages") or [] if isinstance(m, dict) and m.get("string")]
    fmt = data.get("json_format_version") or [None]
    if fmt and fmt[0] not in (None, 1):
        return empty_health("smartctl json_format_version %s is not supported (1 is)" % fmt, "smartctl")
    # Bits 0-1: the tool could not even talk to the device.
    if exit_status & 0x03 or ("smart_status" not in data and not data.get("nvme_smart_health_information_log")
                              and not data.get("ata_smart_attributes")):
        why = "; ".join(msgs) or "; ".join(t for b, t in SMARTCTL_EXIT_BITS if exit_status & b) \
            or "no SMART data in the output"
        h = empty_health("smartctl: %s (exit status %d)" % (why, exit_status), "smartctl")
        return h
    dev = data.get("device") or {}
    h = empty_health(None, "smartctl")
    h["collected"] = True
    h["protocol"] = dev.get("protocol")
    ss = data.get("smart_status")
    if isinstance(ss, dict) and "passed" in ss:
        h["passed"] = bool(ss["passed"])
    temp = data.get("temperature") or {}
    h["temperature_c"] = _num(temp.get("current"))
    h["power_on_hours"] = _num((data.get("power_on_time") or {}).get("hours"))
    nv = data.get("nvme_smart_health_information_log")
    if isinstance(nv, dict):
        h["critical_warning"] = _critical_warning(nv.get("critical_warning"))
        h["media_errors"] = _num(nv.get("media_errors"))
        h["num_err_log_entries"] = _num(nv.get("num_err_log_entries"))
        h["percentage_used"] = _num(nv.get("percentage_used"))
        h["available_spare"] = _num(nv.get("available_spare"))
        if h["temperature_c"] is None:
            h["temperature_c"] = _num(nv.get("temperature"))
        if h["power_on_hours"] is None:
            h["power_on_hours"] = _num(nv.get("power_on_hours"))
    table = (data.get("ata_smart_attributes") or {}).get("table")
    if table:
        h["reallocated_sectors"] = _ata_raw(table, 5)
        h["pending_sectors"] = _ata_raw(table, 197)
        if h["power_on_hours"] is None:
            h["power_on_hours"] = _ata_raw(table, 9)
        if h["temperature_c"] is None:
            t = _ata_raw(table, 194)
            h["temperature_c"] = t & 0xFF if t is not None else None
    if "scsi_grown_defect_list" in data:
        h["reallocated_sectors"] = _num(data.get("scsi_grown_defect_list"))
        unc = 0
        seen = False
        for op in ("read", "write", "verify"):
            v = _num(((data.get("scsi_error_counter_log") or {}).get(op) or {}).get("total_uncorrected_errors"))
            if v is not None:
                unc += v
                seen = True
        if seen:
            h["media_errors"] = unc
        if h["percentage_used"] is None:
            h["percentage_used"] = _num(data.get("scsi_percentage_used_endurance_indicator"))
    if exit_status & 0x08 and h["passed"] is None:
        h["passed"] = False
    h["problems"] = _problems(h)
    h["identity"] = {"model": _clean(data.get("model_name")), "serial": _clean(data.get("serial_number")),
                     "firmware": _clean(data.get("firmware_version") or data.get("revision"))}
    if exit_status:
        h["exit_status"] = exit_status
        h["exit_status_text"] = [t for b, t in SMARTCTL_EXIT_BITS if exit_status & b]
    return h


def parse_nvme_smart_log(data):
    """Normalize ``nvme smart-log -o json`` output (nvme-cli 1.x/2.x). Its
    ``temperature`` is in kelvin; it has no overall verdict, so ``passed`` is
    ``critical_warning == 0`` (what smartctl also reports for NVMe)."""
    if not isinstance(data, dict) or "critical_warning" not in data:
        return empty_health("nvme smart-log printed no SMART log object", "nvme-cli")
    h = empty_health(None, "nvme-cli")
    h["collected"] = True
    h["protocol"] = "NVMe"
    h["critical_warning"] = _critical_warning(data.get("critical_warning"))
    h["passed"] = (h["critical_warning"] == 0) if h["critical_warning"] is not None else None
    h["media_errors"] = _num(data.get("media_errors"))
    h["num_err_log_entries"] = _num(data.get("num_err_log_entries"))
    h["percentage_used"] = _num(data.get("percent_used", data.get("percentage_used")))
    h["available_spare"] = _num(data.get("avail_spare"))
    k = _num(data.get("temperature"))
    if k is not None:
        h["temperature_c"] = k - 273 if k > 200 else k
    h["power_on_hours"] = _num(data.get("power_on_hours"))
    # 'passed' is derived from critical_warning here: name the warning, not a verdict the drive never gave.
    h["problems"] = [p for p in _problems(h) if not p.startswith("overall health")]
    return h


def _loads(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def collect_health(drive, run, which):
    """Health of one drive with whichever tool is present. ``run(argv)`` returns
    ``(rc, stdout, stderr)``; ``which(name)`` a path or None. Never raises."""
    if drive.get("transport") == "loop":
        return empty_health("loop device: no SMART or health log (its backing file's disk is what counts)")
    smartctl = which("smartctl")
    nvme = which("nvme") if drive.get("transport") == "nvme" else None
    reasons = []
    if smartctl:
        try:
            rc, out, err = run([smartctl, "--json", "-a", drive["path"]])
        except (OSError, ValueError, RuntimeError) as e:  # reported, never raised
            rc, out, err = -1, "", str(e)
        data = _loads(out)
        if data is None:
            reasons.append("smartctl exit %s printed no JSON: %s" % (rc, (err or out or "").strip()[:200]))
        else:
            h = parse_smartctl(data)
            if h["collected"]:
                return h
            reasons.append(h["reason"])
    if nvme:
        try:
            rc, out, err = run([nvme, "smart-log", drive["path"], "-o", "json"])
        except (OSError, ValueError, RuntimeError) as e:
            rc, out, err = -1, "", str(e)
        data = _loads(out)
        if rc == 0 and data is not None:
            h = parse_nvme_smart_log(data)
            if h["collected"]:
                return h
            reasons.append(h["reason"])
        else:
            first = ((err or out or "").strip().splitlines() or ["no output"])[0]
            reasons.append("nvme smart-log exit %s: %s" % (rc, first))
    elif smartctl and drive.get("transport") == "nvme":
        reasons.append("nvme (nvme-cli) not installed")
    if not smartctl and not nvme:
        want = "smartctl (smartmontools)" + (" or nvme (nvme-cli)" if drive.get("transport") == "nvme" else "")
        return empty_health("%s not installed" % want)
    return empty_health("; ".join(r for r in reasons if r), "smartctl" if smartctl else "nvme-cli")


def apply_tool_identity(drive, health):
    """Fill (or complete) identity from smartctl's IDENTIFY data. Behind libata the
    SCSI ``rev`` of a SATA disk is 4 characters of its firmware (SAT: the last two
    words) and ``model`` its first 16 characters: smartctl's full value replaces a
    sysfs value it contains. A value that differs otherwise is left as the kernel says."""
    ident = health.pop("identity", None) if isinstance(health, dict) else None
    if not ident:
        return drive
    changed = False
    for key in ("model", "serial", "firmware"):
        v = ident.get(key)
        have = drive.get(key)
        if v and v != have and (have is None or (key in ("model", "firmware") and have in v)):
            drive[key] = v
            changed = True
    if changed and "smartctl" not in drive["sources"]:
        drive["sources"].append("smartctl")
    return drive


class DrivesError(Exception):
    """The refusal of the module ``fleetqual.storage.drives`` (a ``check_devices`` entry
    refused with ``fail_on_refusal``): ``msg`` its message, ``result`` its result fields."""

    def __init__(self, msg, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


def run_tool(argv):
    """``run(argv) -> (rc, stdout, stderr)`` as the module runs its tools (LC_ALL=C)."""
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, check=False)
    except OSError as e:
        return 127, "", str(e)
    return (p.returncode, p.stdout.decode("utf-8", "surrogateescape"),
            p.stderr.decode("utf-8", "surrogateescape"))


def find_tool(name):
    """``which(name) -> path | None`` as the module finds its tools (PATH and the sbin dirs)."""
    try:
        return get_bin_path(name)
    except ValueError:
        return None
