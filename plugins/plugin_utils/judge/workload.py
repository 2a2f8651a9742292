# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's checks of one workload record, appended in the order the host's judge (:mod:`.host`,
whose docstring gives the shape of a check and every decision) reports them: foreign I/O,
integrity errors, the cache proof, then each matching rule's limits. Also the iostat
sentence every check quotes as its evidence (:func:`evidence`)."""

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import (
    dig,
    READ_MODES,
    WRITE_MODES,
    type_name,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import cmp_word, compare, error_check, make_check
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.integrity import io_error_check, stall_check, verify_checks
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import (
    compile_metric,
    rule_limits,
    rule_matches,
    rule_name,
    stall_limit,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.device import DEVICE_FIELDS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stalls import held_stall_s, silence_evidence, silence_notes, stall_message
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import record_metrics


_LIMIT_LABEL = {"min_iops": ("IOPS", ""), "min_mibps": ("MiB/s", "")}


def _does(record, metrics, mode_set, op):
    count = metrics.get("%s_count" % op)
    if is_number(count):
        return count > 0
    return record.get("mode") in mode_set


def _mode_does(record, metrics, op):
    """Whether the workload's mode does ``op`` for certain: a mode of reads or writes alone, or a
    mixed one that completed nothing at all. A count of 0 there is a window in which the device
    completed nothing, not an op the workload leaves out (a mix's ratio or a database pattern
    without flushers may leave one out)."""
    mode = record.get("mode")
    if op == "read":
        ours, other = READ_MODES, WRITE_MODES
    elif op == "write":
        ours, other = WRITE_MODES, READ_MODES
    else:
        return False
    if mode in ours and mode not in other:
        return True
    return mode in ours and not any(metrics.get("%s_count" % o) for o in ("read", "write"))


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


def _answered(metrics):
    """The drive completed at least one request of this workload."""
    keys = ("read_count", "write_count", "fsync_count", "verify_checked", "errors_ok_after_first")
    return any((metrics.get(k) or 0) > 0 for k in keys)


def answered_later_indexes(records):
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


def _integrity(record, wid, metrics, answered_later=False, stall_ruled=False):
    """Error checks for one record (the module's result status and the metrics).
    ``answered_later``: a later workload on the same target was answered by the drive;
    ``stall_ruled``: a rule's ``max_stall_s`` judges its stalls instead of the built-in limit."""
    out = []
    result = record.get("result")
    if not isinstance(result, dict):
        return [error_check(wid, "no_metrics", "%s: no result recorded for the workload" % wid)]
    if result.get("skipped"):
        return [error_check(wid, "skipped", "%s: the workload was skipped (%s)"
                            % (wid, result.get("skip_reason") or result.get("msg") or "no reason given"))]
    measured = bool(metrics.get("measured"))
    if result.get("failed"):
        msg = " ".join(str(result.get("msg") or "no message").split())
        rc = result.get("rc")
        out.append(error_check(wid, "module_failed", "%s: benchmark failed%s: %s"
                               % (wid, " (rc %s)" % rc if rc is not None else "", msg), value=rc, metric="rc"))
        if not measured:
            return out
    if not measured or metrics.get("iops") is None and metrics.get("fsync_per_sec") is None:
        out.append(error_check(wid, "no_metrics", "%s: no benchmark data in the result (rc %s)"
                               % (wid, result.get("rc", "?"))))
        return out
    errors = metrics.get("errors")
    if errors:
        out.append(io_error_check(wid, metrics, answered_later))
    elif not _answered(metrics) and result.get("rc"):
        # iobench failed before its first measured request (a prepare write refused by a drive that
        # vanished, say) and said so only on stderr: never a run that measured nothing and passed
        said = [ln.strip() for ln in str(result.get("stderr") or "").splitlines() if ln.strip()]
        out.append(error_check(wid, "no_requests", "%s: no request completed (iobench rc %s)%s"
                               % (wid, result["rc"], ": %s" % said[-1] if said else ""), value=result["rc"], metric="rc"))
        return out
    out.extend(verify_checks(wid, metrics))
    stalled = None if stall_ruled else stall_check(wid, metrics)
    if stalled:
        out.append(stalled)
    if metrics.get("timed_out"):
        msg = "%s: stopped by the module's timeout after %s s; partial results" % (
            wid, fmt_num(metrics.get("elapsed_s")))
        out.append(error_check(wid, "timed_out", msg, value=True, metric="timed_out"))
    elif metrics.get("interrupted"):
        sig = metrics.get("signal")
        who = metrics.get("stopped_by")
        msg = "%s: run interrupted%s after %s s; partial results" % (
            wid, " (%s)" % who if who else " by %s" % sig if sig else "", fmt_num(metrics.get("elapsed_s")))
        out.append(error_check(wid, "interrupted", msg, value=True, metric="interrupted"))
    elif not errors:
        short = short_window_check(wid, metrics)
        if short:
            out.append(short)
    return out


# a window this much shorter than planned (beyond a paced thread's last gap) measured something
# else than the workload asked for: never a figure to judge
SHORT_WINDOW_FRACTION = 0.9


def short_window_check(wid, metrics):
    """An error when the measured window lasted under 90% of its planned ``time``, nothing
    (a signal, the module's timeout, I/O errors) having said why: its figures describe a
    fraction of the workload asked for, and a pass on them would be a pass on nothing."""
    planned, elapsed = metrics.get("planned_s"), metrics.get("elapsed_s")
    if planned is None or elapsed is None:
        return None
    floor = SHORT_WINDOW_FRACTION * planned - (metrics.get("pace_gap_s") or 0.0)
    if elapsed >= floor:
        return None
    msg = ("%s: measured for %s s of its planned %s s (the window must last at least %s s); "
           "its figures are not the workload's" % (wid, fmt_num(elapsed), fmt_num(planned), fmt_num(floor)))
    return error_check(wid, "short_window", msg, value=elapsed, metric="elapsed_s")


def _steady_state_check(rule, key, record, wid, metrics):
    name = rule_name(rule, key)
    ss = metrics.get("steady_state")
    ev = evidence(record, metrics)
    if not isinstance(ss, dict):
        msg = ("%s: ran without steady state (give the workload steady_state: true); %s requires it"
               % (wid, name))
        return make_check(wid, name, "steady_state.reached", None, True, "==", False, ev, "fail", "limit", msg)
    values = ", ".join(fmt_num(v) for v in ss.get("values") or [])
    series = "; %s per round: %s" % (ss.get("metric") or "iops", values) if values else ""
    if ss.get("reached"):
        msg = "%s: reached steady state at round %s of %s%s" % (
            wid, fmt_num(ss.get("round")), fmt_num(ss.get("max_rounds")), series)
        return make_check(wid, name, "steady_state.reached", True, True, "==", True, msg, "pass", "limit", msg)
    msg = "%s: did not reach steady state in %s rounds (at most %s)%s" % (
        wid, fmt_num(ss.get("rounds")), fmt_num(ss.get("max_rounds")), series)
    return make_check(wid, name, "steady_state.reached", False, True, "==", False, series.lstrip("; ") or ev,
                      "fail", "limit", msg)


def _stall_rule_check(rule, key, op, limit, wid, metrics):
    """A rule's ``max_stall_s``: the longest silence the device held against the rule's limit
    (plugin_utils/metrics/stalls.py); an integrity check, as the built-in stall limit is."""
    name = rule_name(rule, key)
    figures = metrics.get("stall")
    value = held_stall_s(figures)
    if value is None:
        why = (figures or {}).get("reason") or "no interval series in the result"
        msg = "%s: stalls not judged (%s); %s not applicable" % (wid, why, name)
        return make_check(wid, name, "stall", None, limit, op, None, msg, "n/a", "integrity", msg)
    ev = silence_evidence(figures) if figures["silences"] else "silences: none"
    failed = stall_message(wid, figures, limit, name)
    if failed:
        return make_check(wid, name, "stall", value, limit, op, False, ev, "fail", "integrity", failed)
    msg = "%s: longest stall %s s <= limit %s s [rule %s] (%s)" % (wid, fmt_num(value), fmt_num(limit), name, ev)
    return make_check(wid, name, "stall", value, limit, op, True, ev, "pass", "integrity", msg)


def _limit_check(rule, key, op, limit, record, wid, metrics):
    name = rule_name(rule, key)
    if key == "require_steady_state":
        return _steady_state_check(rule, key, record, wid, metrics)
    if key == "max_stall_s":
        return _stall_rule_check(rule, key, op, limit, wid, metrics)
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
        if not count and not _mode_does(record, metrics, op_name):
            msg = "%s: does no %s operations; %s not applicable" % (wid, op_name, name)
            return make_check(wid, name, metric, None, limit, op, None, ev, "n/a", "limit", msg)
    if value is None:
        msg = "%s: %s has no value (limit %s %s%s) (%s)" % (wid, label, op, fmt_num(limit), unit, ev)
        return make_check(wid, name, metric, None, limit, op, False, ev, "fail", "limit", msg)
    passed = compare(value, op, limit)
    msg = "%s: %s %s%s %s limit %s%s (%s)" % (wid, label, fmt_num(value), unit, cmp_word(op, passed),
                                              fmt_num(limit), unit, ev)
    return make_check(wid, name, metric, value, limit, op, passed, ev, "pass" if passed else "fail", "limit", msg)


def _metric_check(rule, key, op, limit, record, wid, metrics):
    name = rule_name(rule, key)
    expr = rule["metric"]
    ev = evidence(record, metrics)
    tag = " [rule %s]" % rule["name"] if rule.get("name") else ""
    try:
        value = compile_metric(expr).search(record)
    except Exception as exc:  # jmespath runtime errors (e.g. invalid type for a function)
        msg = "%s: %s could not be evaluated: %s%s" % (wid, expr, exc, tag)
        return make_check(wid, name, expr, None, limit, op, False, ev, "fail", "metric", msg)
    if value is None:
        msg = "%s: %s has no value (limit %s %s)%s (%s)" % (wid, expr, op, fmt_num(limit), tag, ev)
        return make_check(wid, name, expr, None, limit, op, False, ev, "fail", "metric", msg)
    if not is_number(value):
        msg = "%s: %s is not a number (got %s %r)%s" % (wid, expr, type_name(value), value, tag)
        return make_check(wid, name, expr, value, limit, op, False, ev, "fail", "metric", msg)
    passed = compare(value, op, limit)
    msg = "%s: %s %s %s limit %s%s (%s)" % (wid, expr, fmt_num(value), cmp_word(op, passed),
                                            fmt_num(limit), tag, ev)
    return make_check(wid, name, expr, value, limit, op, passed, ev, "pass" if passed else "fail", "metric", msg)


def _cache_proof_check(wid, ev):
    ratio = ev.get("bytes_ratio") if ev.get("bytes_ratio") is not None else ev.get("ops_ratio")
    text = ("device %s: r/s %s, rkB/s %s vs benchmark %s reads/s, %s kB/s"
            % (ev.get("device") or "?", fmt_num(ev.get("dev_r_s")), fmt_num(ev.get("dev_rkb_s")),
               fmt_num(ev.get("bench_read_iops")), fmt_num(ev.get("bench_read_kb_s"))))
    msg = ("%s: served from a cache, not the disk: the device read %s of the benchmark's reads (limit %s); "
           "its numbers are not disk numbers (%s)" % (wid, fmt_num(ratio), fmt_num(ev.get("min_ratio")), text))
    return make_check(wid, "cache_proof", "diagnostics.cache_proof", ratio, ev.get("min_ratio"), ">=", False, text,
                      "fail", "diagnostic", msg)


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
        return make_check(wid, "foreign_io", "foreign_skipped", m["foreign_skipped"], None, None,
                          False if status == "fail" else None, msg, status, "foreign", msg)
    ev = _foreign_text(m)
    if m.get("foreign_guard"):
        msg = "%s: %s; the partial numbers are not judged (%s)" % (wid, m["foreign_guard"], ev)
        status = shared
        return make_check(wid, "foreign_io", "foreign_await_ms", m.get("foreign_await_ms"), None, None,
                          False if status == "fail" else None, ev, status, "foreign", msg)
    share = m.get("foreign_share")
    if share is None:
        msg = "%s: foreign I/O not measured (%s)" % (wid, m.get("foreign_blind") or "no samples")
        return make_check(wid, "foreign_io", "foreign_share", None, limit, "<=", None, msg, "n/a", "foreign", msg)
    material = m.get("foreign_iops") is None or m.get("foreign_iops") >= (m.get("foreign_min_iops") or 0)
    if limit is not None and share > limit and not material:
        msg = "%s: foreign share %s above limit %s but immaterial: %s requests/s not ours < %s (%s)" % (
            wid, fmt_num(share), fmt_num(limit), fmt_num(m.get("foreign_iops")), fmt_num(m.get("foreign_min_iops")), ev)
        return make_check(wid, "foreign_io", "foreign_share", share, limit, "<=", True, ev, "pass", "foreign", msg)
    if limit is not None and share > limit:
        msg = "%s: shared window: %s > limit %s (%s)" % (wid, "foreign share %s" % fmt_num(share), fmt_num(limit), ev)
        if on_busy == "warn":
            warnings.append(msg + "; judged anyway (on_busy: warn)")
            return make_check(wid, "foreign_io", "foreign_share", share, limit, "<=", None, ev, "n/a", "foreign", msg)
        return make_check(wid, "foreign_io", "foreign_share", share, limit, "<=", False if shared == "fail" else None,
                          ev, shared, "foreign", msg)
    msg = "%s: foreign share %s <= limit %s (%s)" % (wid, fmt_num(share), fmt_num(limit), ev)
    return make_check(wid, "foreign_io", "foreign_share", share, limit, "<=", True, ev, "pass", "foreign", msg)


def workload_checks(checks, rules, matched, applicable, proof_failed, wid, rec, warnings=None, answered_later=False):
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
    limit, limit_rule = stall_limit(rules, rec)
    integrity = _integrity(rec, wid, metrics, answered_later, stall_ruled=limit is not None)
    if warnings is not None:
        # silences that were not the device's, and stalls within a rule's limit: said, never
        # judged (docs/integrity.md, "Stalls")
        warnings.extend(silence_notes(wid, metrics.get("stall"), shared_judged=foreign is not None, limit=limit,
                                      rule=rule_name(limit_rule, "max_stall_s") if limit_rule else None))
    if foreign is not None and metrics.get("foreign_guard"):
        # the guard stopped it: that is the foreign check's story, not an integrity error
        integrity = [c for c in integrity if c["rule"] not in ("interrupted", "timed_out", "short_window")]
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
