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
``io_errors``, ``timed_out``, ``interrupted``, ``no_workloads``).

Missing values -- an explicit decision:

* A ``max_<op>_<pct>_ms`` limit on a workload that does not do ``op`` (count 0 or the op
  absent, e.g. ``max_fsync_p99_ms`` on a run without fsyncs, ``max_read_*`` on rndwr) is
  *not applicable*: the check is reported with status ``n/a`` and does not affect the
  verdict. A rule whose matches are all n/a gives a warning.
* A built-in figure that should exist but does not (``min_iops`` with no rate, a
  percentile missing although the op ran) FAILS with "no value".
* A ``metric`` rule whose JMESPath yields null FAILS with "no value" (the author asked
  for that number; silence would hide a typo); a non-number FAILS with "not a number".
* ``require_steady_state: true`` FAILS on a workload that did not reach steady state
  (``metrics.steady_state``), quoting the tracked value of every round, and on one that
  ran without steady state (validation refuses a rule that can only match such ones).

Drives (``drives`` argument, the host's drives of docs/contracts.md section 7;
the checks are ``judge_drives.py``):

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

from ansible_collections.fleetqual.storage.plugins.module_utils.vocabulary import (
    dig,
    READ_MODES,
    WRITE_MODES,
    type_name,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.plugin_utils import burnin as _burnin
from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as _diag
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import DEVICE_FIELDS, record_metrics
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import workload_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.rules import (
    compile_metric,
    is_diagnostic_rule,
    is_drive_rule,
    rule_limits,
    rule_matches,
    rule_name,
    validate_rules,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge_checks import _check, _cmp_word, _compare, _error
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge_integrity import io_error_check, stall_check, verify_checks
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge_drives import (  # noqa: F401 - re-exported
    KERNEL_LIMIT,
    _drive_checks,
    kernel_checks,
    drive_label,
    drive_list,
)

PASS, FAIL, ERROR, INCONCLUSIVE = "PASS", "FAIL", "ERROR", "INCONCLUSIVE"

_LIMIT_LABEL = {"min_iops": ("IOPS", ""), "min_mibps": ("MiB/s", "")}


# --------------------------------------------------------------------------- evidence

def _does(record, metrics, mode_set, op):
    count = metrics.get("%s_count" % op)
    if is_number(count):
        return count > 0
    return record.get("mode") in mode_set


def evidence(record, metrics, focus=None):
    """iostat sentence for a workload, e.g.
    ``device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6``.

    ``focus`` is ``read``, ``write``, ``fsync``, ``iops``, ``mibps`` or None (all that the
    workload does)."""
    m = metrics or {}
    if not any(m.get(k) is not None for k, _label in DEVICE_FIELDS):
        source = dig(record, "result", "collector", "source")
        reason = dig(record, "result", "collector", "reason")
        text = "no device statistics (collector: %s" % (source or "none")
        return text + ("; %s)" % reason if reason else ")")
    reads = _does(record, m, READ_MODES, "read")
    writes = _does(record, m, WRITE_MODES, "write")
    if focus == "read":
        reads, writes = True, False
    elif focus in ("write", "fsync"):
        reads, writes = False, True
    if not reads and not writes:
        reads = writes = True
    items = []

    def add(label, key, unit=""):
        if m.get(key) is not None:
            items.append("%s %s%s" % (label, fmt_num(m[key]), unit))

    if reads:
        add("r/s", "dev_r_s")
        if focus == "mibps":
            add("rkB/s", "dev_rkb_s")
        add("r_await", "dev_r_await_ms", " ms")
    if writes:
        add("w/s", "dev_w_s")
        if focus == "mibps":
            add("wkB/s", "dev_wkb_s")
        add("w_await", "dev_w_await_ms", " ms")
        if focus in ("write", "fsync"):
            add("wareq-sz", "dev_wareq_sz_kb", " kB")
    add("aqu-sz", "dev_aqu_sz")
    add("%util", "dev_util_pct")
    return "device %s: %s" % (m.get("device") or "?", ", ".join(items))


# --------------------------------------------------------------------------- checks
# (the check dict and the comparison are judge_checks.py; the drive checks judge_drives.py)

def _answered(metrics):
    """The drive completed at least one request of this workload."""
    keys = ("read_count", "write_count", "fsync_count", "verify_checked", "errors_ok_after_first")
    return any((metrics.get(k) or 0) > 0 for k in keys)


def _answered_later(records):
    """Indexes of the records after which a later workload on the same target was answered by
    the drive: their I/O errors were a bad region, not a drive that stopped answering."""
    out = set()
    seen = set()
    for i in range(len(records) - 1, -1, -1):
        rec = records[i]
        target = rec.get("target") if isinstance(rec, dict) else None
        if target in seen:
            out.add(i)
        if isinstance(rec, dict) and _answered(record_metrics(rec)):
            seen.add(target)
    return out


def _integrity(record, wid, metrics, answered_later=False):
    """Error checks for one record (the module's result status and the metrics).
    ``answered_later``: a later workload on the same target was answered by the drive."""
    out = []
    result = record.get("result")
    if not isinstance(result, dict):
        return [_error(wid, "no_metrics", "%s: no result recorded for the workload" % wid)]
    if result.get("skipped"):
        return [_error(wid, "skipped", "%s: the workload was skipped (%s)"
                       % (wid, result.get("skip_reason") or result.get("msg") or "no reason given"))]
    measured = bool(metrics.get("measured"))
    if result.get("failed"):
        msg = " ".join(str(result.get("msg") or "no message").split())
        rc = result.get("rc")
        out.append(_error(wid, "module_failed", "%s: benchmark failed%s: %s"
                          % (wid, " (rc %s)" % rc if rc is not None else "", msg), value=rc, metric="rc"))
        if not measured:
            return out
    if not measured or metrics.get("iops") is None and metrics.get("fsync_per_sec") is None:
        out.append(_error(wid, "no_metrics", "%s: no benchmark data in the result (rc %s)"
                          % (wid, result.get("rc", "?"))))
        return out
    errors = metrics.get("errors")
    if errors:
        out.append(io_error_check(wid, metrics, answered_later))
    elif not _answered(metrics) and result.get("rc"):
        # iobench failed before its first measured request (a prepare write refused by a drive that
        # vanished, say) and said so only on stderr: never a run that measured nothing and passed
        said = [ln.strip() for ln in str(result.get("stderr") or "").splitlines() if ln.strip()]
        out.append(_error(wid, "no_requests", "%s: no request completed (iobench rc %s)%s"
                          % (wid, result["rc"], ": %s" % said[-1] if said else ""), value=result["rc"], metric="rc"))
        return out
    out.extend(verify_checks(wid, metrics))
    stalled = stall_check(wid, metrics)
    if stalled:
        out.append(stalled)
    if metrics.get("timed_out"):
        msg = "%s: stopped by the module's timeout after %s s; partial results" % (
            wid, fmt_num(metrics.get("elapsed_s")))
        out.append(_error(wid, "timed_out", msg, value=True, metric="timed_out"))
    elif metrics.get("interrupted"):
        sig = metrics.get("signal")
        msg = "%s: run interrupted%s after %s s; partial results" % (
            wid, " by %s" % sig if sig else "", fmt_num(metrics.get("elapsed_s")))
        out.append(_error(wid, "interrupted", msg, value=True, metric="interrupted"))
    return out


def _steady_state_check(rule, key, record, wid, metrics):
    name = rule_name(rule, key)
    ss = metrics.get("steady_state")
    ev = evidence(record, metrics)
    if not isinstance(ss, dict):
        msg = ("%s: ran without steady state (give the workload steady_state: true); %s requires it"
               % (wid, name))
        return _check(wid, name, "steady_state.reached", None, True, "==", False, ev, "fail", "limit", msg)
    values = ", ".join(fmt_num(v) for v in ss.get("values") or [])
    series = "; %s per round: %s" % (ss.get("metric") or "iops", values) if values else ""
    if ss.get("reached"):
        msg = "%s: reached steady state at round %s of %s%s" % (
            wid, fmt_num(ss.get("round")), fmt_num(ss.get("max_rounds")), series)
        return _check(wid, name, "steady_state.reached", True, True, "==", True, msg, "pass", "limit", msg)
    msg = "%s: did not reach steady state in %s rounds (at most %s)%s" % (
        wid, fmt_num(ss.get("rounds")), fmt_num(ss.get("max_rounds")), series)
    return _check(wid, name, "steady_state.reached", False, True, "==", False, series.lstrip("; ") or ev,
                  "fail", "limit", msg)


def _limit_check(rule, key, op, limit, record, wid, metrics):
    name = rule_name(rule, key)
    if key == "require_steady_state":
        return _steady_state_check(rule, key, record, wid, metrics)
    if key in ("min_iops", "min_mibps"):
        metric = key[4:]
        label = _LIMIT_LABEL[key][0]
        focus = metric
        op_name = None
    else:  # max_<op>_<pct>_ms
        _max, op_name, pct, _ms = key.split("_")
        metric = "%s_%s_ms" % (op_name, pct)
        label = "%s %s" % (op_name, "p99.9" if pct == "p999" else pct)
        focus = op_name
    value = metrics.get(metric)
    ev = evidence(record, metrics, focus)
    unit = " ms" if op_name else ""
    if op_name and value is None:
        count = metrics.get("%s_count" % op_name)
        if not count:
            msg = "%s: does no %s operations; %s not applicable" % (wid, op_name, name)
            return _check(wid, name, metric, None, limit, op, None, ev, "n/a", "limit", msg)
    if value is None:
        msg = "%s: %s has no value (limit %s %s%s) (%s)" % (wid, label, op, fmt_num(limit), unit, ev)
        return _check(wid, name, metric, None, limit, op, False, ev, "fail", "limit", msg)
    passed = _compare(value, op, limit)
    msg = "%s: %s %s%s %s limit %s%s (%s)" % (wid, label, fmt_num(value), unit, _cmp_word(op, passed),
                                              fmt_num(limit), unit, ev)
    return _check(wid, name, metric, value, limit, op, passed, ev, "pass" if passed else "fail", "limit", msg)


def _metric_check(rule, key, op, limit, record, wid, metrics):
    name = rule_name(rule, key)
    expr = rule["metric"]
    ev = evidence(record, metrics)
    tag = " [rule %s]" % rule["name"] if rule.get("name") else ""
    try:
        value = compile_metric(expr).search(record)
    except Exception as exc:  # jmespath runtime errors (e.g. invalid type for a function)
        msg = "%s: %s could not be evaluated: %s%s" % (wid, expr, exc, tag)
        return _check(wid, name, expr, None, limit, op, False, ev, "fail", "metric", msg)
    if value is None:
        msg = "%s: %s has no value (limit %s %s)%s (%s)" % (wid, expr, op, fmt_num(limit), tag, ev)
        return _check(wid, name, expr, None, limit, op, False, ev, "fail", "metric", msg)
    if not is_number(value):
        msg = "%s: %s is not a number (got %s %r)%s" % (wid, expr, type_name(value), value, tag)
        return _check(wid, name, expr, value, limit, op, False, ev, "fail", "metric", msg)
    passed = _compare(value, op, limit)
    msg = "%s: %s %s %s limit %s%s (%s)" % (wid, expr, fmt_num(value), _cmp_word(op, passed),
                                            fmt_num(limit), tag, ev)
    return _check(wid, name, expr, value, limit, op, passed, ev, "pass" if passed else "fail", "metric", msg)


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


def _cache_proof_check(wid, ev):
    ratio = ev.get("bytes_ratio") if ev.get("bytes_ratio") is not None else ev.get("ops_ratio")
    text = ("device %s: r/s %s, rkB/s %s vs benchmark %s reads/s, %s kB/s"
            % (ev.get("device") or "?", fmt_num(ev.get("dev_r_s")), fmt_num(ev.get("dev_rkb_s")),
               fmt_num(ev.get("bench_read_iops")), fmt_num(ev.get("bench_read_kb_s"))))
    msg = ("%s: served from a cache, not the disk: the device read %s of the benchmark's reads (limit %s); "
           "its numbers are not disk numbers (%s)" % (wid, fmt_num(ratio), fmt_num(ev.get("min_ratio")), text))
    return _check(wid, "cache_proof", "diagnostics.cache_proof", ratio, ev.get("min_ratio"), ">=", False, text,
                  "fail", "diagnostic", msg)


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
            out.append(_check(None, rname, "diagnostics.%s" % name, shown, limit, "in", passed, sentence,
                              "pass" if passed else "fail", "diagnostic", msg))
            continue
        expr = rule["metric"]
        try:
            value = compile_metric(expr).search(entry)
        except Exception as exc:  # jmespath runtime errors
            msg = "diagnostic %s: %s could not be evaluated: %s%s" % (name, expr, exc, tag)
            out.append(_check(None, rname, expr, None, limit, op, False, sentence, "fail", "diagnostic", msg))
            continue
        if value is None or not is_number(value):
            what = "has no value" if value is None else "is not a number (got %s %r)" % (type_name(value), value)
            msg = "diagnostic %s: %s %s (limit %s %s)%s: %s" % (name, expr, what, op, fmt_num(limit), tag, sentence)
            out.append(_check(None, rname, expr, value, limit, op, False, sentence, "fail", "diagnostic", msg))
            continue
        passed = _compare(value, op, limit)
        msg = "diagnostic %s: %s %s %s limit %s%s: %s" % (name, expr, fmt_num(value), _cmp_word(op, passed),
                                                          fmt_num(limit), tag, sentence)
        out.append(_check(None, rname, expr, value, limit, op, passed, sentence,
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
    (``plugin_utils/burnin.py``: a health counter that rose FAILS; a burn-in without it says
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
        checks.append(_error(None, "host_error", _host_error_text(error)))
    matched = [0] * len(rules)
    applicable = [0] * len(rules)
    foreign_warnings = []
    later = _answered_later(records)
    index = {id(r): i for i, r in enumerate(records)}
    for wid, rec in slots:
        if rec is None:
            wid_only, _at, target = wid.rpartition("@") if "@" in wid else (wid, "", None)
            label = "%s on %s" % (wid_only, target) if target else wid
            checks.append(_error(wid_only, "workload_missing", "%s: planned workload has no result (missing)" % label))
            if target:
                checks[-1]["target"] = target
            continue
        first = len(checks)
        if rec.get("target"):
            # messages say "<id> on <target>"; the check keeps the id and gains target
            wid = "%s on %s" % (wid, rec["target"])
        _workload_checks(checks, rules, matched, applicable, proof_failed, wid, rec, foreign_warnings,
                         index.get(id(rec)) in later)
        if rec.get("target"):
            for c in checks[first:]:
                c["workload"] = rec.get("id")
                c["target"] = rec["target"]
    if not slots and not error:
        checks.append(_error(None, "no_workloads", "no workload results for this host"))
    for ri, rule in enumerate(rules):
        if is_diagnostic_rule(rule) and slots:
            matched[ri] += 1
            applicable[ri] += 1
            checks.extend(_diagnostic_checks(rule, diagnostics))
    drive_warnings = foreign_warnings + _drive_checks(checks, rules, drives, matched, applicable)
    # the kernel's word on each drive (``kernel``: the record's kernel section, docs/kernel-log.md;
    # ``kernel_log``: fleetqual_kernel_log); None: not handed over, no kernel checks
    if kernel is not None or any(is_drive_rule(r) and KERNEL_LIMIT in r for r in rules):
        drive_warnings += kernel_checks(checks, rules, drives, kernel, matched, applicable, kernel_log, records)
    drive_warnings += _burnin.burnin_checks(checks, records, drives, drives_after)    # docs/integrity.md
    return _verdict(checks, rules, matched, applicable, diagnostics, slots, drive_warnings)


def _foreign_text(metrics):
    """The foreign figures of a workload as evidence."""
    m = metrics
    parts = ["foreign share %s" % fmt_num(m.get("foreign_share"))]
    for key, label in (("foreign_reads", "reads"), ("foreign_writes", "writes")):
        if m.get(key) is not None:
            parts.append("%s %s" % (label, fmt_num(m[key])))
    if m.get("foreign_bytes") is not None:
        parts.append("%s MiB" % fmt_num(m["foreign_bytes"] / 1048576.0))
    if m.get("foreign_busy_pct") is not None:
        parts.append("busy %s %%" % fmt_num(m["foreign_busy_pct"]))
    if m.get("foreign_await_ms") is not None:
        parts.append("their await %s ms" % fmt_num(m["foreign_await_ms"]))
    return "I/O not ours on device %s over %s s: %s (attributed by %s)" % (
        m.get("device") or "?", fmt_num(m.get("foreign_span_s")), ", ".join(parts), m.get("foreign_source") or "?")


def _foreign_check(wid, metrics, warnings):
    """The ``foreign_io`` check of a workload run with foreign-I/O accounting, or None."""
    m = metrics
    if m.get("foreign_source") is None and m.get("foreign_skipped") is None and m.get("foreign_quiet") is None:
        return None
    on_busy = m.get("foreign_on_busy") or "inconclusive"
    limit = m.get("foreign_max_share")
    shared = "fail" if on_busy == "fail" else "inconclusive"
    if m.get("foreign_skipped"):
        status = "fail" if on_busy == "fail" and "quiet" in m["foreign_skipped"] else "inconclusive"
        msg = "%s: not measured: %s" % (wid, m["foreign_skipped"])
        return _check(wid, "foreign_io", "foreign_skipped", m["foreign_skipped"], None, None,
                      False if status == "fail" else None, msg, status, "foreign", msg)
    ev = _foreign_text(m)
    if m.get("foreign_guard"):
        msg = "%s: %s; the partial numbers are not judged (%s)" % (wid, m["foreign_guard"], ev)
        status = shared
        return _check(wid, "foreign_io", "foreign_await_ms", m.get("foreign_await_ms"), None, None,
                      False if status == "fail" else None, ev, status, "foreign", msg)
    share = m.get("foreign_share")
    if share is None:
        msg = "%s: foreign I/O not measured (%s)" % (wid, m.get("foreign_blind") or "no samples")
        return _check(wid, "foreign_io", "foreign_share", None, limit, "<=", None, msg, "n/a", "foreign", msg)
    material = m.get("foreign_iops") is None or m.get("foreign_iops") >= (m.get("foreign_min_iops") or 0)
    if limit is not None and share > limit and not material:
        msg = "%s: foreign share %s above limit %s but immaterial: %s requests/s not ours < %s (%s)" % (
            wid, fmt_num(share), fmt_num(limit), fmt_num(m.get("foreign_iops")), fmt_num(m.get("foreign_min_iops")), ev)
        return _check(wid, "foreign_io", "foreign_share", share, limit, "<=", True, ev, "pass", "foreign", msg)
    if limit is not None and share > limit:
        msg = "%s: shared window: %s > limit %s (%s)" % (wid, "foreign share %s" % fmt_num(share), fmt_num(limit), ev)
        if on_busy == "warn":
            warnings.append(msg + "; judged anyway (on_busy: warn)")
            return _check(wid, "foreign_io", "foreign_share", share, limit, "<=", None, ev, "n/a", "foreign", msg)
        return _check(wid, "foreign_io", "foreign_share", share, limit, "<=", False if shared == "fail" else None,
                      ev, shared, "foreign", msg)
    msg = "%s: foreign share %s <= limit %s (%s)" % (wid, fmt_num(share), fmt_num(limit), ev)
    return _check(wid, "foreign_io", "foreign_share", share, limit, "<=", True, ev, "pass", "foreign", msg)


def _workload_checks(checks, rules, matched, applicable, proof_failed, wid, rec, warnings=None, answered_later=False):
    """Checks of one workload record (foreign I/O, integrity, cache proof, rules), appended to ``checks``."""
    metrics = record_metrics(rec)
    view = rec if rec.get("metrics") is metrics else dict(rec, metrics=metrics)
    foreign = _foreign_check(wid, metrics, warnings if warnings is not None else [])
    first = len(checks)
    if foreign is not None:
        checks.append(foreign)
        if metrics.get("foreign_skipped"):
            # not run: its rules matched it (no "matched no workload" warning) but judge nothing
            for ri, rule in enumerate(rules):
                if rule_matches(rule, rec):
                    matched[ri] += 1
            return
    integrity = _integrity(rec, wid, metrics, answered_later)
    if foreign is not None and metrics.get("foreign_guard"):
        # the guard stopped it: that is the foreign check's story, not an integrity error
        integrity = [c for c in integrity if c["rule"] not in ("interrupted", "timed_out")]
    checks.extend(integrity)
    try:
        _judged_checks(checks, rules, matched, applicable, proof_failed, wid, rec, metrics, view, integrity)
    finally:
        if foreign is not None and foreign["status"] == "inconclusive":
            for c in checks[first + 1:]:
                # bad data or I/O errors are the drive's, whatever else shared the window
                if c["status"] == "fail" and c.get("kind") != "integrity":
                    c["status"] = "inconclusive"
                    c["passed"] = None
                    c["message"] += " [shared window: not judged]"


def _judged_checks(checks, rules, matched, applicable, proof_failed, wid, rec, metrics, view, integrity):
    if any(c["rule"] in ("no_metrics", "skipped") for c in integrity) or not metrics.get("measured"):
        return
    proof = proof_failed.get((rec.get("target"), rec.get("id")))
    if proof is not None:
        checks.append(_cache_proof_check(wid, proof))
    for ri, rule in enumerate(rules):
        if not rule_matches(rule, rec):
            continue
        matched[ri] += 1
        for key, op, limit in rule_limits(rule):
            if key in ("min", "max"):
                c = _metric_check(rule, key, op, limit, view, wid, metrics)
            else:
                c = _limit_check(rule, key, op, limit, rec, wid, metrics)
            if c["status"] != "n/a":
                applicable[ri] += 1
            checks.append(c)


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


__all__ = ["judge", "evidence", "drive_label", "drive_list", "target_verdicts", "first_failing_check",
           "first_failing_rule", "PASS", "FAIL", "ERROR", "INCONCLUSIVE"]
