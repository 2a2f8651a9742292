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


def run_pace(intervals):
    """:func:`stability_of` over iobench's per-interval series: the IOPS of each interval,
    without the short tail interval (a fraction of a second holding the last few
    operations, whose rate is noise), and the second of the measured window each began."""
    ivs = [iv for iv in intervals or [] if isinstance(iv, dict) and as_number(iv.get("iops")) is not None]
    typical = median(as_number(iv.get("duration_s")) for iv in ivs)
    kept = [iv for iv in ivs
            if typical is None or as_number(iv.get("duration_s")) is None or iv["duration_s"] >= 0.5 * typical]
    return stability_of([iv["iops"] for iv in kept], starts=interval_starts(kept))


def interval_starts(intervals):
    """The second of the measured window each interval began (to 0.1 s): its end ``t`` less
    its ``duration_s``; None for all when an interval says neither."""
    starts = []
    for iv in intervals:
        t, length = as_number(iv.get("t")), as_number(iv.get("duration_s"))
        if t is None or length is None:
            return None
        starts.append(round(t - length, 1))
    return starts


def _median3(a, b, c):
    return sorted((a, b, c))[1]


def smoothed(values):
    """The series after a running median of 3 (Tukey's rule at both ends): a lone interval far
    from its neighbours (a stall, a spike) is taken out, a step is kept where it is."""
    n = len(values)
    if n < 3:
        return list(values)
    out = [values[0]] + [_median3(*values[i - 1:i + 2]) for i in range(1, n - 1)] + [values[-1]]
    out[0] = _median3(values[0], out[1], 3 * out[1] - 2 * out[2])
    out[-1] = _median3(values[-1], out[-2], 3 * out[-2] - 2 * out[-3])
    return out


def change_point(values):
    """Where the pace changed: the index k (1 <= k < n) at which one step best splits the series
    into two levels (the least sum of squares about each part's mean, the earliest on a tie),
    found on the :func:`smoothed` series so that one odd interval does not move it; None under
    2 values."""
    s = smoothed([float(v) for v in values])
    n = len(s)
    if n < 2:
        return None
    centre = sum(s) / n
    sums, squares = [0.0], [0.0]
    for v in s:
        sums.append(sums[-1] + (v - centre))
        squares.append(squares[-1] + (v - centre) ** 2)

    def sse(a, b):
        return squares[b] - squares[a] - (sums[b] - sums[a]) ** 2 / (b - a)

    costs = [(sse(0, k) + sse(k, n), k) for k in range(1, n)]
    least = min(c for c, _k in costs)
    return next(k for c, k in costs if c <= least + 1e-9 * (abs(least) + squares[n]))


def stability_of(series, starts=None):
    """Pace figures of a per-interval IOPS series (see the module docstring), or None.
    ``starts``: the second each interval began (:func:`interval_starts`), for ``change_at_s``."""
    vals = [v for v in (as_number(x) for x in series or []) if v is not None]
    n = len(vals)
    if n < STABILITY_MIN_INTERVALS:
        return None
    third = n // 3
    # each third's level is its median: one interval of a third that stalled or spiked (a
    # guest starved for a second at the end of a loaded run) does not move the level the
    # decision compares (a mean read the last third of a throttled drive at 87.5 IOPS of 100)
    first, last = median(vals[:third]), median(vals[n - third:])
    slices = min(STABILITY_SERIES_POINTS, n)
    bounds = [round(i * n / slices) for i in range(slices + 1)]
    at = change_point(vals)
    return {"intervals": n, "first_iops": round(first, 1), "last_iops": round(last, 1),
            "change_pct": round((last - first) / first * 100.0, 1) if first > 0 else None,
            "min_iops": round(min(vals), 1), "max_iops": round(max(vals), 1),
            "series": [round(mean(vals[a:b]), 1) for a, b in zip(bounds, bounds[1:])],
            "change_at_s": starts[at] if starts and len(starts) == n and at is not None else None}


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
