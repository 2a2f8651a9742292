# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Diagnostics 5 and 6 (docs/diagnostics.md): the thread sweep of a host, its knee, the
tipping point (p99 against the latency bound) and the latency-bounded maximum (an iobench
search, else the sweep). ``diagnose.py`` runs them in ``diagnose``; ``knee`` is the one knee
rule, also used by array mode (``plugin_utils/array/figures.py``)."""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import fmt_k, fmt_ms, fmt_pct, fmt_x
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, median, ratio
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.model import DEFAULTS, diag_entry, na_entry
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import rounded


# --------------------------------------------------------------------------- 5. tipping point

def _family_key(w):
    if w.fkey is None:
        r = w.rec
        w.fkey = (w.mode, bool(w.direct), w.block, w.total, w.file_num, r.get("engine") or "sync",
                  r.get("iodepth") or 1, r.get("rw_ratio"), r.get("fsync_freq"), w.label)
    return w.fkey


def _p99(w):
    """p99 of the operation that describes the workload (metrics ``latency_op``)."""
    return w.get("lat_p99_ms")


def sweep_steps(ws, o=None):
    """The thread sweep of the host: (family label, steps sorted by threads) or (None, [])."""
    o = o or DEFAULTS
    fams = {}
    for w in ws:
        if w.ok and w.threads and w.get("iops") is not None:
            # one workload per thread count (the first)
            fams.setdefault(_family_key(w), {}).setdefault(int(w.threads), w)
    best = None
    for key, by_t in fams.items():
        if len(by_t) < o["sweep_min_steps"]:
            continue
        rank = (len(by_t), key[0] == "rndrd", bool(by_t[max(by_t)].over_cache()))
        if best is None or rank > best[0]:
            best = (rank, key, by_t)
    if best is None:
        return None, []
    _rank, key, by_t = best
    steps = []
    for t in sorted(by_t):
        w = by_t[t]
        rs, wsec = w.get("dev_r_s"), w.get("dev_w_s")
        dev_ops = None if rs is None and wsec is None else (rs or 0.0) + (wsec or 0.0)
        r_aw, w_aw = w.get("dev_r_await_ms"), w.get("dev_w_await_ms")
        if dev_ops:
            aw = ((rs or 0.0) * (r_aw or 0.0) + (wsec or 0.0) * (w_aw or 0.0)) / dev_ops
        else:
            aw = max([v for v in (r_aw, w_aw) if v is not None] or [None]) if (r_aw or w_aw) else None
        aqu = w.get("dev_aqu_sz")
        little = ratio(aqu, dev_ops * aw / 1000.0) if dev_ops and aw is not None else None
        steps.append({"threads": t, "id": w.id, "iops": rounded(w.get("iops"), 1), "p99_ms": rounded(_p99(w), 4),
                      "aqu_sz": rounded(aqu, 2), "await_ms": rounded(aw, 3), "util_pct": rounded(w.get("dev_util_pct"), 1),
                      "dev_iops": rounded(dev_ops, 1), "little_ratio": rounded(little, 3)})
    label = "%s %s%s" % (key[9] or "", key[0], "" if key[1] else " buffered")
    return label.strip(), steps


def knee(steps, share):
    """``(knee step, best step)`` of a sweep: the step with the fewest threads whose IOPS
    reach ``share`` of the sweep's best (one noisy dip does not end the growth early);
    ``(None, None)`` without IOPS."""
    rated = [s for s in steps if s.get("iops") is not None]
    if not rated:
        return None, None
    top = max(rated, key=lambda s: s["iops"])
    first = min((s for s in rated if s["iops"] >= share * top["iops"]), key=lambda s: s["threads"])
    return first, top


def _bound_best(steps, bound):
    within = [s for s in steps if s.get("p99_ms") is not None and s["p99_ms"] <= bound]
    if not within:
        return None, None
    hi_t = max(within, key=lambda s: s["threads"])
    hi_iops = max(within, key=lambda s: s["iops"] or 0)
    return hi_t, hi_iops


def sweep_tipping_point(ws, o):
    name = "tipping_point"
    label, steps = sweep_steps(ws, o)
    if not steps:
        return na_entry(name, "needs a thread sweep: one workload at %d or more thread counts" % o["sweep_min_steps"])
    bound = o["latency_bound_ms"]
    hi_t, hi_iops = _bound_best(steps, bound)
    # the knee, judged from the whole sweep: the fewest threads reaching knee_share of its best IOPS
    sat, top = knee(steps, o["knee_share"])
    full = next((s for s in steps if s.get("util_pct") is not None and s["util_pct"] >= o["util_full_pct"]), None)
    gain_after_full = None
    if full is not None:
        later = [s["iops"] for s in steps if s["threads"] > full["threads"] and s["iops"] is not None]
        if later and full["iops"]:
            gain_after_full = max(later) / full["iops"]
    littles = [s["little_ratio"] for s in steps if s.get("little_ratio") is not None]
    little = median(littles)
    ev = {"family": label, "bound_ms": bound, "steps": steps,
          "max_threads_within_bound": hi_t["threads"] if hi_t else None,
          "max_iops_within_bound": hi_iops["iops"] if hi_iops else None,
          "threads_at_max_iops": hi_iops["threads"] if hi_iops else None,
          "p99_ms_at_max_iops": hi_iops["p99_ms"] if hi_iops else None,
          "saturation_threads": sat["threads"] if sat else None,
          "knee_share": o["knee_share"], "best_iops": top["iops"] if top else None,
          "best_threads": top["threads"] if top else None,
          "util_full_threads": full["threads"] if full else None,
          "iops_gain_after_util_full": rounded(gain_after_full, 3),
          "little_ratio": rounded(little, 3), "little_ok": None if little is None else abs(little - 1) <= o["little_tolerance"]}
    span = "%d-%d threads" % (steps[0]["threads"], steps[-1]["threads"])
    if hi_t:
        s = ("Tipping point (%s, %s): p99 stays under %s up to %d threads; best %s IOPS at %d threads (p99 %s)"
             % (label, span, fmt_ms(bound), hi_t["threads"], fmt_k(hi_iops["iops"]), hi_iops["threads"],
                fmt_ms(hi_iops["p99_ms"])))
        status, concl = "pass", "within_bound"
    else:
        s = ("Tipping point (%s, %s): p99 is over %s already at %d thread%s (%s)"
             % (label, span, fmt_ms(bound), steps[0]["threads"], "" if steps[0]["threads"] == 1 else "s",
                fmt_ms(steps[0]["p99_ms"])))
        status, concl = "warn", "exceeds_bound"
    if sat is not None and sat is not steps[-1]:
        s += ("; IOPS reach %s of the sweep's best (%s at %d threads) at %d threads"
              % (fmt_pct(o["knee_share"]), fmt_k(top["iops"]), top["threads"], sat["threads"]))
    else:
        s += "; IOPS still growing at %d threads" % steps[-1]["threads"]
    if full is not None and gain_after_full is not None and gain_after_full > 1 + o["saturation_gain"]:
        s += ("; %%util reached 100 at %d threads yet IOPS rose %s more (a parallel device is not saturated "
              "at 100 %%util)" % (full["threads"], fmt_x(gain_after_full)))
    if little is not None:
        s += "; Little's law aqu-sz/(IOPS x await) = %.2f%s" % (
            little, "" if ev["little_ok"] else " (device figures disagree: other I/O or too few samples)")
    return diag_entry(status, concl, s + ".", ev, [st["id"] for st in steps])


# --------------------------------------------------------------------------- 6. bounded maximum

def _search_of(ws):
    for w in ws:
        s = w.m.get("search")
        if isinstance(s, dict) and isinstance(s.get("steps"), list):
            return w, s
    return None, None


def sweep_bounded_max(ws, o, tipping):
    name = "bounded_max"
    w, search = _search_of(ws)
    if search is not None:
        bound = as_number(search.get("bound_ms")) or o["latency_bound_ms"]
        steps = [{k: st.get(k) for k in ("threads", "iodepth", "iops", "p99_ms")} for st in search["steps"]]
        knob = search.get("knob") or ("iodepth" if any(st["threads"] is None and st["iodepth"] is not None
                                                       for st in steps) else "threads")
        best = search.get("best")
        if isinstance(best, dict):
            best = {k: best.get(k) for k in ("threads", "iodepth", "iops", "p99_ms")}
        else:                                               # absent / null: the best complete step within the bound
            _most_threads, best = _bound_best([st for st, raw in zip(steps, search["steps"]) if raw.get("complete", True)], bound)
        ev = {"source": "search", "workload": w.id, "bound_ms": bound, "knob": knob, "steps": steps,
              "best": best, "stopped": search.get("stopped"),
              "iops": best.get("iops") if best else None, "p99_ms": best.get("p99_ms") if best else None}
        if best and best.get("iops") is not None:
            at = best.get(knob)
            return diag_entry("pass", "within_bound",
                              "Latency-bounded maximum (iobench search, %s): %s IOPS at %s %s with p99 %s <= %s."
                              % (w.id, fmt_k(best["iops"]), fmt_num(at), knob, fmt_ms(best.get("p99_ms")), fmt_ms(bound)),
                              ev, [w.id])
        return diag_entry("warn", "exceeds_bound",
                          "Latency-bounded maximum (iobench search, %s): no step kept p99 under %s."
                          % (w.id, fmt_ms(bound)), ev, [w.id])
    if tipping["status"] == "n/a":
        return na_entry(name, "no iobench search result and no thread sweep")
    t = tipping["evidence"]
    ev = {"source": "sweep", "bound_ms": t["bound_ms"], "knob": "threads", "iops": t["max_iops_within_bound"],
          "threads": t["threads_at_max_iops"], "p99_ms": t["p99_ms_at_max_iops"], "family": t["family"]}
    if t["max_iops_within_bound"] is None:
        return diag_entry("warn", "exceeds_bound",
                          "Latency-bounded maximum (from the %s thread sweep): no thread count kept p99 under %s."
                          % (t["family"], fmt_ms(t["bound_ms"])), ev, tipping["workloads"])
    return diag_entry("pass", "within_bound",
                      "Latency-bounded maximum (from the %s thread sweep): %s IOPS at %d threads with p99 %s <= %s."
                      % (t["family"], fmt_k(ev["iops"]), ev["threads"], fmt_ms(ev["p99_ms"]), fmt_ms(t["bound_ms"])),
                      ev, tipping["workloads"])
