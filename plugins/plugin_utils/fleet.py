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
import os
import re
import tempfile

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import drive_fleet
from ansible_collections.fleetqual.storage.plugins.plugin_utils import histogram as histmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import verdict as verdictmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import drive_list, first_failing_rule
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import median, robust_scale
# a finite float, or None for None / NaN / inf / bool / non-numeric (numeric strings read)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import to_float as num

SCHEMA = "fleetqual.fleet"
SCHEMA_VERSION = 2
GENERATOR = "fleetqual.storage.qualify_report"

VERDICTS = ("PASS", "FAIL", "UNREACHABLE", "ERROR")
MIN_GROUP_SIZE = 3

DEFAULT_OPTIONS = {
    "outliers": "warn",                 # warn | fail | off
    "regressions": "warn",              # warn | fail | off
    "drives": "warn",                   # warn | fail | off: drive consistency (plugin_utils/drive_fleet.py)
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

def latency_op_from_mode(mode, metrics):
    """For records written before metrics.latency_op existed: which operation's latency
    describes a workload, from its mode: read, write or mixed (worse of both)."""
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


def workload_id(spec, metrics=None):
    """The record's id (``metrics.workload_id`` == ``id``, derived once by the plan)."""
    wid = spec.get("id") or (metrics or {}).get("workload_id")
    if wid:
        return str(wid)
    parts = [str(p) for p in (spec.get("workload"), spec.get("mode")) if p]
    if spec.get("threads") is not None:
        parts.append("t%s" % spec.get("threads"))
    return "-".join(parts) or "workload"


def row_key(row):
    """A workload row's key in a host: ``<id>@<target>`` (plan.workload_key's form), or the
    id for the one shorthand target."""
    return "%s@%s" % (row["id"], row["target"]) if row.get("target") else row["id"]


TARGET_KEYS = ("target_kind", "target_path", "target_device")


def _clean_metrics(metrics):
    """Numbers as finite floats (NaN/inf -> None), booleans kept, anything else dropped."""
    out = {}
    for k, v in metrics.items():
        t = type(v)
        if t is float:
            out[k] = v if v - v == 0.0 else None
        elif t is bool or v is None:
            out[k] = v
        elif isinstance(v, str):
            out[str(k)] = str(v)
        elif isinstance(v, dict):
            out[str(k)] = plain(v)
        else:
            n = num(v)
            if n is not None or isinstance(v, (int, float)):
                out[str(k)] = n
    return out


PCT_KEYS = ("p50", "p90", "p95", "p99", "p999")


def _metric_latency_op(mode, metrics):
    """The workload record's ``latency_op`` (metrics.py decides it); records written before
    it existed fall back to the mode (read, write, or mixed = the worse of both)."""
    op = metrics.get("latency_op")
    if isinstance(op, str) and op:
        return op
    return latency_op_from_mode(mode, metrics)


def _lat(metrics, op, pct):
    """Percentile ``pct`` of the workload's latency op, in ms: the record's ``lat_<pct>_ms``
    when present, else the per-op keys."""
    value = num(metrics.get("lat_%s_ms" % pct))
    if value is not None or "lat_%s_ms" % pct in metrics:
        return value
    return _pct_for(metrics, op, pct)


def summarize_workload(spec, keep_metrics=True):
    """The flat per-workload row the fleet report uses (numbers may be None).

    Reads the workload spec and its ``metrics`` only (never the benchmark's raw JSON);
    ``devices``/``collector`` fall back to the module result's collector block for records
    written before ``metrics.device`` existed."""
    spec = spec if isinstance(spec, dict) else {}
    metrics = spec.get("metrics") if isinstance(spec.get("metrics"), dict) else {}
    op = _metric_latency_op(spec.get("mode"), metrics)
    errors = num(metrics.get("errors"))
    interrupted = bool(metrics.get("interrupted"))
    threads = spec.get("threads")
    conc = metrics.get("concurrency")
    if isinstance(conc, dict) and conc.get("threads") is not None:
        threads = conc.get("threads")
    try:
        threads = int(threads) if threads is not None else None
    except (TypeError, ValueError):
        threads = None
    device = metrics.get("device")
    if isinstance(device, str) and device:
        devices = device.split(",")
        source = metrics.get("dev_source")
    else:
        result = spec.get("result") if isinstance(spec.get("result"), dict) else {}
        collector = result.get("collector") if isinstance(result.get("collector"), dict) else {}
        devices = plain(collector.get("devices") or [])
        source = collector.get("source")
    row = {
        "id": workload_id(spec, metrics),
        "target": plain(spec.get("target")) or None,
        "workload": plain(spec.get("workload")),
        "mode": plain(spec.get("mode")),
        "threads": threads,
        "block_size": plain(spec.get("block_size")),
        "direct": plain(spec.get("direct")),
        "time_s": num(spec.get("time")),
        "elapsed_s": num(metrics.get("elapsed_s")),
        "latency_op": op,
        "iops": _round(num(metrics.get("iops")), 3),
        "mibps": _round(num(metrics.get("mibps")), 4),
    }
    for pct in PCT_KEYS:
        row["%s_ms" % pct] = _round(_lat(metrics, op, pct), 6)
    row.update({
        "util_pct": _round(num(metrics.get("dev_util_pct")), 3),
        "await_ms": _round(device_await(metrics), 6),
        "errors": int(errors) if errors is not None else 0,
        "interrupted": interrupted,
        "devices": devices,
        "collector": plain(source),
        "outliers": [],
        "baseline": None,
    })
    if row["target"]:
        # where it ran, for the drive judgements (drive_fleet.drive_of_record)
        row.update({k: plain(spec.get(k)) for k in TARGET_KEYS if spec.get(k)})
    if keep_metrics:
        row["metrics"] = _clean_metrics(metrics)
    return row


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
    parts = [str(v) for v in (facts.get("product_name") or facts.get("hardware_model"), facts.get("disk_model"))
             if v not in (None, "", "NA", "N/A", "?")]
    if parts:
        return " / ".join(parts), "hardware"
    return "(none)", "none"


def _last_events(play):
    """(last failed task, last unreachable event) of a host's play outcome, as counted by
    ansible's stats (rescued failures do not count)."""
    play = play or {}
    failed = play.get("failed") or []          # [{task, msg}], not-ignored, not-rescued
    unreachable = play.get("unreachable") or []
    counts = play.get("counts") or {}
    n_fail = int(counts.get("failures", len(failed)) or 0)
    n_dark = int(counts.get("unreachable", len(unreachable)) or 0)
    last_fail = failed[-1] if failed and n_fail else None
    last_dark = unreachable[-1] if unreachable and n_dark else None
    if n_fail and not last_fail:
        last_fail = {"task": "?", "msg": "failed"}
    if n_dark and not last_dark:
        last_dark = {"task": "?", "msg": "host unreachable"}
    return last_fail, last_dark


def build_host(name, record, play=None, inventory_groups=None, keep_detail=True, histograms=False):
    """One host entry of fleet.json from its record (or None) and its play outcome.

    The verdict is decided by ``verdict.final_verdict`` (the one owner; rules in
    docs/report.md); ``aggregate`` applies it again once the fleet judgements (outliers,
    regressions) are known.  ``keep_detail``: keep every check, each workload's full
    metrics and the iostat series (what report.html draws for a host); without it the
    entry keeps the summary and the checks that did not pass.  ``hist``: a
    ``HistogramAccumulator`` that receives the workloads' latency histograms."""
    play = play or {}
    record = record if isinstance(record, dict) else None
    last_fail, last_dark = _last_events(play)
    counts = play.get("counts") or {}
    if record is None:
        groups = list(inventory_groups or [])
        facts = {}
        workloads = []
        checks = []
    else:
        groups = list(record.get("groups") or inventory_groups or [])
        facts = record.get("facts") if isinstance(record.get("facts"), dict) else {}
        workloads = [w for w in record.get("workloads") or [] if isinstance(w, dict)] \
            if isinstance(record.get("workloads"), list) else []
        checks = [c for c in (record.get("checks") or []) if isinstance(c, dict)]
    decided = verdictmod.final_verdict(record, last_fail, last_dark)
    group, group_source = group_of(groups, facts)
    rows = [summarize_workload(w, keep_metrics=keep_detail) for w in workloads]
    diagnostics = host_diagnostics(record, workloads)
    for row in rows:
        mine = checks if not row["target"] else [c for c in checks if c.get("target") == row["target"]]
        row["first_failing_rule"] = first_failing_rule({"checks": mine}, row["id"])
    ffr = first_failing_rule({"checks": checks})
    kept_checks = checks if keep_detail else [c for c in checks if c.get("passed") is not True]
    entry = {
        "host": str(name),
        "verdict": decided["verdict"],
        "record_verdict": decided["record_verdict"],
        "first_failing_rule": ffr,
        "reasons": decided["reasons"],
        "notes": decided["notes"],
        "group": group,
        "group_source": group_source,
        "groups": [str(g) for g in groups],
        "run_id": plain(record.get("run_id")) if record else None,
        "slice": plain(record.get("slice")) if record else None,
        "profile": plain(record.get("profile")) if record else None,
        "facts": plain(facts),
        "test_dir": plain(record.get("test_dir")) if record else None,
        "targets": plain(record.get("targets")) if record else None,
        "drives": host_drives(record, checks),
        "target_drives": {},
        "device": plain(record.get("device")) if record else None,
        "results_file": plain(record.get("results_file")) if record else None,
        "warnings": plain(record.get("warnings") or []) if record else [],
        "checks": plain(kept_checks),
        "checks_total": len(checks),
        "play": {
            "counts": {k: int(v or 0) for k, v in counts.items()},
            "failed_task": plain(last_fail),
            "unreachable_task": plain(last_dark),
        },
        "workloads": rows,
        "diagnostics": diagnostics,
        "outliers": [],
        "regressions": [],
        "drive_findings": [],
        "detail": None,
    }
    # what verdict.final_verdict needs again once the fleet judgements are known
    entry["_record"] = None if record is None else {
        "verdict": record.get("verdict"), "reasons": list(record.get("reasons") or []), "workloads": bool(workloads)}
    if histograms:
        entry["histograms"] = {}
        for w, row in zip(workloads, rows):
            h = latency_histogram(row, w)
            if h:
                if row.get("target"):
                    h["workload"] = row["id"]       # the fleet's percentiles are per workload id
                entry["histograms"][row_key(row)] = h
    if keep_detail:
        entry["detail"] = host_detail(workloads)
    return entry


DRIVE_KEYS = ("name", "path", "id_path", "by_id", "model", "serial", "firmware", "size_bytes", "transport",
              "targets")
HEALTH_KEYS = ("collected", "reason", "passed", "problems")


def host_drives(record, checks=()):
    """The host's drives (the drives module's ``drives``, docs/contracts.md section 7) as
    a host summary keeps them: what the drive judgements (plugin_utils/drive_fleet.py) and
    the drive table need (identity, the targets on each, the health verdict) and
    ``judged``, the judge's drive checks of it (drive_fleet.drive_checks); None when the
    record has no drive inventory. The record keeps the rest (every health figure)."""
    drives = drive_list(record.get("drives")) if isinstance(record, dict) else None
    if drives is None:
        return None
    out = []
    for d in drives:
        item = {k: plain(d.get(k)) for k in DRIVE_KEYS if k in d}
        if isinstance(d.get("health"), dict):
            item["health"] = {k: plain(d["health"].get(k)) for k in HEALTH_KEYS if k in d["health"]}
        item["judged"] = drive_fleet.drive_checks(checks, d.get("name"))
        out.append(item)
    return out


def latency_histogram(row, spec):
    """{op, bits, buckets} of a workload's latency op (read+write merged for a mixed one),
    None when the record has none or the workload had errors / was interrupted."""
    if row["errors"] or row["interrupted"]:
        return None
    op = row["latency_op"]
    hists = [h for h in (histmod.workload_histogram(spec, o) for o in (("read", "write") if op == "mixed" else (op,)))
             if h]
    if not hists:
        return None
    bits = {int(h.get("sub_bucket_bits", histmod.DEFAULT_BITS)) for h in hists}
    if len(bits) > 1:
        return None
    # flat [index, count, index, count, ...]: a stored entry parses faster than pairs
    pairs = hists[0]["buckets"] if len(hists) == 1 else histmod.merge(*[h["buckets"] for h in hists])
    return {"op": op, "bits": bits.pop(), "buckets": [x for pair in pairs for x in pair]}


def host_detail(workloads):
    """What report.html draws for a host beyond fleet.json's summary: each workload's
    iostat series [[t, %util, await], ...] (fleet.iostat_samples)."""
    return {"iostat": {_spec_key(w): [list(s) for s in iostat_samples(w)] for w in workloads}}


def _spec_key(spec):
    """row_key of a workload record."""
    wid = workload_id(spec, spec.get("metrics") if isinstance(spec.get("metrics"), dict) else None)
    return "%s@%s" % (wid, spec["target"]) if spec.get("target") else wid


class HistogramAccumulator:
    """Exact fleet latency percentiles: merges the latency histogram of every workload
    (plugin_utils/histogram.py), per group and workload id; the fleet's are the sum of
    its groups'."""

    def __init__(self):
        self.groups = {}     # (group, wid) -> {"op", "bits", "hosts", "buckets": {idx: count}, "mismatch"}

    def add_host(self, group, histograms, sign=1):
        """Add (sign -1: take away again) one host's {wid: {op, bits, buckets}}."""
        for key, h in (histograms or {}).items():
            self._add(group, h.get("workload") or key, h["op"], h["bits"], h["buckets"], sign, 1)

    def _add(self, group, wid, op, bits, flat_buckets, sign, hosts):
        key = (group, wid)
        slot = self.groups.get(key)
        if slot is None:
            slot = self.groups[key] = {"op": op, "bits": bits, "hosts": 0, "buckets": {}, "mismatch": False}
        if slot["bits"] != bits:
            slot["mismatch"] = True
            return
        acc = slot["buckets"]
        get = acc.get
        flat = iter(flat_buckets)
        for idx, cnt in zip(flat, flat):
            acc[idx] = get(idx, 0) + sign * cnt
        slot["hosts"] += sign * hosts

    def state(self):
        """JSON-able content (EntryWriter's .sum file)."""
        return [[g, wid, slot["op"], slot["bits"], slot["hosts"], slot["mismatch"],
                 [x for idx in sorted(slot["buckets"]) for x in (idx, slot["buckets"][idx])]]
                for (g, wid), slot in self.groups.items()]

    def add_state(self, state):
        for g, wid, op, bits, hosts, mismatch, flat in state:
            self._add(g, wid, op, bits, flat, 1, hosts)
            if mismatch:
                self.groups[(g, wid)]["mismatch"] = True

    @staticmethod
    def _summary(slot):
        pairs = sorted((i, c) for i, c in slot["buckets"].items() if c)
        out = {"latency_op": slot["op"], "hosts": slot["hosts"], "count": sum(c for _idx, c in pairs)}
        for pct, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
            v = histmod.percentile(pairs, p, slot["bits"])
            out["%s_ms" % pct] = None if v is None else round(v / 1e6, 6)
        if slot["mismatch"]:
            out["note"] = "histograms with other sub_bucket_bits left out"
        return out

    def result(self):
        fleet = {}
        for (_g, wid), slot in self.groups.items():
            f = fleet.get(wid)
            if f is None:
                f = fleet[wid] = {"op": slot["op"], "bits": slot["bits"], "hosts": 0, "buckets": {},
                                  "mismatch": slot["mismatch"]}
            if f["bits"] != slot["bits"]:
                f["mismatch"] = True
                continue
            acc = f["buckets"]
            for idx, cnt in slot["buckets"].items():
                acc[idx] = acc.get(idx, 0) + cnt
            f["hosts"] += slot["hosts"]
            f["mismatch"] = f["mismatch"] or slot["mismatch"]
        return {"fleet": [dict(workload=wid, **self._summary(fleet[wid])) for wid in sorted(fleet)],
                "groups": [dict(group=g, workload=wid, **self._summary(slot))
                           for (g, wid), slot in sorted(self.groups.items(),
                                                        key=lambda kv: (natural_key(kv[0][0]), kv[0][1]))]}


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
        values = [v for _host, _workload, v in items]
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
                "host": h["host"], "group": gname, "workload": wid, "target": w.get("target"), "metric": metric,
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


def outlier_text(o):
    pct = "" if o["pct_from_median"] is None else ", %+.1f %%" % o["pct_from_median"]
    return ("%s%s %s %s = %s vs group '%s' median %s (robust score %.1f%s, %s)"
            % (o["workload"], " on %s" % o["target"] if o.get("target") else "", o["metric"], o["direction"],
               fmt_num(o["value"]), o["group"], fmt_num(o["median"]), o["score"], pct,
               "worse" if o["worse"] else "better than peers"))


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
                base[(bh.get("host"), row_key(bw))] = bw
    base_hosts = {bh.get("host") for bh in baseline.get("hosts") or [] if isinstance(bh, dict)}
    regressions = []
    compared = 0
    for h in hosts:
        for w in h["workloads"]:
            bw = base.get((h["host"], row_key(w)))
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
                    r = {"host": h["host"], "workload": w["id"], "target": w.get("target"), "metric": metric,
                         "baseline": _round(old), "current": _round(cur), "delta_pct": _round(pct, 1),
                         "tolerance_pct": tolerance_pct}
                    r["text"] = ("%s %s %s -> %s (%+.1f %%, tolerance %g %%)"
                                 % (row_key(w), metric, fmt_num(old), fmt_num(cur), pct, tolerance_pct))
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

def aggregate(records, play=None, inventory=None, options=None, baseline=None, now=None, run_id=None,
              loader=None, detail_hosts=100, entries=(), entry_sink=None, hist=None):
    """Build the fleet dict (fleet.json content).

    records:   {host: record}, or an iterable of (host, record) pairs consumed one at a
               time (``iter_run_records``: a results directory streamed record by record)
    play:      {host: {counts: {...}, failed: [{task, msg}], unreachable: [{task, msg}]}}
    inventory: {host: [group, ...]}    every host the plays targeted
    options:   see DEFAULT_OPTIONS
    baseline:  a loaded earlier fleet.json (load_baseline) or None
    loader:    host -> record, to read again the records of the hosts drawn in detail
               (default: the ``records`` mapping); None when records is an iterator and
               no loader is given: no host detail
    detail_hosts: how many hosts keep full detail (every check, every metric, iostat
               series): non-passing hosts first, then hosts with outliers; None = all
    entries:   host entries built earlier (stored by ``entry_sink`` of an earlier run:
               the run directory's fleet.d/), used as they are
    hist:      a HistogramAccumulator already holding the histograms of ``entries``
    entry_sink: called with every host entry built here (before its histograms are
               merged), to store it (``EntryWriter``)
    """
    with gc_paused():
        return _aggregate(records, play, inventory, options, baseline, now, run_id, loader, detail_hosts,
                          entries, entry_sink, hist)


def fleet_options(options):
    """DEFAULT_OPTIONS updated with the given ones (None: the default); a mode that is not
    warn, fail or off is refused, naming the option."""
    opts = dict(DEFAULT_OPTIONS)
    opts.update({k: v for k, v in (options or {}).items() if v is not None and k in DEFAULT_OPTIONS})
    for key in ("outliers", "regressions", "drives"):
        if opts[key] not in drive_fleet.MODES:
            raise ValueError("%s: must be one of %s, got %r" % (key, ", ".join(drive_fleet.MODES), opts[key]))
    return opts


def _aggregate(records, play, inventory, options, baseline, now, run_id, loader, detail_hosts, entries,
               entry_sink, hist):
    opts = fleet_options(options)
    play = play or {}
    inventory = inventory or {}
    now = now or utc_now()
    if isinstance(records, dict) or hasattr(records, "items"):
        mapping = {str(k): v for k, v in records.items() if isinstance(v, dict)}
        pairs = iter(mapping.items())
        loader = loader or mapping.get
    else:
        mapping = None
        pairs = iter(records or ())
    hist = hist or HistogramAccumulator()
    hosts = {}
    run_ids = {}

    def take(entry, built):
        if built and entry_sink is not None:
            entry_sink(entry)
        hist.add_host(entry["group"], entry.pop("histograms", None))
        hosts[entry["host"]] = entry
        rid = entry.get("run_id")
        if rid:
            run_ids[rid] = run_ids.get(rid, 0) + 1

    for entry in entries or ():
        take(entry, False)
    for name, rec in pairs:
        name = str(name)
        if isinstance(rec, dict):
            take(build_host(name, rec, play.get(name), inventory.get(name), keep_detail=False, histograms=True),
                 True)
    others = set(inventory) | {h for h, p in play.items()
                               if (p.get("counts") or {}).get("failures")
                               or (p.get("counts") or {}).get("unreachable")
                               or p.get("failed") or p.get("unreachable")}
    for name in others - set(hosts):
        take(build_host(name, None, play.get(name), inventory.get(name), keep_detail=False), True)
    hosts = [hosts[n] for n in sorted(hosts, key=natural_key)]

    if run_id is None:
        run_id = max(run_ids, key=lambda r: (run_ids[r], r)) if run_ids else run_id_from(now)
    run_id = str(run_id)
    notes = []
    if len(run_ids) > 1:
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

    findings, drive_rows = judge_drives(hosts, opts)
    for h in hosts:
        apply_verdict(h, opts)

    # full detail for the hosts a reader looks at first: read their records again
    ranked = sorted(hosts, key=detail_rank)
    chosen = ranked if detail_hosts is None else ranked[:max(0, int(detail_hosts))]
    if loader is not None:
        for h in chosen:
            rec = loader(h["host"]) if h["_record"] is not None else None
            if isinstance(rec, dict):
                attach_detail(h, rec)
            elif h["_record"] is None:
                h["detail"] = {"iostat": {}}
    catalog = {}
    for h in hosts:
        del h["_record"]
        if h["detail"] is None:
            compact_host(h, catalog)

    by_verdict = verdictmod.counts(h["verdict"] for h in hosts)
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
            "drives": len(drive_rows),
            "drives_failed": sum(1 for d in drive_rows if d["verdict"] == "FAIL"),
            "drive_findings": len(findings),
            "detail_hosts": sum(1 for h in hosts if h["detail"] is not None),
            "slices": sorted({_slice_label(h["slice"]) for h in hosts if h.get("slice")}),
        },
        "latency": hist.result(),
        "workloads": [dict(id=wid, **catalog[wid]) for wid in sorted(catalog)],
        "groups": groups,
        "hosts": hosts,
        "outliers": outliers,
        "baseline": base,
        "drives": drive_rows,
        "drive_findings": findings,
        "notes": notes,
    }


def drive_records(hosts):
    """The host entries as the drive judgements read host records (plugin_utils/drive_fleet.py):
    drives (with their judged checks) and the workload rows (per target its IOPS and p99
    latency). A stored entry of fleet.d/ carries all of it, so a merge of slices judges the
    drives of the whole fleet."""
    return [{"host": h["host"], "groups": h["groups"], "facts": h["facts"], "test_dir": h["test_dir"],
             "drives": h["drives"], "workloads": h["workloads"]} for h in hosts if h.get("drives") is not None]


def target_drive_map(h):
    """{target name: the drive it runs on} of a host entry (drive_fleet.drive_of_record; no
    entry for a target spread over several drives). The JUnit case of a target carries its
    drive's checks and findings."""
    drives = h.get("drives")
    if not drives:
        return {}
    where = {}
    for t in h.get("targets") or []:
        if isinstance(t, dict) and t.get("name"):
            where[str(t["name"])] = {"target": t["name"], "target_path": t.get("path"),
                                     "target_device": t.get("device")}
    for w in h["workloads"]:
        if w.get("target") and w["target"] not in where:
            where[w["target"]] = {k: w.get(k) for k in ("target", "target_path", "target_device")}
    out = {}
    for name, rec in where.items():
        d = drive_fleet.drive_of_record(rec, drives, h.get("test_dir"))
        if d is not None:
            out[name] = d.get("name")
    return out


def judge_drives(hosts, opts):
    """(findings, drive table rows) of the fleet's drives; each host entry gets its own
    findings in ``drive_findings`` (verdict.final_verdict reads them)."""
    records = drive_records(hosts)
    for h in hosts:
        h.setdefault("drive_findings", [])
        h["target_drives"] = target_drive_map(h)
    if not records:
        return [], []
    findings = drive_fleet.drive_findings(records, {
        "drives": opts["drives"], "outlier_mad_score": opts["outlier_mad_score"],
        "outlier_pct_below": opts["outlier_pct_below"]})
    by_host = {h["host"]: h for h in hosts}
    for h in hosts:
        h["drive_findings"] = []
    for f in findings:
        by_host[f["host"]]["drive_findings"].append(f)
    return findings, drive_fleet.drive_rows(records, findings)


def _slice_label(s):
    if isinstance(s, dict):
        return "%s/%s" % (s.get("number"), s.get("count"))
    return str(s)


def detail_rank(h):
    """Order of the hosts drawn in detail: not PASS, then with outliers, then by name."""
    return (h["verdict"] == "PASS", not h["outliers"], natural_key(h["host"]))


def apply_verdict(h, opts):
    """Final verdict of a fleet host (verdict.final_verdict with its fleet judgements)."""
    play = h["play"]
    decided = verdictmod.final_verdict(h["_record"], play.get("failed_task"), play.get("unreachable_task"),
                                       h["outliers"], h["regressions"], opts, h.get("drive_findings") or ())
    h["verdict"] = decided["verdict"]
    h["reasons"] = decided["reasons"]
    h["notes"] = decided["notes"]
    if decided["first_failing_rule"] and not h["first_failing_rule"]:
        h["first_failing_rule"] = decided["first_failing_rule"]


SPEC_KEYS = ("workload", "mode", "threads", "block_size", "direct", "time_s", "devices", "collector")


def compact_host(h, catalog):
    """A host without detail keeps its measured figures; what every host shares (the
    workload's spec) moves to the fleet's ``workloads`` catalog, and diagnostics that did
    not apply (n/a) are left out: fleet.json stays readable at 10,000 hosts."""
    for row in h["workloads"]:
        spec = {k: row.pop(k) for k in SPEC_KEYS if k in row}
        catalog.setdefault(row["id"], spec)
    if h.get("drives"):
        # the names only: each drive is a row of the fleet's drive table (fleet.json "drives")
        h["drives"] = [d.get("name") for d in h["drives"]]
    diags = h.get("diagnostics")
    if diags:
        h["diagnostics"] = {k: v for k, v in diags.items() if not (isinstance(v, dict) and v.get("status") == "n/a")}


def attach_detail(h, record):
    """Give a summarized host entry its full detail from its record again."""
    workloads = [w for w in record.get("workloads") or [] if isinstance(w, dict)]
    checks = [c for c in (record.get("checks") or []) if isinstance(c, dict)]
    h["checks"] = plain(checks)
    by_key = {}
    for w in workloads:
        by_key[_spec_key(w)] = w.get("metrics") if isinstance(w.get("metrics"), dict) else {}
    for row in h["workloads"]:
        row["metrics"] = _clean_metrics(by_key.get(row_key(row)) or {})
    h["detail"] = host_detail(workloads)


# --------------------------------------------------------------------------- files

REPORT_FILES = ("fleet.json", "summary.json", "gate.json")
LIMIT_FILE = "not-passed.limit"


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def record_paths(run_dir):
    """Paths of the host records stored in a run directory (``<host>.json``), sorted by
    host name.  The role's replaced records (``<host>.json.<pid>.<time>~``, kept by
    ``copy backup``) and the report files are not records."""
    out = []
    with os.scandir(run_dir) as it:
        for e in it:
            if e.name.endswith(".json") and e.name not in REPORT_FILES and not e.name.startswith(".") \
                    and e.is_file():
                out.append((e.name[:-5], e.path))
    out.sort(key=lambda x: natural_key(x[0]))
    return out


def iter_run_records(run_dir, names=None):
    """(host, record) of the host records in a run directory (all, or those in ``names``),
    read one at a time so that only one record is in memory."""
    for name, path in record_paths(run_dir):
        if names is not None and name not in names:
            continue
        try:
            rec = _read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and "workloads" in rec and "verdict" in rec:
            yield str(rec.get("host") or name), rec


ENTRIES_DIR = "fleet.d"
_ENTRY_HOST = re.compile(r'^\{"host": ("(?:[^"\\]|\\.)*")')


class EntryWriter:
    """Stores the host entries of one report (a run, a slice, a controller) in
    ``<run_dir>/fleet.d/``: ``<label>-<time>-<pid>.jsonl`` one entry per line (without its
    histograms), ``.hist`` each host's latency histograms, ``.sum`` their sum per group and
    workload.  A merge reads the small entries and the sums (and the histograms only of
    the hosts a newer file replaces, to subtract them), never every full record.  The
    ``.jsonl`` is renamed into place last: a file set is complete or absent."""

    def __init__(self, run_dir, label="run"):
        directory = os.path.join(run_dir, ENTRIES_DIR)
        os.makedirs(directory, exist_ok=True)
        name = "%s-%s-%d.jsonl" % (re.sub(r"[^A-Za-z0-9_.-]", "_", str(label)),
                                   utc_now().strftime("%Y%m%dT%H%M%S.%fZ"), os.getpid())
        self.path = os.path.join(directory, name)
        self._tmp = os.path.join(directory, "." + name)
        self._f = open(self._tmp, "w", encoding="utf-8")
        self._h = open(self.path + ".hist", "w", encoding="utf-8")
        self._enc = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode
        self._sum = HistogramAccumulator()

    def __call__(self, entry):
        hists = entry.get("histograms")
        line = self._enc({k: v for k, v in entry.items() if k != "histograms"})
        self._f.write(line.replace('{"host":', '{"host": ', 1) + "\n")
        if hists:
            self._h.write(self._enc({"host": entry["host"], "group": entry["group"], "histograms": hists})
                          .replace('{"host":', '{"host": ', 1) + "\n")
            self._sum.add_host(entry["group"], hists)

    def close(self):
        self._h.close()
        write_atomic(self.path + ".sum", self._enc(self._sum.state()) + "\n")
        self._f.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self):
        for f in (self._f, self._h):
            f.close()
        for p in (self._tmp, self.path + ".hist"):
            with contextlib.suppress(OSError):
                os.unlink(p)


def run_sources(run_dir):
    """What a run directory holds, newest first: (entries, stale, hist).

    ``entries`` yields the newest stored entry of each host (fleet.d/); ``stale`` is the
    set of hosts whose record is newer than their entry (or who have none): those records
    are summarized again; ``hist`` holds the latency histograms of the entries yielded
    (each file's sum, minus the hosts a newer file or record replaces).  Two passes over
    the entry files, so that only the winning line of each host is parsed and no more than
    one entry is held at a time."""
    directory = os.path.join(run_dir, ENTRIES_DIR)
    files = []
    if os.path.isdir(directory):
        with os.scandir(directory) as it:
            files = sorted((e.stat().st_mtime_ns, e.name, e.path) for e in it
                           if e.name.endswith(".jsonl") and not e.name.startswith("."))
    newest = {}                       # host -> (file index, line number, mtime)
    in_file = []                      # file index -> hosts in it
    for fi, (mtime, _name, path) in enumerate(files):
        names = set()
        with open(path, encoding="utf-8") as f:
            for li, line in enumerate(f):
                m = _ENTRY_HOST.match(line)
                if m:
                    host = json.loads(m.group(1))
                    newest[host] = (fi, li, mtime)
                    names.add(host)
        in_file.append(names)
    stale = set()
    for name, path in record_paths(run_dir):
        got = newest.get(name)
        if got is None or os.stat(path).st_mtime_ns > got[2]:
            stale.add(name)
            newest.pop(name, None)

    hist = HistogramAccumulator()
    for fi, (_mtime, _name, path) in enumerate(files):
        replaced = {h for h in in_file[fi] if newest.get(h, (None,))[0] != fi}
        try:
            with open(path + ".sum", encoding="utf-8") as f:
                hist.add_state(json.load(f))
        except (OSError, ValueError):
            continue
        if replaced:
            with open(path + ".hist", encoding="utf-8") as f:
                for line in f:
                    m = _ENTRY_HOST.match(line)
                    if m and json.loads(m.group(1)) in replaced:
                        h = json.loads(line)
                        hist.add_host(h["group"], h["histograms"], sign=-1)

    def entries():
        wanted = {}
        for host, (fi, li, _m) in newest.items():
            wanted.setdefault(fi, set()).add(li)
        for fi, (_mtime, _name, path) in enumerate(files):
            lines = wanted.get(fi)
            if not lines:
                continue
            with open(path, encoding="utf-8") as f:
                for li, line in enumerate(f):
                    if li in lines:
                        yield json.loads(line)
    return entries(), stale, hist


def run_loader(run_dir):
    """host -> its record read again from the run directory (None when absent)."""
    def load(host):
        try:
            rec = _read_json(os.path.join(run_dir, "%s.json" % host))
        except (OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) else None
    return load


def aggregate_run(run_dir, options=None, baseline=None, now=None, detail_hosts=100, store_entries=True):
    """The fleet of every host stored in ``run_dir`` (all slices and controllers that
    wrote into it, re-runs included): each host's newest entry from fleet.d/, or its
    record summarized again when the record is newer; streamed one host at a time.
    ``store_entries``: store the entries summarized here, so the next merge reads them."""
    run_id = os.path.basename(os.path.normpath(run_dir))
    entries, stale, hist = run_sources(run_dir)
    sink = EntryWriter(run_dir, "report") if store_entries and stale else None
    try:
        fleet = aggregate(iter_run_records(run_dir, stale), options=options, baseline=baseline, now=now,
                          run_id=run_id, loader=run_loader(run_dir), detail_hosts=detail_hosts, entries=entries,
                          entry_sink=sink, hist=hist)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    if sink is not None:
        sink.close()
    return fleet


def pick_run_id(records, now=None):
    """The run id of a set of records: the most common one (ties: the latest), else the
    time now."""
    counts = {}
    for r in records:
        rid = r.get("run_id") if isinstance(r, dict) else None
        if rid:
            counts[rid] = counts.get(rid, 0) + 1
    return max(counts, key=lambda r: (counts[r], r)) if counts else run_id_from(now or utc_now())


def not_passed(fleet):
    """Hosts whose verdict is not PASS, in fleet order."""
    return [h["host"] for h in fleet["hosts"] if h["verdict"] != "PASS"]


def limit_text(fleet):
    """Content of the ``--limit @file`` file: one non-PASS host per line (empty: all passed)."""
    return "".join("%s\n" % h for h in not_passed(fleet))


def run_summary(fleet, slice_=None):
    """The small summary AWX passes between workflow nodes: run id, slice, verdict per
    host and counts (no measurements)."""
    return {"run_id": fleet["run_id"], "slice": slice_, "generated_at": fleet["generated_at"],
            "counts": dict(fleet["summary"]["by_verdict"]), "hosts": fleet["summary"]["hosts"],
            "verdicts": {h["host"]: h["verdict"] for h in fleet["hosts"]},
            "not_passed": not_passed(fleet)}


def write_atomic(path, text, mode=0o644):
    """Write text (a string, or an iterable of strings written one after the other) to
    path via a temporary file in the same directory and rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                f.writelines(text)
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
    return "".join(iter_json(fleet))


def iter_json(fleet):
    """to_json's text in pieces, one list item at a time (written as it is encoded, the
    text of a 10,000-host fleet is never held whole)."""
    enc = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(", ", ": ")).encode
    keys = list(fleet)
    yield "{\n"
    for i, key in enumerate(keys):
        value = fleet[key]
        end = ",\n" if i < len(keys) - 1 else "\n"
        if isinstance(value, list) and value:
            yield " %s: [\n" % enc(str(key))
            last = len(value) - 1
            for j, item in enumerate(value):
                yield "  " + enc(item) + (",\n" if j < last else "\n")
            yield " ]" + end
        else:
            yield " %s: %s%s" % (enc(str(key)), enc(value), end)
    yield "}\n"


def history_lines(fleet):
    out = []
    for h in fleet["hosts"]:
        out.append({
            "run_id": fleet["run_id"], "generated_at": fleet["generated_at"], "host": h["host"],
            "verdict": h["verdict"], "record_verdict": h["record_verdict"], "group": h["group"],
            "profile": h["profile"],
            "workloads": {row_key(w): {"iops": _round(w["iops"], 2), "mibps": _round(w["mibps"], 3),
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


def prometheus_registry(fleet):
    """The controller's textfile: the fleet summary only (a host's own series belong in
    that host's node_exporter textfile directory).  Names follow the Prometheus naming
    conventions: base units (seconds), no verdict label on a ``_pass`` metric."""
    from prometheus_client import CollectorRegistry, Gauge  # pylint: disable=import-outside-toplevel

    reg = CollectorRegistry()
    hosts = Gauge("fleetqual_fleet_hosts", "Hosts per verdict in the last run.", ["verdict"], registry=reg)
    for verdict, n in fleet["summary"]["by_verdict"].items():
        hosts.labels(verdict=verdict).set(n)
    passed = Gauge("fleetqual_host_pass", "1 when the host passed qualification in the last run, else 0.",
                   ["host", "group"], registry=reg)
    for h in fleet["hosts"]:
        passed.labels(host=h["host"], group=h["group"]).set(1 if h["verdict"] == "PASS" else 0)
    outl = Gauge("fleetqual_fleet_outliers", "Fleet outliers (worse direction) per metric in the last run.",
                 ["metric"], registry=reg)
    for metric in JUDGED_METRICS:
        outl.labels(metric=metric).set(sum(1 for o in fleet["outliers"] if o["metric"] == metric and o["worse"]))
    lat = Gauge("fleetqual_fleet_latency_seconds",
                "Fleet-wide latency percentile of a workload, merged exactly from every host's histogram.",
                ["workload", "op", "percentile"], registry=reg)
    # a "quantile" label belongs to summary metrics only (promtool): "percentile" p50 ... p999
    for row in (fleet.get("latency") or {}).get("fleet") or []:
        for pct in PCT_KEYS:
            v = row.get("%s_ms" % pct)
            if v is not None:
                lat.labels(workload=row["workload"], op=row["latency_op"], percentile=pct).set(v / 1000.0)
    ts = Gauge("fleetqual_last_run_timestamp_seconds", "When the fleet report was generated.", registry=reg)
    try:
        ts.set(datetime.datetime.strptime(fleet["generated_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp())
    except (ValueError, KeyError):
        ts.set(0)
    return reg


def host_prometheus_registry(record, now=None):
    """One host's own series, for that host's node_exporter textfile directory (the role
    writes it there when ``fleetqual_node_exporter_textfile_dir`` names one): Prometheus
    adds the host's own labels when it scrapes them.  Base units: operations and bytes per
    second, seconds, a 0..1 ratio."""
    from prometheus_client import CollectorRegistry, Gauge  # pylint: disable=import-outside-toplevel

    reg = CollectorRegistry()
    labels = ["workload", "mode", "threads"]       # workload: <id>@<target> on a host with targets
    g = {
        "ops": Gauge("fleetqual_workload_operations_per_second", "Reads and writes per second of a workload.",
                     labels, registry=reg),
        "bytes": Gauge("fleetqual_workload_throughput_bytes_per_second", "Bytes read and written per second.",
                       labels, registry=reg),
        "lat": Gauge("fleetqual_workload_latency_seconds", "Latency percentile of the workload's latency operation.",
                     labels + ["op", "percentile"], registry=reg),
        "util": Gauge("fleetqual_workload_device_utilization_ratio",
                      "Share of the measured window the test device was busy (iostat %util / 100).", labels,
                      registry=reg),
        "await": Gauge("fleetqual_workload_device_await_seconds", "Average device request time (iostat await).",
                       labels, registry=reg),
    }
    record = record if isinstance(record, dict) else {}
    for w in record.get("workloads") or []:
        if not isinstance(w, dict):
            continue
        row = summarize_workload(w, keep_metrics=False)
        lab = {"workload": row_key(row), "mode": row["mode"] or "", "threads": "" if row["threads"] is None
               else str(row["threads"])}
        for key, gauge, factor in (("iops", "ops", 1.0), ("mibps", "bytes", 1048576.0), ("util_pct", "util", 0.01),
                                   ("await_ms", "await", 0.001)):
            if row[key] is not None:
                g[gauge].labels(**lab).set(row[key] * factor)
        for pct in PCT_KEYS:
            if row["%s_ms" % pct] is not None:
                g["lat"].labels(op=row["latency_op"] or "", percentile=pct, **lab).set(row["%s_ms" % pct] / 1000.0)
    Gauge("fleetqual_host_pass", "1 when this host's last qualification verdict (the judge's) was PASS.",
          registry=reg).set(1 if str(record.get("verdict")).upper() == "PASS" else 0)
    Gauge("fleetqual_last_run_timestamp_seconds", "When this host's record was assembled.",
          registry=reg).set((now or utc_now()).timestamp())
    return reg


def host_prometheus_text(record, now=None):
    """A host's own textfile content (host_prometheus_registry)."""
    from prometheus_client import generate_latest  # pylint: disable=import-outside-toplevel
    return generate_latest(host_prometheus_registry(record, now)).decode("utf-8")


def prometheus_text(fleet):
    """The textfile content (prometheus_client's exposition format)."""
    from prometheus_client import generate_latest  # pylint: disable=import-outside-toplevel
    return generate_latest(prometheus_registry(fleet)).decode("utf-8")


def write_prometheus(path, fleet):
    """Write the textfile atomically with prometheus_client's write_to_textfile."""
    from prometheus_client import write_to_textfile  # pylint: disable=import-outside-toplevel
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with gc_paused():
        write_to_textfile(path, prometheus_registry(fleet))
    return path


def results_root(records, default="results"):
    """The results directory the role used: parent of <run_id>/ of results_file."""
    for r in (records or {}).values():
        rf = r.get("results_file") if isinstance(r, dict) else None
        if rf:
            return os.path.dirname(os.path.dirname(str(rf)))
    return default
