# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in plan (docs/integrity.md): a profile's one round repeated for a duration.

A profile with ``burnin: {hours: H}`` (the shipped ``burnin`` profile gives
``fleetqual_burnin_time``) has one *round* as its matrix, repeated for H hours: as many whole
rounds as fit (at least one, at most :data:`BURNIN_MAX_ROUNDS`), each workload's id suffixed
``-r<k>`` and marked ``burnin: {round, rounds, pass}`` (the progress line shows it; the
contract: ``pass`` is ``write`` for a workload that only writes, ``verify`` for one that
only reads, ``mix`` otherwise). Every round writes, then reads back; every workload
verifies. The write and verify passes cover the whole data set once (``requests``) when
its size is known (after the targets: a device target's region), else until their
``time``.

``profiles.py`` calls :func:`expand_rounds` on the resolved round and :func:`cover_data_sets`
on the plan placed on its targets; both run on the host (module_utils) and on the
controller (validation, the ``plan`` filter).
"""

import copy
import math

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.summary import workload_duration_s
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name

BURNIN_VAR = "fleetqual_burnin_time"
BURNIN_MAX_HOURS = 720          # 30 days
BURNIN_MAX_ROUNDS = 1000        # a plan of at most 3000-odd workloads: the job's status stays small
BURNIN_PASSES = ("write", "verify", "mix")


def setting_of(profile_or_matrix, profiles):
    """The ``burnin`` mapping of the profile (its own, else the nearest parent's through
    ``extends``), or None; a user matrix replaces a profile's rounds, not its burnin."""
    prof, seen = profile_or_matrix, []
    while True:
        if isinstance(prof, str):
            if not isinstance(profiles, dict) or prof in seen:
                return None
            seen.append(prof)
            prof = profiles.get(prof)
        if not isinstance(prof, dict):
            return None
        if prof.get("burnin") is not None:
            return prof["burnin"]
        prof = prof.get("extends")


def seconds_of(hours):
    """A duration in hours as seconds, to the microsecond: 2.01 h is 7236 s, not the
    7235.999... that binary floating point makes of 2.01 x 3600 (a round of 7236 s fits)."""
    return round(hours * 3600, 6)


def burnin_hours(value, var=BURNIN_VAR):
    """``(hours, error)``: the burn-in duration in hours (a number or a numeric string, above 0
    and at most :data:`BURNIN_MAX_HOURS`), or the error naming ``var`` and the closest valid value."""
    hours = value
    if isinstance(hours, str):
        try:
            hours = float(hours.strip())
        except ValueError:
            return None, "%s: must be a number of hours (e.g. 24), got %r" % (var, value)
    if not is_number(hours):       # a finite int or float, never a bool or NaN
        return None, "%s: must be a number of hours (e.g. 24), got %s %r" % (var, type_name(value), value)
    if hours <= 0:
        return None, "%s: must be more than 0 hours, got %r; closest valid value: 1" % (var, value)
    if hours > BURNIN_MAX_HOURS:
        return None, "%s: at most %d hours (30 days), got %r; closest valid value: %d" % (
            var, BURNIN_MAX_HOURS, value, BURNIN_MAX_HOURS)
    return float(hours), None


def burnin_pass(spec):
    """The burn-in pass of a workload: ``write`` (writes only), ``verify`` (reads only) or ``mix``."""
    mode = spec.get("mode")
    if mode in ("seqwr", "rndwr"):
        return "write"
    if mode in ("seqrd", "rndrd"):
        return "verify"
    return "mix"


def burnin_rounds(round_s, hours):
    """Whole rounds of ``round_s`` seconds in ``hours``: at most the duration, at least one."""
    return max(1, int(seconds_of(hours) // round_s)) if round_s > 0 else 1


def expand_rounds(out, setting, names, errors):
    """The burn-in expansion of one round (``out``) into the rounds that fill the profile's
    ``burnin.hours`` (module comment above); ``out`` unchanged without a ``burnin`` setting."""
    if setting is None or not out:
        return out
    var = BURNIN_VAR
    if not isinstance(setting, dict) or set(setting) - {"hours"} or "hours" not in setting:
        errors.append("%s.<profile>.burnin: must be {hours: <number>} (the shipped profile: {hours: "
                      "'{{ %s }}'}), got %r" % (names["profiles"], var, setting))
        return out
    hours, problem = burnin_hours(setting["hours"], var)
    if problem:
        errors.append(problem)
        return out
    passes = [burnin_pass(spec) for spec in out]
    if "write" not in passes or "verify" not in passes or passes.index("write") > passes.index("verify"):
        errors.append("%s.<profile>.matrix: a burn-in round needs a write pass (writes only) and then a verify "
                      "pass (reads only) before its other workloads; passes now: %s"
                      % (names["profiles"], ", ".join("%s %s" % (s["id"], p) for s, p in zip(out, passes))))
        return out
    unverified = [s["id"] for s in out if s.get("verify") is False]
    if unverified:
        errors.append("a burn-in workload must verify its data: %s ha%s verify: false (from the profile or %s)"
                      % (", ".join(unverified), "ve" if len(unverified) > 1 else "s", names["overrides"]))
        return out
    round_s = sum(workload_duration_s(s) for s in out)
    if round_s > seconds_of(hours):
        closest = math.ceil(round_s / 36.0) / 100.0
        parts = ", ".join("%s %d s" % (s["id"], workload_duration_s(s)) for s in out)
        errors.append("%s: %s h is shorter than one burn-in round (%d s: %s); closest valid value: %s (or shorten "
                      "the round with fleetqual_workload_overrides: {time: ...})"
                      % (var, fmt_hours(hours), round_s, parts, fmt_hours(closest)))
        return out
    rounds = burnin_rounds(round_s, hours)
    if rounds > BURNIN_MAX_ROUNDS:
        closest = math.floor(BURNIN_MAX_ROUNDS * round_s / 36.0) / 100.0
        errors.append("%s: %s h makes %d rounds of %d s, more than %d; closest valid value: %s (or lengthen the round "
                      "with fleetqual_workload_overrides: {time: ...})"
                      % (var, fmt_hours(hours), rounds, round_s, BURNIN_MAX_ROUNDS, fmt_hours(closest)))
        return out
    expanded = []
    for k in range(1, rounds + 1):
        for spec, kind in zip(out, passes):
            s = copy.deepcopy(spec)
            s["id"] = "%s-r%d" % (spec["id"], k)
            s["burnin"] = {"round": k, "rounds": rounds, "pass": kind}
            expanded.append(s)
    return expanded


def fmt_hours(hours):
    """``24.0`` -> ``24``, ``1.5`` -> ``1.5``, ``0.003`` -> ``0.003``: hundredths, or two
    significant digits for less than that (never ``0`` for a duration above 0)."""
    text = ("%.2f" % hours).rstrip("0").rstrip(".")
    return "%.2g" % hours if text == "0" and hours else text


def cover_data_sets(specs):
    """A burn-in write or verify pass covers its whole data set once: ``requests`` = the
    data set's blocks, once its size is known (a device target's region is sized by
    ``plan_targets``); until its ``time`` otherwise. A ``requests`` the spec gives is kept."""
    for s in specs:
        if not isinstance(s.get("burnin"), dict) or s["burnin"].get("pass") not in ("write", "verify"):
            continue
        size = int(s.get("total_size") or s.get("device_size") or 0)
        if size and s.get("block_size") and not s.get("requests"):
            s["requests"] = size // int(s["block_size"])
    return specs
