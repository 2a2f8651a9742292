# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workload rows of the fleet report (controller side, pure Python): one flat row per host,
target and workload (``summarize_workload``), read from the workload record's ``metrics``
(plugin_utils/metrics/workload.py, the one reader of the benchmark's JSON), never the raw JSON; and
the iostat series report.html draws for a host drawn in detail."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as metricsmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import integrity as metricsmod_integrity
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import plain, rounded
# a finite float, or None for None / NaN / inf / bool / non-numeric (numeric strings read)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float as num


ROW_TARGET_KEYS = ("target_kind", "target_path", "target_device")

PCT_KEYS = ("p50", "p90", "p95", "p99", "p999")
# the first verify mismatches a workload row keeps for the reports (the record keeps 16)
VERIFY_FIRST_ROW = 4


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


def spec_key(spec):
    """row_key of a workload record."""
    wid = workload_id(spec, spec.get("metrics") if isinstance(spec.get("metrics"), dict) else None)
    return "%s@%s" % (wid, spec["target"]) if spec.get("target") else wid


def clean_metrics(metrics):
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


def row_latency_op(metrics):
    """The workload record's ``latency_op`` (plugin_utils/metrics/workload.py decides it). A record written before
    it existed gets it from the same rule (``metrics.latency_op``) over its operation counts,
    or, without counts, its rates (the same window: the same order)."""
    op = metrics.get("latency_op")
    if isinstance(op, str) and op:
        return op
    counts = []
    for count, rate in (("read_count", "read_iops"), ("write_count", "write_iops"), ("fsync_count", "fsync_per_sec")):
        value = num(metrics.get(count))
        counts.append(num(metrics.get(rate)) if value is None else value)
    has_commit = num(metrics.get("commit_count")) is not None or num(metrics.get("commit_p99_ms")) is not None
    return metricsmod.latency_op(*counts, has_commit)


def _pct_for(metrics, op, pct):
    value = num(metrics.get("%s_%s_ms" % (op, pct))) if op else None
    if value is None:
        # e.g. a write workload that only measured fsyncs
        for other in ("read", "write", "fsync"):
            value = num(metrics.get("%s_%s_ms" % (other, pct)))
            if value is not None:
                break
    return value


def _lat(metrics, op, pct):
    """Percentile ``pct`` of the workload's latency op, in ms: the record's ``lat_<pct>_ms``
    when present, else the per-op keys."""
    value = num(metrics.get("lat_%s_ms" % pct))
    if value is not None or "lat_%s_ms" % pct in metrics:
        return value
    return _pct_for(metrics, op, pct)


def device_await(metrics):
    """iostat's classic await: r_await and w_await weighted by r/s and w/s."""
    r_s, w_s = num(metrics.get("dev_r_s")), num(metrics.get("dev_w_s"))
    r_aw, w_aw = num(metrics.get("dev_r_await_ms")), num(metrics.get("dev_w_await_ms"))
    if r_s is not None and w_s is not None and r_aw is not None and w_aw is not None and (r_s + w_s) > 0:
        return (r_s * r_aw + w_s * w_aw) / (r_s + w_s)
    vals = [v for v in (r_aw, w_aw) if v is not None]
    return max(vals) if vals else None


def summarize_workload(spec, keep_metrics=True):
    """The flat per-workload row the fleet report uses (numbers may be None).

    Reads the workload spec and its ``metrics`` only (never the benchmark's raw JSON);
    ``devices``/``collector`` fall back to the module result's collector block for records
    written before ``metrics.device`` existed."""
    spec = spec if isinstance(spec, dict) else {}
    metrics = spec.get("metrics") if isinstance(spec.get("metrics"), dict) else {}
    op = row_latency_op(metrics)
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
        "iops": rounded(num(metrics.get("iops")), 3),
        "mibps": rounded(num(metrics.get("mibps")), 4),
    }
    for pct in PCT_KEYS:
        row["%s_ms" % pct] = rounded(_lat(metrics, op, pct), 6)
    row.update({
        "util_pct": rounded(num(metrics.get("dev_util_pct")), 3),
        "await_ms": rounded(device_await(metrics), 6),
        "errors": int(errors) if errors is not None else 0,
        "interrupted": interrupted,
        # data verification (docs/integrity.md): blocks checked and bad (null: not verified or
        # not reported), "off" with why, and the first mismatches (the reports quote them)
        "verified": metricsmod_integrity.count_of(metrics.get("verify_checked")) if metrics.get("verify_enabled") else None,
        "bad": metricsmod_integrity.count_of(metrics.get("verify_bad")) if metrics.get("verify_enabled") else None,
        "verify_off": (metrics.get("verify_reason") or "verify off") if metrics.get("verify_enabled") is False else None,
        "verify_first": [plain(f) for f in (metrics.get("verify_first") or [])[:VERIFY_FIRST_ROW] if isinstance(f, dict)],
        "devices": devices,
        "collector": plain(source),
        "outliers": [],
        "baseline": None,
    })
    if row["target"]:
        # where it ran, for the drive judgements (drive_consistency.drive_of_record)
        row.update({k: plain(spec.get(k)) for k in ROW_TARGET_KEYS if spec.get(k)})
    if keep_metrics:
        row["metrics"] = clean_metrics(metrics)
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


def host_detail(workloads):
    """What report.html draws for a host beyond fleet.json's summary: each workload's
    iostat series [[t, %util, await], ...] (fleet.iostat_samples)."""
    return {"iostat": {spec_key(w): [list(s) for s in iostat_samples(w)] for w in workloads}}
