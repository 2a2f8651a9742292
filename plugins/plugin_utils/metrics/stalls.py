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
  place in the run (seconds from the window's start) and the longest single request; a
  threshold rule's ``max_stall_s`` replaces that limit for the workloads it matches
  (docs/thresholds.md): a stall no longer than it is said in a warning, not judged;
* a workload paced so slowly (``rate_iops``) that fewer than ``MIN_EXPECTED`` completions
  are due in ``STALL_S`` is not judged (an empty interval is its cadence, not a stall);
* a silence is read against the device's own counters read inside it (the result's
  ``device_samples``: the devices' ``/sys/block/<dev>/stat`` a few times a second, in a
  compliance run too; its ``foreign`` samples, read once a report interval, when it has
  none). When the device completed at least
  ``MIN_EXPECTED`` requests inside it (``others``: the device's completions less the job's
  own, where a cgroup tells them apart; else every completion, the job's own writeback
  included), the device did not stall: the job's requests waited behind that work. Such a
  silence is counted in ``starved``, never in ``stalls``. When it completed fewer and held no
  request it did not answer (``idle``: at every sample inside it the in-flight gauge was 0,
  or the requests it held, a journal commit's or a metadata read's, were completed by the
  next sample), the job issued nothing: the host did not run it (CPU starvation, a pause),
  which is not the device either; counted in ``idle``. When the sampler itself (a thread reading sysfs at a steady
  cadence) did not run through nearly the whole silence, missing its cadence by ``STALL_S``
  or more, the host ran none of the job's processes (:func:`sampler_gap`): ``paused``; so
  too when the samples say nothing of the device inside the silence (``others`` None) and
  the sampler missed its cadence (gaps of ``MISSED_FACTOR`` x its cadence or more) through
  nearly all of it (:func:`missed_cadence`: a host that ran it once in a second where it was
  due five times) or ran across it at half its cadence or less (:func:`mean_gap`: due five
  times a second, read 0.55 s apart). Otherwise, without two samples spanning half of a silence (``others``
  None), a silence long enough is a stall, as it is when the device held a request from one
  sample to the next and completed none.

The interval series is iobench's own (``bench.intervals``: ``t`` is the interval's end in
seconds from the window's start, ``duration_s``, ``read_ops``/``write_ops``/``fsync_ops`` and
``*_max_us``); docs/iobench-json.md.
"""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.foreign import interval_completions
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import OPS

STALL_S = 1.0
MIN_EXPECTED = 3.0
# a gap between two device samples of this many times the sampler's cadence is a cadence
# missed: the host did not run the job's sampler thread on time
MISSED_FACTOR = 3.0
# a sampler whose samples across a silence came this many times its cadence apart on average
# ran at half its rate or less there: the host did not run the job's processes on time
SLOW_FACTOR = 2.0


def _max_us(iv):
    vals = [iv.get(op + "_max_us") for op in OPS]
    return max([v for v in vals if is_number(v)] or [0.0])


def device_inside(samples, t0, t1):
    """What the device did between the epochs ``t0`` and ``t1``, from a result's ``foreign`` or
    ``device_samples`` section (its samples: the device counters ``d``, and in a compliance
    run the job's own, ``c`` from its cgroup or ``l`` from iobench's live log, read at the
    same instants ``e``): ``(others, idle)``. ``others``: the requests it completed that are
    not the job's; ``idle``: True when it answered every request it held at a sample inside
    (the in-flight gauge: :func:`_answered_all`), None when the samples do not say. ``(None, None)`` when fewer than two samples
    fall inside or their span is under half of it."""
    if not isinstance(samples, dict):
        return None, None
    inside = [x for x in samples.get("samples") or []
              if isinstance(x, dict) and is_number(x.get("e")) and t0 <= x["e"] <= t1]
    if len(inside) < 2 or inside[-1]["e"] - inside[0]["e"] < (t1 - t0) / 2.0:
        return None, None
    a, b = inside[0], inside[-1]
    done = 0
    for name, cur in (b.get("d") or {}).items():
        prev = (a.get("d") or {}).get(name)
        if not (isinstance(cur, list) and isinstance(prev, list) and len(cur) > 3 and len(prev) > 3):
            return None, None
        done += (cur[0] - prev[0]) + (cur[3] - prev[3])
        mine_b, mine_a = (b.get("c") or {}).get(name), (a.get("c") or {}).get(name)
        if isinstance(mine_b, list) and isinstance(mine_a, list) and len(mine_b) > 2 and len(mine_a) > 2:
            done -= (mine_b[0] - mine_a[0]) + (mine_b[2] - mine_a[2])
    la, lb = a.get("l"), b.get("l")
    if not (b.get("c") or a.get("c")) and isinstance(la, list) and isinstance(lb, list) and len(la) > 3 \
            and len(lb) > 3 and a.get("r") == b.get("r"):
        done -= (lb[0] - la[0]) + (lb[3] - la[3])
    return max(0, int(done)), _answered_all(samples, inside)


def _completions(sample):
    """The reads and writes a sample's devices had completed (``d``: each device's counters),
    or None when one of them does not say."""
    total = 0
    for d in (sample.get("d") or {}).values():
        if not (isinstance(d, list) and len(d) > 3 and is_number(d[0]) and is_number(d[3])):
            return None
        total += d[0] + d[3]
    return total


def _answered_all(samples, inside):
    """Whether the device answered every request it held at the samples ``inside`` a silence:
    at each of them, the requests in flight (the kernel's in-flight gauge, field 9 of
    ``/sys/block/<dev>/stat``, Documentation/admin-guide/iostats.rst) were matched by as many
    completions by the next sample (inside the silence or after it). A journal commit's or a
    metadata read's one or two requests held at one sample and completed by the next leave it
    answering; a request held from one sample to the next with nothing completed is a device
    that holds what it does not answer. None when a sample lacks a device's gauge or counters."""
    every = sorted((x for x in samples.get("samples") or [] if isinstance(x, dict) and is_number(x.get("e"))),
                   key=lambda x: x["e"])
    names = set((inside[-1].get("d") or {}).keys())
    if not names:
        return None
    for x in inside:
        d = x.get("d") or {}
        if set(d) != names or not all(isinstance(v, list) and len(v) > 7 and is_number(v[7]) for v in d.values()):
            return None
        held = sum(v[7] for v in d.values())
        if not held:
            continue
        later = [y for y in every if y["e"] > x["e"] and set((y.get("d") or {}).keys()) == names]
        done_now, done_next = _completions(x), _completions(later[0]) if later else None
        if done_now is None or done_next is None or done_next - done_now < held:
            return False
    return True


def _epochs(samples):
    """The instants (``e``) of a result's ``foreign`` or ``device_samples`` samples, in order."""
    return sorted(x["e"] for x in samples.get("samples") or [] if isinstance(x, dict) and is_number(x.get("e")))


def sampler_gap(samples, t0, t1):
    """``(gap, covered)``: of two consecutive device samples of a result's ``foreign`` or
    ``device_samples`` section, the pair whose gap covers most of ``[t0, t1]`` (epochs): the
    whole gap in seconds and the part of ``[t0, t1]`` inside it; None without a sample on
    each side. The sampler is a thread that reads sysfs at a steady cadence; a gap far
    longer than that cadence is the host not running it (the job's processes were not
    scheduled), whatever the device did."""
    if not isinstance(samples, dict):
        return None
    es = _epochs(samples)
    if not es or es[0] > t0 or es[-1] < t1:
        return None
    pairs = [(b - a, min(b, t1) - max(a, t0)) for a, b in zip(es, es[1:]) if b > t0 and a < t1]
    return max(pairs, key=lambda p: p[1]) if pairs else None


def missed_cadence(samples, t0, t1, every):
    """The part of ``[t0, t1]`` (epochs, seconds) that lies in gaps between consecutive device
    samples of ``MISSED_FACTOR`` x ``every`` (the sampler's cadence) or more: when the sampler
    was not run on time. None without a sample on each side or a cadence."""
    if not isinstance(samples, dict) or not (is_number(every) and every > 0):
        return None
    es = _epochs(samples)
    if not es or es[0] > t0 or es[-1] < t1:
        return None
    return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in zip(es, es[1:]) if b - a >= MISSED_FACTOR * every)


def mean_gap(samples, t0, t1):
    """The mean gap between the device samples from the last one read at or before ``t0`` to
    the first one at or after ``t1`` (epochs): how often the sampler really ran across
    ``[t0, t1]``. None without a sample on each side."""
    if not isinstance(samples, dict):
        return None
    es = _epochs(samples)
    before = [i for i, e in enumerate(es) if e <= t0]
    after = [i for i, e in enumerate(es) if e >= t1]
    if not before or not after:
        return None
    a, b = before[-1], after[0]
    return (es[b] - es[a]) / (b - a) if b > a else None


def _sample_interval(samples):
    """The interval the samples were meant to be read at (``device_samples.interval``, the
    foreign-I/O settings' ``interval``), or None."""
    if not isinstance(samples, dict):
        return None
    for v in (samples.get("interval"), (samples.get("settings") or {}).get("interval")):
        if is_number(v) and v > 0:
            return float(v)
    return None


def stall_figures(intervals, rate_iops=None, samples=None, start_epoch=None):
    """The silences of one run's interval series, or None without a series.

    ``{"intervals", "silences": [{"from_s", "to_s", "seconds", "others", "idle"}], "longest_s",
    "stalls", "starved", "idle", "max_request_ms", "max_request_at_s", "judged", "reason"}``:
    ``stalls`` counts the silences of ``STALL_S`` or more in which the device completed no
    other request either and held one it did not answer (or the samples do not say),
    ``starved`` those in which it completed others, ``idle`` those in which it held no
    request it did not answer (:func:`device_inside` over ``samples``, the result's ``foreign`` or ``device_samples`` section, with
    ``start_epoch`` the window's start; ``others`` None: not known); ``judged`` is False
    (with ``reason``) for a run paced below ``MIN_EXPECTED`` completions per ``STALL_S``."""
    ivs = [iv for iv in intervals or [] if isinstance(iv, dict) and is_number(iv.get("t"))
           and is_number(iv.get("duration_s"))]
    if not ivs:
        return None
    silences = []
    run = None
    for iv in ivs:
        if interval_completions(iv) == 0 and iv["duration_s"] > 0:
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
    every = _sample_interval(samples)
    for a, b in silences:
        seconds = round(b - a, 3)
        others = idle = gap = missed = slow = None
        if seconds >= STALL_S - 1e-9 and is_number(start_epoch):
            others, idle = device_inside(samples, start_epoch + a, start_epoch + b)
            gap = sampler_gap(samples, start_epoch + a, start_epoch + b)
            missed = missed_cadence(samples, start_epoch + a, start_epoch + b, every)
            slow = mean_gap(samples, start_epoch + a, start_epoch + b)
        # the sampler missed its cadence by a stall's length or more, over (nearly) the whole
        # silence: the host did not run the job's processes; or, the samples saying nothing
        # of the device inside it, the sampler missed its cadence through (nearly) all of it,
        # or ran across it at half its cadence or less (on cadence, a silence of STALL_S holds
        # samples enough to say)
        paused = bool(every and ((gap and gap[0] >= every + STALL_S and gap[1] >= seconds - every)
                                 or (others is None and missed is not None
                                     and missed >= max(seconds - every, seconds / 2.0))
                                 or (others is None and slow is not None and slow >= SLOW_FACTOR * every)))
        out.append({"from_s": round(a, 3), "to_s": round(b, 3), "seconds": seconds, "others": others,
                    "idle": bool(idle) and not _served(others) and not paused,
                    "paused": paused and not _served(others)})
    longest = max([s["seconds"] for s in out] or [0.0])
    long_ones = [s for s in out if s["seconds"] >= STALL_S - 1e-9] if judged else []
    return {"intervals": len(ivs), "silences": out, "longest_s": longest,
            "stalls": sum(1 for s in long_ones if _stalled(s)),
            "starved": sum(1 for s in long_ones if _served(s["others"])),
            "idle": sum(1 for s in long_ones if s["idle"]),
            "paused": sum(1 for s in long_ones if s["paused"]),
            "max_request_ms": round(_max_us(worst) / 1000.0, 3), "max_request_at_s": worst["t"],
            "judged": judged, "reason": reason}


def _served(others):
    """The device answered others inside a silence: at least ``MIN_EXPECTED`` requests (a
    journal commit's one or two writes while it otherwise held nothing are no work the job
    waited behind)."""
    return is_number(others) and others >= MIN_EXPECTED


def _stalled(silence):
    return (silence["seconds"] >= STALL_S - 1e-9 and not _served(silence.get("others")) and not silence.get("idle")
            and not silence.get("paused"))


def _over(silence, limit):
    """A stall beyond the limit: the built-in one (``None``: ``STALL_S`` or more) or a rule's
    ``max_stall_s`` (longer than it)."""
    return _stalled(silence) and (limit is None or silence["seconds"] > limit + 1e-9)


def held_stall_s(figures):
    """The longest silence the device held (a stall at the built-in limit), 0.0 without one;
    None when the series was not judged or is missing."""
    if not figures or not figures.get("judged", True):
        return None
    return max([s["seconds"] for s in figures.get("silences") or [] if _stalled(s)] or [0.0])


def silence_evidence(figures, limit=8):
    """The first ``limit`` silences of a stall check's figures, as its evidence."""
    return "silences: %s" % ", ".join("%s-%s s" % (fmt_num(s["from_s"]), fmt_num(s["to_s"]))
                                      for s in (figures or {}).get("silences", [])[:limit])


def stall_message(wid, figures, limit=None, rule=None):
    """The reason of a stalled workload, or None when it did not stall: beyond ``STALL_S``,
    or beyond ``limit`` (a rule's ``max_stall_s``, the rule's name in ``rule``) when given."""
    if not figures or not figures.get("stalls") or not figures.get("judged", True):
        return None
    stalls = [s for s in figures["silences"] if _over(s, limit)]
    if not stalls:
        return None
    first = stalls[0]
    where = "stall limit %s s" % fmt_num(STALL_S if limit is None else limit)
    if rule:
        where += ", rule %s" % rule
    return ("%s: the device completed no request for %s s, %d time%s (first from %s s to %s s into the run, "
            "interval series; %s); longest single request %s ms"
            % (wid, fmt_num(max(s["seconds"] for s in stalls)), len(stalls), "" if len(stalls) == 1 else "s",
               fmt_num(first["from_s"]), fmt_num(first["to_s"]), where,
               fmt_num(figures.get("max_request_ms"))))


def silence_notes(wid, figures, shared_judged=False, limit=None, rule=None):
    """Warnings for the long silences that were not judged, one per kind (its longest
    silence): ``starved`` ones (the device went on completing other requests; left out when
    ``shared_judged``: a compliance run judges a shared window by its foreign-I/O rules),
    ``paused`` ones (the job's own sampler did not run either), ``idle`` ones (the device
    held no request: the job issued none) and, under a rule's ``limit`` (``max_stall_s``, the
    rule's name in ``rule``), the device's own stalls no longer than it."""
    if not figures or not figures.get("judged", True):
        return []
    long_ones = [s for s in figures.get("silences") or [] if s["seconds"] >= STALL_S - 1e-9]
    kinds = (
        (limit is not None and (lambda s: _stalled(s) and not _over(s, limit)),
         "the device completed no request for {secs} s ({place}; it held requests): a stall, within the stall "
         "limit %s s of rule %s" % (fmt_num(limit), str(rule).replace("{", "{{").replace("}", "}}"))),
        (not shared_judged and (lambda s: _served(s.get("others"))),
         "no request of the job completed for {secs} s ({place}) while the device completed {others} others "
         "(another process's, or the job's own writeback): the job's requests waited, the device did not stall"),
        (lambda s: s.get("paused"),
         "no request of the job completed for {secs} s ({place}) while the host did not run the job's processes "
         "(its device sampler, due every few tenths of a second, did not run either): the host paused, the "
         "device did not stall"),
        (lambda s: s.get("idle"),
         "the job issued no request for {secs} s ({place}; the device answered every request it held and "
         "completed {others}): the host did "
         "not run the benchmark (CPU starvation, a pause), the device did not stall; the workload's rates count "
         "that time"),
    )
    notes = []
    for match, text in kinds:
        mine = [s for s in long_ones if match and match(s)]
        if mine:
            s = max(mine, key=lambda x: x["seconds"])
            place = "from %s s to %s s into the run" % (fmt_num(s["from_s"]), fmt_num(s["to_s"]))
            notes.append("%s: %s" % (wid, text.format(secs=fmt_num(s["seconds"]), place=place,
                                                      others=fmt_num(s.get("others")))))
    return notes
