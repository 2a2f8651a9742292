# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Renderers of the fleet report: terminal table, JSON, JUnit XML, HTML (inline SVG), Markdown.

Every renderer takes the ``fleet`` dict built by ``fleet.aggregate`` (fleet.json content);
the HTML renderer optionally takes the raw host records for iostat time series.  Missing
or NaN numbers render as "-".  Templates live in the collection's top-level templates/
directory and are rendered with a private Jinja2 environment (no Ansible templar).
"""
from __future__ import annotations

import html
import json
import math
import os
import re
import statistics
import textwrap
import xml.etree.ElementTree as ET

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet as fleetmod
# table cells: '-' for missing, compact (plugin_utils/fmt.py is the one set of formatters)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_ms as fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_pct as fmt_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import first_failing_rule, target_verdicts

TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "templates")
FORMATS = ("table", "json", "junit", "html", "md")
DASH = "-"
ELLIPSIS = "\u2026"
VERDICT_SHORT = {"PASS": "PASS", "FAIL": "FAIL", "ERROR": "ERROR", "UNREACHABLE": "UNREACH"}

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#d62728")
VERDICT_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#9a6700", "UNREACHABLE": "#6e7781"}


# --------------------------------------------------------------------------- numbers

def truncate(text, width):
    text = "" if text is None else str(text)
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    return text[: width - 1] + ELLIPSIS


# --------------------------------------------------------------------------- terminal table

TABLE_COLUMNS = (
    # header, key, align, min width, max width (None = natural)
    ("host", "host", "<", 6, 24),
    ("workload", "workload", "<", 8, 26),
    ("thr", "threads", ">", 3, 4),
    ("IOPS", "iops", ">", 5, 7),
    ("MiB/s", "mibps", ">", 5, 7),
    ("p95ms", "p95", ">", 5, 6),
    ("p99ms", "p99", ">", 5, 6),
    ("op", "op", "<", 2, 6),          # the operation the latency columns are (metrics.latency_op)
    ("%util", "util", ">", 5, 5),
    ("await", "await", ">", 5, 6),
    ("verdict", "verdict", "<", 7, 7),
    ("first failing rule", "rule", "<", 6, 60),
)


def table_rows(fleet):
    """One row per host and workload (one row for a host without workloads)."""
    with fleetmod.gc_paused():
        return _table_rows(fleet)


def _table_rows(fleet):
    """Hosts with detail in fleet.json get one row per workload; the others (the passing
    hosts beyond ``html_detail_hosts`` in a large fleet) one summary row each."""
    rows = []
    for h in fleet["hosts"]:
        v = VERDICT_SHORT.get(h["verdict"], h["verdict"])
        if h["workloads"] and h.get("detail") is None:
            flagged = sorted({m for w in h["workloads"] for m in w["outliers"]})
            rule = h["first_failing_rule"] or (("outlier: " + ",".join(flagged)) if flagged else DASH)
            if rule == DASH and h["verdict"] != "PASS" and h["reasons"]:
                rule = h["reasons"][0]
            iops = [w["iops"] for w in h["workloads"] if w["iops"] is not None]
            p99 = [w["p99_ms"] for w in h["workloads"] if w["p99_ms"] is not None]
            rows.append({"host": h["host"], "workload": "%d workloads" % len(h["workloads"]), "threads": DASH,
                         "iops": "min " + fmt_num(min(iops)) if iops else DASH, "mibps": DASH, "p95": DASH,
                         "p99": "max " + fmt_ms(max(p99)) if p99 else DASH, "op": DASH, "util": DASH,
                         "await": DASH,
                         "verdict": v, "rule": rule,
                         "_host": h["host"], "_group": h["group"], "_verdict": h["verdict"], "_span": 0,
                         "_flags": tuple(flagged), "_util1": DASH})
            continue
        if not h["workloads"]:
            rule = h["first_failing_rule"] or short_reason(h)
            rows.append({"host": h["host"], "workload": DASH, "threads": DASH, "iops": DASH, "mibps": DASH,
                         "p95": DASH, "p99": DASH, "op": DASH, "util": DASH, "await": DASH, "verdict": v,
                         "rule": rule,
                         # for the HTML table
                         "_host": h["host"], "_group": h["group"], "_verdict": h["verdict"], "_span": 0,
                         "_flags": (), "_util1": DASH})
            continue
        span = len(h["workloads"])
        for i, w in enumerate(h["workloads"]):
            rule = w.get("first_failing_rule")
            if not rule and w["outliers"]:
                rule = "outlier: " + ",".join(w["outliers"])
            if not rule and w["errors"]:
                rule = "I/O errors: %d" % w["errors"]
            if not rule and w["interrupted"]:
                rule = "interrupted"
            if not rule and i == 0 and h["verdict"] != "PASS" and not h["first_failing_rule"] and h["reasons"]:
                rule = h["reasons"][0]
            rows.append({
                "host": h["host"] if i == 0 else "",
                "workload": fleetmod.row_key(w),          # <id>@<target>: a row per host and target
                "threads": DASH if w["threads"] is None else str(w["threads"]),
                "iops": fmt_num(w["iops"]), "mibps": fmt_num(w["mibps"]),
                "p95": fmt_ms(w["p95_ms"]), "p99": fmt_ms(w["p99_ms"]), "op": w.get("latency_op") or DASH,
                "util": fmt_pct(w["util_pct"], 0) if w["util_pct"] is not None else DASH,
                "await": fmt_ms(w["await_ms"]),
                "verdict": v if i == 0 else "",
                "rule": rule or DASH,
                "_host": h["host"], "_group": h["group"], "_verdict": h["verdict"], "_span": span if i == 0 else -1,
                "_flags": w["outliers"], "_util1": fmt_pct(w["util_pct"]),
            })
    return rows


def short_reason(h):
    """A compact reason for a host without results (the full one is printed under the table)."""
    play = h.get("play") or {}
    if h["verdict"] == "UNREACHABLE" and play.get("unreachable_task"):
        return "unreachable: %s" % play["unreachable_task"].get("task")
    if h["record_verdict"] is None and play.get("failed_task"):
        return "failed: %s" % play["failed_task"].get("task")
    return h["reasons"][0] if h["reasons"] else DASH


def _fit_widths(rows, width):
    """Natural column widths capped per column; the rule column takes what is left, and
    when that is too little the workload, then the host column give way.

    Ours rather than a table library's: the rule is specific (which column yields first,
    the reasons column's floor, truncation with an ellipsis at a hard width for AWX's and
    CI logs), and tabulate/rich would still need it written around them."""
    cols = TABLE_COLUMNS
    widths = []
    for header, key, _align, lo, hi in cols:
        natural = max([len(header)] + [len(r[key]) for r in rows]) if rows else len(header)
        widths.append(max(lo, min(hi, natural)))
    budget = width - (len(cols) - 1)
    rule_min = 14
    fixed = sum(widths[:-1])
    for idx, floor in ((1, 14), (0, 10), (1, cols[1][3]), (0, cols[0][3])):
        while fixed + rule_min > budget and widths[idx] > floor:
            widths[idx] -= 1
            fixed -= 1
    widths[-1] = max(cols[-1][3], min(widths[-1], budget - fixed))
    return widths


def render_table(fleet, width=110, rows=None):
    """The fleet table for the terminal, every line at most ``width`` columns."""
    rows = table_rows(fleet) if rows is None else rows
    widths = _fit_widths(rows, width)
    out = []

    def line(values):
        cells = []
        for (header, key, align, _lo, _hi), w, val in zip(TABLE_COLUMNS, widths, values):
            val = truncate(val, w)
            cells.append(val.ljust(w) if align == "<" else val.rjust(w))
        return " ".join(cells).rstrip()[:width]

    out.append(line([c[0] for c in TABLE_COLUMNS]))
    out.append(line(["-" * w for w in widths]))
    for r in rows:
        out.append(line([r[c[1]] for c in TABLE_COLUMNS]))
    if not rows:
        out.append("(no hosts)")
    return "\n".join(out)


# --------------------------------------------------------------------------- drives

DRIVE_COLUMNS = (
    # header, key, min width, max width
    ("host", "host", 4, 20),
    ("device", "drive", 6, 12),
    ("model", "model", 5, 26),
    ("serial", "serial", 6, 20),
    ("firmware", "firmware", 8, 10),
    ("health", "health", 6, 13),
    ("verdict", "verdict", 7, 7),
    ("reasons", "reasons", 7, 400),
)
DRIVE_ROWS_ALL = 500      # up to this many drives every one is listed; beyond, the flagged ones


def drive_flagged(d):
    """A drive that failed or has a finding (shown in every format whatever the fleet's size)."""
    return d["verdict"] == "FAIL" or bool(d.get("findings")) or d["health"] == "FAILED"


def drive_table(fleet, limit=DRIVE_ROWS_ALL):
    """(rows, left out) of the drive table (fleet.json ``drives``, drive_fleet.drive_rows):
    every drive when there are at most ``limit``, else the flagged ones. Cells are text;
    ``reasons`` joins the failed drive checks and the drive's findings."""
    drives = fleet.get("drives") or []
    shown = drives if len(drives) <= limit else [d for d in drives if drive_flagged(d)]
    odd = {(f["host"], f["drive"], f["kind"]) for f in fleet.get("drive_findings") or []
           if f.get("kind") in ("model", "firmware")}
    rows = []
    for d in shown:
        rows.append({"host": d["host"], "drive": d.get("drive") or DASH, "model": d.get("model") or DASH,
                     "serial": d.get("serial") or DASH, "firmware": d.get("firmware") or DASH,
                     "health": d["health"], "verdict": d["verdict"],
                     "reasons": "; ".join(list(d.get("reasons") or []) + list(d.get("findings") or [])
                                          + ([d["health_note"]] if d.get("health_note") and d["health"] != "PASSED"
                                             and not d.get("reasons") else [])) or DASH,
                     "_flagged": drive_flagged(d),
                     "_odd": {k for k in ("model", "firmware") if (d["host"], d.get("drive"), k) in odd}})
    return rows, len(drives) - len(shown)


def render_drive_table(fleet, width=110, limit=50):
    """The drive table for the terminal (host, device, model, serial, firmware, health,
    verdict, reasons), at most ``width`` columns; beyond ``limit`` drives only the flagged."""
    rows, omitted = drive_table(fleet, limit)
    if not rows and not omitted:
        return ""
    widths = []
    for header, key, lo, hi in DRIVE_COLUMNS:
        natural = max([len(header)] + [len(r[key]) for r in rows])
        widths.append(max(lo, min(hi, natural)))
    budget = width - (len(DRIVE_COLUMNS) - 1)
    for idx in (2, 0, 3):           # model, host, serial give way to the reasons
        while sum(widths[:-1]) + 20 > budget and widths[idx] > DRIVE_COLUMNS[idx][2]:
            widths[idx] -= 1
    widths[-1] = max(DRIVE_COLUMNS[-1][2], min(widths[-1], budget - sum(widths[:-1])))

    def line(values):
        return " ".join(truncate(v, w).ljust(w) for v, w in zip(values, widths)).rstrip()[:width]

    out = [line([c[0] for c in DRIVE_COLUMNS]), line(["-" * w for w in widths])]
    out.extend(line([r[c[1]] for c in DRIVE_COLUMNS]) for r in rows)
    if omitted:
        out.append("... %d more drives without findings (see fleet.json)" % omitted)
    return "\n".join(out)


def html_drive_body(rows):
    """<tbody> rows of the drive table."""
    e = _e
    return Markup("\n".join(
        '<tr%s><td>%s</td><td>%s</td><td%s>%s</td><td>%s</td><td%s>%s</td><td%s>%s</td><td><span class="badge %s">%s'
        '</span></td><td>%s</td></tr>' % (
            ' class="flagged"' if r["_flagged"] else "", e(r["host"]), e(r["drive"]),
            ' class="flag"' if "model" in r["_odd"] else "", e(r["model"]), e(r["serial"]),
            ' class="flag"' if "firmware" in r["_odd"] else "", e(r["firmware"]),
            ' class="flag"' if r["health"] == "FAILED" else "", e(r["health"]),
            e({"n/a": "NA"}.get(r["verdict"], r["verdict"])), e(r["verdict"]), e(r["reasons"])) for r in rows))


def summary_line(fleet):
    s = fleet["summary"]
    bv = s["by_verdict"]
    return "fleet: %d/%d hosts passed (PASS %d, FAIL %d, UNREACHABLE %d, ERROR %d)" % (
        s["passed"], s["hosts"], bv.get("PASS", 0), bv.get("FAIL", 0), bv.get("UNREACHABLE", 0),
        bv.get("ERROR", 0))


def detail_lines(fleet, width=110, limit=20):
    """Short lines under the table: reasons of non-passing hosts, outliers, regressions, notes."""
    lines = []
    bad = [h for h in fleet["hosts"] if h["verdict"] != "PASS"]
    for h in bad[:limit]:
        reason = h["reasons"][0] if h["reasons"] else "(no reason recorded)"
        lines.append(truncate("%s %s: %s" % (h["verdict"], h["host"], reason), width))
    if len(bad) > limit:
        lines.append("... and %d more non-passing hosts (see fleet.json)" % (len(bad) - limit))
    mode = fleet["options"]["outliers"]
    per_host = {}
    for o in fleet["outliers"]:
        per_host.setdefault(o["host"], []).append(o)
    for host, items in list(per_host.items())[:limit]:
        parts = []
        for metric in fleetmod.JUDGED_METRICS:
            for direction in ("low", "high"):
                sel = [o for o in items if o["metric"] == metric and o["direction"] == direction]
                if not sel:
                    continue
                pcts = [o["pct_from_median"] for o in sel if o["pct_from_median"] is not None]
                worst = max(pcts, key=abs) if pcts else None
                parts.append("%s %s in %d workload(s) (%smax score %.1f)" % (
                    metric, direction, len(sel), "" if worst is None else "up to %+.0f %%, " % worst,
                    max(o["score"] for o in sel)))
        lines.append(truncate("outlier (%s) %s [%s]: %s" % (mode, host, items[0]["group"], "; ".join(parts)),
                              width))
    if len(per_host) > limit:
        lines.append("... and %d more hosts with outliers (see fleet.json)" % (len(per_host) - limit))
    base = fleet.get("baseline")
    if base:
        regs = base["regressions"]
        lines.append(truncate("baseline %s: %d workload(s) compared, %d regression(s) (%s)"
                              % (base.get("run_id") or base.get("path"), base["compared_workloads"], len(regs),
                                 fleet["options"]["regressions"]), width))
        for r in regs[:limit]:
            lines.append(truncate("regression %s: %s" % (r["host"], r["text"]), width))
    for n in fleet["notes"][:limit]:
        lines.append(truncate("note: %s" % n, width))
    lines.extend(diagnostic_lines(fleet, width, limit))
    return lines


# --------------------------------------------------------------------------- diagnostics

DIAG_MARK = {"pass": "ok", "warn": "warn", "fail": "FAIL", "unproven": "unproven", "info": "info", "n/a": "n/a"}
_DIAG_RANK = {"fail": 0, "warn": 1, "unproven": 2, "info": 3, "pass": 4, "n/a": 5}


def diagnostic_items(h, include_na=False):
    """[{name, title, status, conclusion, sentence}] of a fleet host, in diagnostics.NAMES order."""
    diags = h.get("diagnostics") or {}
    out = []
    for name in diagmod.NAMES:
        d = diags.get(name)
        if not isinstance(d, dict):
            continue
        status = d.get("status") or "info"
        if status == "n/a" and not include_na:
            continue
        out.append({"name": name, "title": diagmod.TITLES.get(name, name), "status": status,
                    "conclusion": d.get("conclusion"), "sentence": d.get("sentence") or ""})
    return out


def diagnostic_lines(fleet, width=110, limit=20):
    """Under the table: each host's diagnostic sentences (n/a left out), wrapped to ``width``.
    Hosts with a failed or warning diagnostic come first; at most ``limit`` hosts."""
    hosts = []
    for h in fleet["hosts"]:
        items = diagnostic_items(h)
        if items:
            hosts.append((min(_DIAG_RANK.get(i["status"], 5) for i in items), h["host"], items))
    if not hosts:
        return []
    hosts.sort(key=lambda x: x[0])         # stable: fleet order within a rank
    lines = []
    for _rank, host, items in hosts[:limit]:
        lines.append(truncate("diagnostics %s:" % host, width))
        for i in items:
            lines.extend(textwrap.wrap("[%s] %s" % (DIAG_MARK.get(i["status"], i["status"]), i["sentence"]),
                                       width=max(20, width), initial_indent="  ", subsequent_indent="      ",
                                       break_long_words=True, break_on_hyphens=False))
    if len(hosts) > limit:
        lines.append("... diagnostics of %d more hosts in report.html, report.md and fleet.json"
                     % (len(hosts) - limit))
    return lines


def html_diagnostics_grid(fleet):
    """<tbody> of the fleet diagnostics table: one row per host with diagnostics, one cell per
    diagnostic (its conclusion, coloured by status, the sentence as tooltip)."""
    e = _e
    out = []
    for h in fleet["hosts"]:
        diags = h.get("diagnostics") or {}
        if h.get("detail") is None or not any(isinstance(d, dict) and d.get("status") != "n/a"
                                              for d in diags.values()):
            continue
        cells = []
        for name in diagmod.NAMES:
            d = diags.get(name)
            if not isinstance(d, dict) or d.get("status") == "n/a":
                cells.append('<td class="muted">-</td>')
                continue
            cells.append('<td class="dg %s" title="%s">%s</td>'
                         % (e(d.get("status")), e(d.get("sentence")), e(d.get("conclusion"))))
        out.append('<tr><td><a href="#host-%s">%s</a></td>%s</tr>' % (e(h["host"]), e(h["host"]), "".join(cells)))
    return Markup("\n".join(out))


# --------------------------------------------------------------------------- JSON

def render_json(fleet):
    return fleetmod.to_json(fleet)


# --------------------------------------------------------------------------- templates

_ENVS = {}
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(value):
    """Text safe for XML 1.0 (control characters dropped); escaping is left to autoescape."""
    return _XML_BAD.sub("", "" if value is None else str(value))


def _env(kind):
    env = _ENVS.get(kind)
    if env is None:
        env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), undefined=StrictUndefined,
                          autoescape=select_autoescape(enabled_extensions=("html", "xml", "j2"),
                                                       default_for_string=True),
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        if kind == "md":
            env.autoescape = False
        env.filters.update(num=fmt_num, ms=fmt_ms, pct=fmt_pct, xml=xml_text, md=md_cell)
        _ENVS[kind] = env
    return env


def _render(kind, template_name, **ctx):
    return _env(kind).get_template(template_name).render(**ctx)


# --------------------------------------------------------------------------- JUnit

def _check_message(c):
    metric = c.get("metric") or c.get("rule") or "value"
    return "%s %s = %s, limit %s %s" % (c.get("workload") or "", metric, _fmtv(c.get("value")),
                                        c.get("op") or "", _fmtv(c.get("limit")))


def _fmtv(v):
    n = fleetmod.num(v)
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


def _case_kind(verdict):
    return "failure" if verdict == "FAIL" else ("error" if verdict in ("ERROR", "UNREACHABLE") else None)


def _host_case_parts(h, fleet):
    """What every case of a host says beyond its own reasons: the fleet judgements, notes
    and the play's failed/unreachable task (text), and the verdict line (system-out)."""
    extra = ["fleet outlier (%s): %s" % (fleet["options"]["outliers"], o["text"]) for o in h["outliers"]]
    extra.extend("baseline regression (%s): %s" % (fleet["options"]["regressions"], r["text"])
                 for r in h["regressions"])
    extra.extend("drive %s (%s): %s" % (f["kind"], f["severity"], f["message"]) for f in h.get("drive_findings") or [])
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
        else:
            kind = "failure"
        mine = [c for c in checks if c.get("target") == name
                or (drive and c.get("kind") == "drive" and c.get("drive") == drive)]
        text = reasons + host_level + _failed_check_lines(mine) + extra
        first = (reasons + host_level + [h["verdict"]])[0]
        rule = first_failing_rule({"checks": [c for c in mine if c.get("status") in ("fail", "error")]})
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
        fleetmod.row_key(w), fmt_num(w["iops"]), fmt_num(w["mibps"]), fmt_ms(w.get("p50_ms")), fmt_ms(w["p99_ms"]),
        fmt_ms(w.get("p999_ms")), w.get("latency_op") or "-", fmt_pct(w["util_pct"]), fmt_ms(w["await_ms"]),
        "" if not (w["errors"] or w["interrupted"]) else
        " [%s]" % ", ".join(x for x in ("%d I/O errors" % w["errors"] if w["errors"] else "",
                                        "interrupted" if w["interrupted"] else "") if x)))


def junit_cases(fleet):
    """View model: one test case per host and target (judge.target_verdicts; one per host
    for the shorthand target), grouped by fleet group:
    [(group, [{name, classname, time, kind: None|failure|error, message, type, text, out}])].

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
        groups.setdefault(h["group"] or "(none)", []).append({
            "name": "%s %s" % (h["host"], _legacy_target(h)), "classname": cls,
            "time": sum((w["elapsed_s"] or w.get("time_s") or 0.0) for w in h["workloads"]), "kind": kind,
            "message": h["reasons"][0] if h["reasons"] else h["verdict"],
            "type": (h["first_failing_rule"] or h["verdict"]) if kind == "failure" else h["verdict"],
            "text": "\n".join(text), "out": out})
    return [(g, groups[g]) for g in sorted(groups, key=fleetmod.natural_key)]


def render_junit(fleet):
    """JUnit XML (the Jenkins xunit-plugin junit-10.xsd shape; GitLab reads testcase
    classname/name/time and the failure text) written with xml.etree.ElementTree.
    Characters XML 1.0 forbids are dropped first: ElementTree escapes, it does not drop."""
    x = xml_text
    cases = junit_cases(fleet)
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    stamp = fleet["generated_at"][:19]
    for i, (group, items) in enumerate(cases):
        n_fail = sum(1 for c in items if c["kind"] == "failure")
        n_err = sum(1 for c in items if c["kind"] == "error")
        t = sum(c["time"] for c in items)
        suite = ET.SubElement(root, "testsuite", {
            "name": x("fleetqual.%s" % group), "tests": str(len(items)), "failures": str(n_fail),
            "errors": str(n_err), "skipped": "0", "time": "%.3f" % t, "timestamp": stamp, "id": str(i),
            "package": x("fleetqual.%s" % fleet["run_id"])})
        props = ET.SubElement(suite, "properties")
        for k, v in (("run_id", fleet["run_id"]), ("group", group), ("outliers", fleet["options"]["outliers"]),
                     ("regressions", fleet["options"]["regressions"])):
            ET.SubElement(props, "property", {"name": k, "value": x(v)})
        for c in items:
            case = ET.SubElement(suite, "testcase", {"name": x(c["name"]), "classname": x(c["classname"]),
                                                     "time": "%.3f" % c["time"]})
            if c["kind"]:
                el = ET.SubElement(case, c["kind"], {"message": x(c["message"]), "type": x(c["type"])})
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


# --------------------------------------------------------------------------- Markdown

def md_cell(value):
    text = DASH if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


MD_KEYS = ("host", "workload", "threads", "iops", "mibps", "p95", "p99", "op", "util", "await", "verdict", "rule")


def render_markdown(fleet, rows=None):
    rows = table_rows(fleet) if rows is None else rows
    table_md = "\n".join("| " + " | ".join(md_cell(r[k]) for k in MD_KEYS) + " |" for r in rows)
    diag = []
    for h in fleet["hosts"]:
        if h.get("detail") is None:       # the hosts drawn in detail; the others' are in fleet.json
            continue
        items = diagnostic_items(h)
        if items:
            diag.append("\n### %s\n" % md_cell(h["host"]))
            diag.extend("- **%s** (%s): %s" % (i["title"], i["status"], md_cell(i["sentence"])) for i in items)
    drives, drives_omitted = drive_table(fleet)
    drives_md = "\n".join("| " + " | ".join(md_cell(r[c[1]]) for c in DRIVE_COLUMNS) + " |" for r in drives)
    return _render("md", "report.md.j2", fleet=fleet, summary=summary_line(fleet), rows=rows, table_md=table_md,
                   diagnostics_md="\n".join(diag), drives_md=drives_md, drives_omitted=drives_omitted)


# --------------------------------------------------------------------------- SVG

def _e(text):
    return html.escape("" if text is None else str(text), quote=True)


def _nice_max(v):
    if v is None or v <= 0:
        return 1.0
    exp = math.floor(math.log10(v))
    base = 10 ** exp
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if v <= m * base:
            return m * base
    return 10 * base


def _ticks(vmax, n=4):
    return [vmax * i / n for i in range(n + 1)]


def _axis_label(v):
    return fmt_num(v) if v >= 100 or v == 0 else ("%g" % float("%.3g" % v))


def svg_line_chart(title, series, x_values, y_label, width=420, height=230):
    """Lines over a categorical x axis (thread counts).  series: [(label, {x: y})]."""
    ml, mr, mt, mb = 54, 12, 26, 58
    pw, ph = width - ml - mr, height - mt - mb
    ys = [y for _label, pts in series for y in pts.values() if y is not None]
    vmax = _nice_max(max(ys) if ys else None)
    xs = list(x_values)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="%s">' % (width, height, width, height, _e(title)),
             '<text x="%d" y="16" class="ct">%s</text>' % (ml, _e(title))]
    for t in _ticks(vmax):
        y = mt + ph - t / vmax * ph
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>' % (ml, ml + pw, y, y))
        parts.append('<text x="%d" y="%.1f" class="tl" text-anchor="end">%s</text>' % (ml - 4, y + 3, _axis_label(t)))
    n = len(xs)

    def xpos(i):
        return ml + (pw * (i + 0.5) / n if n else pw / 2)
    for i, x in enumerate(xs):
        parts.append('<text x="%.1f" y="%d" class="tl" text-anchor="middle">%s</text>' % (xpos(i), mt + ph + 13, _e(x)))
    parts.append('<text x="%.1f" y="%d" class="al" text-anchor="middle">threads</text>' % (ml + pw / 2, mt + ph + 26))
    parts.append('<text x="12" y="%.1f" class="al" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>'
                 % (mt + ph / 2, mt + ph / 2, _e(y_label)))
    if not ys:
        parts.append('<text x="%.1f" y="%.1f" class="empty" text-anchor="middle">no data</text>'
                     % (ml + pw / 2, mt + ph / 2))
    idx = {x: i for i, x in enumerate(xs)}
    legend_y = height - 14
    lx = ml
    for si, (label, pts) in enumerate(series):
        colour = PALETTE[si % len(PALETTE)]
        coords = [(xpos(idx[x]), mt + ph - y / vmax * ph) for x, y in sorted(pts.items(), key=lambda kv: idx[kv[0]])
                  if y is not None and x in idx]
        if len(coords) > 1:
            parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                         % (colour, " ".join("%.1f,%.1f" % c for c in coords)))
        for cx, cy in coords:
            parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (cx, cy, colour))
        if lx < width - 60:
            parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="lg">%s</text>'
                         % (lx, legend_y - 9, colour, lx + 13, legend_y, _e(truncate(label, 22))))
            lx += 20 + 6 * min(len(label), 22)
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>' % (ml, mt, pw, ph))
    parts.append("</svg>")
    return Markup("".join(parts))


STRIP_MAX_DOTS = 200      # a group with more hosts is drawn as a box plot (outliers as dots)


def svg_strip_chart(title, groups, unit, width=560, row_h=26):
    """Fleet distribution: one row per group, a dot per host, median tick, outliers in red.

    groups: [(group name, [(host, value, is_outlier)], median)]"""
    ml, mr, mt, mb = 130, 16, 26, 30
    rows = [g for g in groups if g[1]]
    height = mt + mb + row_h * max(1, len(rows))
    pw = width - ml - mr
    vals = [v for _group, pts, _median in rows for _host, v, _out in pts]
    vmax = _nice_max(max(vals) * 1.04 if vals else None)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="%s">' % (width, height, width, height, _e(title)),
             '<text x="8" y="16" class="ct">%s</text>' % _e(title)]
    base_y = mt + row_h * max(1, len(rows))
    for t in _ticks(vmax, 5):
        x = ml + t / vmax * pw
        parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" class="grid"/>' % (x, x, mt, base_y))
        parts.append('<text x="%.1f" y="%d" class="tl" text-anchor="middle">%s</text>' % (x, base_y + 13, _axis_label(t)))
    parts.append('<text x="%.1f" y="%d" class="al" text-anchor="middle">%s</text>' % (ml + pw / 2, base_y + 26, _e(unit)))
    if not rows:
        parts.append('<text x="%.1f" y="%d" class="empty" text-anchor="middle">no data</text>' % (ml + pw / 2, mt + 16))
    for ri, (gname, pts, med) in enumerate(rows):
        cy = mt + row_h * ri + row_h / 2
        parts.append('<text x="%d" y="%.1f" class="tl" text-anchor="end">%s</text>'
                     % (ml - 6, cy + 3, _e(truncate(gname, 20))))
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="lane"/>' % (ml, ml + pw, cy, cy))
        if len(pts) > STRIP_MAX_DOTS:
            # a large group: its spread as a box (p25-p75) with whiskers (p5-p95) instead of
            # a dot per host; the outliers are still drawn one by one below
            q = statistics.quantiles([v for _host, v, _out in pts], n=20)
            x5, x25, x75, x95 = (ml + q[i] / vmax * pw for i in (0, 4, 14, 18))
            parts.append('<g class="box"><title>%s: %d hosts, p5 %s, p25 %s, p75 %s, p95 %s</title>'
                         '<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><rect x="%.1f" y="%.1f" width="%.1f" '
                         'height="%.1f"/></g>' % (_e(gname), len(pts), _axis_label(q[0]), _axis_label(q[4]),
                                                  _axis_label(q[14]), _axis_label(q[18]), x5, x95, cy, cy, x25,
                                                  cy - row_h / 4, max(1.0, x75 - x25), row_h / 2))
        else:
            normal = []
            for j, (host, v, out) in enumerate(pts):
                x = ml + v / vmax * pw
                jitter = ((j * 7) % 9 - 4) * (row_h / 28.0)
                if out:
                    continue
                normal.append('<circle cx="%.1f" cy="%.1f" r="3"><title>%s: %s</title></circle>'
                              % (x, cy + jitter, _e(host), _axis_label(v)))
            parts.append('<g class="dot">%s</g>' % "".join(normal))
        if med is not None:
            mx = ml + med / vmax * pw
            parts.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="median"/>' % (mx, mx, cy - row_h / 2 + 3, cy + row_h / 2 - 3))
        # outliers on top, labelled; close labels merge into "host +N" so they never overlap
        outs = sorted(((ml + v / vmax * pw, host, v) for host, v, out in pts if out), key=lambda o: o[0])
        labels = []          # [x, text, extra]
        for x, host, v in outs:
            parts.append('<circle cx="%.1f" cy="%.1f" r="5" class="outlier"><title>%s: %s (outlier)</title></circle>'
                         % (x, cy, _e(host), _axis_label(v)))
            if labels and x - labels[-1][0] < 6.2 * (len(labels[-1][1]) + 4) + 6:
                labels[-1][2] += 1
            else:
                labels.append([x, truncate(host, 16), 0])
        for x, text, extra in labels:
            label = text + (" +%d" % extra if extra else "")
            if x + 8 + 6.2 * len(label) > width:
                lx, anchor = x - 7, "end"
            else:
                lx, anchor = x + 6, "start"
            parts.append('<text x="%.1f" y="%.1f" class="ol" text-anchor="%s">%s</text>'
                         % (lx, cy - 6, anchor, _e(label)))
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>' % (ml, mt, pw, base_y - mt))
    parts.append("</svg>")
    return Markup("".join(parts))


def svg_timeseries(title, samples, width=260, height=120):
    """%util (area, left axis 0-100) and await (line, right axis) over a workload's time.

    samples: [(t, util, await_ms)]"""
    ml, mr, mt, mb = 30, 36, 20, 20
    pw, ph = width - ml - mr, height - mt - mb
    ts = [s[0] for s in samples]
    aws = [s[2] for s in samples if s[2] is not None]
    t0, t1 = (min(ts), max(ts)) if ts else (0.0, 1.0)
    span = (t1 - t0) or 1.0
    amax = _nice_max(max(aws) if aws else None)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart ts" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="%s">' % (width, height, width, height, _e(title)),
             '<text x="4" y="13" class="ct sm">%s</text>' % _e(truncate(title, 40))]
    for frac in (0.0, 0.5, 1.0):
        y = mt + ph - frac * ph
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>' % (ml, ml + pw, y, y))
        parts.append('<text x="%d" y="%.1f" class="tl util" text-anchor="end">%d</text>' % (ml - 3, y + 3, frac * 100))
        parts.append('<text x="%d" y="%.1f" class="tl await">%s</text>' % (ml + pw + 3, y + 3, _axis_label(frac * amax)))
    parts.append('<text x="%d" y="%d" class="tl">%ss</text><text x="%d" y="%d" class="tl" text-anchor="end">%ss</text>'
                 % (ml, height - 6, _axis_label(0), ml + pw, height - 6, _axis_label(span)))
    if not samples:
        parts.append('<text x="%.1f" y="%.1f" class="empty" text-anchor="middle">no iostat samples</text>'
                     % (ml + pw / 2, mt + ph / 2))

    def x(t):
        return ml + (t - t0) / span * pw
    util_pts = [(x(t), mt + ph - min(max(u, 0.0), 100.0) / 100.0 * ph) for t, u, _await in samples if u is not None]
    if util_pts:
        poly = ["%.1f,%d" % (util_pts[0][0], mt + ph)] + ["%.1f,%.1f" % p for p in util_pts] + \
               ["%.1f,%d" % (util_pts[-1][0], mt + ph)]
        parts.append('<polygon class="utilarea" points="%s"/>' % " ".join(poly))
    aw_pts = [(x(t), mt + ph - a / amax * ph) for t, _util, a in samples if a is not None]
    if len(aw_pts) > 1:
        parts.append('<polyline class="awline" points="%s"/>' % " ".join("%.1f,%.1f" % p for p in aw_pts))
    elif aw_pts:
        parts.append('<circle class="awdot" cx="%.1f" cy="%.1f" r="2.5"/>' % aw_pts[0])
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>' % (ml, mt, pw, ph))
    parts.append("</svg>")
    return Markup("".join(parts))


# --------------------------------------------------------------------------- HTML

def _family(w):
    label = " ".join(str(p) for p in (w.get("workload"), w.get("mode")) if p) or w["id"]
    return "%s @%s" % (label, w["target"]) if w.get("target") else label


def host_thread_charts(h):
    """IOPS and p99 by thread count for one host (one line per workload family)."""
    fams = {}
    threads = set()
    for w in h["workloads"]:
        if w["threads"] is None:
            continue
        threads.add(w["threads"])
        fams.setdefault(_family(w), []).append(w)
    xs = sorted(threads)
    iops = [(f, {w["threads"]: w["iops"] for w in ws}) for f, ws in fams.items()]
    p99 = [(f, {w["threads"]: w["p99_ms"] for w in ws}) for f, ws in fams.items()]
    return (svg_line_chart("%s: IOPS by threads" % h["host"], iops, xs, "IOPS"),
            svg_line_chart("%s: p99 latency by threads" % h["host"], p99, xs, "p99 ms"))


def fleet_distribution_charts(fleet, limit=None):
    """Per workload id and judged metric: strip chart of the fleet, outliers marked."""
    outl = {(o["host"], o["workload"], o.get("target"), o["metric"]) for o in fleet["outliers"]}
    data = {}
    for h in fleet["hosts"]:
        for w in h["workloads"]:
            for metric in fleetmod.JUDGED_METRICS:
                v = w.get(metric)
                if v is None:
                    continue
                data.setdefault((w["id"], metric), {}).setdefault(h["group"], []).append(
                    (h["host"], v, (h["host"], w["id"], w.get("target"), metric) in outl))
    charts = []
    for (wid, metric), groups in sorted(data.items()):
        rows = []
        for g in sorted(groups, key=fleetmod.natural_key):
            pts = groups[g]
            rows.append((g, pts, fleetmod.median([v for _host, v, _out in pts])))
        unit = "IOPS" if metric == "iops" else "p99 latency, ms"
        n_out = sum(1 for g in rows for p in g[1] if p[2])
        charts.append({"workload": wid, "metric": metric, "outliers": n_out,
                       "svg": svg_strip_chart("%s: %s" % (wid, unit), rows, unit)})
        if limit and len(charts) >= limit:
            break
    return charts


def html_table_body(rows):
    """The <tbody> rows of the fleet table, from table_rows() (built here, not in Jinja:
    16 000 rows through the template engine cost about a second)."""
    e = _e
    out = []
    for r in rows:
        span = r["_span"]
        badge = '<span class="badge %s">%s</span>' % (e(r["_verdict"]), e(r["_verdict"]))
        if span == 0:           # host without workloads, or one summary row for a host
            cells = "".join('<td class="n">%s</td>' % e(r[k])
                            for k in ("threads", "iops", "mibps", "p95", "p99", "op", "_util1", "await"))
            out.append('<tr class="first"><td><strong>%s</strong></td><td>%s</td><td>%s</td>%s<td>%s</td><td>%s</td></tr>'
                       % (e(r["_host"]), e(r["_group"]), e(r["workload"]), cells, badge, e(r["rule"])))
            continue
        flags = r["_flags"]
        head = ('<tr class="first"><td rowspan="%d"><strong>%s</strong></td><td rowspan="%d">%s</td>'
                % (span, e(r["_host"]), span, e(r["_group"]))) if span > 0 else "<tr>"
        out.append('%s<td>%s</td><td class="n">%s</td><td class="n%s">%s</td><td class="n">%s</td>'
                   '<td class="n">%s</td><td class="n%s">%s</td><td>%s</td><td class="n">%s</td><td class="n">%s</td>%s'
                   '<td>%s</td></tr>'
                   % (head, e(r["workload"]), r["threads"], " flag" if "iops" in flags else "", r["iops"],
                      r["mibps"], r["p95"], " flag" if "p99_ms" in flags else "", r["p99"], e(r["op"]), r["_util1"],
                      r["await"], ('<td rowspan="%d">%s</td>' % (span, badge)) if span > 0 else "", e(r["rule"])))
    return Markup("\n".join(out))


def html_context(fleet, records=None, detail_hosts=100, rows=None):
    """Everything report.html shows, from the fleet dict alone (``records`` is accepted for
    compatibility and not read: fleet.json carries the detail of the hosts drawn)."""
    # detail sections: failing hosts first, then hosts with outliers, then the rest, among
    # the hosts whose detail fleet.json carries
    ranked = sorted((h for h in fleet["hosts"] if h.get("detail") is not None), key=fleetmod.detail_rank)
    detail = []
    for h in ranked[:detail_hosts] if detail_hosts is not None else ranked:
        if not h["workloads"]:
            detail.append({"host": h, "iops_svg": None, "p99_svg": None, "iostat": [], "diagnostics": []})
            continue
        iops_svg, p99_svg = host_thread_charts(h)
        series = (h.get("detail") or {}).get("iostat") or {}
        iostat = []
        for w in h["workloads"]:
            key = fleetmod.row_key(w)
            samples = [tuple(x) for x in series.get(key) or ()]
            iostat.append({"id": key, "svg": svg_timeseries(key, samples), "n": len(samples)})
        detail.append({"host": h, "iops_svg": iops_svg, "p99_svg": p99_svg, "iostat": iostat,
                       "diagnostics": diagnostic_items(h)})
    detail.sort(key=lambda d: fleetmod.natural_key(d["host"]["host"]))
    drives, drives_omitted = drive_table(fleet)
    return {
        "fleet": fleet,
        "summary": summary_line(fleet),
        "table_body": html_table_body(table_rows(fleet) if rows is None else rows),
        "verdict_colours": VERDICT_COLOURS,
        "distribution": fleet_distribution_charts(fleet),
        "detail": detail,
        "detail_omitted": max(0, len(fleet["hosts"]) - len(detail)),
        "diagnostics_grid": html_diagnostics_grid(fleet),
        "diagnostic_titles": [diagmod.TITLES[n] for n in diagmod.NAMES],
        "strip_max_dots": STRIP_MAX_DOTS,
        "drive_body": html_drive_body(drives),
        "drives_shown": len(drives),
        "drives_omitted": drives_omitted,
    }


def render_html(fleet, records=None, detail_hosts=100, rows=None):
    return _render("html", "report.html.j2", **html_context(fleet, records, detail_hosts, rows))


# --------------------------------------------------------------------------- files

FILE_NAMES = {"json": "fleet.json", "junit": "junit.xml", "html": "report.html", "md": "report.md"}


def write_reports(fleet, run_dir, formats=FORMATS, records=None, detail_hosts=100, rows=None):
    """Write the requested file formats into run_dir; returns {format: path}.

    ``rows`` (table_rows(fleet)) may be passed to share the formatted table with the terminal."""
    written = {}
    if rows is None and ("html" in formats or "md" in formats):
        rows = table_rows(fleet)
    renderers = {
        "json": lambda: fleetmod.iter_json(fleet),     # written piece by piece
        "junit": lambda: render_junit(fleet),
        "html": lambda: render_html(fleet, records, detail_hosts, rows),
        "md": lambda: render_markdown(fleet, rows),
    }
    for fmt in formats:
        if fmt in renderers:
            path = os.path.join(run_dir, FILE_NAMES[fmt])
            with fleetmod.gc_paused():
                text = renderers[fmt]()
            fleetmod.write_atomic(path, text)
            written[fmt] = path
    if written:
        # the hosts to run again: ansible-playbook ... --limit @<run_dir>/not-passed.limit
        written["limit"] = fleetmod.write_atomic(os.path.join(run_dir, fleetmod.LIMIT_FILE),
                                                 fleetmod.limit_text(fleet))
    return written


def rerender(fleet_json, run_dir=None, formats=("junit", "html", "md")):
    """Render report formats again from a stored fleet.json alone (no host record is read);
    returns {format: path}.  The files equal those the callback wrote with the same fleet."""
    with open(fleet_json, encoding="utf-8") as f:
        fleet = json.load(f)
    if fleet.get("schema") != fleetmod.SCHEMA:
        raise ValueError("%s is not a fleetqual fleet.json" % fleet_json)
    run_dir = run_dir or os.path.dirname(os.path.abspath(fleet_json))
    detail = fleet["summary"].get("detail_hosts", 100)
    return write_reports(fleet, run_dir, formats, detail_hosts=detail)
