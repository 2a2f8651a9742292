# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet aggregation for the qualify_report callback (controller side, pure Python).

Input: the per-host records the ``qualify`` role hands over with ``set_stats``
(docs/contracts.md section 6) plus what the play itself saw for every host
(unreachable, failed tasks).  Output: one JSON-safe ``fleet`` dict, the content of
``fleet.json`` (schema documented in docs/report.md), which every renderer in
``report.py`` reads.  Also: robust fleet outliers, baseline deltas, history.jsonl and
the Prometheus textfile.

Nothing here imports Ansible; every function is testable on synthetic dicts.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import json
import math
import os
import re
import tempfile

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import first_failing_rule

SCHEMA = "fleetqual.fleet"
SCHEMA_VERSION = 1
GENERATOR = "fleetqual.storage.qualify_report"

VERDICTS = ("PASS", "FAIL", "UNREACHABLE", "ERROR")
MIN_GROUP_SIZE = 3
MAD_SCALE = 1.4826           # MAD -> sigma for normal data
MEANAD_SCALE = 1.2533        # mean absolute deviation -> sigma (used when MAD == 0)

DEFAULT_OPTIONS = {
    "outliers": "warn",                 # warn | fail | off
    "regressions": "warn",              # warn | fail | off
    "outlier_mad_score": 3.5,
    "outlier_pct_below": 20.0,
    "regression_tolerance_pct": 10.0,
    "baseline": None,
}

# Metrics judged across the fleet (outliers) and against a baseline (regressions).
# "higher" means a higher value is better.
JUDGED_METRICS = {"iops": "higher", "p99_ms": "lower"}
DELTA_METRICS = {"iops": "higher", "mibps": "higher", "p99_ms": "lower"}
NON_GROUPS = ("all", "ungrouped")

READ_MODES = ("rndrd", "seqrd", "read", "randread")
WRITE_MODES = ("rndwr", "seqwr", "seqrewr", "write", "randwrite", "log")


# --------------------------------------------------------------------------- helpers

@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector (restored on exit).

    The report builds hundreds of thousands of small acyclic dicts while the host records
    (every iostat sample) are alive; each automatic collection walks all of them, which
    cost about a third of ``aggregate`` on 1000 hosts. Nothing here creates cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plain(obj):
    """Deep-copy into plain JSON types (str, int, float, bool, None, dict, list).

    Ansible 2.19 hands data over in tagged subclasses of the builtin types; renderers and
    json.dumps want the plain ones.  Unknown objects become their str()."""
    if obj is None or type(obj) in (str, int, float, bool):
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, dict) or hasattr(obj, "items"):
        try:
            return {str(k): plain(v) for k, v in obj.items()}
        except Exception:  # pragma: no cover - exotic mapping
            return str(obj)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [plain(v) for v in obj]
    return str(obj)


def num(value):
    """A finite float, or None for None / NaN / inf / bool / non-numeric."""
    t = type(value)
    if t is float:
        return value if value - value == 0.0 else None      # NaN and inf fail this
    if t is int:
        return float(value)
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(f) or math.isinf(f):
        return None
    return f


def median(values):
    vals = sorted(values)
    n = len(vals)
    if n == 0:
        return None
    mid = n // 2
    if n % 2:
        return vals[mid]
    return (vals[mid - 1] + vals[mid]) / 2.0


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def run_id_from(now):
    return now.strftime("%Y%m%dT%H%M%SZ")


_NAT = re.compile(r"(\d+)")


def natural_key(text):
    """Sort db2 before db10."""
    return [int(p) if p.isdigit() else p.lower() for p in _NAT.split(str(text))]


def _round(value, digits=4):
    return None if value is None else round(value, digits)


# --------------------------------------------------------------------------- workloads

def latency_op(mode, metrics):
    """Which operation's latency describes a workload: read, write or mixed (worse of both).

    Falls back to whatever the metrics carry (fsync for a pure fsync workload)."""
    mode = (mode or "").lower()
    if mode in READ_MODES or mode.endswith("rd"):
        return "read"
    if mode in WRITE_MODES or mode.endswith("wr"):
        return "write"
    if mode:
        return "mixed"
    if num(metrics.get("read_p99_ms")) is not None and num(metrics.get("write_p99_ms")) is None:
        return "read"
    if num(metrics.get("write_p99_ms")) is not None and num(metrics.get("read_p99_ms")) is None:
        return "write"
    return "mixed"


def _pct_for(metrics, op, pct):
    if op == "mixed":
        vals = [v for v in (num(metrics.get("read_%s_ms" % pct)), num(metrics.get("write_%s_ms" % pct)))
                if v is not None]
        return max(vals) if vals else None
    value = num(metrics.get("%s_%s_ms" % (op, pct)))
    if value is None:
        # e.g. a write workload that only measured fsyncs
        for other in ("read", "write", "fsync"):
            value = num(metrics.get("%s_%s_ms" % (other, pct)))
            if value is not None:
                break
    return value


def device_await(metrics):
    """iostat's classic await: r_await and w_await weighted by r/s and w/s."""
    r_s, w_s = num(metrics.get("dev_r_s")), num(metrics.get("dev_w_s"))
    r_aw, w_aw = num(metrics.get("dev_r_await_ms")), num(metrics.get("dev_w_await_ms"))
    if r_s is not None and w_s is not None and r_aw is not None and w_aw is not None and (r_s + w_s) > 0:
        return (r_s * r_aw + w_s * w_aw) / (r_s + w_s)
    vals = [v for v in (r_aw, w_aw) if v is not None]
    return max(vals) if vals else None


def workload_id(spec):
    wid = spec.get("id")
    if wid:
        return str(wid)
    parts = [str(p) for p in (spec.get("workload"), spec.get("mode")) if p]
    if spec.get("threads") is not None:
        parts.append("t%s" % spec.get("threads"))
    return "-".join(parts) or "workload"


def _clean_metrics(metrics):
    """Numbers as finite floats (NaN/inf -> None), booleans kept, anything else dropped."""
    out = {}
    for k, v in metrics.items():
        t = type(v)
        if t is float:
            out[k] = v if v - v == 0.0 else None
        elif t is bool or v is None:
            out[k] = v
        else:
            n = num(v)
            if n is not None or isinstance(v, (int, float)):
                out[str(k)] = n
    return out


def summarize_workload(spec):
    """The flat per-workload row the fleet report uses (numbers may be None)."""
    spec = spec if isinstance(spec, dict) else {}
    metrics = spec.get("metrics") if isinstance(spec.get("metrics"), dict) else {}
    result = spec.get("result") if isinstance(spec.get("result"), dict) else {}
    op = latency_op(spec.get("mode"), metrics)
    bench = result.get("bench") if isinstance(result.get("bench"), dict) else {}
    collector = result.get("collector") if isinstance(result.get("collector"), dict) else {}
    errors = num(metrics.get("errors"))
    interrupted = bool(metrics.get("interrupted")) or bool(bench.get("interrupted"))
    threads = spec.get("threads")
    try:
        threads = int(threads) if threads is not None else None
    except (TypeError, ValueError):
        threads = None
    return {
        "id": workload_id(spec),
        "workload": plain(spec.get("workload")),
        "mode": plain(spec.get("mode")),
        "threads": threads,
        "block_size": plain(spec.get("block_size")),
        "direct": plain(spec.get("direct")),
        "time_s": num(spec.get("time")),
        "elapsed_s": num(bench.get("elapsed_s")),
        "latency_op": op,
        "iops": num(metrics.get("iops")),
        "mibps": num(metrics.get("mibps")),
        "p95_ms": _pct_for(metrics, op, "p95"),
        "p99_ms": _pct_for(metrics, op, "p99"),
        "util_pct": num(metrics.get("dev_util_pct")),
        "await_ms": device_await(metrics),
        "errors": int(errors) if errors is not None else 0,
        "interrupted": interrupted,
        "devices": plain(collector.get("devices") or []),
        "collector": plain(collector.get("source")),
        "metrics": _clean_metrics(metrics),
        "outliers": [],
        "baseline": None,
    }


def iostat_samples(spec):
    """(t, %util, await) samples of one workload, await weighted like device_await."""
    result = spec.get("result") if isinstance(spec, dict) and isinstance(spec.get("result"), dict) else {}
    iostat = result.get("iostat") if isinstance(result.get("iostat"), dict) else {}
    samples = iostat.get("samples") if isinstance(iostat.get("samples"), list) else []
    per_t = {}
    for s in samples:
        if not isinstance(s, dict):
            continue
        t = num(s.get("t"))
        if t is None:
            continue
        slot = per_t.setdefault(t, {"util": [], "rs": 0.0, "ws": 0.0, "rw_aw": 0.0, "aw": []})
        util = num(s.get("%util"))
        if util is not None:
            slot["util"].append(util)
        r_s, w_s = num(s.get("r/s")) or 0.0, num(s.get("w/s")) or 0.0
        r_aw, w_aw = num(s.get("r_await")), num(s.get("w_await"))
        slot["rs"] += r_s
        slot["ws"] += w_s
        slot["rw_aw"] += r_s * (r_aw or 0.0) + w_s * (w_aw or 0.0)
        slot["aw"].extend(v for v in (r_aw, w_aw) if v is not None)
    out = []
    for t in sorted(per_t):
        slot = per_t[t]
        util = max(slot["util"]) if slot["util"] else None     # busiest device
        ops = slot["rs"] + slot["ws"]
        if ops > 0:
            aw = slot["rw_aw"] / ops
        else:
            aw = max(slot["aw"]) if slot["aw"] else None
        out.append((t, util, aw))
    return out


# --------------------------------------------------------------------------- hosts

def _first_group(groups):
    for g in groups or []:
        if g and str(g) not in NON_GROUPS:
            return str(g)
    return None


def group_of(groups, facts):
    """(group name, source): inventory group, else hardware + disk model, else none."""
    g = _first_group(groups)
    if g:
        return g, "inventory"
    facts = facts if isinstance(facts, dict) else {}
    hw = facts.get("product_name") or facts.get("hardware_model")
    disk = facts.get("disk_model")
    if hw or disk:
        return "%s / %s" % (hw or "?", disk or "?"), "hardware"
    return "(none)", "none"


def _event_text(ev):
    if not ev:
        return ""
    task = ev.get("task") or "?"
    msg = (ev.get("msg") or "").strip().splitlines()
    msg = msg[0] if msg else ""
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return "task '%s': %s" % (task, msg) if msg else "task '%s'" % task


def build_host(name, record, play=None, inventory_groups=None):
    """One host entry of fleet.json from its record (or None) and its play outcome.

    Rules (documented in docs/report.md):
      * no record, unreachable         -> UNREACHABLE (task and message)
      * no record, a task failed       -> ERROR (task and message)
      * no record, nothing failed      -> ERROR ("no record")
      * record                         -> the record's verdict (the judge's), except
      * record PASS, then a task failed or the host became unreachable -> ERROR: the
        measurements stand (and are kept) but the run on that host did not complete, so
        PASS would not be truthful.  ``record_verdict`` keeps PASS.
      * record FAIL/ERROR and a later failure (e.g. the final verdict gate) -> unchanged.
    """
    play = play or {}
    record = record if isinstance(record, dict) else None
    failed = play.get("failed") or []          # [{task, msg}], not-ignored, not-rescued
    unreachable = play.get("unreachable") or []
    counts = play.get("counts") or {}
    n_fail = int(counts.get("failures", len(failed)) or 0)
    n_dark = int(counts.get("unreachable", len(unreachable)) or 0)
    last_fail = failed[-1] if failed and n_fail else None
    last_dark = unreachable[-1] if unreachable and n_dark else None
    if n_dark and not last_dark:
        last_dark = {"task": "?", "msg": "host unreachable"}

    reasons = []
    notes = []
    if record is None:
        groups = list(inventory_groups or [])
        facts = {}
        workloads = []
        checks = []
        record_verdict = None
        if n_dark:
            verdict = "UNREACHABLE"
            reasons.append("unreachable at %s" % _event_text(last_dark))
        elif n_fail:
            verdict = "ERROR"
            reasons.append("failed before storing a record: %s" % _event_text(last_fail or {"task": "?"}))
        else:
            verdict = "ERROR"
            reasons.append("no fleetqual_report record: the qualify role did not complete on this host "
                           "(play stopped early, host skipped, or the role was not run)")
    else:
        groups = list(record.get("groups") or inventory_groups or [])
        facts = record.get("facts") if isinstance(record.get("facts"), dict) else {}
        workloads = record.get("workloads") if isinstance(record.get("workloads"), list) else []
        checks = [c for c in (record.get("checks") or []) if isinstance(c, dict)]
        record_verdict = str(record.get("verdict") or "ERROR").upper()
        if record_verdict not in ("PASS", "FAIL", "ERROR"):
            notes.append("record verdict %r is not PASS/FAIL/ERROR; reported as ERROR" % record_verdict)
            record_verdict_eff = "ERROR"
        else:
            record_verdict_eff = record_verdict
        reasons.extend(str(r) for r in (record.get("reasons") or []))
        verdict = record_verdict_eff
        if record_verdict_eff == "PASS" and (n_fail or n_dark):
            verdict = "ERROR"
            if n_dark:
                reasons.append("record verdict PASS, but the host then became unreachable at %s"
                               % _event_text(last_dark))
            if n_fail:
                reasons.append("record verdict PASS, but then %s failed" % _event_text(last_fail or {}))
        elif n_fail or n_dark:
            ev = last_fail or last_dark
            notes.append("play outcome after the record (%s verdict kept): %s"
                         % (record_verdict_eff, _event_text(ev)))
        if not workloads and verdict == "PASS":
            verdict = "ERROR"
            reasons.append("record verdict PASS but the record holds no workload results")

    group, group_source = group_of(groups, facts)
    rows = [summarize_workload(w) for w in workloads if isinstance(w, dict)]
    diagnostics = host_diagnostics(record, workloads)
    for row in rows:
        row["first_failing_rule"] = first_failing_rule({"checks": checks}, row["id"])
    ffr = first_failing_rule({"checks": checks})
    entry = {
        "host": str(name),
        "verdict": verdict,
        "record_verdict": record_verdict,
        "first_failing_rule": ffr,
        "reasons": reasons,
        "notes": notes,
        "group": group,
        "group_source": group_source,
        "groups": [str(g) for g in groups],
        "run_id": plain(record.get("run_id")) if record else None,
        "profile": plain(record.get("profile")) if record else None,
        "facts": plain(facts),
        "test_dir": plain(record.get("test_dir")) if record else None,
        "device": plain(record.get("device")) if record else None,
        "results_file": plain(record.get("results_file")) if record else None,
        "checks": plain(checks),
        "play": {
            "counts": {k: int(v or 0) for k, v in counts.items()},
            "failed_task": plain(last_fail),
            "unreachable_task": plain(last_dark),
        },
        "workloads": rows,
        "diagnostics": diagnostics,
        "outliers": [],
        "regressions": [],
    }
    return entry


def host_diagnostics(record, workloads):
    """The host's diagnostics (docs/diagnostics.md): the record's own ``diagnostics``
    (computed by the role), else computed here from its workloads (records written before
    diagnostics existed); {} for a host without workloads."""
    diags = record.get("diagnostics") if isinstance(record, dict) else None
    if isinstance(diags, dict) and diags:
        return plain(diags)
    if not workloads:
        return {}
    # built from plain types already: no copy needed
    return diagmod.diagnose([w for w in workloads if isinstance(w, dict)])


# --------------------------------------------------------------------------- outliers

def robust_scale(values, med):
    """(scale, method) of values around med; scale 0 means 'all equal'.

    MAD * 1.4826 (Iglewicz & Hoaglin); when MAD is 0 (more than half the hosts identical)
    fall back to the mean absolute deviation * 1.2533 so one deviating host can still be
    scored, and never divide by zero."""
    dev = [abs(v - med) for v in values]
    mad = median(dev)
    if mad and mad > 0:
        return MAD_SCALE * mad, "mad", mad
    mean_ad = sum(dev) / len(dev) if dev else 0.0
    if mean_ad > 0:
        return MEANAD_SCALE * mean_ad, "meanad", mad or 0.0
    return 0.0, "none", mad or 0.0


def find_outliers(hosts, mad_score=3.5, pct_below=20.0, min_group=MIN_GROUP_SIZE):
    """Flag per (group, workload id, metric) hosts far from the group median.

    A value is an outlier when its robust score |x - median| / scale exceeds ``mad_score``
    (either direction) or when it is more than ``pct_below`` % worse than the median
    (IOPS below, p99 latency above).  ``worse`` tells whether the deviation is in the bad
    direction; only those count as failures in ``fail`` mode.  Returns (outliers, groups).
    """
    by_key = {}
    members = {}
    for h in hosts:
        if not h["workloads"]:
            continue
        members.setdefault(h["group"], {"source": h["group_source"], "hosts": []})["hosts"].append(h["host"])
        for w in h["workloads"]:
            if w["errors"] or w["interrupted"]:
                continue
            for metric in JUDGED_METRICS:
                v = w.get(metric)
                if v is None:
                    continue
                by_key.setdefault((h["group"], w["id"], metric), []).append((h, w, v))

    outliers = []
    groups = {}
    for gname, info in members.items():
        groups[gname] = {"name": gname, "source": info["source"],
                         "hosts": sorted(info["hosts"], key=natural_key),
                         "judged": len(info["hosts"]) >= min_group, "note": None}
        if len(info["hosts"]) < min_group:
            groups[gname]["note"] = ("%d host(s) with results: fewer than %d, no outlier judgement"
                                     % (len(info["hosts"]), min_group))
    for (gname, wid, metric), items in sorted(by_key.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2])):
        if len(items) < min_group:
            continue
        values = [v for _, _, v in items]
        med = median(values)
        scale, method, mad = robust_scale(values, med)
        better = JUDGED_METRICS[metric]
        for h, w, v in items:
            score = abs(v - med) / scale if scale > 0 else 0.0
            if med:
                pct = (v - med) / abs(med) * 100.0
            else:
                pct = None
            worse_pct = None
            if pct is not None:
                worse_pct = -pct if better == "higher" else pct
            by_score = score > mad_score
            by_pct = worse_pct is not None and worse_pct > pct_below
            if not (by_score or by_pct):
                continue
            direction = "high" if v > med else "low"
            worse = (direction == "low") if better == "higher" else (direction == "high")
            o = {
                "host": h["host"], "group": gname, "workload": wid, "metric": metric,
                "value": _round(v), "median": _round(med), "mad": _round(mad),
                "scale": method, "score": _round(score, 2),
                "pct_from_median": _round(pct, 1), "direction": direction, "worse": worse,
                "by": "score+pct" if (by_score and by_pct) else ("score" if by_score else "pct"),
                "group_size": len(items),
            }
            o["text"] = outlier_text(o)
            outliers.append(o)
            h["outliers"].append(o)
            w["outliers"].append(metric)
    return outliers, [groups[k] for k in sorted(groups, key=natural_key)]


def _fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.3g" % v


def outlier_text(o):
    pct = "" if o["pct_from_median"] is None else ", %+.1f %%" % o["pct_from_median"]
    return ("%s %s %s = %s vs group '%s' median %s (robust score %.1f%s, %s)"
            % (o["workload"], o["metric"], o["direction"], _fmt(o["value"]), o["group"],
               _fmt(o["median"]), o["score"], pct, "worse" if o["worse"] else "better than peers"))


# --------------------------------------------------------------------------- baseline

def load_baseline(path):
    """Read an earlier fleet.json (a file, or a run directory holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "fleet.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("hosts"), list):
        raise ValueError("%s is not a fleetqual fleet.json (schema %r)" % (path, SCHEMA))
    if int(data.get("schema_version") or 0) > SCHEMA_VERSION:
        raise ValueError("%s has schema_version %s, newer than this reader (%s)"
                         % (path, data.get("schema_version"), SCHEMA_VERSION))
    data["_path"] = path
    return data


def baseline_deltas(hosts, baseline, tolerance_pct=10.0):
    """Per host and workload: change of iops, mibps, p99_ms against the baseline.

    A regression is an IOPS drop or p99 rise beyond ``tolerance_pct``."""
    base = {}
    for bh in baseline.get("hosts") or []:
        if not isinstance(bh, dict):
            continue
        for bw in bh.get("workloads") or []:
            if isinstance(bw, dict) and bw.get("id"):
                base[(bh.get("host"), bw.get("id"))] = bw
    base_hosts = {bh.get("host") for bh in baseline.get("hosts") or [] if isinstance(bh, dict)}
    regressions = []
    compared = 0
    for h in hosts:
        for w in h["workloads"]:
            bw = base.get((h["host"], w["id"]))
            if bw is None:
                w["baseline"] = {"status": "new"}
                continue
            compared += 1
            deltas = {}
            for metric, better in DELTA_METRICS.items():
                cur, old = w.get(metric), num(bw.get(metric))
                pct = None
                if cur is not None and old:
                    pct = (cur - old) / abs(old) * 100.0
                worse = None
                if pct is not None:
                    worse = -pct if better == "higher" else pct
                regressed = bool(worse is not None and worse > tolerance_pct and metric in JUDGED_METRICS)
                deltas[metric] = {"baseline": _round(old), "current": _round(cur),
                                  "delta_pct": _round(pct, 1), "regression": regressed}
                if regressed:
                    r = {"host": h["host"], "workload": w["id"], "metric": metric,
                         "baseline": _round(old), "current": _round(cur), "delta_pct": _round(pct, 1),
                         "tolerance_pct": tolerance_pct}
                    r["text"] = ("%s %s %s -> %s (%+.1f %%, tolerance %g %%)"
                                 % (w["id"], metric, _fmt(old), _fmt(cur), pct, tolerance_pct))
                    regressions.append(r)
                    h["regressions"].append(r)
            w["baseline"] = {"status": "compared", "deltas": deltas}
    current = {h["host"] for h in hosts}
    return {
        "path": baseline.get("_path"),
        "run_id": baseline.get("run_id"),
        "generated_at": baseline.get("generated_at"),
        "tolerance_pct": tolerance_pct,
        "compared_workloads": compared,
        "missing_hosts": sorted((str(x) for x in base_hosts - current if x), key=natural_key),
        "new_hosts": sorted((h["host"] for h in hosts if h["host"] not in base_hosts and h["workloads"]),
                            key=natural_key),
        "regressions": regressions,
    }


# --------------------------------------------------------------------------- aggregate

def aggregate(records, play=None, inventory=None, options=None, baseline=None, now=None, run_id=None):
    """Build the fleet dict (fleet.json content).

    records:   {host: record}          (stats.custom[host]['fleetqual_report'])
    play:      {host: {counts: {...}, failed: [{task, msg}], unreachable: [{task, msg}]}}
    inventory: {host: [group, ...]}    every host the plays targeted
    options:   see DEFAULT_OPTIONS
    baseline:  a loaded earlier fleet.json (load_baseline) or None
    """
    with gc_paused():
        return _aggregate(records, play, inventory, options, baseline, now, run_id)


def _aggregate(records, play, inventory, options, baseline, now, run_id):
    opts = dict(DEFAULT_OPTIONS)
    opts.update({k: v for k, v in (options or {}).items() if v is not None})
    # no deep copy of the records (they carry every iostat sample): the pieces the fleet
    # keeps are converted with plain() where they are copied
    records = {str(k): v for k, v in (records or {}).items() if isinstance(v, dict)}
    play = play or {}
    inventory = inventory or {}
    now = now or utc_now()
    names = set(records) | set(inventory) | {h for h, p in play.items()
                                             if (p.get("counts") or {}).get("failures")
                                             or (p.get("counts") or {}).get("unreachable")
                                             or p.get("failed") or p.get("unreachable")}
    hosts = [build_host(n, records.get(n), play.get(n), inventory.get(n))
             for n in sorted(names, key=natural_key)]

    if run_id is None:
        ids = [r.get("run_id") for r in records.values() if r.get("run_id")]
        run_id = max(set(ids), key=ids.count) if ids else run_id_from(now)
    notes = []
    if len({r.get("run_id") for r in records.values() if r.get("run_id")}) > 1:
        notes.append("records carry different run_ids; report filed under %s" % run_id)

    outliers, groups = [], []
    if opts["outliers"] != "off":
        outliers, groups = find_outliers(hosts, float(opts["outlier_mad_score"]),
                                         float(opts["outlier_pct_below"]))
        for g in groups:
            if g["note"]:
                notes.append("group '%s': %s" % (g["name"], g["note"]))

    base = None
    if baseline is not None and opts["regressions"] != "off":
        base = baseline_deltas(hosts, baseline, float(opts["regression_tolerance_pct"]))
        if base["missing_hosts"]:
            notes.append("in the baseline but not in this run: %s" % ", ".join(base["missing_hosts"]))

    for h in hosts:
        if h["verdict"] != "PASS":
            continue
        if opts["outliers"] == "fail":
            bad = [o for o in h["outliers"] if o["worse"]]
            if bad:
                h["verdict"] = "FAIL"
                h["reasons"].extend("fleet outlier: %s" % o["text"] for o in bad)
                h["first_failing_rule"] = h["first_failing_rule"] or "fleet outlier"
        if opts["regressions"] == "fail" and h["regressions"]:
            h["verdict"] = "FAIL"
            h["reasons"].extend("regression against baseline: %s" % r["text"] for r in h["regressions"])
            h["first_failing_rule"] = h["first_failing_rule"] or "baseline regression"

    by_verdict = {v: 0 for v in VERDICTS}
    for h in hosts:
        by_verdict[h["verdict"]] = by_verdict.get(h["verdict"], 0) + 1
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "generated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run_id": str(run_id),
        "options": {k: opts[k] for k in DEFAULT_OPTIONS},
        "summary": {
            "hosts": len(hosts),
            "passed": by_verdict["PASS"],
            "by_verdict": by_verdict,
            "workloads": sum(len(h["workloads"]) for h in hosts),
            "outliers": len(outliers),
            "outliers_worse": sum(1 for o in outliers if o["worse"]),
            "regressions": len(base["regressions"]) if base else 0,
        },
        "groups": groups,
        "hosts": hosts,
        "outliers": outliers,
        "baseline": base,
        "notes": notes,
    }


# --------------------------------------------------------------------------- files

def write_atomic(path, text, mode=0o644):
    """Write text to path via a temporary file in the same directory and rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def to_json(fleet):
    """fleet.json text: top-level keys one per line, each list item (host, outlier, ...) on
    its own line.  Readable with jq, and fast (the C encoder is not used with indent=)."""
    enc = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(", ", ": ")).encode
    keys = list(fleet)
    parts = ["{"]
    for i, key in enumerate(keys):
        value = fleet[key]
        if isinstance(value, list) and value:
            text = "[\n" + ",\n".join("  " + enc(item) for item in value) + "\n ]"
        else:
            text = enc(value)
        parts.append(" %s: %s%s" % (enc(str(key)), text, "," if i < len(keys) - 1 else ""))
    parts.append("}")
    return "\n".join(parts) + "\n"


def history_lines(fleet):
    out = []
    for h in fleet["hosts"]:
        out.append({
            "run_id": fleet["run_id"], "generated_at": fleet["generated_at"], "host": h["host"],
            "verdict": h["verdict"], "record_verdict": h["record_verdict"], "group": h["group"],
            "profile": h["profile"],
            "workloads": {w["id"]: {"iops": _round(w["iops"], 2), "mibps": _round(w["mibps"], 3),
                                    "p99_ms": _round(w["p99_ms"]), "util_pct": _round(w["util_pct"], 1)}
                          for w in h["workloads"]},
        })
    return out


def append_history(path, fleet):
    """Append one JSON line per host (a single write call, O_APPEND)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = "".join(json.dumps(line, sort_keys=True, allow_nan=False) + "\n" for line in history_lines(fleet))
    with open(path, "a", encoding="utf-8") as f:
        f.write(data)
    return path


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kw):
    return "{" + ",".join('%s="%s"' % (k, _label("" if v is None else v)) for k, v in kw.items()) + "}"


PROM_METRICS = (
    ("fleetqual_workload_iops", "Operations per second (read+write) of a workload.", "iops", 1.0),
    ("fleetqual_workload_mibps", "Throughput of a workload in MiB/s.", "mibps", 1.0),
    ("fleetqual_workload_latency_p95_seconds", "p95 latency of the workload's main operation.", "p95_ms", 1e-3),
    ("fleetqual_workload_latency_p99_seconds", "p99 latency of the workload's main operation.", "p99_ms", 1e-3),
    ("fleetqual_workload_device_util_percent", "iostat %util of the test device during the workload.",
     "util_pct", 1.0),
    ("fleetqual_workload_device_await_seconds", "iostat await of the test device during the workload.",
     "await_ms", 1e-3),
)


def prometheus_text(fleet):
    """node_exporter textfile-collector content for the run."""
    lines = []
    labelled = [(_labels(host=h["host"], workload=w["id"], mode=w["mode"], threads=w["threads"]), w)
                for h in fleet["hosts"] for w in h["workloads"]]
    for name, help_text, key, factor in PROM_METRICS:
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s gauge" % name)
        if factor == 1.0:
            lines.extend("%s%s %r" % (name, lab, w[key]) for lab, w in labelled if w[key] is not None)
        else:
            lines.extend("%s%s %r" % (name, lab, w[key] * factor) for lab, w in labelled if w[key] is not None)
    lines.append("# HELP fleetqual_host_pass 1 when the host passed qualification in the last run.")
    lines.append("# TYPE fleetqual_host_pass gauge")
    for h in fleet["hosts"]:
        lines.append("fleetqual_host_pass%s %d" % (_labels(host=h["host"], verdict=h["verdict"], group=h["group"]),
                                                   1 if h["verdict"] == "PASS" else 0))
    lines.append("# HELP fleetqual_workload_outlier 1 when the value is a fleet outlier within its group.")
    lines.append("# TYPE fleetqual_workload_outlier gauge")
    for o in fleet["outliers"]:
        lines.append("fleetqual_workload_outlier%s 1" % _labels(host=o["host"], workload=o["workload"],
                                                                 metric=o["metric"]))
    lines.append("# HELP fleetqual_fleet_hosts Hosts per verdict in the last run.")
    lines.append("# TYPE fleetqual_fleet_hosts gauge")
    for verdict, n in fleet["summary"]["by_verdict"].items():
        lines.append("fleetqual_fleet_hosts%s %d" % (_labels(verdict=verdict), n))
    lines.append("# HELP fleetqual_last_run_timestamp_seconds When the fleet report was generated.")
    lines.append("# TYPE fleetqual_last_run_timestamp_seconds gauge")
    try:
        ts = datetime.datetime.strptime(fleet["generated_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (ValueError, KeyError):
        ts = 0.0
    lines.append("fleetqual_last_run_timestamp_seconds %d" % ts)
    return "\n".join(lines) + "\n"


def results_root(records, default="results"):
    """The results directory the role used: parent of <run_id>/ of results_file."""
    for r in (records or {}).values():
        rf = r.get("results_file") if isinstance(r, dict) else None
        if rf:
            return os.path.dirname(os.path.dirname(str(rf)))
    return default
