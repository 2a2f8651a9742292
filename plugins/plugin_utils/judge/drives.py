# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's drive checks (docs/thresholds.md; run by :mod:`.host`'s
``judge``): per drive its own health
verdict (``drive_health``), then every drive rule over the drives it selects, each citing
the drive's model and serial; then the kernel's word on each drive (:func:`kernel_checks`,
docs/kernel-log.md): the kernel log's storage messages during the run against
``max_kernel_errors`` (0 without a rule)."""

import difflib
import re

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.kmsg import UNATTRIBUTED, message_drives
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import (
    DRIVE_LIMITS,
    drive_selected,
    is_drive_rule,
    rule_limits,
    rule_name,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import make_check, cmp_word, compare
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.device import collector_devices


# --------------------------------------------------------------------------- drives

def drive_label(drive):
    """``drive sda (Samsung SSD 870, serial WD-WX12A3456789)``: how reasons cite a drive."""
    return "drive %s (%s, serial %s)" % (drive.get("name") or drive.get("path") or "?",
                                         drive.get("model") or "model unknown", drive.get("serial") or "unknown")


def _drive_check(drive, rule, metric, value, limit, op, passed, status, message, ev):
    c = make_check(None, rule, metric, value, limit, op, passed, ev, status, "drive", message)
    c.update(drive=drive.get("name"), serial=drive.get("serial"), model=drive.get("model"),
             firmware=drive.get("firmware"))
    return c


def _health_evidence(health):
    if not health.get("collected"):
        return "health not collected: %s" % (health.get("reason") or "no reason given")
    items = ["%s %s" % (k.replace("_", " "), fmt_num(health[k])) for k in (
        "critical_warning", "media_errors", "percentage_used", "available_spare", "reallocated_sectors",
        "pending_sectors", "temperature_c", "power_on_hours") if is_number(health.get(k))]
    return "%s: %s" % (health.get("tool") or "health", ", ".join(items) or "no counters reported")


def drive_list(drives):
    """The drives of a ``drives`` argument: a list, or the drives module's result."""
    if isinstance(drives, dict):
        drives = drives.get("drives")
    return [d for d in drives or [] if isinstance(d, dict)] if isinstance(drives, list) else None


def drive_health_checks(checks, rules, drives, matched, applicable):
    """Drive checks appended to ``checks``: the default verdict check of every drive
    (``drive_health``), then every drive rule over the drives it selects. Returns warnings."""
    warnings = []
    drive_rules = [(ri, r) for ri, r in enumerate(rules) if is_drive_rule(r)]
    listed = drive_list(drives)
    if listed is None:
        for ri, rule in drive_rules:
            matched[ri] += 1
            for key, op, limit in rule_limits(rule):
                if key == KERNEL_LIMIT:
                    continue    # judged on the kernel log's drive names (kernel_checks)
                msg = "%s: drive inventory not collected for this host; not applicable" % rule_name(rule, key)
                checks.append(make_check(None, rule_name(rule, key), "health.%s" % DRIVE_LIMITS[key], None, limit, op,
                                         None, "no drive inventory", "n/a", "drive", msg))
        return warnings
    for d in listed:
        health = d.get("health") if isinstance(d.get("health"), dict) else {
            "collected": False, "reason": "no health in the drive inventory (drives module run without health)"}
        label = drive_label(d)
        ev = _health_evidence(health)
        if not health.get("collected"):
            msg = "%s: own health verdict not applicable: %s" % (label, ev)
            checks.append(_drive_check(d, "drive_health", "health.passed", None, True, "==", None, "n/a", msg, ev))
            warnings.append(msg)
        elif health.get("passed") is False:
            problems = "; ".join(health.get("problems") or []) or "the drive reports itself failing"
            msg = "%s: the drive's own health verdict is FAILED (%s)" % (label, problems)
            checks.append(_drive_check(d, "drive_health", "health.passed", False, True, "==", False, "fail", msg, ev))
        elif health.get("passed") is True:
            msg = "%s: the drive's own health verdict is PASSED" % label
            checks.append(_drive_check(d, "drive_health", "health.passed", True, True, "==", True, "pass", msg, ev))
        else:
            msg = "%s: %s gives no overall health verdict; not applicable (%s)" % (
                label, health.get("tool") or "the tool", ev)
            checks.append(_drive_check(d, "drive_health", "health.passed", None, True, "==", None, "n/a", msg, ev))
    for ri, rule in drive_rules:
        chosen = [d for d in listed if drive_selected(rule, d)]
        if not chosen:
            matched[ri] += 1
            applicable[ri] += 1
            names = ", ".join("%s (%s)" % (d.get("name"), d.get("serial") or "serial unknown") for d in listed)
            name = rule_name(rule, rule_limits(rule)[0][0])
            msg = "%s: selects no drive of this host (drive: %s); its drives: %s" % (
                name, rule.get("drive"), names or "none")
            checks.append(make_check(None, name, "drive", rule.get("drive"), None, None, False, names, "fail", "drive",
                                     msg))
            continue
        matched[ri] += 1
        for d in chosen:
            health = d.get("health") if isinstance(d.get("health"), dict) else {"collected": False}
            for key, op, limit in rule_limits(rule):
                if key == KERNEL_LIMIT:
                    continue    # kernel_checks
                field = DRIVE_LIMITS[key]
                c = _drive_limit_check(d, health, rule, key, field, op, limit)
                if c["status"] != "n/a":
                    applicable[ri] += 1
                checks.append(c)
    return warnings


def _drive_limit_check(drive, health, rule, key, field, op, limit):
    name = rule_name(rule, key)
    label = drive_label(drive)
    ev = _health_evidence(health)
    what = field.replace("_", " ")
    tag = " [rule %s]" % rule["name"] if rule.get("name") else ""
    if not health.get("collected"):
        msg = "%s: %s not applicable, %s%s" % (label, name, ev, tag)
        return _drive_check(drive, name, "health.%s" % field, None, limit, op, None, "n/a", msg, ev)
    value = health.get(field)
    if not is_number(value):
        msg = "%s: %s does not report %s; %s not applicable%s" % (label, health.get("tool") or "the tool", what,
                                                                  name, tag)
        return _drive_check(drive, name, "health.%s" % field, None, limit, op, None, "n/a", msg, ev)
    passed = compare(value, op, limit)
    msg = "%s: %s %s %s limit %s%s (%s)" % (label, what, fmt_num(value), cmp_word(op, passed), fmt_num(limit),
                                            tag, ev)
    return _drive_check(drive, name, "health.%s" % field, value, limit, op, passed,
                        "pass" if passed else "fail", msg, ev)


# --------------------------------------------------------------------------- the kernel log

KERNEL_LIMIT = "max_kernel_errors"
KERNEL_DEFAULT_LIMIT = 0            # every drive, whatever the profile, without a rule
KERNEL_OPTIONS = {"judge_before_run": False, "lookback_s": None}   # fleetqual_kernel_log
QUOTED = 5                          # kernel lines a check's evidence quotes
QUOTED_IN_MESSAGE = 3               # distinct kernel messages a check's message (the reason) quotes


KERNEL_VAR = "fleetqual_kernel_log"


def validate_kernel_log(value, host=None, var_name=KERNEL_VAR):
    """Problems of a ``fleetqual_kernel_log`` value, each naming the host, the variable and
    the closest valid key or value; [] when valid (None or {}: the defaults)."""
    where = "%s%s" % ("host %s: " % host if host else "", var_name)
    if value is None:
        return []
    if not isinstance(value, dict):
        return ["%s: must be a mapping with judge_before_run and/or lookback_s, got %s %r"
                % (where, type(value).__name__, value)]
    errors = []
    for key, val in value.items():
        if key not in KERNEL_OPTIONS:
            guess = difflib.get_close_matches(str(key), list(KERNEL_OPTIONS), n=1, cutoff=0.5)
            errors.append("%s.%s: unknown key%s; valid: %s" % (where, key, " (did you mean %s?)" % guess[0] if guess
                                                               else "", ", ".join(KERNEL_OPTIONS)))
        elif key == "judge_before_run" and not isinstance(val, bool):
            errors.append("%s.judge_before_run: must be true or false, got %s %r; closest: %s"
                          % (where, type(val).__name__, val, str(str(val).lower() in ("1", "yes", "true")).lower()))
        elif key == "lookback_s" and val is not None and (not is_number(val) or val < 0):
            errors.append("%s.lookback_s: must be a number of seconds >= 0 (or null: all the kernel log holds), got "
                          "%r; closest: %s" % (where, val, fmt_num(max(0, val)) if is_number(val) else "null"))
    return errors


def kernel_options(options):
    """``fleetqual_kernel_log`` with its defaults (validated on the controller: plugin_utils/validate/inputs.py)."""
    out = dict(KERNEL_OPTIONS)
    out.update((k, v) for k, v in (options or {}).items() if k in KERNEL_OPTIONS)
    return out


def _in_lookback(msg, kernel, lookback_s):
    started = kernel.get("started_s")
    if not is_number(lookback_s) or not is_number(started) or not is_number(msg.get("time_s")):
        return True
    return started - msg["time_s"] <= lookback_s


def kernel_view(kernel, options=None):
    """``(counts, judged, context)`` of a record's ``kernel`` section: the counts per drive and
    kind that are judged (the run's, complete; with ``judge_before_run`` also the look-back's
    kept lines), the kept messages they come from, and the look-back's messages within
    ``lookback_s`` reported as context."""
    opts = kernel_options(options)
    counts = dict((d, dict(k)) for d, k in (kernel.get("counts") or {}).items())
    messages = [m for m in kernel.get("messages") or [] if isinstance(m, dict)]
    judged = [m for m in messages if not m.get("before_run")]
    context = [m for m in messages if m.get("before_run") and _in_lookback(m, kernel, opts["lookback_s"])]
    if opts["judge_before_run"]:
        for m in context:
            for d in message_drives(m) or [UNATTRIBUTED]:
                per = counts.setdefault(d, {})
                per[m["kind"]] = per.get(m["kind"], 0) + 1
        judged, context = context + judged, []
    return counts, judged, context


def kernel_errors(kernel, drive, options=None):
    """How many storage messages the judge counts for ``drive`` (a name), or None when the
    kernel log was not collected (the drive table's ``kernel_errors``)."""
    if not isinstance(kernel, dict) or not kernel.get("collected"):
        return None
    return sum((kernel_view(kernel, options)[0].get(drive) or {}).values())


def checked_kernel_errors(checks, drive):
    """The storage messages the judge counted for ``drive`` (a name): the value of its kernel
    check among a record's ``checks`` (the largest, with several rules), or None when it
    has none (the kernel log not collected or not handed to the judge). The drive table's
    and fleet.json's ``kernel_errors``."""
    values = [c.get("value") for c in checks or () if isinstance(c, dict) and c.get("metric") == "kernel.errors"
              and c.get("drive") == drive and is_number(c.get("value"))]
    return max(values) if values else None


def note_text(entry):
    """A capability probe's note as the record and the drive table show it: ``does not support
    write zeroes (2 WRITE_ZEROES requests failed during the run: operation not supported error;
    a capability probe, not a fault)``; the look-back's requests said apart (``before the run``)."""
    during, before = entry.get("count") or 0, entry.get("count_before") or 0
    if during and before:
        when = "during the run (and %d before it)" % before
    else:
        when = "during the run" if during else "before the run"
    n = during or before
    return "%s (%d %s request%s failed %s: %s error; a capability probe, not a fault)" % (
        entry.get("note"), n, entry.get("op"), "" if n == 1 else "s", when, entry.get("error"))


def kernel_notes(kernel, drive):
    """The notes the kernel log's capability probes leave on ``drive`` (a name): the entries
    of the section's ``notes`` (module_utils/collect/kmsg.py ``add_note``)."""
    if not isinstance(kernel, dict):
        return []
    return [n for n in kernel.get("notes") or [] if isinstance(n, dict) and n.get("drive") == drive]


def checked_kernel_notes(checks, drive):
    """The notes of ``drive``'s kernel checks among a record's ``checks`` (texts, each once):
    the drive table's and fleet.json's ``kernel_notes``."""
    out = []
    for c in checks or ():
        if isinstance(c, dict) and c.get("metric") == "kernel.errors" and c.get("drive") == drive:
            out.extend(t for t in c.get("notes") or [] if t not in out)
    return out


def _quote(msg):
    return '"%s"' % msg.get("text")


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def distinct_lines(lines, n=QUOTED_IN_MESSAGE):
    """The first line of each distinct message among ``lines`` (in their order), at most ``n``,
    and how many distinct messages were left out. Two lines are the same message when they
    differ only in their numbers (another sector, tag or queue): a drive that keeps failing
    one way is quoted once, one that times out, is aborted and then reset is quoted at each
    step (``... QID 1 timeout, aborting``, ``Abort status: 0x0``, ``... QID 1 timeout, reset
    controller``)."""
    firsts, seen = [], set()
    for m in lines:
        shape = _NUMBERS.sub("#", str(m.get("text")))
        if shape not in seen:
            seen.add(shape)
            firsts.append(m)
    return firsts[:n], max(0, len(firsts) - n)


def _kinds(per):
    return ", ".join("%s %d" % (k, n) for k, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))


def _kernel_place(msg):
    at = "seq %s at %s s" % (msg.get("seq"), fmt_num(msg.get("time_s")))
    if msg.get("before_run"):
        return at + ", before the run"
    return at + (", workload %s" % msg["workload"] if msg.get("workload") else ", between workloads")


def under_test(drives, records):
    """Names of the drives the run measured: those the workloads' collectors watched and those
    a target runs on; None when the records say neither (then every drive is)."""
    names = set(collector_devices(records))
    names.update(d.get("name") for d in drives if d.get("targets"))
    return names or None


def kernel_checks(checks, rules, drives, kernel, matched, applicable, options=None, records=None):
    """Kernel log checks appended to ``checks`` (``rule: max_kernel_errors`` or the rule's
    name, ``kind: drive``, ``metric: kernel.errors``): per drive under test (:func:`under_test`
    of ``records``) and per drive a rule names, the storage messages the kernel logged about
    it during the run against the limit of every drive rule with ``max_kernel_errors`` that
    selects it (0 when none does); the message quotes the first line of each distinct
    message (:func:`distinct_lines`), the evidence the first :data:`QUOTED` lines. Returns warnings: the log not collected (a warning, never
    a PASS-affecting silence nor a failure), records lost, messages on drives not under test
    or on no drive of the host, the look-back's messages (context, not judged)."""
    warnings = []
    krules = [(ri, r) for ri, r in enumerate(rules or []) if is_drive_rule(r) and KERNEL_LIMIT in r]
    if not isinstance(kernel, dict) or not kernel.get("collected"):
        reason = ("kernel log not collected: %s" % (kernel.get("reason") or "no reason given")
                  if isinstance(kernel, dict) else "kernel log not handed to the judge")
        if isinstance(kernel, dict):
            warnings.append(reason)
        for _ri, rule in krules:
            name = rule_name(rule, KERNEL_LIMIT)
            checks.append(make_check(None, name, "kernel.errors", None, rule[KERNEL_LIMIT], "<=", None, reason, "n/a",
                                     "drive", "%s: not applicable, %s" % (name, reason)))
        return warnings
    counts, judged, context = kernel_view(kernel, options)
    listed = drive_list(drives)
    if listed is None:   # no inventory: the drives the kernel named
        listed = [{"name": d} for d in sorted(counts) if d != UNATTRIBUTED]
    tested = under_test(listed, records)
    # a drive rule naming a drive judges it, under test or not; without a rule, the drives under test
    listed = [d for d in listed if tested is None or d.get("name") in tested
              or any("drive" in r and drive_selected(r, d) for _ri, r in krules)]
    names = [d.get("name") for d in listed]
    lost = kernel.get("lost") or 0
    lost_text = "; %d kernel log records were overwritten before they were read" % lost if lost else ""
    if lost:
        warnings.append("kernel log (%s): %d records were overwritten before the job read them; storage errors "
                        "among them are not counted" % (kernel.get("source"), lost))
    warnings.extend("kernel log: %s" % w for w in kernel.get("warnings") or [])
    for d in listed:
        name = d.get("name")
        per = counts.get(name) or {}
        n = sum(per.values())
        lines = [m for m in judged if name in message_drives(m)]
        mine = [(ri, r) for ri, r in krules if drive_selected(r, d)]
        limits = [(ri, rule_name(r, KERNEL_LIMIT), r[KERNEL_LIMIT], r.get("name")) for ri, r in mine] or [
            (None, KERNEL_LIMIT, KERNEL_DEFAULT_LIMIT, None)]
        ev = "kernel log (%s): %s%s" % (kernel.get("source"), _kinds(per) or "no storage messages", lost_text)
        if lines:
            ev += "; " + "; ".join("%s (%s)" % (_quote(m), _kernel_place(m)) for m in lines[:QUOTED])
        elif n:
            ev += "; its lines were not kept (the record keeps %d)" % len(kernel.get("messages") or [])
        probes = kernel_notes(kernel, name)
        notes = [note_text(e) for e in probes]
        if probes:
            ev += "; capability probes, not counted: " + "; ".join(
                "%s (%s)" % (_quote(e.get("first") or {}), _kernel_place(e.get("first") or {})) for e in probes)
        for ri, rname, limit, tag in limits:
            if ri is not None:
                applicable[ri] += 1
            passed = n <= limit
            what = "%d kernel storage error%s during the run" % (n, "" if n == 1 else "s") if n else \
                "no kernel storage errors during the run"
            msg = "%s: %s (limit %s)%s" % (drive_label(d), what, fmt_num(limit), " [rule %s]" % tag if tag else "")
            if lines:
                quoted, more = distinct_lines(lines)
                msg += ": %s" % "; ".join(_quote(m) for m in quoted)
                if more:
                    msg += " (+%d other message%s)" % (more, "" if more == 1 else "s")
            if notes:
                msg += "; note: %s" % "; ".join(notes)
            c = _drive_check(d, rname, "kernel.errors", n, limit, "<=", passed, "pass" if passed else "fail", msg, ev)
            if notes:
                c["notes"] = list(notes)
            c["kernel"] = {"counts": per, "lines": [dict((k, m.get(k)) for k in (
                "seq", "time_s", "epoch", "kind", "device", "workload", "before_run", "text")) for m in lines[:QUOTED]]}
            checks.append(c)
    others = dict((d, per) for d, per in counts.items() if d not in names and per)
    if others:
        first = next((m for m in judged if not (set(message_drives(m)) & set(names))), None)
        warnings.append("kernel log: storage messages during the run on no drive under test, not "
                        "judged: %s%s" % ("; ".join("%s: %s" % (d, _kinds(p)) for d, p in sorted(others.items())),
                                          " (first: %s)" % _quote(first) if first else ""))
    for name in names:
        mine = [m for m in context if name in message_drives(m)]
        if mine:
            warnings.append("kernel log before the run (context, not judged): %d storage message%s on %s, the last: "
                            "%s (%s)" % (len(mine), "" if len(mine) == 1 else "s", name, _quote(mine[-1]),
                                         _kernel_place(mine[-1])))
    return warnings
