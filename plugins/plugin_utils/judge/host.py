# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge: workload records + threshold rules -> verdict, reasons, checks.

Written once; used by the ``qualify`` role (filter ``fleetqual.storage.judge``) and by
the ``qualify_report`` callback (imports this module).

``judge(workloads, rules, expected_ids=None)`` returns::

    verdict:  PASS | FAIL | ERROR | INCONCLUSIVE
    reasons:  [sentences]          # errors first, then failed limits, then shared workloads; empty on PASS
    checks:   [{workload, rule, metric, value, limit, op, passed, evidence,
                status, kind, message}, ...]
    summary:  {workloads, checks, passed, failed, not_applicable, errors}
    warnings: [sentences]          # rules that matched nothing, or only n/a checks

Foreign I/O (records of a job run with ``foreign_io``, metrics ``foreign_*``):

* Every such workload gets a ``rule: foreign_io`` check (``kind: foreign``). A workload that
  was not run because its device never got quiet or the host's time budget was spent
  (``foreign_skipped``), one the guard stopped (``foreign_guard``: its partial numbers are
  not judged, and the guard's stop is not an ``interrupted`` error), or one whose
  ``foreign_share`` passed ``foreign_max_share`` (with at least ``foreign_min_iops``
  foreign requests/s: less is immaterial) is *shared*: with ``on_busy``
  ``inconclusive`` (the default) the check's status is ``inconclusive`` and every failed
  limit of that workload becomes ``inconclusive`` too (a threshold missed on a shared
  window is not a FAIL); with ``fail`` the check fails; with ``warn`` a share above the
  limit is a warning and the workload is judged on its numbers (a workload that did not
  run or was stopped is still inconclusive: there is nothing to judge). Otherwise the
  check passes and quotes the share.
* The host's verdict: ERROR over FAIL over INCONCLUSIVE over PASS -- a real failure on a
  window of its own is a FAIL even when other workloads were shared.

Verdicts: ERROR when the host failed outside a workload (``error``), a planned workload
is missing (``expected_ids``), a workload's module call failed or was skipped, it has no
benchmark data, its drive stopped answering (I/O errors and no successful request after
the first, or an iobench that does not say), or it was interrupted or stopped by the
module's timeout; else FAIL when any limit failed, a block read back was wrong (corrupt,
misplaced or stale: a lost write) or I/O errors hit a region of a drive that still
serves the rest (``kind: integrity``, docs/integrity.md); else PASS. Limits are still
checked on workloads with partial data, so an ERROR host also shows what it measured.
Data that was not verified (``verify`` off) or lost writes that could not be seen (no
generation map) are ``n/a`` checks of kind ``integrity``: notes, never a failure. An
integrity failure stays a failure on a shared window (foreign I/O does not flip bits).

Checks are ordered by workload (plan order, then records not in the plan), and per
workload: integrity errors, then rules in list order, then each rule's limits in
canonical order (min_iops, min_mibps, max_read_*, max_write_*, max_fsync_* by
percentile, metric min, metric max). ``status`` is ``pass``, ``fail``, ``n/a``,
``error`` or ``inconclusive`` (a shared window, below); ``passed`` is true, false, or null
for n/a and inconclusive. ``kind`` is ``foreign`` (the foreign-I/O check), ``limit`` (built-in),
``metric`` (JMESPath rule), ``diagnostic`` (cache proof, diagnostic rules), ``drive`` (drive health),
``integrity`` (data verification and I/O errors of a drive that still answers: ``rule``
``data_corrupt``, ``data_misplaced``, ``lost_write``, ``io_errors``, and the notes
``verify_off``, ``lost_writes_unchecked``) or ``error``
(integrity; ``rule`` is one of
``host_error``, ``workload_missing``, ``module_failed``, ``skipped``, ``no_metrics``,
``io_errors``, ``timed_out``, ``interrupted``, ``short_window``, ``no_workloads``).

Missing values -- an explicit decision:

* A ``max_<op>_<pct>_ms`` limit on a workload that does not do ``op`` (count 0 or the op
  absent, e.g. ``max_fsync_p99_ms`` on a run without fsyncs, ``max_read_*`` on rndwr) is
  *not applicable*: the check is reported with status ``n/a`` and does not affect the
  verdict. A rule whose matches are all n/a gives a warning.
* A built-in figure that should exist but does not (``min_iops`` with no rate, a
  percentile missing although the op ran, or the op of the workload's mode when its window
  completed none: ``judge/workload.py`` ``_mode_does``) FAILS with "no value".
* A ``metric`` rule whose JMESPath yields null FAILS with "no value" (the author asked
  for that number; silence would hide a typo); a non-number FAILS with "not a number".
* ``require_steady_state: true`` FAILS on a workload that did not reach steady state
  (``metrics.steady_state``), quoting the tracked value of every round, and on one that
  ran without steady state (validation refuses a rule that can only match such ones).

Drives (``drives`` argument, the host's drives of docs/contracts.md section 7;
the checks are ``plugin_utils/judge/drives.py``):

* Always, per drive, ``rule: drive_health``: FAIL when the drive's own SMART / NVMe verdict
  is failed (``health.passed`` false), pass when it passed, ``n/a`` with the reason (and a
  warning) when its health was not collected or the tool gives no verdict.
* Drive rules (``rules.is_drive_rule``): per selected drive and limit; a counter the tool
  does not report, or health not collected, is ``n/a``; a ``drive:`` selector naming no
  drive of the host FAILS (listing the host's drives); without ``drives`` every drive
  rule is ``n/a`` ("drive inventory not collected") with a warning.
* Reasons cite the drive's model and serial; checks add ``drive``, ``serial``, ``model``,
  ``firmware``.

Several targets (records with ``target``, docs/contracts.md section 4): messages say
``<id> on <target>``, checks carry ``target``, the cache proof is computed per target,
and :func:`target_verdicts` gives a verdict per target.

The judge reads each record's ``metrics`` (``metrics.record_metrics``) and the module's
result status (``failed``, ``skipped``, ``msg``, ``rc``), never the benchmark's JSON.

The JMESPath of a ``metric`` rule is evaluated over the workload record (the spec keys,
``result`` and ``metrics``), e.g. ``metrics.dev_util_pct`` or
``result.bench.ops.read.latency_us."p99.99"``.

Diagnostics (docs/diagnostics.md; ``diagnostics`` argument, computed with
``diagnostics.diagnose`` when not given):

* Cache proof, always: an over-cache read workload whose device reads fall short of the
  benchmark's (the page or controller cache served it) gets a ``fail`` check with
  ``rule: cache_proof`` and ``kind: diagnostic`` -- its numbers are not disk numbers, so
  the host cannot PASS. An unproven cache proof (no device statistics) is a warning only.
* Rules with ``diagnostic`` are checked once per host, after the workloads: ``expect``
  passes when the diagnostic's status or conclusion is one of the expected values;
  ``metric`` with ``min``/``max`` evaluates the JMESPath over the diagnostic entry (null
  FAILS with "no value", as for workload metric rules). ``workload`` of these checks is
  null, ``kind`` is ``diagnostic``.
"""

from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import burnin as _burnin
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as _diag
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import workload_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import (
    compile_metric,
    is_diagnostic_rule,
    is_drive_rule,
    rule_limits,
    rule_name,
    validate_rules,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import (
    make_check,
    cmp_word,
    compare,
    error_check,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import (
    KERNEL_LIMIT,
    drive_health_checks,
    kernel_checks,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.workload import answered_later_indexes, workload_checks

PASS, FAIL, ERROR, INCONCLUSIVE = "PASS", "FAIL", "ERROR", "INCONCLUSIVE"


# --------------------------------------------------------------------------- checks
# (the check dict and the comparison are checks.py; a workload's checks workload.py; the
# drive checks drives.py, all beside this file)


def _expected_list(expected_ids):
    if expected_ids is None:
        return None
    out = []
    for item in expected_ids:
        wid = (workload_key(item) if item.get("id") else None) if isinstance(item, dict) else item
        if isinstance(wid, str) and wid not in out:
            out.append(wid)
    return out


def _host_error_text(error):
    if isinstance(error, dict):
        task = error.get("task")
        msg = " ".join(str(error.get("msg") or "failed").split())
        return "task %r failed: %s" % (task, msg) if task else msg
    return " ".join(str(error).split())


def _diagnostic_checks(rule, diags):
    """Checks of one diagnostic rule against the host's diagnostics."""
    name = rule["diagnostic"]
    entry = diags.get(name) if isinstance(diags, dict) else None
    entry = entry if isinstance(entry, dict) else {}
    tag = " [rule %s]" % rule["name"] if rule.get("name") else ""
    sentence = entry.get("sentence") or "no diagnostic %s in the record" % name
    out = []
    for key, op, limit in rule_limits(rule):
        rname = rule_name(rule, key)
        if key == "expect":
            got = [v for v in (entry.get("status"), entry.get("conclusion")) if v is not None]
            passed = any(v in limit for v in got)
            shown = "/".join(dict.fromkeys(got)) or "missing"
            msg = "diagnostic %s is %s, %s %s%s: %s" % (
                name, shown, "expected" if passed else "expected one of", ", ".join(str(x) for x in limit),
                tag, sentence)
            out.append(make_check(None, rname, "diagnostics.%s" % name, shown, limit, "in", passed, sentence,
                                  "pass" if passed else "fail", "diagnostic", msg))
            continue
        expr = rule["metric"]
        try:
            value = compile_metric(expr).search(entry)
        except Exception as exc:  # jmespath runtime errors
            msg = "diagnostic %s: %s could not be evaluated: %s%s" % (name, expr, exc, tag)
            out.append(make_check(None, rname, expr, None, limit, op, False, sentence, "fail", "diagnostic", msg))
            continue
        if value is None or not is_number(value):
            what = "has no value" if value is None else "is not a number (got %s %r)" % (type_name(value), value)
            msg = "diagnostic %s: %s %s (limit %s %s)%s: %s" % (name, expr, what, op, fmt_num(limit), tag, sentence)
            out.append(make_check(None, rname, expr, value, limit, op, False, sentence, "fail", "diagnostic", msg))
            continue
        passed = compare(value, op, limit)
        msg = "diagnostic %s: %s %s %s limit %s%s: %s" % (name, expr, fmt_num(value), cmp_word(op, passed),
                                                          fmt_num(limit), tag, sentence)
        out.append(make_check(None, rname, expr, value, limit, op, passed, sentence,
                              "pass" if passed else "fail", "diagnostic", msg))
    return out


def judge(workloads, rules, expected_ids=None, error=None, diagnostics=None, options=None, drives=None,
          kernel=None, kernel_log=None, drives_after=None):
    """Judge one host. See the module docstring for the shape and the decisions.

    ``workloads``: records (spec + ``result`` + optional ``metrics``); ``rules``:
    ``fleetqual_thresholds``; ``expected_ids``: the planned ids (strings or the plan's
    specs); ``error``: a host-level failure outside any workload (the role's rescue:
    ``{task, msg}`` or a string), which makes the verdict ERROR; ``diagnostics``: the
    host's ``diagnostics.diagnose`` result (computed here with ``options`` when None);
    ``drives``: the host's drives (docs/contracts.md section 7, a list or the drives
    module's result; None: not collected, no drive checks); ``kernel``: the record's kernel
    section and ``kernel_log``: ``fleetqual_kernel_log`` (``judge_drives.kernel_checks``,
    docs/kernel-log.md; None: not handed over, no kernel checks). The result carries
    ``diagnostics`` too. ``drives_after``: the drives read again after a burn-in
    (``plugin_utils/judge/burnin.py``: a health counter that rose FAILS; a burn-in without it says
    so). Raises ``ValueError`` when the rules do not
    validate.
    """
    problems = validate_rules(rules)
    if problems:
        raise ValueError("invalid thresholds: " + "; ".join(problems))
    rules = rules or []
    records = [w for w in (workloads or []) if isinstance(w, dict)]
    expected = _expected_list(expected_ids)
    # (id, record or None) in plan order, then records not in the plan in record order
    slots = []

    def key(rec):
        return workload_key(rec) if rec.get("id") else None

    for wid in expected or []:
        mine = [r for r in records if key(r) == wid or (r.get("id") == wid and "@" not in wid)]
        if mine:
            slots.extend((r.get("id"), r) for r in mine)
        else:
            slots.append((wid, None))
    for i, rec in enumerate(records):
        if expected is None or (key(rec) not in expected and rec.get("id") not in expected):
            slots.append((rec.get("id") or "workload[%d]" % i, rec))

    if not isinstance(diagnostics, dict):
        diagnostics = _diag.diagnose(records, options=options)
    targets = list(dict.fromkeys(r.get("target") for r in records if r.get("target")))
    if targets:
        # several targets share workload ids: the cache proof of each target's own records
        proof_failed = {}
        for t in targets:
            mine = [r for r in records if r.get("target") == t]
            for wid, ev in _diag.cache_proof_failures(_diag.diagnose(mine, options=options)):
                proof_failed[(t, wid)] = ev
    else:
        proof_failed = {(None, wid): ev for wid, ev in _diag.cache_proof_failures(diagnostics)}

    checks = []
    if error:
        checks.append(error_check(None, "host_error", _host_error_text(error)))
    matched = [0] * len(rules)
    applicable = [0] * len(rules)
    foreign_warnings = []
    later = answered_later_indexes(records)
    index = {id(r): i for i, r in enumerate(records)}
    for wid, rec in slots:
        if rec is None:
            wid_only, _at, target = wid.rpartition("@") if "@" in wid else (wid, "", None)
            label = "%s on %s" % (wid_only, target) if target else wid
            checks.append(error_check(wid_only, "workload_missing", "%s: planned workload has no result (missing)" % label))
            if target:
                checks[-1]["target"] = target
            continue
        first = len(checks)
        if rec.get("target"):
            # messages say "<id> on <target>"; the check keeps the id and gains target
            wid = "%s on %s" % (wid, rec["target"])
        workload_checks(checks, rules, matched, applicable, proof_failed, wid, rec, foreign_warnings,
                        index.get(id(rec)) in later)
        if rec.get("target"):
            for c in checks[first:]:
                c["workload"] = rec.get("id")
                c["target"] = rec["target"]
    if not slots and not error:
        checks.append(error_check(None, "no_workloads", "no workload results for this host"))
    for ri, rule in enumerate(rules):
        if is_diagnostic_rule(rule) and slots:
            matched[ri] += 1
            applicable[ri] += 1
            checks.extend(_diagnostic_checks(rule, diagnostics))
    drive_warnings = foreign_warnings + drive_health_checks(checks, rules, drives, matched, applicable)
    # the kernel's word on each drive (``kernel``: the record's kernel section, docs/kernel-log.md;
    # ``kernel_log``: fleetqual_kernel_log); None: not handed over, no kernel checks
    if kernel is not None or any(is_drive_rule(r) and KERNEL_LIMIT in r for r in rules):
        drive_warnings += kernel_checks(checks, rules, drives, kernel, matched, applicable, kernel_log, records)
    drive_warnings += _burnin.burnin_checks(checks, records, drives, drives_after)    # docs/integrity.md
    return _verdict(checks, rules, matched, applicable, diagnostics, slots, drive_warnings)


def _verdict(checks, rules, matched, applicable, diagnostics, slots, drive_warnings):
    errors = [c for c in checks if c["status"] == "error"]
    failed = [c for c in checks if c["status"] == "fail"]
    shared = [c for c in checks if c["status"] == "inconclusive" and c.get("kind") == "foreign"]
    verdict = ERROR if errors else FAIL if failed else INCONCLUSIVE if shared else PASS
    warnings = []
    cp = diagnostics.get("cache_proof") if isinstance(diagnostics.get("cache_proof"), dict) else {}
    if cp.get("status") == "unproven":
        warnings.append(cp.get("sentence") or "cache proof unproven")
    warnings.extend(drive_warnings)
    for ri, rule in enumerate(rules):
        label = rule.get("name") or rule_name(rule, rule_limits(rule)[0][0])
        if is_drive_rule(rule):
            if matched[ri] and not applicable[ri]:
                warnings.append("rule %s matched only drives where its limits do not apply (health not collected "
                                "or not reported)" % label)
            continue
        if not matched[ri]:
            warnings.append("rule %s matched no workload" % label)
        elif not applicable[ri]:
            warnings.append("rule %s matched only workloads where its limits do not apply" % label)
    summary = {
        "workloads": len(slots),
        "checks": len(checks),
        "passed": sum(1 for c in checks if c["status"] == "pass"),
        "failed": len(failed),
        "not_applicable": sum(1 for c in checks if c["status"] == "n/a"),
        "errors": len(errors),
        "inconclusive": len(shared),
    }
    return {
        "verdict": verdict,
        "reasons": [c["message"] for c in errors] + [c["message"] for c in failed] + [c["message"] for c in shared],
        "checks": checks,
        "summary": summary,
        "warnings": warnings,
        "diagnostics": diagnostics,
    }


def target_verdicts(host_judgement):
    """``{target: {verdict, reasons, checks}}`` from the checks that carry ``target`` (a
    host with several targets: a report row and a JUnit case per target). Host-level
    checks (host error, drives, diagnostic rules) stay the host's; ``{}`` for the
    shorthand target (no check carries a target)."""
    out = {}
    for c in (host_judgement or {}).get("checks") or []:
        if isinstance(c, dict) and c.get("target"):
            out.setdefault(c["target"], []).append(c)
    result = {}
    for target, checks in out.items():
        errors = [c["message"] for c in checks if c.get("status") == "error"]
        failed = [c["message"] for c in checks if c.get("status") == "fail"]
        shared = [c["message"] for c in checks if c.get("status") == "inconclusive" and c.get("kind") == "foreign"]
        verdict = ERROR if errors else FAIL if failed else INCONCLUSIVE if shared else PASS
        result[target] = {"verdict": verdict, "reasons": errors + failed + shared, "checks": len(checks)}
    return result


def first_failing_check(host_judgement, workload=None):
    """The check that best explains a non-PASS host (or one of its workloads, when
    ``workload`` is given): its first error, else its first failed limit; None when
    nothing failed (or no checks, e.g. an unreachable host)."""
    checks = [c for c in (host_judgement or {}).get("checks") or []
              if workload is None or (isinstance(c, dict) and str(c.get("workload")) == str(workload))]
    for status in ("error", "fail", "inconclusive"):
        for c in checks:
            if isinstance(c, dict) and c.get("status", "fail" if c.get("passed") is False else None) == status:
                return c
    for c in checks:  # records written without status
        if isinstance(c, dict) and c.get("passed") is False:
            return c
    return None


def first_failing_rule(host_judgement, workload=None):
    """Name of the rule of :func:`first_failing_check` (``None`` if nothing failed)."""
    c = first_failing_check(host_judgement, workload)
    return (c.get("rule") or c.get("metric") or "rule") if c else None


__all__ = ["judge", "target_verdicts", "first_failing_check", "first_failing_rule", "PASS", "FAIL", "ERROR",
           "INCONCLUSIVE"]
