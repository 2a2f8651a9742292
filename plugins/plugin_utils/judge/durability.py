# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The power-cut test's verdict (docs/durability.md): what the drive acknowledged as durable
and did not hold after the power came back.

:func:`judge_durability` turns the cycles' read-backs (``iobench witness-check`` per target,
with the cut's time) into ``{verdict, reasons, ...}``: PASS when no acknowledged write was
lost, torn, misplaced or unreadable over every cycle, FAIL citing the counts, the time
before the cut the lost writes had been acknowledged, the drive's serial and its write cache
setting; :func:`merge_into_record` puts it into the host record (the worse verdict, its
reasons first)."""

NOT_HELD = ("lost", "torn", "misplaced", "read_errors")     # what an acknowledged block may be after a cut
ORDER = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2, "ERROR": 3}


def _drive_text(drive):
    drive = drive or {}
    parts = []
    ident = " ".join(str(x) for x in (drive.get("model"), drive.get("serial")) if x)
    parts.append("drive %s" % (ident or drive.get("name") or "unknown"))
    if drive.get("write_cache"):
        parts.append("write cache %s (%s)" % (drive["write_cache"], drive.get("write_cache_source") or "kernel"))
    if drive.get("fua") is not None:
        parts.append("FUA %s" % ("on" if drive["fua"] else "off"))
    return ", ".join(parts)


def judge_durability(cycles, settings=None, recovered=None):
    """The verdict of a host's power-cut cycles: ``cycles`` is a list of ``{cycle, cut_ms,
    taken_ms, results: {target: witness-check output with its drive}}``, a cycle an earlier
    run cut and never read back (its controller died) with ``recovered_from`` that run's id.
    ``recovered``: ``{run_id, cycle, state}`` of such a cycle this run powered the host on
    for (docs/durability.md, "A run killed in the middle of a cycle"), or None; one whose cut
    was never confirmed (``armed``) is a note, not a cycle."""
    targets = {}
    per_cycle = []
    for c in cycles or []:
        row = {"cycle": c.get("cycle"), "cut_ms": c.get("cut_ms"), "taken_ms": c.get("taken_ms"), "targets": {},
               "recovered_from": c.get("recovered_from")}
        for name, res in sorted((c.get("results") or {}).items()):
            t = targets.setdefault(name, {"drive": res.get("drive"), "acked": 0, "cycles": 0,
                                          "lost": 0, "torn": 0, "misplaced": 0, "read_errors": 0,
                                          "unreadable_entries": 0, "lost_window_ms": None, "acked_in_bad": 0,
                                          "samples": []})
            t["cycles"] += 1
            t["acked"] += res.get("acked") or 0
            t["unreadable_entries"] += res.get("unreadable_entries") or 0
            bad = sum(res.get(k) or 0 for k in NOT_HELD)
            for k in NOT_HELD:
                t[k] += res.get(k) or 0
            window = None
            first = (res.get("lost_acked_ms") or {}).get("first")
            if bad and first is not None and c.get("cut_ms") is not None:
                window = max(0, c["cut_ms"] - first)
                t["lost_window_ms"] = max(t["lost_window_ms"] or 0, window)
            if bad:
                t["acked_in_bad"] += res.get("acked") or 0
                t["samples"].extend((res.get("samples") or [])[:4])
            row["targets"][name] = {"acked": res.get("acked"), "lost": res.get("lost"), "torn": res.get("torn"),
                                    "misplaced": res.get("misplaced"), "read_errors": res.get("read_errors"),
                                    "lost_window_ms": window}
        per_cycle.append(row)
    reasons = []
    for name, t in sorted(targets.items()):
        where = "%s, %s" % (name, _drive_text(t["drive"]))
        window = " (the last %d ms before it)" % t["lost_window_ms"] if t["lost_window_ms"] is not None else ""
        if t["lost"]:
            reasons.append("%d of %d acknowledged writes lost across a power cut%s: the drive's write cache is "
                           "volatile or ignores flushes (target %s)" % (t["lost"], t["acked_in_bad"], window, where))
        if t["torn"]:
            reasons.append("%d of %d acknowledged blocks torn across a power cut%s: half old, half new (target %s)"
                           % (t["torn"], t["acked_in_bad"], window, where))
        if t["misplaced"]:
            reasons.append("%d acknowledged blocks hold another place's data after a power cut (target %s)"
                           % (t["misplaced"], where))
        if t["read_errors"]:
            reasons.append("%d acknowledged blocks could not be read back after a power cut (target %s)"
                           % (t["read_errors"], where))
    for t in targets.values():      # each target's own verdict: its drive kept every acknowledged write
        t["verdict"] = "FAIL" if any(t[k] for k in NOT_HELD) else "PASS"
    planned = (settings or {}).get("cycles")
    own = [r for r in per_cycle if not r["recovered_from"]]
    if planned is not None and len(own) < planned and not reasons:
        reasons.append("only %d of %d power cuts ran" % (len(own), planned))
        verdict = "ERROR"
    else:
        verdict = "FAIL" if reasons else "PASS"
    totals = {k: sum(t[k] for t in targets.values()) for k in ("acked",) + NOT_HELD}
    return dict(verdict=verdict, reasons=reasons, cycles=len(per_cycle), planned_cycles=planned, per_cycle=per_cycle,
                targets={n: {k: v for k, v in t.items() if k != "acked_in_bad"} for n, t in targets.items()},
                recovered=recovered_note(recovered), **totals)


def recovered_note(recovered):
    """The record's word on a cycle an earlier run left unchecked (None without one)."""
    if not isinstance(recovered, dict) or not recovered.get("run_id"):
        return None
    judged = recovered.get("state") == "cut"
    return dict(run_id=recovered["run_id"], cycle=recovered.get("cycle"), judged=judged,
                note="power cut %s of run %s was left unchecked by its controller: this run powered the host on and %s"
                     % (recovered.get("cycle"), recovered["run_id"],
                        "read back every write its witnesses name (judged with this run's cuts)" if judged else
                        "did not judge it: the cut was under way, never confirmed"))


def merge_into_record(record, durability):
    """The host record with the power-cut test's result under ``durability``: the worse of
    the two verdicts, the test's reasons first."""
    if not durability:
        return record
    record["durability"] = durability
    mine = durability.get("verdict") or "ERROR"
    if ORDER.get(mine, 3) > ORDER.get(record.get("verdict"), 3):
        record["verdict"] = mine
    record["reasons"] = list(durability.get("reasons") or []) + list(record.get("reasons") or [])
    if (durability.get("recovered") or {}).get("note"):
        record["warnings"] = list(record.get("warnings") or []) + [durability["recovered"]["note"]]
    return record


def durability_summary(durability):
    """What fleet.json's host entry keeps of a record's ``durability`` (None without one): the
    verdict, the totals and per target its drive's serial and write cache, its counts and the
    window before the cut (no samples, no cycles)."""
    if not isinstance(durability, dict):
        return None
    keep = ("verdict", "cycles", "planned_cycles", "acked") + NOT_HELD
    out = {k: durability.get(k) for k in keep}
    out["targets"] = {}
    for name, t in sorted((durability.get("targets") or {}).items()):
        drive = t.get("drive") or {}
        out["targets"][name] = dict({k: t.get(k) for k in ("verdict", "acked") + NOT_HELD + ("lost_window_ms",)},
                                    serial=drive.get("serial"), model=drive.get("model"),
                                    write_cache=drive.get("write_cache"), fua=drive.get("fua"))
    return out


__all__ = ["judge_durability", "merge_into_record", "durability_summary"]
