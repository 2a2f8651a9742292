# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Threshold rules (``fleetqual_thresholds``): validation, naming, matching.

A rule is a mapping::

    - name: db-read-latency          # optional; derived when absent
      description: text              # optional
      workload: over_cache           # selectors, all optional (absent = any); each a value
      mode: rndrd                    #   or a list of values
      threads: 64
      id: over_cache-rndrd-t64       #   (selects workload ids exactly)
      min_iops: 20000                # limits, at least one
      min_mibps: 300
      max_read_p99_ms: 20            # max_<read|write|fsync>_<p50|p90|p95|p99|p999>_ms
      require_steady_state: true     # the workload (steady_state: true) must reach steady state
      max_stall_s: 5                 # the longest silence the device may hold (default: 1 s is a stall)
      metric: metrics.dev_util_pct   # custom: a JMESPath over the workload record
      min: 0                         #   with min and/or max
      max: 95

    - diagnostic: cache_proof        # a host diagnostic (docs/diagnostics.md); no selectors,
      expect: pass                   #   no built-in limits; expect: a status or conclusion
                                     #   (or a list of them), and/or metric + min/max where
                                     #   the JMESPath runs over the diagnostic entry, e.g.
                                     #   metric: evidence.max_ratio, max: 3

Validation (:func:`validate_rules`) rejects unknown keys (with a did-you-mean), wrong
types, negative limits, ``max_*_ms`` or ``max_stall_s`` <= 0, ``min > max``, a JMESPath that does not
parse, ``min``/``max`` without ``metric`` and a rule without any limit. Messages name
the variable path: ``fleetqual_thresholds[2].max_raed_p99_ms: unknown key ...``.

Diagnostic rules judge the host once, not each workload: ``diagnostic`` names one of
``diagnostics.NAMES``; ``expect`` lists accepted statuses (pass, warn, fail, unproven,
info, n/a) or conclusions of that diagnostic (``diagnostics.CONCLUSIONS``); ``metric``
is evaluated over the diagnostic entry (``{status, conclusion, sentence, evidence,
workloads}``). Selectors and the built-in limits are refused on a diagnostic rule, and
``expect`` without ``diagnostic`` is refused. Derived names: ``diagnostic:<name>=<expect>``
(``|`` between several) and ``max(<metric>)@diagnostic:<name>``.

Drive rules judge the host's drives (the normalised ``health`` of the drives
module, docs/contracts.md section 7), once per drive, not each workload::

    - drive: nvme0n1                 # optional selector: a drive's name, /dev path, by-id
      max_media_errors: 0            #   path, serial or model (or a list); absent = all drives
      max_critical_warning: 0        # limits, at least one: max_media_errors,
      min_available_spare: 10        #   max_critical_warning, max_reallocated_sectors,
                                     #   max_pending_sectors, max_percentage_used,
                                     #   min_available_spare, max_temperature_c,
                                     #   max_power_on_hours

Workload selectors and limits, ``metric`` and ``diagnostic`` are refused on a drive rule.
Derived names: ``<limit>@drive:<selector>`` (``*`` for all drives).

Derived names: ``<limit>@<workload>/<mode>/t<threads>`` with ``*`` for an absent
selector and trailing ``*`` dropped, e.g. ``min_iops@over_cache/rndrd/t64``,
``max_read_p99_ms@cache``, ``min_iops@*``, ``max(metrics.dev_util_pct)@*/rndwr``;
an ``id`` selector is appended as ``[id]``.
"""

import difflib
import math

try:
    import jmespath
    from jmespath.exceptions import JMESPathError
except ImportError:  # the filters and the callback must load without it (ansible-doc, Galaxy)
    jmespath = None

    class JMESPathError(Exception):
        """Never raised: stands in for jmespath's error class when jmespath is missing."""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as _diag
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import model as _diag_model
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stalls import STALL_S
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import METRIC_KEYS
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.profiles import SPEC_KEYS
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import TARGET_SPEC_KEYS
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import MODES
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import OPS, PCTS, type_name
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_int, is_number

SELECTOR_KEYS = ("id", "workload", "mode", "threads")
LATENCY_LIMITS = tuple("max_%s_%s_ms" % (op, pct) for op in OPS for pct in PCTS)
MIN_LIMITS = ("min_iops", "min_mibps")
STATE_LIMITS = ("require_steady_state",)      # true: the workload must reach steady state
# the longest silence (no request completed, the device holding requests) a matched workload may
# show; it replaces the built-in stall limit (plugin_utils/metrics/stalls.py, docs/integrity.md)
STALL_LIMITS = ("max_stall_s",)
LIMIT_KEYS = MIN_LIMITS + LATENCY_LIMITS + STALL_LIMITS + STATE_LIMITS       # canonical check order
OTHER_KEYS = ("name", "description", "metric", "min", "max", "diagnostic", "expect")
# drive rules: limit -> the key of the drive's normalised health (module_utils/devices/drives.py HEALTH_KEYS)
DRIVE_LIMITS = {
    "max_media_errors": "media_errors",
    "max_critical_warning": "critical_warning",
    "max_reallocated_sectors": "reallocated_sectors",
    "max_pending_sectors": "pending_sectors",
    "max_percentage_used": "percentage_used",
    "min_available_spare": "available_spare",
    "max_temperature_c": "temperature_c",
    "max_power_on_hours": "power_on_hours",
    # not a health counter: the kernel's storage messages about the drive during the run
    # (judge_drives.kernel_checks, docs/kernel-log.md); default 0 without a rule
    "max_kernel_errors": "kernel_errors",
}
DRIVE_KEYS = ("name", "description", "drive") + tuple(DRIVE_LIMITS)
DRIVE_SELECT_FIELDS = ("name", "path", "id_path", "serial", "model")   # plus every by_id link
KNOWN_KEYS = ("name", "description") + SELECTOR_KEYS + LIMIT_KEYS + ("metric", "min", "max", "diagnostic", "expect")


def _known_text(keys):
    """``keys`` as one line for messages, the latency limits folded into their pattern."""
    pattern = "max_<%s>_<%s>_ms" % ("|".join(OPS), "|".join(PCTS))
    out = []
    for key in keys:
        text = pattern if key in LATENCY_LIMITS else key
        if text not in out:
            out.append(text)
    return ", ".join(out)


KNOWN_TEXT = _known_text(KNOWN_KEYS)

DEFAULT_VAR = "fleetqual_thresholds"
JMESPATH_MISSING = ("metric rules are JMESPath expressions: install the Python package jmespath on the "
                    "controller (pip install jmespath; it is in the collection's requirements.txt)")

_COMPILED = {}


def compile_metric(expr):
    """Compiled JMESPath (cached). Raises jmespath ParseError/LexerError on bad input,
    ValueError(JMESPATH_MISSING) when the jmespath package is not installed."""
    if jmespath is None:
        raise ValueError(JMESPATH_MISSING)
    if expr not in _COMPILED:
        _COMPILED[expr] = jmespath.compile(expr)
    return _COMPILED[expr]


def _bad_number(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "must be a finite number, got %r" % value
    if not is_number(value):
        return "must be a number, got %s %r" % (type_name(value), value)
    return None


def _check_selector(key, value, where):
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        return ["%s: list must not be empty" % where]
    errs = []
    for v in values:
        if key == "threads":
            if not is_int(v) or v < 1:
                errs.append("%s: must be a thread count >= 1 (or a list of them), got %r" % (where, v))
        elif key == "mode":
            if v not in MODES:
                errs.append("%s: unknown mode %r; known: %s" % (where, v, ", ".join(MODES)))
        elif not isinstance(v, str) or not v:
            errs.append("%s: must be a non-empty string (or a list of them), got %s %r"
                        % (where, type_name(v), v))
    return errs


def _check_label(key, value, where, names, index, var_name):
    """A rule's ``name`` or ``description``: a non-empty string; names unique across the
    rules (``names`` maps each name to the index of its first rule)."""
    if not isinstance(value, str) or not value.strip():
        return ["%s: must be a non-empty string, got %s %r" % (where, type_name(value), value)]
    if key == "name":
        if value in names:
            return ["%s: duplicate rule name %r (also %s[%d])" % (where, value, var_name, names[value])]
        names.setdefault(value, index)
    return []


def validate_rules(rules, var_name=DEFAULT_VAR):
    """List of error strings (empty when every rule is valid). ``None`` is no rules."""
    if rules is None:
        return []
    if not isinstance(rules, list):
        return ["%s: must be a list of rules, got %s" % (var_name, type_name(rules))]
    errors = []
    names = {}
    for i, rule in enumerate(rules):
        path = "%s[%d]" % (var_name, i)
        if not isinstance(rule, dict):
            errors.append("%s: must be a mapping (a rule), got %s" % (path, type_name(rule)))
            continue
        if is_drive_rule(rule):
            errors.extend(_check_drive_rule(rule, path, names, i, var_name))
            continue
        for key, value in rule.items():
            where = "%s.%s" % (path, key)
            if key not in KNOWN_KEYS:
                guess = difflib.get_close_matches(str(key), KNOWN_KEYS + tuple(DRIVE_LIMITS), n=1, cutoff=0.75)
                errors.append("%s: unknown key%s; known: %s"
                              % (where, " (did you mean %s?)" % guess[0] if guess else "", KNOWN_TEXT))
            elif key in SELECTOR_KEYS:
                errors.extend(_check_selector(key, value, where))
            elif key in ("name", "description"):
                errors.extend(_check_label(key, value, where, names, i, var_name))
            elif key in STATE_LIMITS:
                if not isinstance(value, bool):
                    errors.append("%s: must be true or false, got %s %r" % (where, type_name(value), value))
            elif key in LIMIT_KEYS or key in ("min", "max"):
                bad = _bad_number(value)
                if bad:
                    errors.append("%s: %s" % (where, bad))
                elif key in LATENCY_LIMITS and value <= 0:
                    errors.append("%s: a latency limit must be greater than 0 ms, got %r" % (where, value))
                elif key in STALL_LIMITS and value <= 0:
                    errors.append("%s: a stall limit must be greater than 0 s (the default, with no rule, is %s s), "
                                  "got %r" % (where, fmt_num(STALL_S), value))
                elif value < 0:
                    errors.append("%s: must not be negative, got %r" % (where, value))
            elif key == "metric":
                if not isinstance(value, str) or not value.strip():
                    errors.append("%s: must be a JMESPath expression (string), got %s %r"
                                  % (where, type_name(value), value))
                elif jmespath is None:
                    errors.append("%s: %s" % (where, JMESPATH_MISSING))
                else:
                    try:
                        compile_metric(value)
                    except (JMESPathError, ValueError, TypeError) as exc:
                        errors.append("%s: JMESPath %r does not parse: %s"
                                      % (where, value, " ".join(str(exc).split())))
        if "diagnostic" in rule or "expect" in rule:
            errors.extend(_check_diagnostic_rule(rule, path))
            continue
        has_metric = "metric" in rule
        has_bound = "min" in rule or "max" in rule
        if has_bound and not has_metric:
            for key in ("min", "max"):
                if key in rule:
                    errors.append("%s.%s: only valid with metric (for the built-in figures use %s)"
                                  % (path, key, "min_iops / min_mibps" if key == "min" else "max_<op>_<pct>_ms"))
        if has_metric and not has_bound:
            errors.append("%s.metric: needs min and/or max" % path)
        if has_metric:
            unknown = _unknown_record_field(rule["metric"])
            if unknown:
                errors.append("%s.metric: %s" % (path, unknown))
        if is_number(rule.get("min")) and is_number(rule.get("max")) and rule["min"] > rule["max"]:
            errors.append("%s: min %r is greater than max %r; no value can pass" % (path, rule["min"], rule["max"]))
        if not has_metric and not has_bound and not any(k in rule and rule[k] is not False for k in LIMIT_KEYS):
            errors.append("%s: rule sets no limit; give min_iops, min_mibps, max_<op>_<pct>_ms "
                          "(op read|write|fsync, pct p50|p90|p95|p99|p999), max_stall_s, metric with min/max, "
                          "or diagnostic with expect" % path)
    return errors


def _leading_fields(node):
    """Names of a JMESPath's leading plain fields: ``metrics.iops`` -> [metrics, iops]."""
    if node.get("type") == "field":
        return [node["value"]]
    if node.get("type") == "subexpression":
        out = []
        for child in node.get("children", []):
            if child.get("type") != "field":
                break
            out.append(child["value"])
        return out
    return []


def _unknown_record_field(expr):
    """A message when a metric JMESPath starts with a field no workload record has
    (``metrics.no_such_metric``, ``metrcis.iops``), else None. Paths inside ``result``
    (iobench's JSON, iostat, vmstat) are not checked: their keys are open-ended."""
    try:
        fields = _leading_fields(compile_metric(expr).parsed)
    except (JMESPathError, ValueError, TypeError):
        return None  # reported already: does not parse, or jmespath is missing
    record_keys = set(SPEC_KEYS) | {"result", "metrics", "sizing", "dataset", "index", "of"} | set(TARGET_SPEC_KEYS)
    if fields and fields[0] not in record_keys:
        return "%r is not a field of the workload record; it has: %s" % (
            fields[0], ", ".join(sorted(record_keys)))
    if len(fields) > 1 and fields[0] == "metrics" and fields[1] not in METRIC_KEYS:
        close = difflib.get_close_matches(fields[1], METRIC_KEYS, n=1)
        return "unknown metric %r%s; metrics are: %s" % (
            fields[1], " (did you mean %s?)" % close[0] if close else "", ", ".join(METRIC_KEYS))
    return None


def _check_diagnostic_rule(rule, path):
    """Errors of a rule with ``diagnostic`` (or a stray ``expect``)."""
    errs = []
    name = rule.get("diagnostic")
    if "diagnostic" not in rule:
        return ["%s.expect: only valid with diagnostic (one of %s)" % (path, ", ".join(_diag.NAMES))]
    if not isinstance(name, str) or name not in _diag.NAMES:
        guess = difflib.get_close_matches(str(name), _diag.NAMES, n=1, cutoff=0.6)
        errs.append("%s.diagnostic: unknown diagnostic %r%s; known: %s"
                    % (path, name, " (did you mean %s?)" % guess[0] if guess else "", ", ".join(_diag.NAMES)))
        name = None
    for key in SELECTOR_KEYS + LIMIT_KEYS:
        if key in rule:
            errs.append("%s.%s: not allowed in a diagnostic rule (it judges the host once; use expect, "
                        "or metric with min/max over the diagnostic entry)" % (path, key))
    if "expect" in rule:
        exp = rule["expect"]
        values = exp if isinstance(exp, list) else [exp]
        if isinstance(exp, list) and not exp:
            errs.append("%s.expect: list must not be empty" % path)
        allowed = _diag_model.STATUSES + (_diag_model.CONCLUSIONS.get(name, ()) if name else ())
        for v in values:
            if not isinstance(v, str):
                errs.append("%s.expect: must be a status or conclusion (or a list of them), got %s %r"
                            % (path, type_name(v), v))
            elif name and v not in allowed:
                errs.append("%s.expect: %r is not a status or conclusion of %s; known: %s"
                            % (path, v, name, ", ".join(dict.fromkeys(allowed))))
    has_metric = "metric" in rule
    has_bound = "min" in rule or "max" in rule
    if has_bound and not has_metric:
        errs.append("%s: min/max in a diagnostic rule need metric (a JMESPath over the diagnostic entry, "
                    "e.g. evidence.max_ratio)" % path)
    if has_metric and not has_bound:
        errs.append("%s.metric: needs min and/or max" % path)
    if is_number(rule.get("min")) and is_number(rule.get("max")) and rule["min"] > rule["max"]:
        errs.append("%s: min %r is greater than max %r; no value can pass" % (path, rule["min"], rule["max"]))
    if "expect" not in rule and not has_metric:
        errs.append("%s: diagnostic rule sets no test; give expect (e.g. pass) or metric with min/max" % path)
    return errs


def is_drive_rule(rule):
    """A rule on the host's drives: it has ``drive`` or a drive health limit."""
    return isinstance(rule, dict) and ("drive" in rule or any(k in rule for k in DRIVE_LIMITS))


def _check_drive_rule(rule, path, names, index, var_name):
    """Errors of a drive rule (``names`` collects rule names across the list)."""
    errs = []
    for key, value in rule.items():
        where = "%s.%s" % (path, key)
        if key not in DRIVE_KEYS:
            guess = difflib.get_close_matches(str(key), DRIVE_KEYS, n=1, cutoff=0.6)
            why = (" (workload selectors, limits, metric and diagnostic do not apply to a drive rule)"
                   if key in KNOWN_KEYS else "")
            errs.append("%s: unknown key in a drive rule%s%s; known: %s" % (
                where, " (did you mean %s?)" % guess[0] if guess else "", why, ", ".join(DRIVE_KEYS)))
        elif key == "drive":
            values = value if isinstance(value, list) else [value]
            if isinstance(value, list) and not value:
                errs.append("%s: list must not be empty" % where)
            for v in values:
                if not isinstance(v, str) or not v.strip():
                    errs.append("%s: must be a drive's name, /dev path, serial or model (or a list of them), got "
                                "%s %r; for example nvme0n1" % (where, type_name(v), v))
        elif key in ("name", "description"):
            errs.extend(_check_label(key, value, where, names, index, var_name))
        else:
            bad = _bad_number(value)
            if bad:
                errs.append("%s: %s" % (where, bad))
            elif value < 0:
                errs.append("%s: must not be negative, got %r; closest: 0" % (where, value))
    if not any(k in rule for k in DRIVE_LIMITS):
        errs.append("%s: drive rule sets no limit; give one of %s" % (path, ", ".join(DRIVE_LIMITS)))
    return errs


def drive_selected(rule, drive):
    """True when the drive rule's ``drive`` selector (absent: all) names this drive."""
    if "drive" not in rule:
        return True
    wants = rule["drive"] if isinstance(rule["drive"], list) else [rule["drive"]]
    have = {str(drive.get(f)) for f in DRIVE_SELECT_FIELDS if drive.get(f)}
    have.update(str(x) for x in drive.get("by_id") or [])
    return any(w in have for w in wants)


def is_diagnostic_rule(rule):
    return isinstance(rule, dict) and "diagnostic" in rule


def expect_values(rule):
    exp = rule.get("expect")
    return list(exp) if isinstance(exp, list) else [exp]


# --------------------------------------------------------------------------- naming / matching

def selector_value_text(value, prefix=""):
    if isinstance(value, list):
        return ",".join("%s%s" % (prefix, v) for v in value)
    return "%s%s" % (prefix, value)


def selector_text(rule):
    parts = [
        selector_value_text(rule["workload"]) if "workload" in rule else "*",
        selector_value_text(rule["mode"]) if "mode" in rule else "*",
        selector_value_text(rule["threads"], "t") if "threads" in rule else "*",
    ]
    while len(parts) > 1 and parts[-1] == "*":
        parts.pop()
    text = "/".join(parts)
    if "id" in rule:
        text += "[%s]" % selector_value_text(rule["id"])
    return text


def rule_name(rule, limit):
    """Name of one limit of a rule: the given ``name`` or a derived one."""
    if rule.get("name"):
        return rule["name"]
    if is_drive_rule(rule):
        sel = rule.get("drive")
        return "%s@drive:%s" % (limit, ",".join(sel) if isinstance(sel, list) else sel or "*")
    if is_diagnostic_rule(rule):
        if limit == "expect":
            return "diagnostic:%s=%s" % (rule["diagnostic"], "|".join(str(v) for v in expect_values(rule)))
        return "%s(%s)@diagnostic:%s" % (limit, rule.get("metric"), rule["diagnostic"])
    if limit in ("min", "max"):
        label = "%s(%s)" % (limit, rule.get("metric"))
    else:
        label = limit
    return "%s@%s" % (label, selector_text(rule))


def rule_limits(rule):
    """Limits of a rule in canonical order: list of (limit_key, op, limit)."""
    out = []
    if is_drive_rule(rule):
        return [(k, ">=" if k.startswith("min_") else "<=", rule[k]) for k in DRIVE_LIMITS if k in rule]
    if is_diagnostic_rule(rule) and "expect" in rule:
        out.append(("expect", "in", expect_values(rule)))
    for key in LIMIT_KEYS:
        if key in STATE_LIMITS:
            if rule.get(key) is True:
                out.append((key, "==", True))
        elif key in rule:
            out.append((key, ">=" if key.startswith("min_") else "<=", rule[key]))
    if "metric" in rule:
        if "min" in rule:
            out.append(("min", ">=", rule["min"]))
        if "max" in rule:
            out.append(("max", "<=", rule["max"]))
    return out


def selector_match(want, have):
    if isinstance(want, list):
        return have in want
    return have == want


def stall_limit(rules, workload):
    """The stall limit of a workload: ``(seconds, rule)`` of the lowest ``max_stall_s`` among the
    rules that match it, or ``(None, None)`` when none does (the built-in limit holds)."""
    best = (None, None)
    for rule in rules or []:
        if isinstance(rule, dict) and is_number(rule.get("max_stall_s")) and rule_matches(rule, workload):
            if best[0] is None or rule["max_stall_s"] < best[0]:
                best = (rule["max_stall_s"], rule)
    return best


def rule_matches(rule, workload):
    """True when every selector of ``rule`` matches the workload record/spec (a
    diagnostic rule never matches a workload: the judge checks it once per host)."""
    if is_diagnostic_rule(rule) or is_drive_rule(rule):
        return False
    for key in SELECTOR_KEYS:
        if key in rule and not selector_match(rule[key], workload.get(key)):
            return False
    return True


__all__ = ["validate_rules", "rule_name", "rule_limits", "rule_matches", "selector_text",
           "compile_metric", "JMESPATH_MISSING", "is_diagnostic_rule", "is_drive_rule", "drive_selected", "expect_values", "DRIVE_LIMITS",
           "LIMIT_KEYS", "LATENCY_LIMITS", "STATE_LIMITS", "STALL_LIMITS", "stall_limit",
           "KNOWN_KEYS"]
