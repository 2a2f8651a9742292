# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Targets: where a host's plan runs, in one place.

``fleetqual_targets`` is a list of targets, one after the other; each is checked and
resolved by :func:`resolve_targets` (before any host is contacted) and a resolved plan is
expanded over them by :func:`plan_targets`:

  {name, kind: path, path, shorthand}                              a directory
  {name, kind: device, device, destroy_data: true, serial, size}   a whole block device
  {name, kind: device, wwid | alias, device, destroy_data: true, expected_paths, size}
                                                                   a SAN LUN: its dm-multipath map,
      /dev/disk/by-id/dm-uuid-mpath-<wwid> or /dev/mapper/<alias> (the names multipath-tools
      and udev give it on every initiator), checked on the host (devices/multipath.py)

An empty list is the shorthand: one path target, ``fleetqual_test_dir``
(:func:`check_test_dir`); the plan of a shorthand target is the plan as it always was (no
target keys at all). The plan (``profiles.py``) and the controller's validation
(``plugin_utils/validate/inputs.py``) import them from here.
"""

import difflib
import re

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as iobench_options
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size, parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int

TARGET_VAR = "fleetqual_targets"
TARGET_VAR_NAMES = {"targets": TARGET_VAR, "test_dir": "fleetqual_test_dir"}
DEVICE_ALIGN = 512
# keys plan_targets adds to a spec (and so to its record)
TARGET_SPEC_KEYS = ("target", "target_kind", "target_path", "target_device", "target_serial", "target_wwid",
                    "target_alias", "target_expected_paths", "key", "device_size", "device_offset")
# a LUN target's keys, as the plan's specs carry them
LUN_SPEC_KEYS = {"wwid": "target_wwid", "alias": "target_alias", "expected_paths": "target_expected_paths"}


class PlanError(ValueError):
    """Raised by ``plan.plan`` and :func:`plan_targets` with every problem found; ``errors``
    holds the list (defined here so that this module needs nothing of profiles.py)."""

    def __init__(self, errors):
        self.errors = list(errors)
        ValueError.__init__(self, "; ".join(self.errors))


UNSAFE_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
               "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/tmp")


def compact_size(n):
    """``8589934592`` -> ``8G``: the largest binary suffix that divides ``n``, else bytes."""
    for suffix, mult in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= mult and n % mult == 0:
            return "%d%s" % (n // mult, suffix)
    return str(n)


def check_test_dir(path, var_name=TARGET_VAR_NAMES["test_dir"]):
    """Errors of a test directory: absolute, no ``..``, not a system directory itself."""
    if not isinstance(path, str) or not path.startswith("/"):
        return ["%s: must be an absolute path, got %r" % (var_name, path)]
    if ".." in path.split("/"):
        return ["%s: must not contain '..' components, got %r" % (var_name, path)]
    if path.rstrip("/") in UNSAFE_DIRS or path == "/":
        return ["%s: %r is a system directory; use a directory of its own such as /var/tmp/fleetqual"
                % (var_name, path)]
    return []


TARGET_KEYS = ("name", "path", "device", "wwid", "alias", "destroy_data", "serial", "size", "offset", "expected_paths")
# a region's offset on a device: whole 4 KiB blocks (O_DIRECT on a 4Kn LUN)
OFFSET_ALIGN = 4096
# where each way of naming a LUN puts its multipath map (udev's rules of device-mapper and
# multipath-tools: 10-dm.rules, 13-dm-disk.rules)
LUN_DEVICE = {"wwid": "/dev/disk/by-id/dm-uuid-mpath-%s", "alias": "/dev/mapper/%s"}
_WWID_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._:-]*$")
_ALIAS_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
DM_RESERVED = (".", "..", "control")
SCSI_DESIGNATORS = {"naa.": "3", "eui.": "2"}
SHORTHAND_TARGET = "test_dir"
_TARGET_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _norm_path(path):
    """``/data1//fq/`` -> ``/data1/fq`` (no resolution of links: the host does that)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _derived_target_names(paths):
    """Names for targets without one: the basename, or more of the path when basenames
    collide (``/data1/fq``, ``/data2/fq`` -> ``data1-fq``, ``data2-fq``)."""
    def label(p, depth):
        parts = [x for x in p.split("/") if x] or ["root"]
        return re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts[-depth:]))

    depth = {i: 1 for i in range(len(paths))}
    for _round in range(8):
        names = {i: label(p, depth[i]) for i, p in enumerate(paths)}
        clash = [i for i in names if list(names.values()).count(names[i]) > 1]
        if not clash:
            break
        for i in clash:
            depth[i] += 1
    return names


def _target_where(var_name, i, host):
    return "%s%s[%d]" % ("host %s: " % host if host else "", var_name, i)


def _check_one_target(entry, where, errors):
    """Checked copy of one target entry (None when it cannot be used)."""
    if not isinstance(entry, dict):
        errors.append("%s: must be a mapping with path (a directory) or device (a block device), got %s: "
                      "for example {path: /data1/fleetqual} or {device: /dev/disk/by-id/nvme-..., "
                      "destroy_data: true}" % (where, type_name(entry)))
        return None
    start = len(errors)
    for key in entry:
        if key not in TARGET_KEYS:
            guess = difflib.get_close_matches(str(key), TARGET_KEYS, n=1, cutoff=0.6)
            errors.append("%s.%s: unknown key%s; known: %s" % (
                where, key, " (did you mean %s?)" % guess[0] if guess else "", ", ".join(TARGET_KEYS)))
    given = [k for k in ("path", "device", "wwid", "alias") if k in entry]
    if len(given) != 1:
        errors.append("%s: give exactly one of path (a directory on a filesystem), device (a whole block "
                      "device), wwid or alias (a SAN LUN's multipath map), got %s"
                      % (where, " and ".join(given) if given else "none of them"))
        return None
    has_path = given == ["path"]
    out = {}
    if "name" in entry:
        name = entry["name"]
        if not isinstance(name, str) or not _TARGET_NAME_RE.match(name):
            close = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name)) if isinstance(name, str) and name else "data1"
            errors.append("%s.name: must be letters, digits, '_', '.' or '-' (it names the report's rows and "
                          "files), got %r; for example %s" % (where, name, close))
        else:
            out["name"] = name
    if has_path:
        path = entry["path"]
        out["kind"] = "path"
        problems = check_test_dir(path, "%s.path" % where)
        errors.extend(problems)
        if not problems:
            out["path"] = _norm_path(path)
        for key in ("serial", "size", "offset", "expected_paths"):
            if key in entry:
                errors.append("%s.%s: only for a device target; a directory target is sized by the profile "
                              "(remove %s, or use device: instead of path:)" % (where, key, key))
        # on a directory target, destroy_data opts its filesystem in to the power-cut test
        # (docs/durability.md): nothing else reads it there
        if "destroy_data" in entry:
            if entry["destroy_data"] is not True:
                errors.append("%s.destroy_data: true or absent on a directory target (it opts the filesystem in to "
                              "the power-cut test), got %r" % (where, entry["destroy_data"]))
            out["destroy_data"] = entry["destroy_data"] is True
    else:
        out["kind"] = "device"
        dev = entry.get("device")
        if "device" not in entry:
            dev = _lun_device(entry, where, out, errors)
        if dev is None:
            pass
        elif not isinstance(dev, str) or not dev.startswith("/"):
            hint = ("did you mean /%s?" % dev.lstrip("./") if isinstance(dev, str) and dev.lstrip("./").startswith(
                "dev/") else "for example /dev/disk/by-id/nvme-<model>_<serial>")
            errors.append("%s.device: must be an absolute path under /dev, got %r; %s" % (where, dev, hint))
        elif ".." in dev.split("/"):
            errors.append("%s.device: must not contain '..' components, got %r" % (where, dev))
        elif not _norm_path(dev).startswith("/dev/") or _norm_path(dev) in ("/dev/disk", "/dev/disk/by-id"):
            base = dev.rstrip("/").rsplit("/", 1)[-1] or "sdX"
            errors.append("%s.device: must be a block device under /dev, got %r; did you mean /dev/%s?"
                          % (where, dev, base))
        else:
            out["device"] = _norm_path(dev)
        if entry.get("destroy_data") is not True:
            got = "missing" if "destroy_data" not in entry else "%s %r" % (type_name(entry["destroy_data"]),
                                                                           entry["destroy_data"])
            errors.append("%s.destroy_data: a raw device target destroys the device's contents and must say "
                          "destroy_data: true on that target (there is no global switch), got %s"
                          % (where, got))
        out["destroy_data"] = entry.get("destroy_data") is True
        _check_expected_paths(entry, where, out, errors)
        serial = entry.get("serial")
        if "serial" in entry and ("wwid" in entry or "alias" in entry):
            errors.append("%s.serial: a LUN is named by its WWID (its paths' serial is the array's, not a drive's); "
                          "remove serial" % where)
        elif "serial" in entry and (not isinstance(serial, str) or not serial.strip()):
            errors.append("%s.serial: must be the drive's serial number (a non-empty string), got %s %r"
                          % (where, type_name(serial), serial))
        else:
            out["serial"] = serial.strip() if isinstance(serial, str) else None
        out["size"] = None
        if "size" in entry:
            try:
                n = parse_size(entry["size"])
            except ValueError as exc:
                errors.append("%s.size: %s" % (where, exc))
            else:
                if n <= 0 or n % DEVICE_ALIGN:
                    up = max(DEVICE_ALIGN, -(-n // DEVICE_ALIGN) * DEVICE_ALIGN)
                    errors.append("%s.size: must be a multiple of %d bytes greater than 0 (the part of the device "
                                  "the workloads use), got %r; closest: %s"
                                  % (where, DEVICE_ALIGN, entry["size"], compact_size(up)))
                else:
                    out["size"] = n
        _check_offset(entry, where, out, errors)
    return None if len(errors) > start else out


def _check_offset(entry, where, out, errors):
    """``offset``: where the target's region starts on the device (a LUN shared by several
    initiators: each host in a region of its own)."""
    if "offset" not in entry:
        return
    try:
        n = parse_size(entry["offset"])
    except ValueError as exc:
        errors.append("%s.offset: %s" % (where, exc))
        return
    if n < 0 or n % OFFSET_ALIGN:
        errors.append("%s.offset: must be a multiple of %d bytes (where the target's region starts on the device), "
                      "got %r; closest: %s" % (where, OFFSET_ALIGN, entry["offset"],
                                               compact_size(max(0, n) // OFFSET_ALIGN * OFFSET_ALIGN) if n > 0
                                               else "0"))
        return
    out["offset"] = n


def _lun_device(entry, where, out, errors):
    """The multipath map's device path of a ``wwid`` or ``alias`` target (None when the name is
    not valid: the error says why); ``out`` gains the name."""
    key = "wwid" if "wwid" in entry else "alias"
    val = entry[key]
    pattern = _WWID_RE if key == "wwid" else _ALIAS_RE
    # a SCSI device's own designator (sysfs device/wwid: naa.6..., eui....) is not the name
    # multipath gives the LUN: its type digit then the hex (3 for NAA, 2 for EUI-64)
    if key == "wwid" and isinstance(val, str) and val.strip().lower().startswith(tuple(SCSI_DESIGNATORS)):
        text = val.strip()
        errors.append("%s.wwid: %r is the SCSI designator of a path (sysfs device/wwid), not the LUN's WWID as "
                      "multipath -ll shows it; for example %s" % (where, val, SCSI_DESIGNATORS[text[:4].lower()]
                                                                  + text[4:]))
        return None
    # device-mapper refuses these names (drivers/md/dm-ioctl.c, check_name)
    if not isinstance(val, str) or not pattern.match(val.strip()) or (key == "alias" and val.strip() in DM_RESERVED):
        if key == "wwid":
            text = str(val).strip() if val is not None else ""
            hint = re.sub(r"[^0-9A-Za-z._:-]", "", text.rsplit("(", maxsplit=1)[-1]).lstrip("._:-")
            hint = hint if _WWID_RE.match(hint) else "3600a098038303053453f463045727a53"
            errors.append("%s.wwid: must be the LUN's WWID as multipath -ll shows it in parentheses (letters, digits, "
                          "'.', ':', '-', '_'), got %s %r; for example %s" % (where, type_name(val), val, hint))
        else:
            close = re.sub(r"[^A-Za-z0-9_.+-]", "_", val.strip()) if isinstance(val, str) else ""
            close = close if close and close not in DM_RESERVED else "mpatha"
            errors.append("%s.alias: must be a multipath map's name as multipath -ll shows it (letters, digits, '_', "
                          "'.', '+', '-'), got %s %r; for example %s" % (where, type_name(val), val, close))
        return None
    out[key] = val.strip()
    return raw_device({key: out[key]})


def raw_device(entry):
    """The raw device a target entry names, as written (not checked): its ``device``, or its
    LUN's multipath device (:data:`LUN_DEVICE`); None for a directory target."""
    if not isinstance(entry, dict):
        return None
    if entry.get("device"):
        return entry["device"]
    for key in ("wwid", "alias"):
        if entry.get(key):
            return LUN_DEVICE[key] % str(entry[key]).strip()
    return None


def _check_expected_paths(entry, where, out, errors):
    if "expected_paths" not in entry:
        return
    n = entry["expected_paths"]
    if isinstance(n, bool) or not is_int(n) or int(n) < 1:
        close = max(1, int(n)) if is_int(n) and not isinstance(n, bool) else 2
        errors.append("%s.expected_paths: must be a whole number of paths of 1 or more (how many paths the LUN must "
                      "have on this host before anything is written), got %s %r; for example %d"
                      % (where, type_name(n), n, close))
        return
    out["expected_paths"] = int(n)


def resolve_targets(targets, test_dir=None, host=None, names=None):
    """``(targets, errors)``: ``fleetqual_targets`` checked and resolved, or the shorthand.

    Each target: ``{name, kind: path|device, path | device, ...}`` (module comment above).
    Messages name the host (when given), ``fleetqual_targets[i]`` and the closest valid
    value. An empty or absent list gives the one shorthand target ``fleetqual_test_dir``
    (``shorthand: true``, named ``test_dir``).
    """
    nm = dict(TARGET_VAR_NAMES, **(names or {}))
    var = nm.get("targets", TARGET_VAR)
    if targets is None or targets == [] or targets == "":
        if test_dir is None:
            return [], []
        errs = check_test_dir(test_dir, nm["test_dir"])
        if host:
            errs = ["host %s: %s" % (host, e) for e in errs]
        return ([] if errs else [{"name": SHORTHAND_TARGET, "kind": "path", "path": test_dir,
                                  "shorthand": True}]), errs
    if not isinstance(targets, list):
        return [], ["%s%s: must be a list of targets ({path: ...} or {device: ..., destroy_data: true}), got %s"
                    % ("host %s: " % host if host else "", var, type_name(targets))]
    errors, checked = [], []
    for i, entry in enumerate(targets):
        t = _check_one_target(entry, _target_where(var, i, host), errors)
        if t is not None:
            checked.append((i, t))
    # names: explicit ones first, then derived ones made unique against them
    taken = {}
    for i, t in checked:
        if "name" in t:
            if t["name"] in taken:
                errors.append("%s.name: duplicate target name %r (also %s[%d]); for example %s-%d"
                              % (_target_where(var, i, host), t["name"], var, taken[t["name"]], t["name"], i + 1))
            taken.setdefault(t["name"], i)
    unnamed = [(i, t) for i, t in checked if "name" not in t]
    derived = _derived_target_names([t.get("path") or t.get("alias") or ("lun-%s" % t["wwid"] if t.get("wwid") else "")
                                     or t.get("device") or "" for _i, t in unnamed])
    for k, (i, t) in enumerate(unnamed):
        name, n = derived[k], 2
        while name in taken:
            name, n = "%s-%d" % (derived[k], n), n + 1
        t["name"] = name
        taken[name] = i
    # no two targets the same (same directory, same device path, same serial)
    seen = {}
    for i, t in checked:
        for key in ("wwid", "alias", "path", "device", "serial"):
            val = t.get(key)
            if not val:
                continue
            if (key, val) in seen:
                j = seen[(key, val)]
                # one message a target (a LUN's device path is its name's)
                if any(e.startswith("%s: the same " % _target_where(var, i, host)) for e in errors):
                    continue
                errors.append("%s: the same %s %s as %s[%d]; each target must be a different %s"
                              % (_target_where(var, i, host), key, val, var, j,
                                 "drive" if key == "serial" else "directory" if key == "path" else
                                 "LUN" if key in ("wwid", "alias") else "device"))
            seen.setdefault((key, val), i)
    if errors:
        return [], errors
    return [dict(t, shorthand=False) for _i, t in checked], []


def array_target(want, targets, where):
    """The target an array measures on one host (docs/arrays.md, "The array's target"), one
    rule for the controller's validation and the host's job: the target named ``want``;
    without a name, the host's only target (a SAN LUN given as its one ``fleetqual_targets``
    entry is what the array measures); None when the host has none (``fleetqual_test_dir``).
    ``targets``: the host's resolved targets (``resolve_targets``, or the plan's on the
    host), the ``fleetqual_test_dir`` shorthand among them or not. ``where``: the array's
    variable (``fleetqual_arrays.lun1``). Raises ValueError naming the targets when ``want``
    is none of them, or when the host has several and the array names none."""
    real = [t for t in targets or [] if not t.get("shorthand")]
    names = [str(t.get("name")) for t in real]
    if want:
        for t in targets or []:
            if t.get("name") == want:
                return t
        close = difflib.get_close_matches(str(want), names, n=1, cutoff=0.6)
        raise ValueError("%s.target: no target %r on this host%s; its targets: %s"
                         % (where, want, " (did you mean %s?)" % close[0] if close else "",
                            ", ".join(names) or "none (give it fleetqual_targets)"))
    if len(real) > 1:
        raise ValueError("%s.target: this host has %d targets (%s); name one (closest valid value: target: %s)"
                         % (where, len(real), ", ".join(names), names[0]))
    return real[0] if real else None


def _capacity_map(capacities):
    """``{device path: bytes}`` from a mapping, or from the drives module's result
    (``guard`` entries' ``device``/``resolved``/``size_bytes``, ``drives``' paths)."""
    if not isinstance(capacities, dict):
        return {}
    if not any(k in capacities for k in ("guard", "drives")):
        return {k: v for k, v in capacities.items() if is_int(v) and v > 0}
    out = {}
    for d in capacities.get("drives") or []:
        if isinstance(d, dict) and is_int(d.get("size_bytes")):
            for p in [d.get("path"), d.get("id_path")] + list(d.get("by_id") or []):
                if p:
                    out[p] = d["size_bytes"]
    for g in capacities.get("guard") or []:
        if isinstance(g, dict) and is_int(g.get("size_bytes")):
            for p in (g.get("device"), g.get("resolved")):
                if p:
                    out[p] = g["size_bytes"]
    return out


def _device_spec(spec, target, region, region_text, where, errors):
    """A workload spec on a device target: one region from offset 0 (iobench --device
    --size), no files. Over-cache working sets use the whole region; cache and explicit
    ones keep their size and must fit in it."""
    s = dict(spec)
    planned = int(spec.get("total_size") or 0)
    s["file_num"] = 1
    if not s.get("direct"):
        s["direct"] = True
        note = "; O_DIRECT (a block device is always measured with O_DIRECT)"
    else:
        note = ""
    if spec.get("working_set") == "over_cache":
        if region is None:
            s["total_size"] = None
            s["device_size"] = 0
            s["sizing"] = "the whole device %s (capacity not known to the plan; at least %s for over_cache)%s" % (
                target["device"], human_size(planned), note)
        else:
            usable = region - region % int(spec["block_size"])
            if usable < planned:
                errors.append("%s: %s is smaller than workload %s's over_cache working set %s (%s); give a larger "
                              "size: (at least %s) or a smaller fleetqual_cache_size"
                              % (where, region_text, spec["id"], human_size(planned), spec.get("sizing"),
                                 compact_size(-(-planned // DEVICE_ALIGN) * DEVICE_ALIGN)))
                return None
            s["total_size"] = usable
            s["device_size"] = usable
            s["sizing"] = "%s -> %s%s" % (region_text, human_size(usable), note)
    else:
        if planned % DEVICE_ALIGN:
            closest = compact_size(max(DEVICE_ALIGN, planned // DEVICE_ALIGN * DEVICE_ALIGN))
            errors.append("%s: workload %s's working set %s (%d bytes) is not a multiple of %d bytes, which a device "
                          "region needs; closest: total_size: %s"
                          % (where, spec["id"], human_size(planned), planned, DEVICE_ALIGN, closest))
            return None
        if region is not None and planned > region:
            errors.append("%s: %s is smaller than workload %s's working set %s; give a larger size: (at least %s)"
                          % (where, region_text, spec["id"], human_size(planned),
                             compact_size(-(-planned // DEVICE_ALIGN) * DEVICE_ALIGN)))
            return None
        s["device_size"] = planned
        s["sizing"] = "%s, the first %s of %s%s" % (spec.get("sizing"), human_size(planned), target["device"], note)
    offset = int(target.get("offset") or 0)
    if offset:
        s["device_offset"] = offset
    s["dataset"] = "%s@%s+%s" % (target["name"], compact_size(offset) if offset else "0",
                                 compact_size(int(s["device_size"])) if s["device_size"] else "all")
    return s


def plan_targets(plan_list, targets, capacities=None, host=None, names=None):
    """The host's plan run on each of its targets, one target after the other.

    ``plan_list``: the resolved plan (:func:`plan`); ``targets``: the resolved targets
    (``validate.resolve_targets``; empty or the one shorthand target: the plan as it is);
    ``capacities``: device sizes from the host's facts (a mapping ``{device path: bytes}``
    or the ``fleetqual.storage.drives`` result).

    With the shorthand target the plan is returned unchanged. Otherwise every spec gains
    ``target`` (name), ``target_kind`` (path | device), ``target_path`` or
    ``target_device`` (+ ``target_serial`` when given), ``key`` (``<id>@<target>``: unique
    in the expanded plan; the record key is (host, target, id)) and new ``index``/``of``.
    Device specs also get ``device_size`` (iobench ``--size``, 0 = the whole device),
    ``file_num: 1``, ``direct: true`` and a ``dataset`` naming the region
    (``<target>@<offset>+<size>``: offsets, not files), and ``device_offset`` (iobench
    --offset, the target's ``offset``). Raises :class:`PlanError`.
    """
    resolved, errors = list(targets or []), []
    if not resolved or (len(resolved) == 1 and resolved[0].get("shorthand")):
        return list(plan_list or [])
    caps = _capacity_map(capacities)
    var = dict(TARGET_VAR_NAMES, **(names or {}))["targets"]
    out = []
    for ti, target in enumerate(resolved):
        where = "%s%s[%d] (%s)" % ("host %s: " % host if host else "", var, ti, target["name"])
        if target["kind"] == "device":
            cap = caps.get(target["device"])
            offset = int(target.get("offset") or 0)
            if cap is not None and offset >= cap:
                errors.append("%s.offset: %s is not inside the device (%s); at most %s"
                              % (where, human_size(offset), human_size(cap),
                                 compact_size(max(0, cap - OFFSET_ALIGN) // OFFSET_ALIGN * OFFSET_ALIGN)))
                continue
            if target.get("size") is not None:
                if cap is not None and offset + target["size"] > cap:
                    errors.append("%s.size: %s%s is larger than the device (%s); at most %s"
                                  % (where, human_size(target["size"]), " from offset %s" % human_size(offset)
                                     if offset else "", human_size(cap), compact_size(cap - offset)))
                    continue
                region, region_text = target["size"], "size: %s" % human_size(target["size"])
            elif cap is not None:
                region, region_text = cap - offset, ("the device from offset %s (%s)" % (
                    human_size(offset), human_size(cap - offset)) if offset else "the whole device (%s)" % human_size(cap))
            else:
                region, region_text = None, None
        for spec in plan_list or []:
            if target["kind"] == "device":
                s = _device_spec(spec, target, region, region_text, where, errors)
                if s is None:
                    continue
                # what iobench --device refuses (dbpattern needs files, sizes for O_DIRECT)
                problems = iobench_options.rule_errors(s, device=True)
                for _key, msg in problems:
                    errors.append("%s: workload %s on a device target: %s" % (where, s["id"], msg))
                if problems:
                    continue
                s["target_device"] = target["device"]
                if target.get("serial"):
                    s["target_serial"] = target["serial"]
                for key, spec_key in LUN_SPEC_KEYS.items():
                    if target.get(key) is not None:
                        s[spec_key] = target[key]
            else:
                s = dict(spec)
                s["target_path"] = target["path"]
            s["target"] = target["name"]
            s["target_kind"] = target["kind"]
            s["key"] = workload_key(s)
            out.append(s)
    if errors:
        raise PlanError(errors)
    for i, s in enumerate(out):
        s["index"] = i + 1
        s["of"] = len(out)
    return out


def workload_key(spec):
    """The key of a workload in the host's expanded plan and of its record: ``<id>@<target>``,
    or the ``id`` alone for the shorthand target (the record key is (host, target, id))."""
    return "%s@%s" % (spec["id"], spec["target"]) if spec.get("target") else spec["id"]


def target_args(spec):
    """Where the benchmark of a spec runs, as module parameters: ``{dir: <path>/<dataset>}``
    for a path target, ``{device, size}`` for a device target, ``{}`` for the shorthand
    (the role passes ``fleetqual_test_dir`` as it always did)."""
    if spec.get("target_kind") == "device":
        out = {"device": spec["target_device"], "size": int(spec.get("device_size") or 0)}
        if spec.get("device_offset"):
            out["offset"] = int(spec["device_offset"])
        return out
    if spec.get("target_kind") == "path":
        return {"dir": "%s/%s" % (spec["target_path"].rstrip("/"), spec["dataset"])}
    return {}
