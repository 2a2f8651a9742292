# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JUnit XML of the fleet (the Jenkins xunit-plugin junit-10.xsd shape; GitLab reads
testcase classname/name/time and the failure text): one test case per host and target,
grouped by fleet group, each failure citing the measured value, the limit and the device
evidence."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.arrays import array_junit_cases
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import DASH
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_ms as fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_pct as fmt_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import row_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.drift import text_lines as history_lines
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import first_failing_rule, target_verdicts
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float as num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.templating import xml_text


def _check_message(c):
    metric = c.get("metric") or c.get("rule") or "value"
    return "%s %s = %s, limit %s %s" % (c.get("workload") or "", metric, _fmtv(c.get("value")),
                                        c.get("op") or "", _fmtv(c.get("limit")))


def _fmtv(v):
    n = num(v)
    if n is None:
        return DASH if v is None else str(v)
    return "%g" % n


def _legacy_target(h):
    """The case name's target of a host without named targets: its test_dir (records of
    older versions listed it in ``targets`` as a string)."""
    targets = [str(t) for t in (h.get("targets") or []) if t and not isinstance(t, dict)]
    return targets[0] if targets else str(h.get("test_dir") or "-")


def target_names(h):
    """The host's named targets (docs/contracts.md section 4), in order: the record's
    resolved ``targets``, then any other target its workload rows name; [] for the one
    shorthand target."""
    names = [str(t["name"]) for t in h.get("targets") or [] if isinstance(t, dict) and t.get("name")]
    for w in h["workloads"]:
        if w.get("target") and w["target"] not in names:
            names.append(w["target"])
    return names


def _failed_check_lines(checks):
    return ["%s: measured %s, limit %s %s; %s" % (_check_message(c), _fmtv(c.get("value")), c.get("op") or "",
                                                  _fmtv(c.get("limit")), c.get("evidence") or "")
            for c in checks if c.get("passed") is False or c.get("status") in ("fail", "error")]


def _integrity_first(checks, message):
    """The failure message of a case: the first integrity failure's (a block read back wrong,
    I/O errors of a drive that still answers: docs/integrity.md) when the case has one, else
    ``message``; ``(message, rule or None)``."""
    for c in checks:
        if isinstance(c, dict) and c.get("kind") == "integrity" and c.get("status") == "fail":
            return c.get("message") or message, c.get("rule")
    return message, None


def _case_kind(verdict):
    # INCONCLUSIVE: not measured on a disk of its own, so neither passed nor failed: skipped
    if verdict == "INCONCLUSIVE":
        return "skipped"
    return "failure" if verdict == "FAIL" else ("error" if verdict in ("ERROR", "UNREACHABLE") else None)


def _host_case_parts(h, fleet):
    """What every case of a host says beyond its own reasons: the fleet judgements, notes
    and the play's failed/unreachable task (text), and the verdict line (system-out)."""
    extra = ["fleet outlier (%s): %s" % (fleet["options"]["outliers"], o["text"]) for o in h["outliers"]]
    extra.extend("baseline regression (%s): %s" % (fleet["options"]["regressions"], r["text"])
                 for r in h["regressions"])
    extra.extend("drive %s (%s): %s" % (f["kind"], f["severity"], f["message"]) for f in h.get("drive_findings") or [])
    extra.extend("history %s" % line for line in history_lines(h))      # Baseline and findings
    extra.extend("note: %s" % n for n in h["notes"])
    play = h.get("play") or {}
    for key in ("failed_task", "unreachable_task"):
        if play.get(key):
            extra.append("%s: task '%s': %s" % (key.replace("_", " "), play[key].get("task"), play[key].get("msg")))
    return extra


def _target_cases(h, fleet, names, cls):
    """One case per named target: its own checks (judge.target_verdicts), the checks and
    drive findings of the drive it runs on, its outliers and regressions; what belongs to
    no target (a host error, a drive no target is on, the play) fails every case."""
    tv = target_verdicts({"checks": h["checks"]})
    on_drive = h.get("target_drives") or {}
    checks = [c for c in h["checks"] if isinstance(c, dict)]
    opts = fleet["options"]
    own = {}
    for name in names:
        v = tv.get(name) or {"verdict": "PASS", "reasons": []}
        drive = on_drive.get(name)
        reasons = list(v["reasons"])
        reasons.extend(c["message"] for c in checks if c.get("kind") == "drive" and drive
                       and c.get("drive") == drive and c.get("status") == "fail")
        reasons.extend(f["message"] for f in h.get("drive_findings") or []
                       if drive and f.get("drive") == drive and f.get("severity") == "fail")
        if opts.get("outliers") == "fail":
            reasons.extend(o["text"] for o in h["outliers"] if o.get("target") == name and o["worse"])
        if opts.get("regressions") == "fail":
            reasons.extend(r["text"] for r in h["regressions"] if r.get("target") == name)
        own[name] = (v["verdict"], reasons, drive)
    attributed = [r for _verdict, reasons, _drive in own.values() for r in reasons]
    host_level = [] if h["verdict"] == "PASS" else \
        [r for r in h["reasons"] if not any(a in r for a in attributed)] or ([] if attributed else [h["verdict"]])
    extra = _host_case_parts(h, fleet)
    cases = []
    for name in names:
        verdict, reasons, drive = own[name]
        rows = [w for w in h["workloads"] if w.get("target") == name]
        if h["verdict"] == "PASS" or not (reasons or host_level):
            kind = None
        elif host_level and h["verdict"] in ("ERROR", "UNREACHABLE") or verdict == "ERROR":
            kind = "error"
        elif verdict == "INCONCLUSIVE" or (h["verdict"] == "INCONCLUSIVE" and verdict != "FAIL"):
            kind = "skipped"
        else:
            kind = "failure"
        mine = [c for c in checks if c.get("target") == name
                or (drive and c.get("kind") == "drive" and c.get("drive") == drive)]
        text = reasons + host_level + _failed_check_lines(mine) + extra
        first = (reasons + host_level + [h["verdict"]])[0]
        rule = first_failing_rule({"checks": [c for c in mine if c.get("status") in ("fail", "error")]})
        if kind == "failure":
            first, own_rule = _integrity_first(mine, first)
            rule = own_rule or rule
        cases.append({
            "name": "%s %s" % (h["host"], name), "classname": cls,
            "time": sum((w["elapsed_s"] or w.get("time_s") or 0.0) for w in rows), "kind": kind,
            "message": first, "type": (rule or h["first_failing_rule"] or h["verdict"]) if kind == "failure"
            else h["verdict"], "text": "\n".join(text),
            "out": "\n".join(["verdict %s (judge: %s), target %s%s, group %s, run %s" % (
                h["verdict"], h["record_verdict"] or "-", name, " on drive %s" % drive if drive else "", h["group"],
                fleet["run_id"])] + [_workload_line(w) for w in rows]
                + ["warning: %s" % x for x in h.get("warnings") or []])})
    return cases


def _workload_line(w):
    return ("%s: iops %s, MiB/s %s, p50 %s ms, p99 %s ms, p99.9 %s ms (%s), %%util %s, await %s ms%s" % (
        row_key(w), fmt_num(w["iops"]), fmt_num(w["mibps"]), fmt_ms(w.get("p50_ms")), fmt_ms(w["p99_ms"]),
        fmt_ms(w.get("p999_ms")), w.get("latency_op") or "-", fmt_pct(w["util_pct"]), fmt_ms(w["await_ms"]),
        "" if not (w["errors"] or w["interrupted"] or w.get("bad") or w.get("verify_off")) else
        " [%s]" % ", ".join(x for x in ("%d I/O errors" % w["errors"] if w["errors"] else "",
                                        "%d bad blocks" % w["bad"] if w.get("bad") else "",
                                        "verify off: %s" % w["verify_off"] if w.get("verify_off") else "",
                                        "interrupted" if w["interrupted"] else "") if x)))


def junit_cases(fleet):
    """View model: one test case per host and target (judge.target_verdicts; one per host
    for the shorthand target), grouped by fleet group:
    [(group, [{name, classname, time, kind: None|failure|error|skipped, message, type, text, out}])].

    The failure/error ``message`` is the first reason (GitLab shows it in its list); the
    text holds every reason with the measured value, the limit and the device evidence of
    each check that did not pass (a drive's cite its serial), the outliers, regressions and
    drive findings, and the notes."""
    groups = {}
    for h in fleet["hosts"]:
        cls = "fleetqual." + re.sub(r"[^A-Za-z0-9_.-]", "_", h["group"] or "none")
        names = target_names(h)
        if names:
            groups.setdefault(h["group"] or "(none)", []).extend(_target_cases(h, fleet, names, cls))
            continue
        text = list(h["reasons"]) + _failed_check_lines(h["checks"]) + _host_case_parts(h, fleet)
        out = "\n".join(["verdict %s (judge: %s), group %s, run %s" % (
            h["verdict"], h["record_verdict"] or "-", h["group"], fleet["run_id"])]
            + [_workload_line(w) for w in h["workloads"]] + ["warning: %s" % x for x in h.get("warnings") or []])
        kind = _case_kind(h["verdict"])
        message, rule = h["reasons"][0] if h["reasons"] else h["verdict"], None
        if kind == "failure":
            message, rule = _integrity_first(h["checks"], message)
        groups.setdefault(h["group"] or "(none)", []).append({
            "name": "%s %s" % (h["host"], _legacy_target(h)), "classname": cls,
            "time": sum((w["elapsed_s"] or w.get("time_s") or 0.0) for w in h["workloads"]), "kind": kind,
            "message": message,
            "type": (rule or h["first_failing_rule"] or h["verdict"]) if kind == "failure" else h["verdict"],
            "text": "\n".join(text), "out": out})
    return [(g, groups[g]) for g in sorted(groups, key=natural_key)]


def render_junit(fleet):
    """JUnit XML (the Jenkins xunit-plugin junit-10.xsd shape; GitLab reads testcase
    classname/name/time and the failure text) written with xml.etree.ElementTree.
    Characters XML 1.0 forbids are dropped first: ElementTree escapes, it does not drop."""
    x = xml_text
    cases = junit_cases(fleet) + array_junit_cases(fleet)     # one suite per array
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    stamp = fleet["generated_at"][:19]
    for i, (group, items) in enumerate(cases):
        n_fail = sum(1 for c in items if c["kind"] == "failure")
        n_err = sum(1 for c in items if c["kind"] == "error")
        n_skip = sum(1 for c in items if c["kind"] == "skipped")
        t = sum(c["time"] for c in items)
        suite = ET.SubElement(root, "testsuite", {
            "name": x("fleetqual.%s" % group), "tests": str(len(items)), "failures": str(n_fail),
            "errors": str(n_err), "skipped": str(n_skip), "time": "%.3f" % t, "timestamp": stamp, "id": str(i),
            "package": x("fleetqual.%s" % fleet["run_id"])})
        props = ET.SubElement(suite, "properties")
        for k, v in (("run_id", fleet["run_id"]), ("group", group), ("outliers", fleet["options"]["outliers"]),
                     ("regressions", fleet["options"]["regressions"])):
            ET.SubElement(props, "property", {"name": k, "value": x(v)})
        for c in items:
            case = ET.SubElement(suite, "testcase", {"name": x(c["name"]), "classname": x(c["classname"]),
                                                     "time": "%.3f" % c["time"]})
            if c["kind"]:
                attrs = {"message": x(c["message"])}
                if c["kind"] != "skipped":          # junit-10.xsd: skipped carries a message only
                    attrs["type"] = x(c["type"])
                el = ET.SubElement(case, c["kind"], attrs)
                el.text = x(c["text"])
            ET.SubElement(case, "system-out").text = x(c["out"])
        totals["tests"] += len(items)
        totals["failures"] += n_fail
        totals["errors"] += n_err
        totals["time"] += t
    root.attrib.update({"name": x("fleetqual %s" % fleet["run_id"]), "tests": str(totals["tests"]),
                        "failures": str(totals["failures"]), "errors": str(totals["errors"]),
                        "time": "%.3f" % totals["time"]})
    ET.indent(root, space=" ")
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
