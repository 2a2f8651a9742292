# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one owner of a host's final verdict (docs/report.md, "What can change a verdict").

``final_verdict`` decides from

* the host's record (its ``verdict`` is the judge's, ``plugin_utils/judge/host.py``), or its
  absence;
* what the play saw for the host *before* the verdict gate (a task failed, unreachable);
* the fleet judgements about the host: its outliers, baseline regressions and drive
  consistency findings (``plugin_utils/fleet/drive_consistency.py``), with the report options
  ``outliers`` / ``regressions`` / ``drives`` (``warn`` | ``fail`` | ``off``).

The verdict gate of playbooks/qualify.yml, the fleet report (every format) and therefore
the exit code of ``ansible-playbook`` all use this function, so they cannot disagree.
Pure Python, no Ansible import.

INCONCLUSIVE (docs/compliance.md): the judge's verdict for a host none of whose
workloads failed or erred but at least one ran on a shared window (foreign I/O above
``max_share``), was stopped by the foreign-I/O guard, or was not run because the device
never got quiet. It is never improved to PASS and never turned into FAIL by fleet
judgements that read the shared numbers (outliers, baseline regressions, drive
*results*); a task failed after the record, an unreachable host, no workload results or
a drive finding that is not a measurement (model, firmware, count, capacity) still
decide as for PASS. Whether it fails the exit code is :func:`exit_fails`' policy.
"""
from __future__ import annotations

VERDICTS = ("PASS", "FAIL", "UNREACHABLE", "ERROR", "INCONCLUSIVE")
RECORD_VERDICTS = ("PASS", "FAIL", "ERROR", "INCONCLUSIVE")
# Verdicts whose host the gate fails (ansible-playbook exits non-zero); INCONCLUSIVE too
# unless the host's ``fleetqual_inconclusive`` is ``warn`` (see exit_fails).
GATE_FAILS = ("FAIL", "UNREACHABLE", "ERROR")
INCONCLUSIVE_POLICIES = ("fail", "warn")


def _event_text(ev):
    if not ev:
        return ""
    task = ev.get("task") or "?"
    msg = (ev.get("msg") or "").strip().splitlines()
    msg = msg[0] if msg else ""
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return "task '%s': %s" % (task, msg) if msg else "task '%s'" % task


def final_verdict(record, failed=None, unreachable=None, outliers=(), regressions=(), options=None,
                  drive_findings=(), arrays=(), history_findings=()):
    """Return ``{verdict, record_verdict, reasons, notes, first_failing_rule}``.

    record:      the host record (dict) or None when the role stored none
    failed:      the last not-ignored, not-rescued failed task before the gate ({task, msg}) or None
    unreachable: the last unreachable event ({task, msg}) or None
    outliers:    the host's fleet outliers (outliers.find_outliers entries: worse, text)
    regressions: the host's baseline regressions (entries with text)
    options:     {"outliers": warn|fail|off, "regressions": warn|fail|off, "drives": warn|fail|off}
    drive_findings: the host's drive consistency findings (drive_consistency.drive_findings:
                 severity, message); those of severity ``fail`` fail the host
    arrays:      the arrays the host is an initiator of (fleet.json ``arrays`` entries:
                 name, verdict, reasons; plugin_utils/array/mode.py host_arrays; docs/arrays.md)
    history_findings: the host against its own accepted history (history.drift_findings
                 ``findings``: kind drift | trend | wear | identity, severity, message; docs/compliance.md)

    Rules, in order (the table in docs/report.md):
      1. no record: UNREACHABLE if unreachable, else ERROR (a task failed, or no record);
      2. the record's verdict (the judge's; anything but PASS/FAIL/ERROR/INCONCLUSIVE is ERROR);
      3. PASS but the host then failed a task or became unreachable -> ERROR;
      4. PASS with no workload results -> ERROR;
      5. PASS and ``outliers: fail`` with an outlier in the worse direction -> FAIL;
      6. PASS and ``regressions: fail`` with a regression -> FAIL;
      7. PASS and ``drives: fail`` with a drive finding of severity ``fail`` (a drive whose
         model or firmware differs from its group's, a host with fewer drives or less
         capacity, a drive's result worse than its peers') -> FAIL.
      8. INCONCLUSIVE follows rules 3, 4 and 7 (drive findings other than ``result``) like
         PASS, never 5, 6 or 7's ``result`` findings: those read the shared numbers.
      9. PASS or INCONCLUSIVE and an array of the host is not PASS -> the array's verdict
         (ERROR before FAIL), its reasons prefixed ``array <name>:``; a host of an array
         needs no workload results of its own (rule 4 does not apply to it).
     10. PASS and a history finding of severity ``fail`` (a drift beyond the host's
         ``fleetqual_drift`` rule, with ``trend: fail`` a trend or wear finding) -> FAIL,
         reasons ``history <kind>: <message>``; INCONCLUSIVE only by ``wear`` findings (the
         drive's own counters; drift and trend read the shared numbers).
    A verdict is never improved: FAIL and ERROR stay what they are.
    """
    options = options or {}
    reasons, notes = [], []
    if not isinstance(record, dict):
        if unreachable:
            return {"verdict": "UNREACHABLE", "record_verdict": None, "first_failing_rule": None,
                    "reasons": ["unreachable at %s" % _event_text(unreachable)], "notes": notes}
        if failed:
            reason = "failed before storing a record: %s" % _event_text(failed)
        else:
            reason = ("no fleetqual_report record: the qualify role did not complete on this host "
                      "(play stopped early, host skipped, or the role was not run)")
        return {"verdict": "ERROR", "record_verdict": None, "first_failing_rule": None,
                "reasons": [reason], "notes": notes}

    record_verdict = str(record.get("verdict") or "ERROR").upper()
    verdict = record_verdict
    if record_verdict not in RECORD_VERDICTS:
        notes.append("record verdict %r is not PASS/FAIL/ERROR/INCONCLUSIVE; reported as ERROR" % record_verdict)
        verdict = "ERROR"
    reasons.extend(str(r) for r in (record.get("reasons") or []))
    first_rule = None
    if verdict == "INCONCLUSIVE" and (failed or unreachable):
        verdict = "ERROR"
        reasons.append("record verdict INCONCLUSIVE, but then %s" % (
            "the host became unreachable at %s" % _event_text(unreachable) if unreachable
            else "%s failed" % _event_text(failed)))
    elif verdict == "INCONCLUSIVE" and not record.get("workloads"):
        verdict = "ERROR"
        reasons.append("record verdict INCONCLUSIVE but the record holds no workload results")
    if verdict == "PASS" and (failed or unreachable):
        verdict = "ERROR"
        if unreachable:
            reasons.append("record verdict PASS, but the host then became unreachable at %s"
                           % _event_text(unreachable))
        if failed:
            reasons.append("record verdict PASS, but then %s failed" % _event_text(failed))
    elif failed or unreachable:
        notes.append("play outcome after the record (%s verdict kept): %s"
                     % (verdict, _event_text(failed or unreachable)))
    workloads = record.get("workloads")
    if verdict == "PASS" and not workloads and not arrays:
        verdict = "ERROR"
        reasons.append("record verdict PASS but the record holds no workload results")
    if verdict == "PASS" and options.get("outliers") == "fail":
        bad = [o for o in outliers or () if o.get("worse")]
        if bad:
            verdict = "FAIL"
            reasons.extend("fleet outlier: %s" % o["text"] for o in bad)
            first_rule = "fleet outlier"
    if verdict == "PASS" and options.get("regressions") == "fail" and regressions:
        verdict = "FAIL"
        reasons.extend("regression against baseline: %s" % r["text"] for r in regressions)
        first_rule = first_rule or "baseline regression"
    bad_drives = [f for f in drive_findings or () if f.get("severity") == "fail"]
    if verdict == "INCONCLUSIVE":
        bad_drives = [f for f in bad_drives if f.get("kind") != "result"]
    if verdict in ("PASS", "INCONCLUSIVE") and options.get("drives", "warn") != "off" and bad_drives:
        verdict = "FAIL"
        reasons.extend("drive %s: %s" % (f.get("kind"), f.get("message")) for f in bad_drives)
        first_rule = first_rule or "drive %s" % bad_drives[0].get("kind")
    bad_arrays = sorted((a for a in arrays or () if str(a.get("verdict") or "ERROR").upper() != "PASS"),
                        key=lambda a: str(a.get("verdict") or "ERROR").upper() != "ERROR")
    if verdict in ("PASS", "INCONCLUSIVE") and bad_arrays:
        verdict = "ERROR" if str(bad_arrays[0].get("verdict") or "ERROR").upper() != "FAIL" else "FAIL"
        for a in bad_arrays:
            reasons.extend("array %s: %s" % (a.get("name"), r) for r in (a.get("reasons") or [a.get("verdict")]))
        first_rule = first_rule or "array %s" % bad_arrays[0].get("name")
    elif bad_arrays:
        notes.extend("array %s: %s" % (a.get("name"), a.get("verdict")) for a in bad_arrays)
    bad_history = [f for f in history_findings or () if f.get("severity") == "fail"
                   and (verdict == "PASS" or (verdict == "INCONCLUSIVE" and f.get("kind") == "wear"))]
    if bad_history:
        verdict = "FAIL"
        reasons.extend("history %s: %s" % (f.get("kind"), f.get("message")) for f in bad_history)
        first_rule = first_rule or "history %s" % bad_history[0].get("kind")
    return {"verdict": verdict, "record_verdict": record_verdict, "first_failing_rule": first_rule,
            "reasons": reasons, "notes": notes}


def exit_fails(verdict, options=None):
    """Whether the verdict gate fails a host of this final verdict (so ``ansible-playbook``
    exits non-zero): every verdict but PASS, except INCONCLUSIVE with ``options``
    ``{"inconclusive": "warn"}`` (the host's role variable ``fleetqual_inconclusive``, which the
    action fleet_verdicts passes; default ``fail``: a host that could not be measured is not
    a passed host)."""
    verdict = str(verdict or "ERROR").upper()
    if verdict == "PASS":
        return False
    if verdict == "INCONCLUSIVE":
        return (options or {}).get("inconclusive", "fail") != "warn"
    return True


def counts(verdicts):
    """{PASS: n, FAIL: n, UNREACHABLE: n, ERROR: n, INCONCLUSIVE: n} of an iterable of verdicts."""
    out = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        out[v] = out.get(v, 0) + 1
    return out
