# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host against its own history (docs/compliance.md): the findings.

The host's earlier runs, their summaries and the baseline come from ``plugin_utils/history/store.py``
(the run store, the history index ``<run_dir>/history.d/<host>.json``, the newest
*accepted* run of the same host, target and plan).  This module judges the host from them:

* **findings** (:func:`drift_findings`), each ``{kind, host, target, workload, metric,
  severity, message, ...}``:

  - ``drift``: a workload's IOPS down by more than ``iops_drop_pct`` or its p99 up by more
    than ``p99_rise_pct`` against the baseline, citing both runs and both values;
  - ``trend``: over the last ``trend_runs`` runs of the same plan (this one included, at
    least ``trend_min_runs``), the least-squares slope (``statistics.linear_regression``)
    of IOPS per run below ``-trend_iops_pct_per_run`` %, or of p99 above
    ``trend_p99_pct_per_run`` %, of the fitted first value;
  - ``wear``: a drive's ``percentage_used`` at or above ``wear_pct``, or rising, and its
    ``media_errors`` / ``reallocated_sectors`` / ``pending_sectors`` rising over those runs
    (``percentage_used`` rising below ``wear_pct`` is severity ``info``: drives wear);
  - ``identity``: since the host's previous run, a drive replaced (another serial in the
    same slot), its firmware or capacity changed, or the number of drives changed: said
    as such, so a replaced disk is not mistaken for a healed one (a drift or trend
    finding across the change says so too).

Severity: ``drift`` findings take ``mode`` (``auto``: ``fail`` for the profiles in
``fail_profiles``, ``warn`` for others); ``trend`` and ``wear`` take ``trend``
(``warn`` | ``fail`` | ``off``); ``identity`` is always ``warn``.  ``verdict.final_verdict``
fails a PASS host with a finding of severity ``fail``.
Pure Python, no Ansible import.
"""
from __future__ import annotations

import difflib
import os
import statistics

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.store import (
    ACCEPTED,
    HEALTH_COUNTERS,
    baseline_for,
    host_history,
    is_record,
    summarize,
    summary_path,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number

DRIFT_VAR = "fleetqual_drift"
DRIFT_MODES = ("auto", "fail", "warn", "off")
TREND_MODES = ("fail", "warn", "off")

# fleetqual_drift's defaults (also in roles/qualify/defaults/main/main.yml and meta/argument_specs.yml)
DRIFT_DEFAULTS = {
    "mode": "auto",                  # auto | fail | warn | off
    "fail_profiles": ["compliance"],  # profiles where auto means fail
    "iops_drop_pct": 20.0,           # drift: IOPS below the baseline's by more than this
    "p99_rise_pct": 50.0,            # drift: p99 above the baseline's by more than this
    "trend": "warn",                 # trend and wear findings: warn | fail | off
    "trend_runs": 10,                # the last N runs of the same plan (this one included)
    "trend_min_runs": 4,             # fewer: no trend
    "trend_iops_pct_per_run": 3.0,   # fitted IOPS slope, % of the fitted first value, per run
    "trend_p99_pct_per_run": 5.0,    # fitted p99 slope, same
    "wear_pct": 80,                  # percentage_used at or above: a wear finding
    "accept": False,                 # this run becomes the baseline when its record passed
}
NUMBER_KEYS = ("iops_drop_pct", "p99_rise_pct", "trend_iops_pct_per_run", "trend_p99_pct_per_run", "wear_pct")
INT_KEYS = {"trend_runs": 2, "trend_min_runs": 2}


# --------------------------------------------------------------------------- settings

def _closest(key, known):
    guess = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    return " (did you mean %s?)" % guess[0] if guess else ""


def _where(var_name, host, key=None):
    return "%s%s%s" % ("host %s: " % host if host else "", var_name, ".%s" % key if key else "")


def validate_drift(value, host=None, var_name=DRIFT_VAR):
    """Problems of a ``fleetqual_drift`` value, as strings naming the host, the variable and
    key, and the closest valid key or value; [] when valid (None: the defaults)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return ["%s: must be a mapping of %s, got %s"
                % (_where(var_name, host), ", ".join(DRIFT_DEFAULTS), type(value).__name__)]
    errors = []
    for key, val in value.items():
        where = _where(var_name, host, key)
        if key not in DRIFT_DEFAULTS:
            errors.append("%s: unknown key%s; valid: %s" % (where, _closest(key, list(DRIFT_DEFAULTS)), ", ".join(DRIFT_DEFAULTS)))
        elif key in ("mode", "trend"):
            choices = DRIFT_MODES if key == "mode" else TREND_MODES
            if val not in choices:
                errors.append("%s: must be one of %s, got %r%s"
                              % (where, ", ".join(choices), val, _closest(val, choices)))
        elif key == "fail_profiles":
            if not isinstance(val, list) or not all(isinstance(p, str) for p in val):
                errors.append("%s: must be a list of profile names, got %r; closest: %r" % (where, val, [str(val)]))
        elif key == "accept":
            if not isinstance(val, bool):
                errors.append("%s: must be true or false, got %r" % (where, val))
        elif key in INT_KEYS:
            if isinstance(val, bool) or not isinstance(val, int) or val < INT_KEYS[key]:
                errors.append("%s: must be an integer >= %d, got %r; closest: %d"
                              % (where, INT_KEYS[key], val, max(INT_KEYS[key], int(to_float(val) or 0))))
        elif not is_number(val) or val < 0:
            errors.append("%s: must be a number >= 0, got %r; closest: %s"
                          % (where, val, max(0, to_float(val) or 0) if to_float(val) is not None else DRIFT_DEFAULTS[key]))
    if not errors and value.get("trend_min_runs", 0) > value.get("trend_runs", DRIFT_DEFAULTS["trend_runs"]):
        errors.append("%s: trend_min_runs %r is more than trend_runs %r; closest: %r"
                      % (_where(var_name, host), value["trend_min_runs"], value.get("trend_runs", DRIFT_DEFAULTS["trend_runs"]),
                         value.get("trend_runs", DRIFT_DEFAULTS["trend_runs"])))
    return errors


def drift_settings(value=None, profile=None):
    """``fleetqual_drift`` merged over :data:`DRIFT_DEFAULTS`, with ``severity`` (``fail`` | ``warn``
    | ``off``) resolved for the host's profile.  Raises ValueError on an invalid value."""
    errors = validate_drift(value)
    if errors:
        raise ValueError("; ".join(errors))
    out = dict(DRIFT_DEFAULTS, **(value or {}))
    mode = out["mode"]
    if mode == "auto":
        mode = "fail" if profile in (out["fail_profiles"] or ()) else "warn"
    out["severity"] = mode
    return out


# --------------------------------------------------------------------------- findings

def _pct(cur, old):
    if cur is None or old is None or old == 0:
        return None
    return (cur - old) / abs(old) * 100.0


def _fmt(v):
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.3g" % v


def _slot_map(drives):
    return {d.get("slot") or d.get("name"): d for d in drives or []}


def identity_changes(current, previous):
    """Drive identity changes between two summaries (previous -> current): ``replaced``
    (another serial in the same slot), ``firmware``, ``capacity``, ``drive_count``."""
    cur, old = current.get("drives"), previous.get("drives")
    if cur is None or old is None:
        return []
    out = []
    host = current.get("host")
    cites = "run %s -> run %s" % (previous.get("run_id"), current.get("run_id"))
    if len(cur) != len(old):
        out.append({"change": "drive_count", "drive": None, "before": len(old), "after": len(cur),
                    "message": "%s: drive count changed %d -> %d (%s)" % (host, len(old), len(cur), cites)})
    old_slots = _slot_map(old)
    old_serials = {d.get("serial"): d for d in old if d.get("serial")}
    for slot, d in _slot_map(cur).items():
        before = old_serials.get(d.get("serial")) if d.get("serial") else None
        if before is None:
            prev = old_slots.get(slot)
            if prev is not None and prev.get("serial") and d.get("serial") and prev.get("serial") != d.get("serial"):
                out.append({"change": "replaced", "drive": d.get("name"), "before": prev.get("serial"),
                            "after": d.get("serial"),
                            "message": "%s: drive %s replaced: serial %s (%s) -> %s (%s) (%s)"
                            % (host, d.get("name"), prev.get("serial"), prev.get("model"), d.get("serial"),
                               d.get("model"), cites)})
            continue
        if before.get("firmware") != d.get("firmware") and before.get("firmware") and d.get("firmware"):
            out.append({"change": "firmware", "drive": d.get("name"), "before": before.get("firmware"),
                        "after": d.get("firmware"),
                        "message": "%s: drive %s (serial %s) firmware changed %s -> %s (%s)"
                        % (host, d.get("name"), d.get("serial"), before.get("firmware"), d.get("firmware"), cites)})
        if before.get("size_bytes") != d.get("size_bytes") and before.get("size_bytes") and d.get("size_bytes"):
            out.append({"change": "capacity", "drive": d.get("name"), "before": before.get("size_bytes"),
                        "after": d.get("size_bytes"),
                        "message": "%s: drive %s (serial %s) capacity changed %d -> %d bytes (%s)"
                        % (host, d.get("name"), d.get("serial"), before.get("size_bytes"), d.get("size_bytes"),
                           cites)})
    return out


def _finding(kind, host, severity, message, **extra):
    return dict({"kind": kind, "host": host, "severity": severity, "message": message,
                 "target": None, "workload": None, "metric": None}, **extra)


def same_latency(w, other):
    """Whether two runs' p99 are the same operation's (the headline latency,
    ``metrics.latency_op``): a summary written before the rule changed for a workload (a
    periodic-fsync workload was headed by its commit span, now by its write) is not
    compared on latency; one without ``latency_op`` is."""
    a, b = w.get("latency_op"), (other or {}).get("latency_op")
    return a is None or b is None or a == b


def _drift(current, base, settings, replaced_note, compared=None):
    """Drift findings of ``current`` against ``base``; every compared workload and metric is
    appended to ``compared`` as ``{workload, target, metric: iops|p99, ratio, limit_ratio}``
    (ratio: the change in the worse direction, 0.25 = 25 % worse, negative = better)."""
    out = []
    host = current.get("host")
    for key, w in sorted(current.get("workloads", {}).items()):
        bw = (base.get("workloads") or {}).get(key)
        if not bw:
            continue
        rules = (("iops", settings["iops_drop_pct"], -1, "down"), ("p99_ms", settings["p99_rise_pct"], 1, "up"))
        for metric, limit, worse_sign, what in rules:
            if metric == "p99_ms" and not same_latency(w, bw):
                continue
            pct = _pct(w.get(metric), bw.get(metric))
            if pct is not None and compared is not None:
                compared.append({"workload": key, "target": w.get("target"), "metric": metric.replace("_ms", ""),
                                 "ratio": round(pct * worse_sign / 100.0, 6), "limit_ratio": limit / 100.0,
                                 "baseline_run_id": base.get("run_id")})
            if pct is None or pct * worse_sign <= limit:
                continue
            out.append(_finding(
                "drift", host, settings["severity"],
                "%s %s %s %s %.1f %% (limit %g %%): %s in run %s vs %s in accepted run %s%s"
                % (host, key, metric, what, abs(pct), limit, _fmt(w.get(metric)), current.get("run_id"),
                   _fmt(bw.get(metric)), base.get("run_id"), replaced_note),
                target=w.get("target"), workload=key, metric=metric, value=w.get(metric), baseline=bw.get(metric),
                change_pct=round(pct, 2), limit_pct=limit, run_id=current.get("run_id"),
                baseline_run_id=base.get("run_id")))
    return out


def _slope_pct(values):
    """Least-squares slope per run as % of the fitted first value (None when it cannot be
    fitted: fewer than 2 values, or a fitted first value <= 0)."""
    pts = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(pts) < 2:
        return None
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    slope, intercept = statistics.linear_regression(xs, ys)
    if intercept <= 0:
        return None
    return slope / intercept * 100.0


def _trends(series, settings):
    """series: the same-plan summaries oldest first (the current one last)."""
    out = []
    if settings["trend"] == "off" or len(series) < settings["trend_min_runs"]:
        return out
    cur = series[-1]
    host = cur.get("host")
    runs = "%d runs %s .. %s" % (len(series), series[0].get("run_id"), cur.get("run_id"))
    for key in sorted(cur.get("workloads", {})):
        for metric, limit, sign, what in (("iops", settings["trend_iops_pct_per_run"], -1, "falling"),
                                          ("p99_ms", settings["trend_p99_pct_per_run"], 1, "rising")):
            vals = [(s.get("workloads") or {}).get(key, {}).get(metric) if metric == "iops"
                    or same_latency(cur["workloads"][key], (s.get("workloads") or {}).get(key, {})) else None
                    for s in series]
            if sum(v is not None for v in vals) < settings["trend_min_runs"]:
                continue
            slope = _slope_pct(vals)
            if slope is None or slope * sign <= limit:
                continue
            out.append(_finding(
                "trend", host, settings["trend"],
                "%s %s %s %s %.1f %% per run over %s (limit %g %% per run): %s"
                % (host, key, metric, what, abs(slope), runs, limit, " -> ".join(_fmt(v) for v in vals)),
                target=cur["workloads"][key].get("target"), workload=key, metric=metric,
                slope_pct_per_run=round(slope, 2), limit_pct=limit, values=vals,
                run_ids=[s.get("run_id") for s in series]))
    return out


def _wear(series, settings):
    """Drive wear and rising health counters over ``series`` (oldest first), drives matched
    by serial."""
    out = []
    if settings["trend"] == "off" or not series[-1].get("drives"):
        return out
    cur = series[-1]
    host = cur.get("host")
    for d in cur["drives"]:
        serial = d.get("serial")
        past = []
        for s in series:
            match = [x for x in s.get("drives") or () if serial and x.get("serial") == serial]
            if match:
                past.append((s.get("run_id"), match[0]))
        label = "%s drive %s (serial %s)" % (host, d.get("name"), serial)
        used = to_float(d.get("percentage_used"))
        if used is not None and used >= settings["wear_pct"]:
            first = to_float(past[0][1].get("percentage_used")) if past else None
            out.append(_finding("wear", host, settings["trend"],
                                "%s: wear percentage_used %g %% >= %g %% (run %s; %s in run %s)"
                                % (label, used, settings["wear_pct"], cur.get("run_id"), _fmt(first),
                                   past[0][0] if past else "-"),
                                drive=d.get("name"), serial=serial, metric="percentage_used", value=used,
                                limit_pct=settings["wear_pct"]))
        for counter in HEALTH_COUNTERS + ("percentage_used",):
            vals = [(rid, to_float(x.get(counter))) for rid, x in past if to_float(x.get(counter)) is not None]
            if len(vals) < 2 or vals[-1][1] <= vals[0][1]:
                continue
            if counter == "percentage_used" and (used is not None and used >= settings["wear_pct"]):
                continue
            out.append(_finding("wear", host, settings["trend"] if counter != "percentage_used" else "info",
                                "%s: %s rising %s -> %s (run %s -> run %s)"
                                % (label, counter, _fmt(vals[0][1]), _fmt(vals[-1][1]), vals[0][0], vals[-1][0]),
                                drive=d.get("name"), serial=serial, metric=counter, value=vals[-1][1],
                                first=vals[0][1], run_ids=[vals[0][0], vals[-1][0]]))
    return out


def drift_findings(current, history, settings=None):
    """The host's history judgement.

    current:  this run's summary (:func:`summarize`)
    history:  the host's earlier summaries, newest first (:func:`host_history`)
    settings: :func:`drift_settings` (default: the defaults for the current profile)

    Returns ``{baselines: {target: {run_id, ...}}, findings: [...], identity: [...],
    compared: [...], inconclusive_streak: n}``; ``findings`` holds drift, trend, wear and
    identity findings, ``compared`` every workload and metric compared with its baseline.
    """
    settings = settings or drift_settings(None, current.get("profile"))
    host = current.get("host")
    findings, baselines, compared = [], {}, []
    identity = identity_changes(current, history[0]) if history else []
    for change in identity:
        findings.append(_finding("identity", host, "warn", change["message"], drive=change["drive"],
                                 change=change["change"], before=change["before"], after=change["after"],
                                 run_id=current.get("run_id"), previous_run_id=history[0].get("run_id")))
    if settings["severity"] != "off":
        for target, fp in sorted((current.get("plan") or {}).items()):
            base = baseline_for(history, target, fp)
            baselines[target] = None if base is None else {"run_id": base.get("run_id"), "time": base.get("time")}
            if base is None:
                continue
            between = [s for s in history if (s.get("time") or 0) >= (base.get("time") or 0)]
            changed = []
            newer = [current] + between
            for a, b in zip(newer, newer[1:]):
                changed.extend(c for c in identity_changes(a, b) if c["change"] in ("replaced", "drive_count"))
            note = ("; drive identity changed since the baseline (%s): not the same disk"
                    % "; ".join(c["message"] for c in changed)) if changed else ""
            cur_t = dict(current, workloads={k: v for k, v in current.get("workloads", {}).items()
                                             if str(v.get("target") or "") == target})
            findings.extend(_drift(cur_t, base, settings, note, compared))
    same = [current] + [s for s in history if s.get("plan") == current.get("plan")]
    series = list(reversed(same[:settings["trend_runs"]]))
    findings.extend(_trends(series, settings))
    findings.extend(_wear(list(reversed(([current] + list(history))[:settings["trend_runs"]])), settings))
    return {"baselines": baselines, "findings": findings, "identity": identity, "compared": compared,
            "inconclusive_streak": inconclusive_streak(current, history)}


def inconclusive_streak(current, history):
    """How many runs in a row, this one included, the host's verdict was INCONCLUSIVE."""
    n = 0
    for s in [current] + list(history):
        if str(s.get("verdict")).upper() != "INCONCLUSIVE":
            break
        n += 1
    return n


def host_drift(root, record, verdict=None, settings=None, runs=None):
    """Judge a host record against its own history under ``root`` (the results directory):
    reads only this host's summaries of earlier runs, newest first, until it has
    ``trend_runs`` of them and an accepted run of the same plan for each target (or none
    is left).  ``settings``: the host's ``fleetqual_drift`` (default: ``record['drift']``)."""
    if settings is None or "severity" not in settings:
        raw = settings if settings is not None else record.get("drift")
        settings = drift_settings(raw if isinstance(raw, dict) else None, record.get("profile"))
    current = summarize(record, verdict=verdict)
    plan = current.get("plan") or {}

    def enough(found):
        if len(found) < settings["trend_runs"]:
            return False
        return all(baseline_for(found, t, fp) is not None for t, fp in plan.items())
    history = host_history(root, current["host"], before=current["run_id"], stop=enough, runs=runs)
    return drift_findings(current, history, settings)


# --------------------------------------------------------------------------- report time

def judge_entry(h, record, root, runs=None):
    """At report time: judge the fleet host entry ``h`` (built from ``record``) against the
    host's history under the results directory ``root``, into ``h["history"]``:
    ``{baselines, findings, compared, inconclusive_streak, summary}`` (``error`` instead
    when the record's ``drift`` settings are invalid).  Nothing when ``root`` is not given
    or holds no directory of the record's run (a report of records not stored there).
    ``runs``: list_runs(root), made once per report.  The record's ``retention``
    (fleetqual_retention) is kept as ``h["history"]["retention"]`` for the report's
    retention step (retention.fleet_policy)."""
    if not root or not is_record(record) or not os.path.isdir(os.path.join(str(root), str(record.get("run_id")))):
        return None
    try:
        out = host_drift(str(root), record, runs=runs)
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as exc:
        # invalid settings, an unreadable or malformed summary: said, and the report goes on
        h["history"] = {"error": "%s: %s" % (type(exc).__name__, exc), "findings": [], "compared": [],
                        "baselines": {}, "inconclusive_streak": 0, "summary": None}
        return h["history"]
    out.pop("identity", None)
    out["summary"] = summarize(record)
    out["retention"] = record.get("retention") if isinstance(record.get("retention"), dict) else None
    h["history"] = out
    return out


def findings_of(h):
    """The history findings of a fleet host entry (for verdict.final_verdict)."""
    return (h.get("history") or {}).get("findings") or ()


def store_entry(h, root):
    """After the final verdict: store the host's summary of this run with that verdict
    (``<root>/<run_id>/history.d/<host>.json``), so that only an accepted run serves as a
    later run's baseline.  Returns the path, or None when the entry has no summary."""
    summary = (h.get("history") or {}).get("summary")
    if not root or not summary:
        return None
    verdict = str(h.get("verdict") or summary.get("verdict")).upper()
    accepted = verdict in ACCEPTED or (summary.get("record_verdict") in ACCEPTED and summary.get("accept") is True)
    run_dir = os.path.join(str(root), str(summary.get("run_id")))
    if not os.path.isdir(run_dir):
        return None
    try:
        return write_json_atomic(summary_path(run_dir, summary["host"]), dict(summary, verdict=verdict, accepted=accepted))
    except OSError:                  # a read-only results directory: the report goes on
        return None


def text_lines(h):
    """One line per history finding of a fleet host entry, and where its baseline is: the
    lines every report format shows for the host (``[severity] kind: message``)."""
    hist = h.get("history") or {}
    if not hist:
        return []
    lines = []
    if hist.get("error"):
        lines.append("history not judged: %s" % hist["error"])
    for target, base in sorted((hist.get("baselines") or {}).items()):
        lines.append("history baseline%s: %s" % (" (%s)" % target if target else "",
                                                 "run %s" % base["run_id"] if base else "none accepted yet"))
    for f in hist.get("findings") or ():
        lines.append("[%s] %s: %s" % (f.get("severity"), f.get("kind"), f.get("message")))
    if hist.get("inconclusive_streak", 0) > 1:
        lines.append("INCONCLUSIVE %d runs in a row" % hist["inconclusive_streak"])
    return lines


def _gauges(reg, hg):
    from prometheus_client import Gauge  # pylint: disable=import-outside-toplevel

    return {
        "streak": Gauge("fleetqual_host_inconclusive_streak_runs",
                        "Runs in a row, the last one included, whose verdict was INCONCLUSIVE.", hg, registry=reg),
        "ratio": Gauge("fleetqual_host_drift_ratio",
                       "Change against the host's accepted baseline in the worse direction (0.25 = 25 % worse).",
                       hg + ["workload", "metric"], registry=reg),
        "limit": Gauge("fleetqual_host_drift_limit_ratio", "The host's fleetqual_drift limit as a ratio.",
                       hg + ["metric"], registry=reg),
        "count": Gauge("fleetqual_host_drift_findings", "History findings of the host in the last run, per kind.",
                       hg + ["kind"], registry=reg),
        "wear": Gauge("fleetqual_drive_wear_ratio", "The drive's percentage_used / 100.", hg + ["drive", "serial"],
                      registry=reg),
        "events": Gauge("fleetqual_drive_health_events", "The drive's media errors, reallocated or pending sectors.",
                        hg + ["drive", "serial", "counter"], registry=reg),
    }


def _fill(g, lab, hist, verdict):
    streak = g["streak"].labels(**lab) if lab else g["streak"]       # the host's own textfile: no labels
    streak.set(hist.get("inconclusive_streak") or (1 if verdict == "INCONCLUSIVE" else 0))
    if not hist:
        return
    for c in hist.get("compared") or ():
        g["ratio"].labels(workload=c["workload"], metric=c["metric"], **lab).set(c["ratio"])
        g["limit"].labels(metric=c["metric"], **lab).set(c["limit_ratio"])
    for kind in ("drift", "trend", "wear", "identity"):
        g["count"].labels(kind=kind, **lab).set(sum(1 for f in hist.get("findings") or () if f.get("kind") == kind))
    for d in ((hist.get("summary") or {}).get("drives") or ()):
        dl = dict(lab, drive=str(d.get("name") or ""), serial=str(d.get("serial") or ""))
        used = to_float(d.get("percentage_used"))
        if used is not None:
            g["wear"].labels(**dl).set(used / 100.0)
        for counter in HEALTH_COUNTERS:
            v = to_float(d.get(counter))
            if v is not None:
                g["events"].labels(counter=counter, **dl).set(v)


def add_prometheus(reg, hosts):
    """The history series of the fleet textfile (docs/compliance.md, "Alerting"), added to
    the prometheus_client registry ``reg`` from the fleet's host entries; none when no host
    was judged against a history (a report of records outside a results directory)."""
    if not any(h.get("history") for h in hosts):
        return reg
    g = _gauges(reg, ["host", "group"])
    for h in hosts:
        _fill(g, {"host": h["host"], "group": h.get("group") or ""}, h.get("history") or {}, h.get("verdict"))
    return reg


def add_host_prometheus(reg, record):
    """The same series for the host's own textfile (no host label: Prometheus adds the
    host's own), judged when the role stores the record: against the history in the
    results directory of the record's ``results_file`` (the record's verdict; the fleet
    report's final verdict may still change it).  None added without that directory."""
    rf = record.get("results_file") if isinstance(record, dict) else None
    h = {}
    if rf:
        judge_entry(h, record, os.path.dirname(os.path.dirname(str(rf))))
    if h.get("history"):
        _fill(_gauges(reg, []), {}, h["history"], str(record.get("verdict")).upper())
    return reg


__all__ = ["DRIFT_DEFAULTS", "validate_drift", "drift_settings", "identity_changes", "drift_findings",
           "inconclusive_streak", "host_drift", "judge_entry", "findings_of", "store_entry", "text_lines",
           "add_prometheus", "add_host_prometheus"]
