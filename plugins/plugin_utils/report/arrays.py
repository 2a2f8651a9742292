# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arrays of the fleet report (docs/arrays.md) in every format, from
fleet.json's ``arrays`` alone (plugin_utils/array/mode.py builds them): terminal lines,
JUnit cases (one suite per array, a case per step), HTML (the two curves as SVG and a
step table), Markdown and Prometheus series."""

from __future__ import annotations

import re

from markupsafe import Markup

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import DASH, truncate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_ms, cell_num, cell_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_svg import esc, svg_line_chart
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.templating import md_cell

# header, key, align (terminal, Markdown)
ARRAY_COLUMNS = (("step", "step", ">"), ("mode", "mode", "<"), ("init", "initiators", ">"), ("thr", "threads", ">"),
                 ("IOPS", "iops", ">"), ("dev IOPS", "device_iops", ">"), ("MiB/s", "mibps", ">"), ("p50ms", "p50", ">"), ("p99ms", "p99", ">"),
                 ("outst", "outstanding", ">"), ("jain", "jain", ">"), ("min%", "min_share", ">"),
                 ("spread ms", "spread", ">"), ("state", "state", "<"))


def arrays_of(fleet):
    return [a for a in (fleet or {}).get("arrays") or [] if isinstance(a, dict)]


def _state(s, array):
    if not s.get("complete"):
        missing = ", ".join(s.get("missing_hosts") or []) or s.get("problem") or "?"
        return "incomplete: %s" % missing
    failed = [c for c in array.get("checks") or [] if c.get("step") == s.get("index") and c.get("passed") is False]
    if failed:
        return "FAIL %s" % failed[0].get("rule")
    return "outlier" if s.get("outlier") else "ok"


def step_rows(array):
    """One formatted row per step of an array (table cells: '-' for missing)."""
    rows = []
    for s in array.get("steps") or []:
        agg, fair, win = s.get("aggregate") or {}, s.get("fairness") or {}, s.get("window") or {}
        rows.append({"step": str(s.get("index")), "mode": str(s.get("mode")), "initiators": str(s.get("initiators")),
                     "threads": str(s.get("threads")), "iops": cell_num(agg.get("iops")),
                     "device_iops": cell_num(agg.get("device_iops")),
                     "mibps": cell_num(agg.get("mib_per_sec")), "p50": cell_ms(agg.get("p50_ms")),
                     "p99": cell_ms(agg.get("p99_ms")), "outstanding": cell_num(agg.get("outstanding")),
                     "jain": DASH if fair.get("jain") is None else "%.3f" % fair["jain"],
                     "min_share": cell_pct(fair.get("min_share_pct"), 0),
                     "spread": cell_ms(win.get("start_spread_ms")), "state": _state(s, array)})
    return rows


def curve_lines(array):
    """The knee and the latency-bounded maximum of each mode, as sentences."""
    out = []
    for mode, k in (array.get("knee") or {}).items():
        b = (array.get("bounded_max") or {}).get(mode) or {}
        text = "%s: knee " % mode
        text += ("step %s (%s x %s, %s outstanding) %s IOPS of best %s" % (
            k["index"], k["initiators"], k["threads"], cell_num(k["outstanding"]), cell_num(k["iops"]),
            cell_num(k["best_iops"]))) if k else "none (no complete step)"
        if b.get("bound_ms") is not None:
            text += "; bounded max (p99 <= %s ms) %s" % (cell_ms(b["bound_ms"]), (
                "step %s, %s IOPS at p99 %s ms" % (b["index"], cell_num(b["iops"]), cell_ms(b["p99_ms"]))
                if b.get("iops") is not None else "none: no trusted step under the bound"))
        out.append(text)
    return out


def measured_line(array, limit=3):
    """What the array's steps measured, once: the target and the device under it on each
    host (``lun dm-0 (WWID ...; paths sda, sdb)``), from the steps' ``measured``."""
    seen = list(dict.fromkeys(m for s in array.get("steps") or [] for m in s.get("measured") or []))
    if not seen:
        return "measured: unknown (no step says which device)"
    more = " and %d more" % (len(seen) - limit) if len(seen) > limit else ""
    return "measured: %s%s" % ("; ".join(seen[:limit]), more)


def headline(array):
    spread = (array.get("start_spread_ms") or {}).get("median")
    return ("array %s: %s, %d hosts, %s/%s steps complete, window start spread median %s ms"
            % (array.get("name"), array.get("verdict"), len(array.get("hosts") or []), array.get("steps_complete"),
               array.get("steps_total"), cell_ms(spread)))


def array_text_lines(fleet, width=110, limit=40):
    """The terminal's array section: per array a headline, the step table (up to ``limit``
    steps), the knee and bounded maximum per mode, the reasons and notes."""
    out = []
    for a in arrays_of(fleet):
        out.append(truncate(headline(a), width))
        out.append(truncate("  " + measured_line(a), width))
        rows = step_rows(a)
        shown = rows[:limit]
        widths = [max([len(h)] + [len(r[k]) for r in shown]) for h, k, _al in ARRAY_COLUMNS]
        fmt_row = [("{:%s%d}" % (al, w)) for (_h, _k, al), w in zip(ARRAY_COLUMNS, widths)]
        out.append(truncate("  " + " ".join(f.format(h) for f, (h, _k, _al) in zip(fmt_row, ARRAY_COLUMNS)), width).rstrip())
        for r in shown:
            out.append(truncate("  " + " ".join(f.format(r[k]) for f, (_h, k, _al) in zip(fmt_row, ARRAY_COLUMNS)),
                                width).rstrip())
        if len(rows) > limit:
            out.append("  ... %d more steps in fleet.json" % (len(rows) - limit))
        out.extend(truncate("  " + line, width) for line in curve_lines(a))
        if a.get("failover"):
            out.append(truncate("  " + _failover.failover_line(a["failover"]), width))
        out.extend(truncate("  reason: %s" % r, width) for r in a.get("reasons") or [])
        out.extend(truncate("  note: %s" % n, width) for n in a.get("notes") or [])
    return out


# --------------------------------------------------------------------------- JUnit

def _case_name(array, s):
    return "%s step %s %s %sx%s" % (array["name"], s.get("index"), s.get("mode"), s.get("initiators"), s.get("threads"))


def array_junit_cases(fleet):
    """``[(group, [case])]`` in render_junit.junit_cases' shape: one group (suite)
    ``array.<name>`` per array, a case per step (failure: a rule failed on it; error: a rule
    needs it and it is incomplete) and a case for the array's verdict."""
    out = []
    for a in arrays_of(fleet):
        cls = "fleetqual.array." + re.sub(r"[^A-Za-z0-9_.-]", "_", str(a["name"]))
        cases = []
        for s, row in zip(a.get("steps") or [], step_rows(a)):
            mine = [c for c in a.get("checks") or [] if c.get("step") == s.get("index")]
            errors = [c["text"] for c in mine if c.get("passed") is None]
            fails = [c["text"] for c in mine if c.get("passed") is False]
            kind = "error" if errors else "failure" if fails else None
            first_fail = next((c["rule"] for c in mine if c.get("passed") is False), "")
            out_text = ["%s: %s" % (h, row[k]) for h, k, _al in ARRAY_COLUMNS[4:]]
            if not s.get("complete"):
                out_text.extend("missing %s: %s" % (h, why) for h, why in (s.get("missing") or {}).items())
            overlap = (s.get("window") or {}).get("overlap_s")
            cases.append({"name": _case_name(a, s), "classname": cls, "time": float(overlap or 0.0),
                          "kind": kind, "message": (errors + fails)[0] if kind else "",
                          "type": "incomplete step" if errors else first_fail,
                          "text": "\n".join(errors + fails), "out": "\n".join(out_text)})
        verdict = a.get("verdict")
        kind = "failure" if verdict == "FAIL" else "error" if verdict != "PASS" else None
        cases.append({"name": "%s verdict" % a["name"], "classname": cls, "time": 0.0, "kind": kind,
                      "message": (a.get("reasons") or [verdict])[0] if kind else "", "type": str(verdict),
                      "text": "\n".join(list(a.get("reasons") or []) + ["note: %s" % n for n in a.get("notes") or []]),
                      "out": "\n".join([headline(a), measured_line(a)] + curve_lines(a))})
        out.append(("array.%s" % a["name"], cases))
    return out


# --------------------------------------------------------------------------- HTML and Markdown

def _axis(curves, key):
    """The categorical x axis of a curve: the points' ``key`` values as table cells, in
    numeric order, each once."""
    vals = sorted(p[key] for pts in curves.values() for p in pts if p.get(key) is not None)
    return list(dict.fromkeys(cell_num(v) for v in vals))


def curve_charts(array):
    """The array's two curves as inline SVG: aggregate IOPS against outstanding I/O, and p99
    against aggregate IOPS (the hockey stick), one line per mode; outliers are drawn too
    (the step table flags them)."""
    curves = array.get("curves") or {}
    xs_out = _axis(curves, "outstanding")
    iops = [(m, {cell_num(p["outstanding"]): p["iops"] for p in pts if p["outstanding"] is not None})
            for m, pts in curves.items()]
    xs_iops = _axis(curves, "iops")
    p99 = [(m, {cell_num(p["iops"]): p["p99_ms"] for p in pts if p["iops"] is not None}) for m, pts in curves.items()]
    return (svg_line_chart("%s: aggregate IOPS by outstanding I/O" % array["name"], iops, xs_out, "IOPS",
                           x_label="outstanding I/O (IOPS x mean latency)"),
            svg_line_chart("%s: p99 by aggregate IOPS" % array["name"], p99, xs_iops, "p99 ms", x_label="aggregate IOPS"))


def html_section(fleet):
    """The HTML of every array: headline, the two curves, the step table, reasons and notes."""
    parts = []
    for a in arrays_of(fleet):
        iops_svg, p99_svg = curve_charts(a)
        parts.append('<h3 id="array-%s"><span class="badge %s">%s</span> array %s</h3>'
                     % (esc(a["name"]), esc(a["verdict"]), esc(a["verdict"]), esc(a["name"])))
        parts.append('<p class="legend">%s</p>' % esc(headline(a)))
        parts.append('<p class="legend">%s</p>' % esc(measured_line(a)))
        parts.append('<div class="grid"><div class="panel">%s</div><div class="panel">%s</div></div>' % (iops_svg, p99_svg))
        parts.append("<ul>%s</ul>" % "".join("<li>%s</li>" % esc(line) for line in curve_lines(a)))
        head = "".join("<th>%s</th>" % esc(h) for h, _k, _al in ARRAY_COLUMNS)
        body = []
        for s, r in zip(a.get("steps") or [], step_rows(a)):
            flagged = not s.get("complete") or s.get("outlier") or r["state"].startswith("FAIL")
            body.append("<tr>%s</tr>" % "".join(
                '<td%s>%s</td>' % (' class="n"' if al == ">" else ' class="flag"' if k == "state" and flagged else "",
                                   esc(r[k])) for _h, k, al in ARRAY_COLUMNS))
        parts.append('<table class="array-steps"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>'
                     % (head, "\n".join(body)))
        if a.get("reasons") or a.get("notes"):
            parts.append("<ul>%s%s</ul>" % ("".join("<li>%s</li>" % esc(r) for r in a.get("reasons") or []),
                                            "".join('<li class="muted">note: %s</li>' % esc(n) for n in a.get("notes") or [])))
    return Markup("\n".join(parts))


def markdown(fleet):
    """The Markdown of every array: headline, step table, knee and bounded maximum, reasons, notes."""
    out = []
    for a in arrays_of(fleet):
        out.append("\n### array %s — %s\n" % (md_cell(a["name"]), md_cell(a["verdict"])))
        out.append(md_cell(headline(a)) + "\n")
        out.append(md_cell(measured_line(a)) + "\n")
        out.append("| " + " | ".join(h for h, _k, _al in ARRAY_COLUMNS) + " |")
        out.append("|" + "|".join("---:" if al == ">" else "---" for _h, _k, al in ARRAY_COLUMNS) + "|")
        out.extend("| " + " | ".join(md_cell(r[k]) for _h, k, _al in ARRAY_COLUMNS) + " |" for r in step_rows(a))
        out.append("")
        out.extend("- %s" % md_cell(line) for line in curve_lines(a))
        out.extend("- **%s**" % md_cell(r) for r in a.get("reasons") or [])
        out.extend("- note: %s" % md_cell(n) for n in a.get("notes") or [])
    return "\n".join(out)


# --------------------------------------------------------------------------- Prometheus

def add_array_prometheus(reg, fleet):
    """Add the arrays' series to a prometheus_client registry: ``fleetqual_array_pass``,
    aggregate IOPS and p50/p99 (seconds) per step, and whether each step completed."""
    from prometheus_client import Gauge  # pylint: disable=import-outside-toplevel

    arrays = arrays_of(fleet)
    if not arrays:
        return reg
    labels = ["array", "step", "mode", "initiators", "threads"]
    passed = Gauge("fleetqual_array_pass", "1 when the array passed its rules in the last run, else 0.", ["array"],
                   registry=reg)
    iops = Gauge("fleetqual_array_iops", "Aggregate IOPS of an array's step over the hosts' common window.", labels,
                 registry=reg)
    lat = Gauge("fleetqual_array_latency_seconds",
                "Latency percentile of an array's step, merged exactly from its hosts' histograms.",
                labels + ["percentile"], registry=reg)
    complete = Gauge("fleetqual_array_step_complete", "1 when every active host of the step was measured, else 0.",
                     labels, registry=reg)
    for a in arrays:
        passed.labels(array=a["name"]).set(1 if a.get("verdict") == "PASS" else 0)
        for s in a.get("steps") or []:
            lv = dict(array=a["name"], step=str(s.get("index")), mode=str(s.get("mode")),
                      initiators=str(s.get("initiators")), threads=str(s.get("threads")))
            complete.labels(**lv).set(1 if s.get("complete") else 0)
            agg = s.get("aggregate") or {}
            if agg.get("iops") is not None:
                iops.labels(**lv).set(agg["iops"])
            for pct in ("p50", "p99"):
                v = agg.get("%s_ms" % pct)
                if v is not None:
                    lat.labels(percentile=pct, **lv).set(v / 1000.0)
    return reg
