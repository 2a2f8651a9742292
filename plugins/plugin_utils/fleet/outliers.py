# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Groups of like hosts and who is far from them (controller side, pure Python).

``group_of`` puts a host in its group (inventory group, else hardware + disk model);
``deviation`` is the one outlier rule (robust score ``|x - median| / scale`` above
``mad_score``, or more than ``pct_below`` % worse than the median, and for a latency further
from the median than ``min_diff_ms``), used by the host outliers here (``find_outliers``) and
by the drive results of plugin_utils/fleet/drive_consistency.py."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key, rounded
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import median, robust_scale


MIN_GROUP_SIZE = 3

# The outlier rule's defaults (the report options outlier_mad_score, outlier_pct_below,
# outlier_min_diff_ms; docs/report.md "Fleet outliers"). A latency must also differ from the
# median by more than MIN_DIFF_MS: below a tenth of a millisecond two hosts' medians differ by
# scheduling, interrupt placement and timer noise, not by their storage (a host at p50 0.07 ms
# against a median of 0.06 ms is +17 %, past no score, yet no finding), while a drive that
# adds a slow path or a degraded link moves its latency by milliseconds.
MAD_SCORE = 3.5
PCT_BELOW = 20.0
MIN_DIFF_MS = 0.1


def min_diff_of(metric, min_diff_ms):
    """The smallest difference from the median that can make ``metric`` an outlier:
    ``min_diff_ms`` for a latency (a figure in ms, ``*_ms``), none (0) for IOPS."""
    return float(min_diff_ms) if str(metric).endswith("_ms") else 0.0


# Metrics judged across the fleet (outliers) and against a baseline (regressions).
# "higher" means a higher value is better. The median latency is judged beside the p99: a
# drive that adds a few milliseconds to every request (a slow path, a degraded link) moves
# its p50 by orders of magnitude while a p99 dominated by queueing may hide it.
JUDGED_METRICS = {"iops": "higher", "p50_ms": "lower", "p99_ms": "lower"}
# what each judged metric is, as a chart or a table names it
METRIC_LABELS = {"iops": "IOPS", "p50_ms": "p50 latency, ms", "p99_ms": "p99 latency, ms"}


NON_GROUPS = ("all", "ungrouped")


class Peers:
    """The values of one figure among like peers (hosts of a group, drives of a model) and
    the one outlier rule over them: a value deviates when its robust score
    ``|x - median| / scale`` (stats.robust_scale) exceeds ``mad_score`` in either direction,
    or when it is more than ``pct_below`` % worse than the median; and in either case only
    when it is more than ``min_diff`` (the figure's unit, :func:`min_diff_of`) from the
    median. ``better``: "higher" (IOPS) or "lower" (latency) is better."""

    def __init__(self, values, better):
        self.median = median(values)
        self.scale, self.method, self.mad = robust_scale(values, self.median)
        self.better = better

    def deviation(self, v, mad_score, pct_below, min_diff=0.0):
        """None when ``v`` is not an outlier, else {score, pct (from the median, None when
        the median is 0), direction (high | low), worse (in the bad direction), by (score |
        pct | score+pct)}."""
        med = self.median
        if abs(v - med) <= min_diff:
            return None
        score = abs(v - med) / self.scale if self.scale > 0 else 0.0
        pct = (v - med) / abs(med) * 100.0 if med else None
        worse_pct = None if pct is None else (-pct if self.better == "higher" else pct)
        by_score = score > mad_score
        by_pct = worse_pct is not None and worse_pct > pct_below
        if not (by_score or by_pct):
            return None
        direction = "high" if v > med else "low"
        worse = (direction == "low") if self.better == "higher" else (direction == "high")
        return {"score": score, "pct": pct, "direction": direction, "worse": worse,
                "by": "score+pct" if (by_score and by_pct) else ("score" if by_score else "pct")}


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


def find_outliers(hosts, mad_score=MAD_SCORE, pct_below=PCT_BELOW, min_group=MIN_GROUP_SIZE, min_diff_ms=MIN_DIFF_MS):
    """Flag per (group, workload id, metric) hosts far from the group median.

    A value is an outlier when its robust score |x - median| / scale exceeds ``mad_score``
    (either direction) or when it is more than ``pct_below`` % worse than the median
    (IOPS below, latency above), and, for a latency, when it differs from the median by
    more than ``min_diff_ms``.  ``worse`` tells whether the deviation is in the bad
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
        peers = Peers([v for _host, _workload, v in items], JUDGED_METRICS[metric])
        for h, w, v in items:
            d = peers.deviation(v, mad_score, pct_below, min_diff_of(metric, min_diff_ms))
            if d is None:
                continue
            o = {
                "host": h["host"], "group": gname, "workload": wid, "target": w.get("target"), "metric": metric,
                "value": rounded(v), "median": rounded(peers.median), "mad": rounded(peers.mad),
                "scale": peers.method, "score": rounded(d["score"], 2),
                "pct_from_median": rounded(d["pct"], 1), "direction": d["direction"], "worse": d["worse"],
                "by": d["by"], "group_size": len(items),
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
