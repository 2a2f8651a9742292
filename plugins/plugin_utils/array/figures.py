# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode (docs/arrays.md): the figures of each step and of each mode's sweep.

:func:`step_figures` sums one step over the window common to its active hosts (each
host's per-interval counts cut at the window's edges, :func:`count_in`), with the merged
latency, Jain's fairness and the window's spread; :func:`flag_outliers`, :func:`curve`,
:func:`array_knee` and :func:`bounded_max` take one mode's steps. ``mode.py`` plans the
steps and judges the array from these figures.
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram as histmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as _metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.sweep import knee as _sweep_knee
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key, rounded
from ansible_collections.fleetqual.storage.plugins.module_utils.job.lockstep import LATE_SHARE
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import dig
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.profiles import MIB
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, median, ratio


def step_label(step):
    """``step 7 (rndrd, 4 initiators x 16 threads)``"""
    n, t = step.get("initiators"), step.get("threads")
    return "step %s (%s, %s initiator%s x %s thread%s)" % (step.get("index"), step.get("mode"), n,
                                                           "" if n == 1 else "s", t, "" if t == 1 else "s")


# --------------------------------------------------------------------------- figures per step

KNEE_FRACTION = 0.9      # the knee: fewest outstanding requests reaching 90 % of the best IOPS
OUTLIER_TOL = 0.25       # least tolerance of the outlier test (fraction); 3 x the step's own CV when larger
LAT_OPS = ("read", "write")


def step_bench(entry):
    """The iobench result (``bench``) of a host's step entry, or None."""
    res = entry.get("result") if isinstance(entry, dict) else None
    bench = dig(res, "bench")
    if not isinstance(bench, dict):
        bench = dig(res, "result", "bench")
    return bench if isinstance(bench, dict) else None


def host_window(entry, clock_offset_s=None):
    """``(start, end)`` of a host's measured window in the controller's clock: the entry's
    ``window_start``/``window_end``, else iobench's window epochs minus the host's offset."""
    start, end = as_number(entry.get("window_start")), as_number(entry.get("window_end"))
    if start is None or end is None:
        bench = step_bench(entry) or {}
        s, e = as_number(dig(bench, "window", "start_epoch")), as_number(dig(bench, "window", "end_epoch"))
        off = as_number(clock_offset_s) or 0.0
        start, end = (s - off, e - off) if s is not None and e is not None else (None, None)
    return start, end


def host_intervals(entry, clock_offset_s=None):
    """``[(start, end, ops, bytes)]``: iobench's per-interval counts (reads + writes) of a
    host's step in the controller's clock (interval ``t`` is seconds from its window start)."""
    bench = step_bench(entry) or {}
    start, _end = host_window(entry, clock_offset_s)
    block = as_number(dig(bench, "config", "block_size")) or 0
    out = []
    if start is None:
        return out
    for iv in bench.get("intervals") or []:
        if not isinstance(iv, dict):
            continue
        t, d = as_number(iv.get("t")), as_number(iv.get("duration_s"))
        if t is None or d is None or d < 0:
            # a tail interval shorter than the JSON's resolution (duration 0.0) still holds its
            # requests: count_in counts it whole when its instant is inside the window
            continue
        ops = (as_number(iv.get("read_ops")) or 0) + (as_number(iv.get("write_ops")) or 0)
        out.append((start + t - d, start + t, ops, ops * block))
    return out


def count_in(intervals, start, end):
    """``(ops, bytes)`` of the intervals within ``[start, end]``; an interval cut by an edge
    counts for the fraction of it inside (its I/O spread evenly over it); an interval too
    short to have a width at epoch resolution counts whole when its instant is inside."""
    ops = nbytes = 0.0
    for a, b, o, by in intervals:
        if b <= a:
            f = 1.0 if start <= a <= end else 0.0
        else:
            f = min(1.0, max(0.0, min(b, end) - max(a, start)) / (b - a))
        if f <= 0:
            continue
        ops += o * f
        nbytes += by * f
    return ops, nbytes


def jain(values):
    """Jain's fairness index (sum x)^2 / (n sum x^2), in [1/n, 1]; None when empty or all zero."""
    vals = [float(v) for v in values if v is not None]
    sq = sum(v * v for v in vals)
    if not vals or sq <= 0:
        return None
    return sum(vals) ** 2 / (len(vals) * sq)


def _histograms(bench):
    rec = {"result": {"bench": bench}}
    return [h for h in (histmod.workload_histogram(rec, op) for op in LAT_OPS) if h]


def _ms(ns):
    return None if ns is None else ns / 1e6


def merged_latency(benches):
    """Latency of the union of the hosts' I/O (reads and writes): the histograms merged
    exactly, ``{p50_ms, p90_ms, p99_ms, p999_ms, mean_ms, count, histogram}``; ``mean_ms`` is
    exact from iobench's latency sums when every op has one."""
    hists = [h for b in benches for h in _histograms(b)]
    if not hists:
        return None
    merged = histmod.merge_histograms(*hists)
    bits = merged["sub_bucket_bits"]
    buckets = merged["buckets"]
    total_us, total_n, exact = 0.0, 0, True
    for b in benches:
        for op in LAT_OPS:
            opd = dig(b, "ops", op)
            n = as_number(dig(opd, "count")) if isinstance(opd, dict) else None
            if not n:
                continue
            s = as_number(dig(opd, "latency_us", "sum"))
            if s is None:
                exact = False
            else:
                total_us += s
                total_n += n
    mean_ms = total_us / total_n / 1000.0 if exact and total_n else _ms(histmod.bucket_mean(buckets, bits))
    return {"p50_ms": _ms(histmod.percentile(buckets, 50, bits)), "p90_ms": _ms(histmod.percentile(buckets, 90, bits)),
            "p99_ms": _ms(histmod.percentile(buckets, 99, bits)), "p999_ms": _ms(histmod.percentile(buckets, 99.9, bits)),
            "mean_ms": mean_ms, "count": histmod.count(buckets), "histogram": merged}


def _issued(bench):
    """Requests the host kept in flight: threads x iodepth (the metrics' concurrency)."""
    c = _metrics.workload_metrics({"result": {"bench": bench}}).get("concurrency") or {}
    return (c.get("threads") or 0) * (c.get("iodepth") or 1)


def entry_problem(entry):
    """Why a host's step entry cannot be summed (text), or None when it can."""
    if not isinstance(entry, dict):
        return "no step entry (the host was not ready at the start, or stored no array_run)"
    if entry.get("active") is False:
        return entry.get("error") or "not active in this step"
    if entry.get("error"):
        return str(entry["error"])
    if entry.get("complete") is False:
        return "step not complete"
    bench = step_bench(entry)
    if bench is None:
        return "no iobench result"
    start, end = host_window(entry)
    if start is None or end is None:
        return "no measured window"
    if not any(isinstance(iv, dict) for iv in bench.get("intervals") or []):
        return "no per-interval counts (iobench --report-interval)"
    return None


def _series_cv(per_host_intervals, start, end):
    """Coefficient of variation of the aggregate per-interval IOPS over [start, end] (bins of
    the hosts' typical interval), or None with fewer than 3 bins."""
    widths = [b - a for ivs in per_host_intervals for a, b, _o, _by in ivs]
    width = median(widths)
    if not width or end - start < 3 * width:
        return None
    n = int((end - start) // width)
    bins = [sum(count_in(ivs, start + k * width, start + (k + 1) * width)[0] for ivs in per_host_intervals)
            for k in range(n)]
    avg = sum(bins) / n
    if avg <= 0:
        return None
    return (sum((x - avg) ** 2 for x in bins) / n) ** 0.5 / avg


# Windows that overlap by less than this (fleet.json's resolution of overlap_s) do not
# overlap: there is no common window to count in.
MIN_OVERLAP_S = 1e-6


def measured_fields(entry):
    """A host's part of a step: what its I/O went to (the job's ``measured``,
    module_utils/job/lockstep.py): ``target`` (null: ``fleetqual_test_dir``), ``device`` (the
    top block device, ``dm-0`` of a LUN's multipath map), ``devices`` (those counted: the
    map's paths), ``wwid`` (a LUN's)."""
    m = entry.get("measured") if isinstance(entry, dict) and isinstance(entry.get("measured"), dict) else {}
    return {"target": m.get("target"), "device": m.get("device_name"), "devices": list(m.get("devices") or []),
            "wwid": m.get("wwid")}


# /sys/block/<dev>/stat fields of completed reads and writes (Documentation/block/stat.rst)
STAT_READS, STAT_WRITES = 0, 4


def device_counts(entry):
    """``(device requests, benchmark requests, window seconds)`` of a host's step from
    iobench's ``window.devstat`` (the counters of the devices the step measured, read at its
    window's edges: a LUN's paths summed), or None without them. Only the kinds of request
    the step issued are counted: a LUN's paths also complete the host's own reads (multipath
    probing a failed path) that no benchmark issued."""
    bench = step_bench(entry) or {}
    window = bench.get("window") if isinstance(bench.get("window"), dict) else {}
    devstat = window.get("devstat")
    if not isinstance(devstat, dict) or not devstat:
        return None
    ops = bench.get("ops") if isinstance(bench.get("ops"), dict) else {}
    counts = {k: as_number((ops.get(k) or {}).get("count")) or 0 for k in ("read", "write")}
    fields = [f for k, f in (("read", STAT_READS), ("write", STAT_WRITES)) if counts[k]]
    dev_ops = 0
    for d in devstat.values():
        try:
            dev_ops += sum(d["end"][k] - d["start"][k] for k in fields)
        except (KeyError, IndexError, TypeError):
            return None
    mine = counts["read"] + counts["write"]
    secs = (as_number(window.get("end_epoch")) or 0) - (as_number(window.get("start_epoch")) or 0)
    return dev_ops, mine, secs


def measured_text(measured):
    """One line of what a step measured on a host: ``lun dm-0 (WWID 3600..., paths sda, sdb)``,
    ``test_dir /var/tmp/fleetqual (vda1)``; ``unknown`` for a job that did not say."""
    m = measured if isinstance(measured, dict) else {}
    if not m:
        return "unknown"
    where = m.get("device_name") or ", ".join(m.get("devices") or []) or "no block device"
    name = m.get("target") or "test_dir %s" % (m.get("path") or "")
    extra = []
    if m.get("wwid"):
        extra.append("WWID %s" % m["wwid"])
    devices = [d for d in m.get("devices") or [] if d != m.get("device_name")]
    if devices:
        extra.append("paths %s" % ", ".join(devices) if m.get("wwid") else ", ".join(devices))
    return "%s %s%s" % (name.strip(), where, " (%s)" % "; ".join(extra) if extra else "")


def step_figures(step, entries, expected, clock_offsets=None, rank_of=None):
    """The array's figures of one step (docs/report.md, ``arrays[].steps[]``).

    ``entries``: ``{host: its step entry (or None)}``; ``expected``: the hosts that must be
    active (rank < initiators); ``clock_offsets``: ``{host: offset_s}`` for entries without
    controller-clock windows. A step with an expected host missing is incomplete, names the
    host and why, and has no aggregate (never summed as if whole); the hosts it has keep
    their own figures."""
    clock_offsets = clock_offsets or {}
    rank_of = rank_of or {}
    missing = {}
    used = {}
    for host in expected:
        why = entry_problem(entries.get(host))
        if why:
            missing[host] = why
        else:
            used[host] = entries[host]
    extra = sorted((h for h, e in entries.items() if h not in expected and isinstance(e, dict) and e.get("active")),
                   key=natural_key)
    out = {k: step.get(k) for k in ("index", "initiators", "threads", "mode", "time", "warmup", "offset_s", "end_s")}
    out.update({"complete": bool(used) and not missing, "missing_hosts": sorted(missing, key=natural_key),
                "missing": missing, "problem": None, "outlier": False, "extra_hosts": extra, "measured": [],
                "aggregate": dict.fromkeys(("iops", "mib_per_sec", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "mean_ms",
                                            "outstanding", "issued", "littles_ratio", "cv", "device_iops")),
                "window": dict.fromkeys(("start", "end", "start_spread_ms", "end_spread_ms", "overlap_s")),
                "fairness": dict.fromkeys(("jain", "min_share", "min_share_pct", "min_iops", "median_iops",
                                           "max_iops")),
                "hosts": {}})
    if not used:
        if not expected:
            out["problem"] = "no host is active in this step"
        return out
    out["measured"] = sorted({measured_text(e.get("measured")) for e in used.values()})
    windows = {h: host_window(e, clock_offsets.get(h)) for h, e in used.items()}
    ivs = {h: host_intervals(e, clock_offsets.get(h)) for h, e in used.items()}
    start = max(w[0] for w in windows.values())
    end = min(w[1] for w in windows.values())
    earliest = min(w[0] for w in windows.values())
    overlap = max(0.0, end - start)
    out["window"] = {"start": start, "end": end, "overlap_s": rounded(overlap, 6),
                     "start_spread_ms": rounded((start - earliest) * 1000.0, 3),
                     "end_spread_ms": rounded((max(w[1] for w in windows.values()) - end) * 1000.0, 3)}
    counts = {h: count_in(ivs[h], start, end) for h in used}
    for h, e in used.items():
        lat = merged_latency([step_bench(e)]) or {}
        iops = counts[h][0] / overlap if overlap >= MIN_OVERLAP_S else None
        out["hosts"][h] = {"rank": rank_of.get(h), "iops": rounded(iops, 3),
                           "mib_per_sec": rounded(counts[h][1] / MIB / overlap, 4) if overlap >= MIN_OVERLAP_S else None,
                           "p99_ms": rounded(lat.get("p99_ms"), 4),
                           "window_start": windows[h][0], "window_end": windows[h][1],
                           "start_offset_ms": rounded((windows[h][0] - earliest) * 1000.0, 3),
                           "outstanding_issued": _issued(step_bench(e)), "share_pct": None}
        out["hosts"][h].update(measured_fields(e))
        dc = device_counts(e)
        out["hosts"][h]["device_iops"] = rounded(dc[0] / dc[2], 3) if dc and dc[2] > 0 else None
        out["hosts"][h]["device_ratio"] = rounded(dc[0] / dc[1], 4) if dc and dc[1] else None
    host_iops = [out["hosts"][h]["iops"] for h in used if out["hosts"][h]["iops"] is not None]
    med = median(host_iops)
    for h in used:
        v = out["hosts"][h]["iops"]
        out["hosts"][h]["share_pct"] = rounded(100.0 * v / med, 2) if v is not None and med else None
    if host_iops:
        low = min(host_iops)
        out["fairness"] = {"jain": rounded(jain(host_iops), 6), "min_share": rounded(low / med, 6) if med else None,
                           "min_share_pct": rounded(100.0 * low / med, 3) if med else None,
                           "min_iops": low, "median_iops": rounded(med, 3), "max_iops": max(host_iops)}
    spread_s = start - earliest
    step_time = as_number(step.get("time"))
    if overlap < MIN_OVERLAP_S:
        out["complete"] = False
        out["problem"] = ("the hosts' measured windows do not overlap (start spread %.0f ms)"
                          % (out["window"]["start_spread_ms"] or 0))
    elif step_time and spread_s > LATE_SHARE * step_time:
        # lock-step is the hosts' starts against each other: all late together (a shared
        # disk that held every member's setup) is still one common window
        first = min(windows, key=lambda h: (windows[h][0], natural_key(h)))
        last = max(windows, key=lambda h: (windows[h][0], natural_key(h)))
        out["complete"] = False
        out["problem"] = ("not in lock-step: %s began its measured window %.0f ms after %s (over %d %% of the "
                          "step's %s s)" % (last, spread_s * 1000.0, first, LATE_SHARE * 100, fmt_num(step_time)))
    if not out["complete"]:
        return out
    total_ops = sum(c[0] for c in counts.values())
    total_bytes = sum(c[1] for c in counts.values())
    iops = total_ops / overlap
    lat = merged_latency([step_bench(e) for e in used.values()]) or {}
    mean_ms = lat.get("mean_ms")
    outstanding = iops * mean_ms / 1000.0 if mean_ms is not None else None
    issued = sum(out["hosts"][h]["outstanding_issued"] for h in used)
    out["aggregate"] = {
        "iops": rounded(iops, 3), "mib_per_sec": rounded(total_bytes / MIB / overlap, 4), "count": rounded(total_ops, 3),
        "p50_ms": rounded(lat.get("p50_ms")), "p90_ms": rounded(lat.get("p90_ms")), "p99_ms": rounded(lat.get("p99_ms")),
        "p999_ms": rounded(lat.get("p999_ms")), "mean_ms": rounded(mean_ms, 6), "outstanding": rounded(outstanding, 4),
        "issued": issued, "littles_ratio": rounded(ratio(outstanding, issued), 4),
        "cv": rounded(_series_cv(list(ivs.values()), start, end), 4)}
    # the measured devices' own counters over each host's window, summed: what the SAN served
    dev = [out["hosts"][h]["device_iops"] for h in used]
    out["aggregate"]["device_iops"] = rounded(sum(dev), 3) if dev and None not in dev else None
    return out


# --------------------------------------------------------------------------- the curve, knee, bounded maximum

def _trusted(steps):
    return [s for s in steps if s["complete"] and not s["outlier"] and s["aggregate"]["iops"] is not None]


def flag_outliers(steps):
    """Flag (``outlier: true``, ``outlier_text``) each complete step of one mode whose
    aggregate IOPS lies outside its two neighbours on the curve (ordered by outstanding
    I/O) by more than a tolerance: ``max(OUTLIER_TOL, 3 x the step's own CV)`` beyond
    the lower neighbour's value (a dip) or the higher one's (a spike). End points have
    one neighbour and are not judged (a collapse at the highest load is real)."""
    pts = sorted((s for s in steps if s["complete"] and s["aggregate"]["iops"] is not None
                  and s["aggregate"]["outstanding"] is not None),
                 key=lambda s: (s["aggregate"]["outstanding"], s["index"]))
    for i in range(1, len(pts) - 1):
        s, nb = pts[i], (pts[i - 1], pts[i + 1])
        vals = [n["aggregate"]["iops"] for n in nb]
        tol = max(OUTLIER_TOL, 3 * (s["aggregate"]["cv"] or 0.0))
        v = s["aggregate"]["iops"]
        if v < min(vals) / (1 + tol) or v > max(vals) * (1 + tol):
            s["outlier"] = True
            s["outlier_text"] = ("%s: aggregate IOPS %s is an outlier against its neighbours on the curve "
                                 "(steps %s: %s; tolerance %d %%); left out of the knee and the bounded maximum, "
                                 "repeat the run to confirm it"
                                 % (step_label(s), fmt_num(v), " and ".join(str(n["index"]) for n in nb),
                                    " and ".join(fmt_num(x) for x in vals), round(tol * 100)))
    return steps


def curve(steps):
    """The points of one mode's curve, ordered by outstanding I/O: aggregate IOPS vs
    outstanding I/O, p99 vs aggregate IOPS (the hockey stick)."""
    pts = [s for s in steps if s["complete"] and s["aggregate"]["iops"] is not None]
    pts.sort(key=lambda s: (s["aggregate"]["outstanding"] if s["aggregate"]["outstanding"] is not None else 0,
                            s["index"]))
    return [{"index": s["index"], "initiators": s["initiators"], "threads": s["threads"],
             "outstanding": s["aggregate"]["outstanding"], "issued": s["aggregate"]["issued"],
             "iops": s["aggregate"]["iops"], "p99_ms": s["aggregate"]["p99_ms"], "outlier": s["outlier"]}
            for s in pts]


def array_knee(steps):
    """The knee of one mode: the trusted step with the fewest outstanding requests reaching
    ``KNEE_FRACTION`` of the best aggregate IOPS (diagnostics.knee, the one knee rule, with
    outstanding I/O for threads); None without trusted steps."""
    pts = sorted(({"threads": s["aggregate"]["outstanding"], "iops": s["aggregate"]["iops"], "step": s}
                  for s in _trusted(steps) if s["aggregate"]["outstanding"] is not None),
                 key=lambda p: (p["threads"], p["step"]["index"]))
    hit, top = _sweep_knee(pts, KNEE_FRACTION)
    if hit is None:
        return None
    s = hit["step"]
    return {"index": s["index"], "initiators": s["initiators"], "threads": s["threads"],
            "outstanding": s["aggregate"]["outstanding"], "iops": s["aggregate"]["iops"],
            "best_iops": top["iops"], "fraction": KNEE_FRACTION}


def bounded_max(steps, bound_ms):
    """The latency-bounded maximum of one mode: the trusted step with the highest aggregate
    IOPS whose p99 stays at or under ``bound_ms``; ``iops`` None when no step does (or no bound)."""
    out = {"bound_ms": bound_ms, "index": None, "iops": None, "p99_ms": None, "initiators": None, "threads": None,
           "steps_incomplete": sum(1 for s in steps if not s["complete"])}
    if bound_ms is None:
        return out
    under = [s for s in _trusted(steps) if s["aggregate"]["p99_ms"] is not None and s["aggregate"]["p99_ms"] <= bound_ms]
    if under:
        best = max(under, key=lambda s: (s["aggregate"]["iops"], -s["index"]))
        out.update(index=best["index"], iops=best["aggregate"]["iops"], p99_ms=best["aggregate"]["p99_ms"],
                   initiators=best["initiators"], threads=best["threads"])
    return out
