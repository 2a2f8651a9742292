# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stalls: stretches of a run in which the device completed no request (controller side).

A drive that stops answering for a second or two and then carries on (firmware garbage
collection gone wrong, a link reset the kernel retried, a controller failing over) posts
good averages and percentiles: a 2 s stall every 10 s leaves p99 untouched when thousands
of requests complete in between. iobench's per-interval series shows it as intervals in
which not one request completed. docs/integrity.md, "Stalls", explains the rule:

* a *silence* is a run of consecutive intervals of the series without a completed read,
  write or fsync; its length is the sum of their durations;
* a silence of ``STALL_S`` seconds or more is a stall; the workload FAILs with the stall's
  place in the run (seconds from the window's start) and the longest single request;
* a workload paced so slowly (``rate_iops``) that fewer than ``MIN_EXPECTED`` completions
  are due in ``STALL_S`` is not judged (an empty interval is its cadence, not a stall);
* a silence during which the device completed other requests (the foreign-I/O samples of a
  shared window: the device's counters minus the job's own, read inside the silence) is
  no stall of the device: the job's requests waited behind others'. It is kept with
  ``others`` (the requests the device completed for others inside it) and counted in
  ``starved``, never in ``stalls``. Without two samples inside a silence ``others`` is None
  and a silence long enough is a stall.

The interval series is iobench's own (``bench.intervals``: ``t`` is the interval's end in
seconds from the window's start, ``duration_s``, ``read_ops``/``write_ops``/``fsync_ops`` and
``*_max_us``); docs/iobench-json.md.
"""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import OPS

STALL_S = 1.0
MIN_EXPECTED = 3.0


def _completed(iv):
    return sum(iv.get(op + "_ops") or 0 for op in OPS if is_number(iv.get(op + "_ops")))


def _max_us(iv):
    vals = [iv.get(op + "_max_us") for op in OPS]
    return max([v for v in vals if is_number(v)] or [0.0])


def others_served(foreign, t0, t1):
    """Requests the device completed for others between the epochs ``t0`` and ``t1``, from a
    result's ``foreign`` section (its samples: the device counters ``d`` and the job's own,
    ``c`` from its cgroup or ``l`` from iobench's live log, read at the same instants
    ``e``), or None when fewer than two samples fall inside or their span is under half
    the silence."""
    if not isinstance(foreign, dict):
        return None
    inside = [x for x in foreign.get("samples") or []
              if isinstance(x, dict) and is_number(x.get("e")) and t0 <= x["e"] <= t1]
    if len(inside) < 2 or inside[-1]["e"] - inside[0]["e"] < (t1 - t0) / 2.0:
        return None
    a, b = inside[0], inside[-1]
    done = 0
    for name, cur in (b.get("d") or {}).items():
        prev = (a.get("d") or {}).get(name)
        if not (isinstance(cur, list) and isinstance(prev, list) and len(cur) > 3 and len(prev) > 3):
            return None
        done += (cur[0] - prev[0]) + (cur[3] - prev[3])
        mine_b, mine_a = (b.get("c") or {}).get(name), (a.get("c") or {}).get(name)
        if isinstance(mine_b, list) and isinstance(mine_a, list) and len(mine_b) > 2 and len(mine_a) > 2:
            done -= (mine_b[0] - mine_a[0]) + (mine_b[2] - mine_a[2])
    la, lb = a.get("l"), b.get("l")
    if not (b.get("c") or a.get("c")) and isinstance(la, list) and isinstance(lb, list) and len(la) > 3 \
            and len(lb) > 3 and a.get("r") == b.get("r"):
        done -= (lb[0] - la[0]) + (lb[3] - la[3])
    return max(0, int(done))


def stall_figures(intervals, rate_iops=None, foreign=None, start_epoch=None):
    """The silences of one run's interval series, or None without a series.

    ``{"intervals", "silences": [{"from_s", "to_s", "seconds", "others"}], "longest_s",
    "stalls", "starved", "max_request_ms", "max_request_at_s", "judged", "reason"}``:
    ``stalls`` counts the silences of ``STALL_S`` or more in which the device did not
    complete others' requests either, ``starved`` those in which it did (:func:`others_served`
    from ``foreign``, the result's foreign-I/O section, with ``start_epoch`` the window's
    start; ``others`` None: not known); ``judged`` is False (with ``reason``) for a run paced
    below ``MIN_EXPECTED`` completions per ``STALL_S``."""
    ivs = [iv for iv in intervals or [] if isinstance(iv, dict) and is_number(iv.get("t"))
           and is_number(iv.get("duration_s"))]
    if not ivs:
        return None
    silences = []
    run = None
    for iv in ivs:
        if _completed(iv) == 0 and iv["duration_s"] > 0:
            start = iv["t"] - iv["duration_s"]
            if run is None:
                run = [start, iv["t"]]
            else:
                run[1] = iv["t"]
        elif run is not None:
            silences.append(run)
            run = None
    if run is not None:
        silences.append(run)
    worst = max(ivs, key=_max_us)
    judged, reason = True, None
    if is_number(rate_iops) and 0 < rate_iops * STALL_S < MIN_EXPECTED:
        judged, reason = False, "paced at %s requests/s: an empty interval is its cadence" % fmt_num(rate_iops)
    out = []
    for a, b in silences:
        seconds = round(b - a, 3)
        others = None
        if seconds >= STALL_S - 1e-9 and is_number(start_epoch):
            others = others_served(foreign, start_epoch + a, start_epoch + b)
        out.append({"from_s": round(a, 3), "to_s": round(b, 3), "seconds": seconds, "others": others})
    longest = max([s["seconds"] for s in out] or [0.0])
    long_ones = [s for s in out if s["seconds"] >= STALL_S - 1e-9] if judged else []
    return {"intervals": len(ivs), "silences": out, "longest_s": longest,
            "stalls": sum(1 for s in long_ones if not s["others"]),
            "starved": sum(1 for s in long_ones if s["others"]),
            "max_request_ms": round(_max_us(worst) / 1000.0, 3), "max_request_at_s": worst["t"],
            "judged": judged, "reason": reason}


def stall_message(wid, figures):
    """The reason of a stalled workload, or None when it did not stall."""
    if not figures or not figures.get("stalls"):
        return None
    stalls = [s for s in figures["silences"] if s["seconds"] >= STALL_S - 1e-9 and not s.get("others")]
    first = stalls[0]
    return ("%s: the device completed no request for %s s, %d time%s (first from %s s to %s s into the run, "
            "interval series; stall limit %s s); longest single request %s ms"
            % (wid, fmt_num(max(s["seconds"] for s in stalls)), len(stalls), "" if len(stalls) == 1 else "s",
               fmt_num(first["from_s"]), fmt_num(first["to_s"]), fmt_num(STALL_S),
               fmt_num(figures.get("max_request_ms"))))
