# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's drive checks (docs/thresholds.md; split out of ``judge.py``, which runs them
in ``judge`` and re-exports ``drive_label`` and ``drive_list``): per drive its own health
verdict (``drive_health``), then every drive rule over the drives it selects, each citing
the drive's model and serial."""

from ansible_collections.fleetqual.storage.plugins.module_utils.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.plugin_utils.rules import DRIVE_LIMITS, drive_selected, is_drive_rule, rule_limits, rule_name
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge_checks import _check, _cmp_word, _compare


# --------------------------------------------------------------------------- drives (issue 11)

def drive_label(drive):
    """``drive sda (Samsung SSD 870, serial WD-WX12A3456789)``: how reasons cite a drive."""
    return "drive %s (%s, serial %s)" % (drive.get("name") or drive.get("path") or "?",
                                         drive.get("model") or "model unknown", drive.get("serial") or "unknown")


def _drive_check(drive, rule, metric, value, limit, op, passed, status, message, ev):
    c = _check(None, rule, metric, value, limit, op, passed, ev, status, "drive", message)
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


def _drive_checks(checks, rules, drives, matched, applicable):
    """Drive checks appended to ``checks``: the default verdict check of every drive
    (``drive_health``), then every drive rule over the drives it selects. Returns warnings."""
    warnings = []
    drive_rules = [(ri, r) for ri, r in enumerate(rules) if is_drive_rule(r)]
    listed = drive_list(drives)
    if listed is None:
        for ri, rule in drive_rules:
            matched[ri] += 1
            for key, op, limit in rule_limits(rule):
                msg = "%s: drive inventory not collected for this host; not applicable" % rule_name(rule, key)
                checks.append(_check(None, rule_name(rule, key), "health.%s" % DRIVE_LIMITS[key], None, limit, op,
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
            checks.append(_check(None, name, "drive", rule.get("drive"), None, None, False, names, "fail", "drive",
                                 msg))
            continue
        matched[ri] += 1
        for d in chosen:
            health = d.get("health") if isinstance(d.get("health"), dict) else {"collected": False}
            for key, op, limit in rule_limits(rule):
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
    passed = _compare(value, op, limit)
    msg = "%s: %s %s %s limit %s%s (%s)" % (label, what, fmt_num(value), _cmp_word(op, passed), fmt_num(limit),
                                            tag, ev)
    return _drive_check(drive, name, "health.%s" % field, value, limit, op, passed,
                        "pass" if passed else "fail", msg, ev)
