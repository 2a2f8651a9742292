# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drive consistency across the fleet, controller side, pure Python.

Input: host records (docs/contracts.md section 6) each with ``drives`` (the drives
module's ``drives`` list, section 7, or its whole result) and ``workloads`` whose
records carry ``target`` / ``target_path`` / ``target_device`` (section 4; a record
without ``target`` ran on the host's ``test_dir``). Output of :func:`drive_findings`: a
list of findings::

    {kind, host, group, drive, serial, model, firmware, message, severity, ...}

``kind``:

* ``model``: a drive whose model is on fewer than half of the hosts of its group that have
  drives of its media with a model (an HDD is compared only with HDDs, an SSD with SSDs:
  ``media``, module_utils/devices/drives.py ``drive_media``; a boot drive every host has is
  not flagged; the one odd drive of a batch is); the finding carries its ``media``;
* ``firmware``: a drive whose firmware differs from its group's majority firmware for
  that model (no majority: every drive of the split is reported);
* ``drive_count``: a host with fewer drives than its group's median (``drive`` null);
* ``capacity``: a host whose total drive capacity is below its group's median by more
  than ``capacity_tolerance_pct``;
* ``result``: a drive's figure of one workload (IOPS, or the p99 latency of the record's
  ``latency_op``) far from the same workload on the same drive model across the fleet,
  with the one outlier rule of the host outliers (``outliers.Peers``):
  robust score ``|x - median| / scale > mad_score`` or more than ``pct_below`` % worse.

Groups are those of the host outliers (``outliers.group_of``: the first inventory group,
else hardware + disk model). ``severity`` is the ``drives`` option (``warn`` | ``fail``;
``off`` returns no findings); a result better than its peers is only ever ``warn``.
Messages cite the host, the drive, its model and serial.

:func:`drive_rows` gives the report's drive table (host, device, media, model, serial,
firmware, health, verdict) from the same records, their judgement and the findings.
"""

from collections import Counter

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import drive_media
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import drive_list
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import (
    checked_kernel_errors,
    checked_kernel_notes,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import (
    MAD_SCORE,
    MIN_DIFF_MS,
    PCT_BELOW,
    Peers,
    group_of,
    min_diff_of,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import median, to_float

DRIVE_OPTIONS = {
    "drives": "warn",                 # warn | fail | off
    "outlier_mad_score": MAD_SCORE,
    "outlier_pct_below": PCT_BELOW,
    "outlier_min_diff_ms": MIN_DIFF_MS,
    "capacity_tolerance_pct": 1.0,
    "min_group": 3,                   # drives of a model per workload needed for a result judgement
}
JUDGEMENT_MODES = ("warn", "fail", "off")
# figure -> "higher" | "lower" is better
RESULT_METRICS = {"iops": "higher", "lat_p99_ms": "lower"}


def _options(options):
    opts = dict(DRIVE_OPTIONS)
    opts.update({k: v for k, v in (options or {}).items() if v is not None})
    if opts["drives"] not in JUDGEMENT_MODES:
        raise ValueError("drives: must be one of %s, got %r" % (", ".join(JUDGEMENT_MODES), opts["drives"]))
    return opts


def _group_of(record):
    return group_of(record.get("groups"), record.get("facts"))[0]


def _label(host, d):
    return "%s drive %s (%s, serial %s%s)" % (
        host, d.get("name") or d.get("path") or "?", d.get("model") or "model unknown",
        d.get("serial") or "unknown", ", firmware %s" % d["firmware"] if d.get("firmware") else "")


def _drive_finding(kind, host, group, d, severity, message, **extra):
    d = d or {}
    out = {"kind": kind, "host": host, "group": group, "drive": d.get("name"), "serial": d.get("serial"),
           "model": d.get("model"), "firmware": d.get("firmware"), "message": message, "severity": severity}
    out.update(extra)
    return out


def _hosts(records):
    """[(host, group, record, drives)] of the records that carry a drive inventory."""
    out = []
    for r in records or []:
        if not isinstance(r, dict):
            continue
        drives = drive_list(r.get("drives"))
        if drives is None:
            continue
        out.append((str(r.get("host")), _group_of(r), r, drives))
    return out


def drive_of_record(record, drives, test_dir=None):
    """The one drive a workload record ran on, or None (no match, or a target spread over
    several drives such as RAID, LVM or md: no single drive to blame)."""
    dev = record.get("target_device")
    if dev:
        for d in drives:
            if dev in [d.get("path"), d.get("id_path")] + list(d.get("by_id") or []):
                return d
        return None
    where = record.get("target_path") or (test_dir if not record.get("target") else None)
    if not where:
        return None
    on = [d for d in drives if where in (d.get("targets") or [])]
    return on[0] if len(on) == 1 else None


# --------------------------------------------------------------------------- identity

MEDIA_PLURAL = {"hdd": "HDDs", "ssd": "SSDs"}


def _media_classes(members):
    """``[(media, [(host, its drives of that media with a model)])]`` of a group's members: an
    HDD is compared only with HDDs, an SSD with SSDs (drives whose media nothing says form a
    class of their own). A host is a peer of a class when it has a drive of that media with a
    model: a drive without one cannot have or lack a model."""
    classes = {}
    for host, drives in members:
        for d in drives:
            if d.get("model"):
                classes.setdefault(drive_media(d), {}).setdefault(host, []).append(d)
    return [(media, list(classes[media].items())) for media in sorted(classes, key=str)]


def _model_findings(group, media, peers, severity):
    """The drives of one media class of a group whose model is on fewer than half of its hosts."""
    if len(peers) < 2:
        return []
    hosts_with = Counter()
    for _host, drives in peers:
        hosts_with.update({d["model"] for d in drives})
    per_host = {m: median([sum(1 for d in drives if d["model"] == m) for _host, drives in peers]) for m in hosts_with}
    common = ", ".join("%s (%s per host)" % (m, fmt_num(per_host[m])) for m in sorted(hosts_with)
                       if hosts_with[m] * 2 >= len(peers))
    which = "group %s" % group if media is None else "group %s with %s" % (group, MEDIA_PLURAL[media])
    out = []
    for host, drives in peers:
        for d in drives:
            m = d["model"]
            if hosts_with[m] * 2 < len(peers):
                out.append(_drive_finding("model", host, group, d, severity, (
                    "%s: model %s is on %d of the %d hosts of %s, which have %s"
                    % (_label(host, d), m, hosts_with[m], len(peers), which, common or "no common model")),
                    media=media))
    return out


def _identity_findings(hosts, severity):
    out = []
    groups = {}
    for host, group, _record, drives in hosts:
        groups.setdefault(group, []).append((host, drives))
    for group, members in groups.items():
        if len(members) < 2:
            continue
        # model: on how many of the group's hosts with drives of its media
        for media, peers in _media_classes(members):
            out += _model_findings(group, media, peers, severity)
        # firmware: per model, the group's majority
        by_model = {}
        for host, drives in members:
            for d in drives:
                if d.get("model"):
                    by_model.setdefault(d["model"], []).append((host, d))
        for model, items in sorted(by_model.items()):
            counts = Counter(d.get("firmware") for _host, d in items)
            if len(counts) < 2:
                continue
            ranked = counts.most_common()
            majority = ranked[0][0] if ranked[0][1] > ranked[1][1] else None
            split = ", ".join("%s on %d" % (fw or "unknown", n) for fw, n in ranked)
            for host, d in items:
                if majority is not None and d.get("firmware") == majority:
                    continue
                if majority is None:
                    text = "%s: group %s runs model %s with no majority firmware (%s drives)" % (
                        _label(host, d), group, model, split)
                else:
                    text = "%s: firmware %s differs from group %s's majority %s for model %s (%s drives)" % (
                        _label(host, d), d.get("firmware") or "unknown", group, majority, model, split)
                out.append(_drive_finding("firmware", host, group, d, severity, text, majority=majority))
    return out


def _size_findings(hosts, severity, tolerance_pct):
    out = []
    groups = {}
    for host, group, _record, drives in hosts:
        cap = sum(to_float(d.get("size_bytes")) or 0 for d in drives)
        models = Counter(d.get("model") or d.get("transport") or "unknown model" for d in drives)
        groups.setdefault(group, []).append((host, len(drives), cap, models))
    for group, members in groups.items():
        if len(members) < 2:
            continue
        med_n = median([n for _host, n, _cap, _models in members])
        med_cap = median([cap for _host, _n, cap, _models in members])
        all_models = set().union(*(models for _host, _n, _cap, models in members))
        usual = {m: median([models[m] for _host, _n, _cap, models in members]) for m in all_models}
        for host, n, cap, models in members:
            if n < med_n:
                short = ["%s (%d, peers %s)" % (m, models[m], fmt_num(usual[m])) for m in sorted(all_models)
                         if models[m] < usual[m]]
                out.append(_drive_finding("drive_count", host, group, None, severity, (
                    "%s: %d drive%s, fewer than group %s's median %s%s" % (
                        host, n, "" if n == 1 else "s", group, fmt_num(med_n),
                        "; fewer of: %s" % ", ".join(short) if short else "")), value=n, median=med_n))
            if med_cap and cap < med_cap * (1 - tolerance_pct / 100.0):
                out.append(_drive_finding("capacity", host, group, None, severity, (
                    "%s: %s GB of drives, %s %% less than group %s's median %s GB" % (
                        host, fmt_num(round(cap / 1e9, 1)), fmt_num(round((1 - cap / med_cap) * 100, 1)), group,
                        fmt_num(round(med_cap / 1e9, 1)))), value=cap, median=med_cap))
    return out


# --------------------------------------------------------------------------- results per drive

def _figures(w):
    """The figures of a workload record (its ``metrics``) or of a fleet.json workload row
    (``iops``, ``p99_ms``, ...: what the report's stored host summaries carry)."""
    m = w.get("metrics")
    if isinstance(m, dict) and "iops" in m:
        return m
    if "p99_ms" in w:
        return {"iops": w.get("iops"), "lat_p99_ms": w.get("p99_ms"), "latency_op": w.get("latency_op"),
                "errors": w.get("errors"), "interrupted": w.get("interrupted")}
    return m if isinstance(m, dict) else {}


def _result_findings(hosts, opts):
    by_key = {}
    for host, group, record, drives in hosts:
        for w in record.get("workloads") or []:
            if not isinstance(w, dict):
                continue
            m = _figures(w)
            if m.get("errors") or m.get("interrupted") or m.get("timed_out"):
                continue
            d = drive_of_record(w, drives, record.get("test_dir"))
            if d is None or not d.get("model"):
                continue
            for metric in RESULT_METRICS:
                v = to_float(m.get(metric))
                if v is not None:
                    by_key.setdefault((d["model"], w.get("id"), metric), []).append(
                        (host, group, d, w, m.get("latency_op"), v))
    out = []
    mad_score, pct_below = float(opts["outlier_mad_score"]), float(opts["outlier_pct_below"])
    for (model, wid, metric), items in sorted(by_key.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if len(items) < int(opts["min_group"]):
            continue
        peers = Peers([v for _host, _group, _drive, _workload, _op, v in items], RESULT_METRICS[metric])
        med, mad, method = peers.median, peers.mad, peers.method
        for host, group, d, w, op, v in items:
            dev = peers.deviation(v, mad_score, pct_below, min_diff_of(metric, opts["outlier_min_diff_ms"]))
            if dev is None:
                continue
            score, pct, worse = dev["score"], dev["pct"], dev["worse"]
            what = "IOPS" if metric == "iops" else "p99 %s latency" % (op or "")
            unit = " ms" if metric != "iops" else ""
            text = ("%s: %s%s %s %s%s vs median %s%s of %d %s drives (robust score %s%s, %s)" % (
                _label(host, d), wid, " on %s" % w["target"] if w.get("target") else "", what.replace("  ", " "),
                fmt_num(v), unit, fmt_num(med), unit, len(items), model, fmt_num(round(score, 1)),
                "" if pct is None else ", %+.1f %%" % pct, "worse" if worse else "better than its peers"))
            out.append(_drive_finding("result", host, group, d, opts["drives"] if worse else "warn", text,
                                      workload=wid, target=w.get("target"), metric=metric, value=v, median=med,
                                      mad=mad, scale=method, score=round(score, 2), worse=worse))
    return out


def drive_findings(records, options=None):
    """Findings of drive consistency across the fleet (module docstring). ``options``:
    ``drives`` (warn | fail | off), ``outlier_mad_score``, ``outlier_pct_below``,
    ``outlier_min_diff_ms``, ``capacity_tolerance_pct``, ``min_group``."""
    opts = _options(options)
    if opts["drives"] == "off":
        return []
    hosts = _hosts(records)
    severity = opts["drives"]
    return (_identity_findings(hosts, severity)
            + _size_findings(hosts, severity, float(opts["capacity_tolerance_pct"]))
            + _result_findings(hosts, opts))


def _health_text(health):
    if not isinstance(health, dict) or not health.get("collected"):
        return "not collected", (health or {}).get("reason") if isinstance(health, dict) else "no health collected"
    if health.get("passed") is False:
        return "FAILED", "; ".join(health.get("problems") or []) or None
    if health.get("passed") is True:
        return "PASSED", "; ".join(health.get("problems") or []) or None
    return "no verdict", "; ".join(health.get("problems") or []) or None


def drive_checks(checks, drive):
    """``{failed: [messages], passed: bool}`` of the judge's checks of one drive (kind
    ``drive``): what the drive table's verdict needs. The fleet report stores it on each
    drive of a host summary (``judged``) instead of the checks themselves."""
    mine = [c for c in checks or [] if isinstance(c, dict) and c.get("kind") == "drive" and c.get("drive") == drive]
    return {"failed": [c["message"] for c in mine if c.get("status") == "fail"],
            "passed": any(c.get("status") == "pass" for c in mine)}


def lun_path(targets, drive):
    """The drive as a path of a SAN LUN target of the record (``targets[].multipath``, the
    host's guard: module_utils/devices/multipath.py), or None: ``{target, alias, wwid, path
    (1-based), paths, usable, transport, portal, dm_state, scsi_state}``."""
    for t in targets or []:
        mp = t.get("multipath") if isinstance(t, dict) else None
        paths = (mp or {}).get("paths") or []
        for i, p in enumerate(paths):
            if isinstance(p, dict) and p.get("name") == drive:
                usable = sum(1 for q in paths if isinstance(q, dict) and q.get("dm_state") in (None, "active")
                             and q.get("scsi_state") in (None, "running"))
                return {"target": t.get("name"), "alias": mp.get("alias"), "wwid": mp.get("wwid"), "path": i + 1,
                        "paths": len(paths), "usable": usable, "transport": p.get("transport"),
                        "portal": p.get("portal"), "dm_state": p.get("dm_state"), "scsi_state": p.get("scsi_state")}
    return None


def drive_rows(records, findings=None):
    """The report's drive table: one row per drive of every host record with drives::

        {host, drive, path, id_path, model, serial, firmware, size_bytes, transport,
         rotational: the kernel's queue/rotational, media: hdd | ssd | None, targets,
         health: PASSED | FAILED | not collected | no verdict, health_note, verdict: PASS | FAIL | n/a,
         reasons: [the judge's failed drive checks], findings: [messages of this drive's findings],
         kernel_errors: the kernel's storage messages the judge counted (absent: log not judged),
         kernel_notes: the kernel's capability probes the drive refused (absent: none),
         lun: the drive is a path of a SAN LUN target (:func:`lun_path`; absent: it is not)}

    ``verdict`` is FAIL when a drive check of the host's judgement (``checks``, kind
    ``drive``) failed or a finding of this drive has severity ``fail``; PASS when a check
    passed; else ``n/a`` (nothing could be checked)."""
    by_drive = {}
    for f in findings or []:
        if isinstance(f, dict) and f.get("drive"):
            by_drive.setdefault((f.get("host"), f["drive"]), []).append(f)
    rows = []
    for r in records or []:
        if not isinstance(r, dict):
            continue
        host = str(r.get("host"))
        checks = [c for c in r.get("checks") or [] if isinstance(c, dict) and c.get("kind") == "drive"]
        for d in drive_list(r.get("drives")) or []:
            judged = d.get("judged") if isinstance(d.get("judged"), dict) else drive_checks(checks, d.get("name"))
            found = by_drive.get((host, d.get("name")), [])
            failed = list(judged["failed"])
            if failed or any(f.get("severity") == "fail" for f in found):
                verdict = "FAIL"
            elif judged["passed"]:
                verdict = "PASS"
            else:
                verdict = "n/a"
            health, note = _health_text(d.get("health"))
            rows.append({"host": host, "drive": d.get("name"), "path": d.get("path"), "id_path": d.get("id_path"),
                         "model": d.get("model"), "serial": d.get("serial"), "firmware": d.get("firmware"),
                         "size_bytes": d.get("size_bytes"), "transport": d.get("transport"),
                         "rotational": d.get("rotational"), "media": drive_media(d),
                         "targets": list(d.get("targets") or []), "health": health, "health_note": note,
                         "verdict": verdict, "reasons": failed, "findings": [f["message"] for f in found]})
            # the kernel's storage messages about it the judge counted (docs/kernel-log.md); absent
            # when the kernel log was not judged
            kernel = d.get("kernel_errors")
            if "kernel_errors" not in d:
                kernel = checked_kernel_errors(r.get("checks"), d.get("name"))
            if kernel is not None:
                rows[-1]["kernel_errors"] = kernel
            lun = lun_path(r.get("targets"), d.get("name"))
            if lun:
                rows[-1]["lun"] = lun
            notes = d["kernel_notes"] if "kernel_notes" in d else checked_kernel_notes(r.get("checks"), d.get("name"))
            if notes:
                rows[-1]["kernel_notes"] = list(notes)
    return rows


__all__ = ["drive_findings", "drive_of_record", "drive_rows", "drive_checks", "DRIVE_OPTIONS", "RESULT_METRICS"]
