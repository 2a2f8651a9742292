# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run's shape over time (docs/contracts.md section 4, ``metrics``): ``steady_state``,
``stability`` (the pace from iobench's per-interval series), and compact copies of the
latency-bounded ``search`` and the database pattern's ``db`` figures. Read by
:mod:`.workload` (its docstring describes every key)."""

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import PCT_SOURCE, PCTS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, mean, median


STABILITY_MIN_INTERVALS = 6


STABILITY_SERIES_POINTS = 12


def steady_state_of(bench):
    ss = bench.get("steady_state")
    if not isinstance(ss, dict) or not ss.get("enabled"):
        return None
    rounds = ss.get("rounds") if isinstance(ss.get("rounds"), list) else []
    metric = ss.get("metric") if isinstance(ss.get("metric"), str) else "iops"
    return {"reached": bool(ss.get("reached")), "round": as_number(ss.get("round")), "rounds": len(rounds),
            "max_rounds": as_number(ss.get("max_rounds")), "metric": metric,
            "values": [as_number(r.get(metric)) for r in rounds if isinstance(r, dict)]}


def interval_iops(intervals):
    """IOPS per interval of iobench's series, without the short tail interval (a fraction
    of a second holding the last few operations, whose rate is noise)."""
    ivs = [iv for iv in intervals or [] if isinstance(iv, dict) and as_number(iv.get("iops")) is not None]
    typical = median(as_number(iv.get("duration_s")) for iv in ivs)
    return [iv["iops"] for iv in ivs
            if typical is None or as_number(iv.get("duration_s")) is None or iv["duration_s"] >= 0.5 * typical]


def stability_of(series):
    """Pace figures of a per-interval IOPS series (see the module docstring), or None."""
    vals = [v for v in (as_number(x) for x in series or []) if v is not None]
    n = len(vals)
    if n < STABILITY_MIN_INTERVALS:
        return None
    third = n // 3
    first, last = mean(vals[:third]), mean(vals[n - third:])
    slices = min(STABILITY_SERIES_POINTS, n)
    bounds = [round(i * n / slices) for i in range(slices + 1)]
    return {"intervals": n, "first_iops": round(first, 1), "last_iops": round(last, 1),
            "change_pct": round((last - first) / first * 100.0, 1) if first > 0 else None,
            "min_iops": round(min(vals), 1), "max_iops": round(max(vals), 1),
            "series": [round(mean(vals[a:b]), 1) for a, b in zip(bounds, bounds[1:])]}


def search_figures(bench):
    s = bench.get("search")
    if not isinstance(s, dict) or not isinstance(s.get("steps"), list):
        return None
    pct = s.get("percentile") if isinstance(s.get("percentile"), str) else "p99"

    def step(d):
        if not isinstance(d, dict):
            return None
        lat = as_number(d.get("p99_us"))
        for key in ("%s_us" % pct, "pct_us"):        # the searched percentile, when not p99
            if lat is None:
                lat = as_number(d.get(key))
        return {"threads": as_number(d.get("threads")), "iodepth": as_number(d.get("iodepth")),
                "iops": as_number(d.get("iops")), "p99_ms": None if lat is None else lat / 1000.0,
                "complete": d.get("complete", True) is not False}

    steps = [step(d) for d in s["steps"] if isinstance(d, dict)]
    best = s.get("best")
    if is_int(best) and 0 <= best < len(steps):
        best = steps[best]
    else:
        best = step(best)
    knob = s.get("knob") if s.get("knob") in ("threads", "iodepth") else None
    return {"knob": knob, "bound_ms": as_number(s.get("bound_ms")), "percentile": pct,
            "stopped": s.get("stopped"), "steps": steps, "best": best}


def db_figures(bench):
    db = bench.get("db")
    if not isinstance(db, dict):
        return None

    def part(name):
        d = db.get(name) if isinstance(db.get(name), dict) else {}
        lat = d.get("latency_us") if isinstance(d.get("latency_us"), dict) else {}
        out = {"per_sec": as_number(d.get("per_sec"))}
        for pct in PCTS:
            v = as_number(lat.get(PCT_SOURCE[pct]))
            out["%s_ms" % pct] = None if v is None else v / 1000.0
        return out

    return {name: part(name) for name in ("commits", "transactions", "page_reads", "page_writes")}
