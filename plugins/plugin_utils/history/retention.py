# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retention of the results directory (docs/compliance.md, "Retention").

``fleetqual_retention: {keep_runs: N, keep_days: D}`` (both null by default: keep
everything).  :func:`prune` runs after a report over ``<results>/``:

* only **run directories this collection wrote** are considered, recognised by their
  content (``history.is_run_dir``: a host record of that run id, a fleet.json of that run,
  or a history summary of it), never by their name; any other file or directory under the
  results directory is left as it is;
* a run is **kept** when it is among the newest ``keep_runs`` runs, or not older than
  ``keep_days`` days (either suffices; an unset one keeps nothing by itself; both unset:
  nothing is pruned); the newest run is always kept;
* for each host, the run holding its **accepted baseline** (the newest accepted run of the
  plan of that host's newest run, per target: what its next run compares with) is kept
  in part when it is otherwise pruned: that host's record (``<host>.json``) and history
  summary (``history.d/<host>.json``) stay, the rest of the run goes (other hosts'
  records, their replaced copies, fleet.json, fleet.d/, the rendered reports);
* inside a pruned run directory only the files the collection writes there are removed
  (host records ``*.json`` and their ``*.json.<pid>.<date>~`` copies, the reports,
  ``not-passed.limit``, ``fleet.d/``, ``history.d/``, the wait's ``.progress/`` and their
  temporary ``.*`` files), then the directory itself; anything else found there is left,
  with the directory, and listed in ``left``;
* a directory holding nothing but an ended run's ``.progress/`` (a husk an older retention
  left) is removed the same way (``husks``); a run still waiting is never one;
* ``<results>/history.jsonl`` (the report's ``history`` option) loses the lines of the
  runs pruned whole, rewritten atomically; a file that is not entirely ours is left.

Pure Python, no Ansible import.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import time as _time

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as _history_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number

RETENTION_VAR = "fleetqual_retention"
RETENTION_DEFAULTS = {"keep_runs": None, "keep_days": None}
REPORT_NAMES = ("fleet.json", "summary.json", "gate.json", "junit.xml", "report.html", "report.md",
                "not-passed.limit")
# the controller's progress of a run's wait (plugins/action/job.py): <host>.json, round-<n>, plan-<hash>
PROGRESS_DIR = ".progress"
OUR_DIRS = ("fleet.d", _history_store.HISTORY_DIR, PROGRESS_DIR)
HISTORY_FILE = "history.jsonl"
_BACKUP = re.compile(r"^.+\.json\.\d+\.[^/]+~$")
_ENTRY_FILE = re.compile(r"^\.?[A-Za-z0-9_.-]+\.(jsonl|jsonl\.hist|jsonl\.sum)$")
_PROGRESS_FILE = re.compile(r"^(round-\d+|plan-[0-9a-f]+|[^/]+\.json)$")
# a host's progress in these states: its job is over (a run left with only them is a husk)
ENDED_STATES = ("done", "failed", "expired", "stopped", "died", "unreachable", "lost")


def validate_retention(value, host=None, var_name=RETENTION_VAR):
    """Problems of a ``fleetqual_retention`` value as strings naming the host, the variable
    and the closest valid key or value; [] when valid (None: the defaults, keep all)."""
    where = "%s%s" % ("host %s: " % host if host else "", var_name)
    if value is None:
        return []
    if not isinstance(value, dict):
        return ["%s: must be a mapping with keep_runs and/or keep_days, got %s" % (where, type(value).__name__)]
    errors = []
    for key, val in value.items():
        if key not in RETENTION_DEFAULTS:
            guess = difflib.get_close_matches(str(key), list(RETENTION_DEFAULTS), n=1, cutoff=0.5)
            errors.append("%s.%s: unknown key%s; valid: keep_runs, keep_days"
                          % (where, key, " (did you mean %s?)" % guess[0] if guess else ""))
        elif val is None:
            continue
        elif key == "keep_runs" and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
            n = to_float(val)
            errors.append("%s.keep_runs: must be an integer >= 1 (or null: no limit), got %r; closest: %d"
                          % (where, val, max(1, int(n)) if n is not None else 1))
        elif key == "keep_days" and (not is_number(val) or val < 0):
            n = to_float(val)
            errors.append("%s.keep_days: must be a number of days >= 0 (or null: no limit), got %r; closest: %s"
                          % (where, val, max(0, n) if n is not None else 0))
    return errors


def _policy(value):
    errors = validate_retention(value)
    if errors:
        raise ValueError("; ".join(errors))
    return dict(RETENTION_DEFAULTS, **(value or {}))


def run_dirs(root):
    """(ours, foreign): the run directories under ``root`` this collection wrote, newest
    first as ``(time, run_id, path)``, and the names of every other entry."""
    ours, foreign = [], []
    seen = set()
    for t, run_id, path in _history_store.list_runs(root):
        seen.add(run_id)
        (ours.append((t, run_id, path)) if _history_store.is_run_dir(path) else foreign.append(run_id))
    try:
        foreign.extend(n for n in os.listdir(root) if n not in seen)
    except FileNotFoundError:
        pass
    return ours, sorted(foreign)


def _hosts_of(path):
    out = []
    with os.scandir(path) as it:
        for e in it:
            if e.name.endswith(".json") and e.name not in REPORT_NAMES and not e.name.startswith(".") \
                    and e.is_file(follow_symlinks=False):
                out.append(e.name[:-5])
    return out


def baseline_runs(runs, cache=True):
    """{host: {run_id, ...}}: the run(s) holding each host's accepted baseline, per target
    the newest accepted run of the plan of the host's newest run (``runs`` newest first).
    ``cache``: store the summaries made from records (history.load_summary)."""
    newest_plan = {}                  # host -> {target: fingerprint} still looked for
    found = {}
    for _t, run_id, path in runs:
        for host in _hosts_of(path):
            if host in newest_plan and not newest_plan[host]:
                continue
            s = _history_store.load_summary(path, host, cache=cache)
            if s is None:
                continue
            if host not in newest_plan:
                newest_plan[host] = dict(s.get("plan") or {})
                found[host] = set()
            wanted = newest_plan[host]
            if s.get("accepted"):
                for target, fp in list(wanted.items()):
                    if (s.get("plan") or {}).get(target) == fp:
                        found[host].add(run_id)
                        del wanted[target]
    return found


def _ours_in_run(name, is_dir):
    if is_dir:
        return name in OUR_DIRS
    if name.startswith("."):
        return any(name[1:].startswith(n) for n in REPORT_NAMES) or name.endswith("~") or ".json." in name
    return name.endswith(".json") or name in REPORT_NAMES or bool(_BACKUP.match(name))


def _ours_inside(dirname, name):
    """Whether a file ``name`` in one of OUR_DIRS is one the collection writes there."""
    if dirname == _history_store.HISTORY_DIR:
        return name.endswith(".json")
    if dirname == PROGRESS_DIR:
        return bool(_PROGRESS_FILE.match(name))
    return bool(_ENTRY_FILE.match(name))


def is_husk(path):
    """A run directory that holds nothing but its ``.progress/`` (the wait's progress, left by
    a retention that did not know it), every host's job in it over (a run still waiting has a
    host ``running``), each progress record of this run: the run's results are gone."""
    run_id = os.path.basename(os.path.normpath(path))
    prog = os.path.join(path, PROGRESS_DIR)
    try:
        if os.path.islink(path) or os.listdir(path) != [PROGRESS_DIR] or os.path.islink(prog):
            return False
        names = os.listdir(prog)
    except OSError:
        return False
    hosts = 0
    for name in names:
        p = os.path.join(prog, name)
        if not os.path.isfile(p) or os.path.islink(p) or not (_ours_inside(PROGRESS_DIR, name) or name.startswith(".")):
            return False
        if name.endswith(".json") and not name.startswith("."):
            try:
                with open(p, encoding="utf-8") as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                return False
            if not isinstance(doc, dict) or str(doc.get("run_id")) != run_id or doc.get("state") not in ENDED_STATES:
                return False
            hosts += 1
    return hosts > 0


def _remove_run(path, keep_hosts, dry_run, left):
    """Remove what the collection wrote in a run directory except ``keep_hosts``' record
    and summary; the directory itself when nothing is left.  Returns the removed paths."""
    removed = []
    keep = {"%s.json" % h for h in keep_hosts}
    with os.scandir(path) as it:
        entries = [(e.name, e.path, e.is_dir(follow_symlinks=False)) for e in it]
    for name, p, is_dir in entries:
        if not _ours_in_run(name, is_dir):
            left.append(p)
            continue
        if is_dir:
            with os.scandir(p) as it:
                inner = [(e.name, e.path, e.is_dir(follow_symlinks=False)) for e in it]
            kept_inner = False
            for iname, ip, idir in inner:
                ours = not idir and (_ours_inside(name, iname) or iname.startswith("."))
                if not ours:
                    left.append(ip)
                    kept_inner = True
                elif name == _history_store.HISTORY_DIR and iname in keep:
                    kept_inner = True
                else:
                    removed.append(ip)
                    if not dry_run:
                        os.unlink(ip)
            if not kept_inner:
                removed.append(p)
                if not dry_run:
                    os.rmdir(p)
            continue
        if name in keep:
            continue
        removed.append(p)
        if not dry_run:
            os.unlink(p)
    if not keep_hosts and not any(lp.startswith(path + os.sep) for lp in left):
        removed.append(path)
        if not dry_run:
            os.rmdir(path)
    return removed


def _trim_history_file(path, pruned, dry_run):
    """Drop the lines of pruned runs from history.jsonl; a file with a line that is not a
    history line of ours is left as it is (returns the number of lines dropped, or None)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError:
        return None
    keep = []
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            return None
        if not isinstance(doc, dict) or "run_id" not in doc or "host" not in doc or "verdict" not in doc:
            return None
        if doc["run_id"] not in pruned:
            keep.append(line)
    dropped = len(lines) - len(keep)
    if dropped and not dry_run:
        write_atomic(path, keep, mode=os.stat(path).st_mode & 0o7777)
    return dropped


def prune(root, policy=None, now=None, dry_run=False, current_run=None):
    """Apply ``fleetqual_retention`` to the results directory ``root``.

    policy:      {keep_runs, keep_days} (None values: no limit of that kind)
    now:         epoch seconds (default: the time now)
    current_run: a run id always kept (the run just reported)
    dry_run:     say what would go, remove nothing

    Returns ``{kept: [run ids], pruned: [run ids], partial: {run_id: [hosts kept]},
    foreign: [entries not ours, untouched], left: [paths inside pruned runs not ours,
    untouched], removed: n paths, history_lines: n, husks: [run ids of directories that
    held only an ended run's .progress/, removed]}``."""
    policy = _policy(policy)
    ours, foreign = run_dirs(root)
    out = {"kept": [r[1] for r in ours], "pruned": [], "partial": {}, "foreign": foreign, "left": [],
           "removed": 0, "history_lines": 0, "husks": []}
    if policy["keep_runs"] is None and policy["keep_days"] is None:
        return out
    now = _time.time() if now is None else now
    keep = set()
    for i, (t, run_id, _p) in enumerate(ours):
        if i == 0 or (policy["keep_runs"] is not None and i < policy["keep_runs"]):
            keep.add(run_id)
        if policy["keep_days"] is not None and t is not None and now - t <= policy["keep_days"] * 86400.0:
            keep.add(run_id)
    if current_run:
        keep.add(str(current_run))
    baselines = baseline_runs(ours, cache=not dry_run)
    hold = {}
    for host, run_ids in baselines.items():
        for rid in run_ids:
            if rid not in keep:
                hold.setdefault(rid, []).append(host)
    gone = set()
    for _t, run_id, path in ours:
        if run_id in keep:
            continue
        removed = _remove_run(path, hold.get(run_id, []), dry_run, out["left"])
        out["removed"] += len(removed)
        if run_id in hold:
            out["partial"][run_id] = sorted(hold[run_id])
        else:
            gone.add(run_id)
            out["pruned"].append(run_id)
    out["kept"] = [r[1] for r in ours if r[1] in keep]
    # husks: runs an earlier retention pruned but for their .progress/ (never the current run)
    for name in list(foreign):
        path = os.path.join(root, name)
        if name != str(current_run) and is_husk(path):
            out["removed"] += len(_remove_run(path, [], dry_run, out["left"]))
            out["husks"].append(name)
            foreign.remove(name)
    hist = os.path.join(root, HISTORY_FILE)
    if gone and os.path.isfile(hist) and not os.path.islink(hist):
        out["history_lines"] = _trim_history_file(hist, gone, dry_run)
    return out


def fleet_policy(hosts):
    """The retention policy of a report: the hosts' ``fleetqual_retention`` (carried by
    their records, history.judge_entry), the most permissive one where they differ (a run
    directory holds every host: for each key the largest value, null = no limit, wins);
    None when no host carries one or a value is invalid (nothing is pruned)."""
    policies = [(h.get("history") or {}).get("retention") for h in hosts]
    policies = [p for p in policies if isinstance(p, dict)]
    if not policies or any(validate_retention(p) for p in policies):
        return None
    out = {}
    for key in RETENTION_DEFAULTS:
        values = [p.get(key) for p in policies]
        out[key] = None if any(v is None for v in values) else max(values)
    return out if any(v is not None for v in out.values()) else None


def after_report(fleet, run_dir):
    """The report step's retention: prune the results directory holding ``run_dir`` with
    the fleet's policy (fleet_policy), keeping this run.  Returns prune's result, None
    when there is no policy, or ``{error}`` when the directory could not be pruned."""
    policy = fleet_policy(fleet.get("hosts") or ())
    if policy is None:
        return None
    root = os.path.dirname(os.path.abspath(run_dir))
    try:
        return prune(root, policy, current_run=fleet.get("run_id"))
    except OSError as exc:          # a report is not lost to a directory it cannot prune
        return {"error": "retention not applied to %s: %s" % (root, exc)}


__all__ = ["validate_retention", "prune", "run_dirs", "baseline_runs", "RETENTION_DEFAULTS", "fleet_policy", "after_report"]
