# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run store and history index of each host against its own history
(docs/compliance.md); ``drift.py`` judges the host from what this reads.

The results directory holds one directory per run (``<root>/<run_id>/<host>.json``,
docs/contracts.md section 6).  This module finds, for a host, its earlier runs newest
first and reads of each only what it needs:

* **the run store**: :func:`list_runs` lists the run directories newest first (time from
  a UTC run id ``YYYYmmddTHHMMSSZ``, else the newest record's mtime) without opening
  them; :func:`is_run_dir` recognises a directory this collection wrote by its content
  (a host record or a fleet.json of ours inside), never by its name.
* **the history index**: one small summary per host and run,
  ``<run_dir>/history.d/<host>.json`` (:func:`summarize`: verdicts, plan fingerprint per
  target, IOPS and p99 per workload, drive identity and health), written atomically at
  report time (:func:`store_summary`, with the host's *final* verdict) and, for runs
  stored before that, made once from the record and cached.  Reading a host's history
  is a ``stat`` per run and one small file per run in question, never the fleet.
* **the baseline**: the newest *accepted* run of the same host, target and plan
  (:func:`accepted`, :func:`plan_fingerprint`).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import re

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.run_dir import TAKEN

HISTORY_DIR = "history.d"
SUMMARY_SCHEMA = "fleetqual.history"
SUMMARY_VERSION = 1

# the plan: what makes two runs' figures comparable (time, warmup and seed do not)
FIGURE_KEYS = ("workload", "mode", "threads", "iodepth", "block_size", "direct", "total_size", "file_num", "engine",
               "fsync_freq", "fsync_mode", "fsync_all", "rw_ratio", "rate_iops", "open_flags", "target_kind",
               "device_size", "steady_state", "precondition")
HEALTH_COUNTERS = ("media_errors", "reallocated_sectors", "pending_sectors")
ACCEPTED = ("PASS",)
_RUN_ID_TIME = re.compile(r"^(\d{8}T\d{6})Z$")


# --------------------------------------------------------------------------- run store

def run_time(run_id, run_dir=None):
    """A run's time (epoch seconds): from a UTC run id ``YYYYmmddTHHMMSSZ``, else the mtime
    of the newest ``*.json`` in its directory (None when neither)."""
    m = _RUN_ID_TIME.match(str(run_id))
    if m:
        return datetime.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    newest = None
    if run_dir:
        try:
            with os.scandir(run_dir) as it:
                for e in it:
                    if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                        mt = e.stat().st_mtime
                        newest = mt if newest is None or mt > newest else newest
        except OSError:
            return None
    return newest


def list_runs(root):
    """[(time, run_id, path)] of the directories directly under ``root``, newest first.
    Does not open them: whether one is a run directory is told by what it holds
    (:func:`is_run_dir`, the host's record itself)."""
    out = []
    try:
        with os.scandir(root) as it:
            for e in it:
                if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                    continue
                t = run_time(e.name, e.path)
                out.append((t if t is not None else 0.0, e.name, e.path))
    except FileNotFoundError:
        return []
    out.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return out


def is_record(rec, host=None, run_id=None):
    """A host record of ours (docs/contracts.md section 6), of that host and run when given."""
    return (isinstance(rec, dict) and rec.get("schema_version") == 1 and isinstance(rec.get("workloads"), list)
            and "verdict" in rec and isinstance(rec.get("host"), str)
            and (host is None or rec.get("host") == host) and (run_id is None or str(rec.get("run_id")) == run_id))


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def is_run_dir(path):
    """True when ``path`` is a run directory this collection wrote: it holds a host record
    whose ``run_id`` is the directory's name, or a fleet.json (schema fleetqual.fleet) of
    that run, or a history summary of that run.  A name alone never makes one."""
    run_id = os.path.basename(os.path.normpath(path))
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    hist = os.path.join(path, HISTORY_DIR)
    if os.path.isdir(hist) and not os.path.islink(hist):
        with os.scandir(hist) as it:
            for e in it:
                if not e.name.endswith(".json") or e.name.startswith("."):
                    continue
                doc = _load(e.path)
                if isinstance(doc, dict) and doc.get("schema") == SUMMARY_SCHEMA and doc.get("run_id") == run_id:
                    return True
                break
    candidates = []
    try:
        with os.scandir(path) as it:
            for e in it:
                if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                    candidates.append((e.stat().st_size, e.path))
    except OSError:
        return False
    for _size, p in sorted(candidates)[:3]:          # the smallest: a record, seldom fleet.json
        doc = _load(p)
        if is_record(doc, run_id=run_id):
            return True
        if isinstance(doc, dict) and doc.get("schema") == "fleetqual.fleet" and str(doc.get("run_id")) == run_id:
            return True
    return False


# --------------------------------------------------------------------------- summaries

def _spec_plan(w):
    return [[k, w.get(k)] for k in FIGURE_KEYS if w.get(k) is not None]


def plan_fingerprint(record):
    """{target: fingerprint} of a record's plan: its profile and, per workload of that
    target, the keys of :data:`FIGURE_KEYS` (what changes the figures; not time, warmup or
    seed).  ``""`` is the shorthand target.  Two runs of the same host and target are
    comparable when their fingerprints are equal."""
    per = {}
    for w in record.get("workloads") or []:
        if isinstance(w, dict):
            per.setdefault(str(w.get("target") or ""), []).append([str(w.get("id")), _spec_plan(w)])
    out = {}
    for target, specs in per.items():
        text = json.dumps([record.get("profile"), sorted(specs)], sort_keys=True, default=str)
        out[target] = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return out


def _drive(d):
    health = d.get("health") if isinstance(d.get("health"), dict) else {}
    by_path = d.get("by_path") or []
    return {"name": d.get("name"), "slot": (by_path[0] if by_path else None) or d.get("name"),
            "serial": d.get("serial"), "model": d.get("model"), "firmware": d.get("firmware"),
            "size_bytes": d.get("size_bytes"), "targets": d.get("targets") or [],
            "percentage_used": health.get("percentage_used"),
            **{k: health.get(k) for k in HEALTH_COUNTERS}}


def summarize(record, verdict=None, accepted=None):
    """The history summary of a host record (small: what the history needs).

    verdict:  the host's final verdict (verdict.final_verdict), default the record's
    accepted: whether this run is an accepted baseline; default: the final verdict is
              PASS, or ``drift.accept`` of the record is true and the record's verdict is PASS
    """
    rec_verdict = str(record.get("verdict") or "ERROR").upper()
    verdict = str(verdict or rec_verdict).upper()
    drift = record.get("drift") if isinstance(record.get("drift"), dict) else {}
    if accepted is None:
        accepted = verdict in ACCEPTED or (rec_verdict in ACCEPTED and drift.get("accept") is True)
    workloads = {}
    for w in record.get("workloads") or []:
        if not isinstance(w, dict):
            continue
        m = w.get("metrics") if isinstance(w.get("metrics"), dict) else {}
        workloads[str(w.get("key") or ("%s@%s" % (w.get("id"), w["target"]) if w.get("target") else w.get("id")))] = {
            "id": w.get("id"), "target": w.get("target"),
            "iops": to_float(m.get("iops")), "p99_ms": to_float(m.get("lat_p99_ms")),
            "latency_op": m.get("latency_op")}
    drives = record.get("drives")
    return {
        "schema": SUMMARY_SCHEMA, "schema_version": SUMMARY_VERSION,
        "host": record.get("host"), "run_id": str(record.get("run_id")), "profile": record.get("profile"),
        # "custom" when the run's matrix was the user's (fleetqual_matrix), the profile's name kept
        "matrix": record.get("matrix"),
        "record_verdict": rec_verdict, "verdict": verdict, "accepted": bool(accepted),
        "accept": drift.get("accept") is True,
        "plan": plan_fingerprint(record), "workloads": workloads,
        "drives": None if not isinstance(drives, list) else [_drive(d) for d in drives if isinstance(d, dict)],
    }


def summary_path(run_dir, host):
    return os.path.join(run_dir, HISTORY_DIR, "%s.json" % host)


def store_summary(run_dir, record, verdict=None, accepted=None):
    """Write the host's summary into ``<run_dir>/history.d/<host>.json`` (atomically) and
    return it: called at report time with the host's final verdict."""
    summary = summarize(record, verdict=verdict, accepted=accepted)
    write_json_atomic(summary_path(run_dir, summary["host"]), summary)
    return summary


def load_summary(run_dir, host, cache=True):
    """The host's summary of a run: ``history.d/<host>.json`` when it is not older than the
    record, else made from ``<host>.json`` (record verdict; cached when ``cache``); None
    when the run has no record of that host."""
    rec_path = os.path.join(run_dir, "%s.json" % host)
    spath = summary_path(run_dir, host)
    try:
        rec_mtime = os.stat(rec_path).st_mtime_ns
    except OSError:
        rec_mtime = None
    try:
        s_mtime = os.stat(spath).st_mtime_ns
    except OSError:
        s_mtime = None
    if s_mtime is not None and (rec_mtime is None or s_mtime >= rec_mtime):
        doc = _load(spath)
        if isinstance(doc, dict) and doc.get("schema") == SUMMARY_SCHEMA and doc.get("host") == host:
            return doc
    if rec_mtime is None:
        return None
    run_id = os.path.basename(os.path.normpath(run_dir))
    rec = _load(rec_path)
    if not is_record(rec, host=host, run_id=run_id):
        return None
    summary = summarize(rec)
    if cache:
        try:
            write_json_atomic(spath, summary)
        except OSError:
            pass
    return summary


def host_history(root, host, before=None, limit=None, stop=None, runs=None):
    """The host's summaries newest first, from the runs under ``root`` (those older than run
    id ``before`` when given: the current run and any newer are skipped).  Reads one small
    file per run that holds the host; stops after ``limit`` summaries, or when
    ``stop(summaries)`` is true.  ``runs``: list_runs(root) made once for many hosts."""
    out = []
    runs = list_runs(root) if runs is None else runs
    if before is not None:
        idx = [i for i, r in enumerate(runs) if r[1] == before]
        if idx:
            runs = runs[idx[0] + 1:]
        else:
            t = run_time(before)
            runs = [r for r in runs if t is None or r[0] < t]
    for t, run_id, path in runs:
        if not os.path.exists(os.path.join(path, "%s.json" % host)) and \
                not os.path.exists(summary_path(path, host)):
            continue
        if os.path.exists(os.path.join(path, "%s.json%s" % (host, TAKEN))):
            continue    # a later run reported this record as its own (judge/resume.py): counted there
        s = load_summary(path, host)
        if s is None:
            continue
        s = dict(s, time=t)
        out.append(s)
        if (limit is not None and len(out) >= limit) or (stop is not None and stop(out)):
            break
    return out


def baseline_for(history, target, fingerprint):
    """The newest accepted summary of ``history`` (newest first) with the same plan for the
    target."""
    for s in history:
        if s.get("accepted") and (s.get("plan") or {}).get(target) == fingerprint:
            return s
    return None


__all__ = ["HISTORY_DIR", "SUMMARY_SCHEMA", "SUMMARY_VERSION", "FIGURE_KEYS", "HEALTH_COUNTERS", "ACCEPTED", "run_time",
           "list_runs", "is_record", "is_run_dir", "plan_fingerprint", "summarize", "summary_path", "store_summary",
           "load_summary", "host_history", "baseline_for"]
