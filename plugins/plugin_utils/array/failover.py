# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failover under load (docs/san.md): a path of the SAN cut while an array step runs on every
initiator, and restored later; what each initiator saw, judged.

``fleetqual_failover`` (the same on every member of the array)::

    {cut: <command>, restore: <command>, at_s: 5, hold_s: 20, max_stall_s: 30,
     step: <array step, default the last>, timeout_s: 60, max_failback_s: <seconds, optional>}

* :func:`check` validates it against the array's steps (before any host is touched);
* :func:`launch` starts the timer (``failover_run.py``, detached, on the controller) when the
  array's common start is fixed: the cut at ``at_s`` seconds into the step's measured window,
  the restore ``hold_s`` seconds later, both inside the window;
* :func:`read_log` reads what ran; :func:`kernel_lines` keeps a host's kernel lines of the
  failover's time (``Failing path``, I/O errors, ``Reinstating path``); :func:`path_changes`
  what dm-multipath did to each path from the cut on (failed, reinstated: the time to fail
  back);
* :func:`judge_failover` gives each active initiator of the step its figures, the longest stretch
  without a completed request (its stall, from iobench's 0.1 s series), the I/O errors, the
  verify mismatches (the step reads back every block it wrote: iobench ``--verify-pass``), the
  kernel's lines, the time to fail back (from the restore to the last failed path's
  reinstatement), and a verdict: FAIL on an I/O error, a mismatch, a stall over
  ``max_stall_s``, or (with ``max_failback_s``) a path back later than that or not at all;
  ERROR when the cut did not run, or ran and no initiator saw it (no stall,
  no kernel line): a failover nobody saw proves nothing.
"""

import os
import subprocess
import sys

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import read_json_or_none, write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_int, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array.figures import entry_problem, measured_text, step_bench
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stalls import stall_figures

FAILOVER_VAR = "fleetqual_failover"
KEYS = ("cut", "restore", "at_s", "hold_s", "max_stall_s", "step", "timeout_s", "max_failback_s")
REQUIRED = ("cut", "restore", "at_s", "hold_s", "max_stall_s")
DEFAULT_TIMEOUT_S = 60
LOG = "failover.state"          # in the array's progress directory (not *.json: those are the members')
SPEC = "failover.spec"
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "failover_run.py")
# kernel lines this long after the restore, or after a failed path's reinstatement when later,
# still belong to the failover
KERNEL_MARGIN_S = 5.0
MAX_LINES = 20


def check(value, steps, where=FAILOVER_VAR):
    """``(checked, errors)`` of a ``fleetqual_failover`` value against the array's planned
    ``steps`` (``mode.plan_steps``); ``checked`` None when it is empty or wrong."""
    import difflib
    if value in (None, {}, ""):
        return None, []
    if not isinstance(value, dict):
        return None, ["%s: must be a mapping {cut, restore, at_s, hold_s, max_stall_s}, got %s" % (where, type_name(value))]
    errors = []
    for key in value:
        if key not in KEYS:
            guess = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.6)
            hint = " (did you mean %s?)" % guess[0] if guess else ""
            errors.append("%s.%s: unknown key%s; known: %s" % (where, key, hint, ", ".join(KEYS)))
    for key in REQUIRED:
        if key not in value:
            errors.append("%s.%s: required (%s)" % (where, key, {
                "cut": "the controller's command that cuts one path, for example a switch port's shutdown",
                "restore": "the controller's command that restores the path",
                "at_s": "seconds into the step's measured window at which the path is cut",
                "hold_s": "seconds the path stays cut", "max_stall_s": "the longest stall an initiator may see"}[key]))
    for key in ("cut", "restore"):
        if key in value and not (isinstance(value[key], str) and value[key].strip()):
            errors.append("%s.%s: must be a shell command (a non-empty string), got %s %r"
                          % (where, key, type_name(value[key]), value[key]))
    for key, low, strict in (("at_s", 0, False), ("hold_s", 0, True), ("max_stall_s", 0, True), ("timeout_s", 0, True),
                             ("max_failback_s", 0, True)):
        if key in value:
            v = value[key]
            if not is_number(v) or (v <= low if strict else v < low):
                errors.append("%s.%s: must be a number of seconds %s 0, got %s %r; for example %s"
                              % (where, key, "above" if strict else "of", type_name(v), v,
                                 {"at_s": 5, "hold_s": 20, "max_stall_s": 30, "timeout_s": DEFAULT_TIMEOUT_S,
                                  "max_failback_s": 60}[key]))
    index = value.get("step", len(steps) if steps else None)
    if "step" in value and (not is_int(value["step"]) or not 1 <= value["step"] <= len(steps or [])):
        errors.append("%s.step: must be an array step from 1 to %d, got %r; for example %d"
                      % (where, len(steps or []), value["step"], len(steps or []) or 1))
        index = None
    if errors:
        return None, errors
    step = steps[index - 1] if steps and index else None
    if step is not None and value["at_s"] + value["hold_s"] >= step["time"]:
        longest = max(0, step["time"] - value["hold_s"] - 1)
        errors.append("%s: at_s %s + hold_s %s is not inside step %d's measured window of %s s: the restore (and the "
                      "path coming back) must be measured; lengthen the step's time or set at_s to at most %s"
                      % (where, fmt_num(value["at_s"]), fmt_num(value["hold_s"]), index, fmt_num(step["time"]),
                         fmt_num(longest)))
        return None, errors
    out = dict(value, step=index, timeout_s=value.get("timeout_s", DEFAULT_TIMEOUT_S))
    return out, []


def schedule(failover, t0, steps):
    """The controller's times of the cut and the restore: ``{step, cut_at, restore_at}``."""
    step = steps[failover["step"] - 1]
    cut = float(t0) + float(step["offset_s"]) + float(failover["at_s"])
    return {"step": failover["step"], "cut_at": round(cut, 6), "restore_at": round(cut + float(failover["hold_s"]), 6)}


def launch(adir, failover, t0, steps):
    """Start the timer (detached); returns its schedule."""
    when = schedule(failover, t0, steps)
    spec = dict(failover, log=os.path.join(adir, LOG), **when)
    path = os.path.join(adir, SPEC)
    write_json_atomic(path, spec)
    with open(os.devnull, "r+b") as null:
        subprocess.Popen([sys.executable, RUNNER, path], stdin=null, stdout=null, stderr=null, start_new_session=True,
                         close_fds=True)
    return when


def read_log(adir):
    """What the timer ran (its log), or None when there is none."""
    return read_json_or_none(os.path.join(adir, LOG))


def _event(log, name):
    return next((e for e in (log or {}).get("events") or [] if e.get("event") == name), None)


def path_changes(kernel, log, offset_s=0.0, paths=None):
    """What dm-multipath did to a host's paths from the failover on (the kernel section's
    ``path_states``, module_utils/collect/kmsg.py): one entry per path it failed from a second
    before the cut, ``{"path" (maj:min), "drive", "failed_s", "reinstated_s"}`` in seconds from
    the cut; ``reinstated_s`` its first reinstatement after that failure, None when the job saw
    none. ``offset_s``: the host's clock minus the controller's; ``paths``: the path disks of
    the step's device (its collector's ``devices``), another LUN's paths left out (None: all)."""
    cut = _event(log, "cut")
    if not cut:
        return []
    start = cut["start"] + offset_s
    out = {}
    for p in (kernel or {}).get("path_states") or []:
        at = p.get("epoch") if isinstance(p, dict) else None
        if not is_number(at) or at < start - 1.0 or (paths is not None and p.get("drive") not in paths):
            continue
        key, t = p.get("path"), round(at - start, 3)
        if p.get("state") == "failed" and key not in out:
            out[key] = {"path": key, "drive": p.get("drive"), "map": p.get("map"), "failed_s": t, "reinstated_s": None,
                        "text": p.get("text")}
        elif p.get("state") == "reinstated" and key in out and out[key]["reinstated_s"] is None:
            out[key].update(reinstated_s=t, reinstated_text=p.get("text"))
    return list(out.values())


def _window_end(log, changes, path=None):
    """Seconds from the cut to the end of the failover's time on a host: a little after the
    restore, or after the reinstatement of ``path`` (every failed path without one) when
    later; None (no end) when that path was failed and never reinstated."""
    cut, restore = _event(log, "cut"), _event(log, "restore")
    end = (restore or cut)["end"] - cut["start"] + KERNEL_MARGIN_S
    for c in changes:
        if path is not None and c["drive"] != path:
            continue
        if c["reinstated_s"] is None:
            if path is not None:
                return None
            continue
        end = max(end, c["reinstated_s"] + KERNEL_MARGIN_S)
    return end


def kernel_lines(kernel, log, offset_s=0.0, paths=None, changes=None):
    """The host's kernel storage lines (the job's kernel section, ``messages``) and
    dm-multipath's reinstatements, from the cut to a little after the restore or the failed
    paths' reinstatement (:func:`path_changes`), oldest first: ``[{"t_s" (from the cut),
    "kind", "text"}]``. ``offset_s``: the host's clock minus the controller's; ``paths``: as
    :func:`path_changes` (a line on another disk left out; one that names none kept);
    ``changes``: :func:`path_changes` of the same arguments when the caller has it."""
    cut = _event(log, "cut")
    if not cut:
        return []
    start = cut["start"] + offset_s
    if changes is None:
        changes = path_changes(kernel, log, offset_s, paths)
    end = start + _window_end(log, changes)
    out = []
    for m in (kernel or {}).get("messages") or []:
        at = m.get("epoch") if is_number(m.get("epoch")) else m.get("time")
        drives = set(m.get("drives") or [m.get("drive")]) - {None}
        if paths is not None and drives and not drives & paths:
            continue        # another device's line (another LUN's path cut at the same time)
        if is_number(at) and start - 1.0 <= at <= end:
            out.append({"t_s": round(at - start, 3), "kind": m.get("kind"), "drive": m.get("drive"), "text": m.get("text")})
    for c in changes:
        if c["reinstated_s"] is not None and c["reinstated_s"] <= end - start:
            out.append({"t_s": c["reinstated_s"], "kind": "path_reinstated", "drive": c["drive"],
                        "text": c["reinstated_text"]})
    out.sort(key=lambda k: k["t_s"])
    return out[:MAX_LINES]


def attach(run, log, kernel):
    """The host record's ``array_run`` gains ``failover`` (the timer's log) and the failover
    step's entry its kernel lines (:func:`kernel_lines`, in the host's clock through the
    run's measured offset)."""
    if not log:
        return run
    run["failover"] = log
    step = (log.get("spec") or {}).get("step")
    offset = ((run.get("clock") or {}).get("offset_s")) or 0.0
    for e in run.get("steps") or []:
        if e.get("index") == step:
            devices = (((e.get("result") or {}).get("collector") or {}).get("devices")) or None
            paths = set(devices) if devices else None
            e["failover_paths"] = path_changes(kernel, log, offset, paths)
            e["failover_kernel"] = kernel_lines(kernel, log, offset, paths, e["failover_paths"])
            # where else the kernel saw the cut: the paths of a device the step did not measure
            e["failover_elsewhere"] = [c for c in path_changes(kernel, log, offset) if paths and c["drive"] not in paths]
    return run


def path_events(kernel, run, targets):
    """The host's kernel section with the failover's path events set apart: the storage
    messages on a path device of a LUN target (``targets[].multipath.paths``) from the cut to a
    little after the restore are the cut itself (the path's requests failed back to multipath,
    which sent them down another path), not errors of a drive. They leave ``messages`` and
    ``counts`` for ``failover_path_events``; the failover's own judgement (:func:`judge_failover`) says
    whether the LUN's I/O saw an error. A path's time ends a little after the restore, or after
    dm-multipath reinstated it when later (a recovering session's errors come until then), and
    never when it failed and was not reinstated. Unchanged without a failover."""
    log = (run or {}).get("failover") if isinstance(run, dict) else None
    cut = _event(log, "cut")
    if not isinstance(kernel, dict) or not cut:
        return kernel
    paths = {p.get("name") for t in targets or [] if isinstance(t, dict)
             for p in ((t.get("multipath") or {}).get("paths") or []) if isinstance(p, dict)}
    offset = ((run.get("clock") or {}).get("offset_s")) or 0.0
    changes = path_changes(kernel, log, offset)
    start = cut["start"] + offset
    ends = {}
    for drive in paths:
        end = _window_end(log, changes, drive)
        ends[drive] = float("inf") if end is None else start + end
    kept, moved = [], []
    for m in kernel.get("messages") or []:
        at = m.get("epoch") if isinstance(m, dict) else None
        if (isinstance(m, dict) and m.get("drive") in paths and not m.get("before_run") and is_number(at)
                and start - 1.0 <= at <= ends[m["drive"]]):
            moved.append(m)
        else:
            kept.append(m)
    if not moved:
        return kernel
    out = dict(kernel, messages=kept, failover_path_events=moved)
    counts = {d: dict(k) for d, k in (kernel.get("counts") or {}).items()}
    for m in moved:
        per = counts.get(m["drive"]) or {}
        if per.get(m.get("kind")):
            per[m["kind"]] -= 1
            if not per[m["kind"]]:
                del per[m["kind"]]
    out["counts"] = counts
    return out


def _host_figures(entry, log, failover):
    """One initiator's figures over the failover step."""
    bench = step_bench(entry) or {}
    cut = _event(log, "cut")
    out = {"stall_s": None, "stall_from_s": None, "stall_to_s": None, "errors": None, "error_first": [],
           "mismatches": None, "verified": None, "kernel": list((entry or {}).get("failover_kernel") or [])}
    out.update(failback(entry, log))
    figures = stall_figures(bench.get("intervals"))
    if figures is not None:
        longest = max(figures["silences"], key=lambda s: s["seconds"], default=None)
        # seconds from the cut (the window's start in the controller's clock is the entry's)
        base = (float(entry["window_start"]) - cut["start"]) if cut and is_number(entry.get("window_start")) else None
        out["stall_s"] = longest["seconds"] if longest else 0.0
        if longest and base is not None:
            out["stall_from_s"], out["stall_to_s"] = round(base + longest["from_s"], 3), round(base + longest["to_s"], 3)
    errs = bench.get("errors") or {}
    out["errors"] = errs.get("total")
    out["error_first"] = [s.get("message") or "%s at offset %s: %s" % (s.get("op"), s.get("offset"), s.get("errno_name"))
                          for s in (errs.get("samples") or [])[:3]]
    v = bench.get("verify") or {}
    if v.get("enabled"):
        out["mismatches"] = sum(int(v.get(k) or 0) for k in ("corrupt", "misplaced", "stale"))
        out["verified"] = int(v.get("checked") or 0)
    return out


def failback(entry, log):
    """``{paths_failed, failback_s, not_reinstated}`` of one initiator: the path disks
    dm-multipath failed from the cut on, the seconds from the restore's end to the last one's
    reinstatement (None when none failed, or one was not reinstated while the job ran: those
    in ``not_reinstated``)."""
    changes = (entry or {}).get("failover_paths") or []
    cut, restore = _event(log, "cut"), _event(log, "restore")
    failed = [c.get("drive") or c.get("path") for c in changes]
    lost = [c.get("drive") or c.get("path") for c in changes if c.get("reinstated_s") is None]
    back = None
    if changes and not lost and cut and restore:
        back = round(max(c["reinstated_s"] for c in changes) - (restore["end"] - cut["start"]), 3)
    return {"paths_failed": failed, "failback_s": back, "not_reinstated": lost}


def seen_elsewhere(entries, hosts, step):
    """Per host, where the kernel saw a cut that the step's I/O did not see: the paths
    dm-multipath failed on a device the step did not measure (the step entry's
    ``failover_elsewhere``, :func:`attach`) against what the step measured. ``[text]``."""
    out = []
    for h in hosts:
        e = entries.get(h) or {}
        other = e.get("failover_elsewhere") or []
        if not other:
            continue
        seen = ", ".join("%s (path %s of multipath map %s, failed at %+.1f s)" % (
            c.get("drive") or "?", c.get("path"), c.get("map") or "?", c["failed_s"]) for c in other[:3])
        out.append("on %s, on %s, but step %s measured %s there" % (
            h, seen, step, measured_text(e.get("measured"))))
    return out


def judge_failover(step, entries, log, failover):
    """The failover of one array step: ``{step, cut, restore, max_stall_s, hosts: {host:
    figures + verdict + reasons}, verdict, reasons}`` (``step``: the step's figures,
    ``mode.build_array``; ``entries``: ``{host: its step entry}``; ``log``: :func:`read_log`)."""
    cut, restore = _event(log, "cut"), _event(log, "restore")
    limit = float(failover["max_stall_s"])
    out = {"step": failover["step"], "cut": cut, "restore": restore, "max_stall_s": limit, "hosts": {},
           "verdict": "PASS", "reasons": []}
    if not cut or cut.get("rc") != 0:
        why = ("it did not run (no timer log)" if not cut else "it exited %s%s: %s" % (
            cut.get("rc"), " (timed out)" if cut.get("timed_out") else "", (cut.get("stderr") or "").strip()[-300:]))
        out.update(verdict="ERROR", reasons=["failover: the cut command %r failed, so no path was cut: %s"
                                             % (failover["cut"], why)])
        return out
    if not restore or restore.get("rc") != 0:
        out["reasons"].append("failover: the restore command %r %s: the path may still be cut" % (
            failover["restore"], "did not run" if not restore else "exited %s: %s" % (
                restore.get("rc"), (restore.get("stderr") or "").strip()[-300:])))
        out["verdict"] = "ERROR"
    active = [h for h, e in sorted(entries.items()) if isinstance(e, dict) and e.get("active")]
    saw = saw_kernel = False
    failed = False
    for h in active:
        f = _host_figures(entries[h], log, failover)
        reasons = []
        if f["errors"]:
            reasons.append("%s I/O error%s through the failover (first: %s)" % (
                f["errors"], "" if f["errors"] == 1 else "s", "; ".join(f["error_first"]) or "see bench.errors"))
        if f["mismatches"]:
            reasons.append("%s block%s read back wrong (verify)" % (f["mismatches"], "" if f["mismatches"] == 1 else "s"))
        if f["stall_s"] is not None and f["stall_s"] > limit:
            reasons.append("no request completed for %s s (from %s s to %s s after the cut), over max_stall_s %s"
                           % (fmt_num(f["stall_s"]), fmt_num(f["stall_from_s"]), fmt_num(f["stall_to_s"]), fmt_num(limit)))
        slow = failover.get("max_failback_s")
        if slow is not None and f["paths_failed"] and restore:
            if f["not_reinstated"]:
                reasons.append("path %s not reinstated by dm-multipath while the job ran (after the restore), "
                               "max_failback_s %s" % (", ".join(map(str, f["not_reinstated"])), fmt_num(slow)))
            elif f["failback_s"] is not None and f["failback_s"] > slow:
                reasons.append("the failed path%s came back %s s after the restore, over max_failback_s %s"
                               % ("" if len(f["paths_failed"]) == 1 else "s", fmt_num(f["failback_s"]),
                                  fmt_num(slow)))
        if reasons and f["kernel"]:
            reasons.append("the kernel: %s" % " | ".join("%+.1f s %s" % (k["t_s"], k["text"]) for k in f["kernel"][:4]))
        # seen: a kernel line, a stall of a second or more, or anything this initiator FAILs on (a
        # block read back wrong FAILs whether or not the cut was seen)
        saw = saw or bool(f["kernel"]) or (f["stall_s"] or 0) >= 1.0 or bool(reasons)
        saw_kernel = saw_kernel or bool(f["kernel"])
        unknown = f["stall_s"] is None
        f.update(verdict="FAIL" if reasons else "ERROR" if unknown else "PASS", reasons=reasons)
        if unknown:
            out["reasons"].append("failover: %s: its stall is not known: step %s %s" % (
                h, failover["step"], entry_problem(entries[h]) or "has no interval series"))
            out["verdict"] = "ERROR"
        failed = failed or bool(reasons)
        out["hosts"][h] = f
        for r in reasons:
            out["reasons"].append("failover: %s: %s" % (h, r))
    if not active:
        out["reasons"].append("failover: step %d has no active initiator" % failover["step"])
        out["verdict"] = "ERROR"
    elif not saw_kernel and not failed and seen_elsewhere(entries, active, failover["step"]):
        # the kernel saw the cut, on paths the step did not measure: a stall of the measured
        # device then is not the cut's, and never a PASS of the failover
        out["reasons"].append("failover: the cut ran (%r) and the kernel saw it, %s: name the LUN as the array's "
                              "target" % (failover["cut"], "; ".join(seen_elsewhere(entries, active, failover["step"]))))
        out["verdict"] = "ERROR"
    elif not saw:
        out["reasons"].append("failover: the cut ran (%r) but no initiator saw it: no stall of 1 s or more, no I/O "
                              "error, no kernel line; the command may not cut a path these initiators use"
                              % failover["cut"])
        out["verdict"] = "ERROR"
    elif failed and out["verdict"] == "PASS":
        out["verdict"] = "FAIL"
    return out


def _failback_text(x):
    if x.get("not_reinstated"):
        return ", path %s not reinstated" % ", ".join(map(str, x["not_reinstated"]))
    if x.get("failback_s") is not None:
        return ", failed back %s s after the restore" % fmt_num(x["failback_s"])
    return ""


def failover_line(f):
    """One line per initiator for the terminal and report.md."""
    parts = []
    for h, x in sorted((f.get("hosts") or {}).items()):
        parts.append("%s %s: stall %s s, %s error%s, %s mismatch%s%s%s" % (
            h, x["verdict"], fmt_num(x["stall_s"]) if x["stall_s"] is not None else "?", x["errors"] or 0,
            "" if x["errors"] == 1 else "s", x["mismatches"] if x["mismatches"] is not None else "?",
            "" if x["mismatches"] == 1 else "es", _failback_text(x),
            ", %d kernel line%s" % (len(x["kernel"]), "" if len(x["kernel"]) == 1 else "s") if x["kernel"] else ""))
    return "failover step %s (max_stall_s %s): %s %s" % (f.get("step"), fmt_num(f.get("max_stall_s")), f.get("verdict"),
                                                         "; ".join(parts))


__all__ = ["FAILOVER_VAR", "KEYS", "check", "schedule", "launch", "read_log", "attach", "kernel_lines", "path_changes",
           "path_events", "failback", "judge_failover", "failover_line"]
