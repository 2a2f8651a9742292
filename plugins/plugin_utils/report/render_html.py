# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html (self-contained: inline SVG, no script): the fleet table, the drive table,
the diagnostics grid, the fleet's distributions and the hosts drawn in detail, from the
fleet dict alone (templates/report.html.j2)."""

from __future__ import annotations

from markupsafe import Markup

from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import model as diagmod_model
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.arrays import html_section as array_html_section
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.hosts import detail_rank
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import row_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import JUDGED_METRICS, METRIC_LABELS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_svg import (
    STRIP_MAX_DOTS,
    esc,
    svg_line_chart,
    svg_strip_chart,
    svg_timeseries,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import (
    columns,
    diagnostic_items,
    drive_table,
    summary_line,
    table_rows,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import DURABILITY_COLUMNS, durability_table, mismatch_lines
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import median
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.templating import render_template


VERDICT_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#9a6700", "UNREACHABLE": "#6e7781",
                   "INCONCLUSIVE": "#8250df"}


def html_drive_body(rows):
    """<tbody> rows of the drive table."""
    e = esc
    return Markup("\n".join(
        '<tr%s><td>%s</td><td>%s</td><td>%s</td><td%s>%s</td><td>%s</td><td%s>%s</td><td%s>%s</td><td><span class="badge '
        '%s">%s</span></td><td>%s</td></tr>' % (
            ' class="flagged"' if r["_flagged"] else "", e(r["host"]), e(r["drive"]), e(r["media"]),
            ' class="flag"' if "model" in r["_odd"] else "", e(r["model"]), e(r["serial"]),
            ' class="flag"' if "firmware" in r["_odd"] else "", e(r["firmware"]),
            ' class="flag"' if r["health"] == "FAILED" else "", e(r["health"]),
            e({"n/a": "NA"}.get(r["verdict"], r["verdict"])), e(r["verdict"]), e(r["reasons"])) for r in rows))


def html_diagnostics_grid(fleet):
    """<tbody> of the fleet diagnostics table: one row per host with diagnostics, one cell per
    diagnostic (its conclusion, coloured by status, the sentence as tooltip)."""
    e = esc
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
            for metric in JUDGED_METRICS:
                v = w.get(metric)
                if v is None:
                    continue
                data.setdefault((w["id"], metric), {}).setdefault(h["group"], []).append(
                    (h["host"], v, (h["host"], w["id"], w.get("target"), metric) in outl))
    charts = []
    for (wid, metric), groups in sorted(data.items()):
        rows = []
        for g in sorted(groups, key=natural_key):
            pts = groups[g]
            rows.append((g, pts, median([v for _host, v, _out in pts])))
        unit = METRIC_LABELS[metric]
        n_out = sum(1 for g in rows for p in g[1] if p[2])
        charts.append({"workload": wid, "metric": metric, "outliers": n_out,
                       "svg": svg_strip_chart("%s: %s" % (wid, unit), rows, unit)})
        if limit and len(charts) >= limit:
            break
    return charts


def html_table_head(cols=None):
    """The heading row of the fleet table (report_rows.COLUMNS shown in report.html)."""
    cols = columns("html") if cols is None else cols
    return Markup("<tr>%s</tr>" % "".join(
        "<th%s%s>%s</th>" % (' class="n"' if c.align == ">" else "", ' title="%s"' % esc(c.title) if c.title else "",
                             esc(c.html)) for c in cols))


def _badge(verdict):
    return '<span class="badge %s">%s</span>' % (esc(verdict), esc(verdict))


# report.html's own way to show a cell of these columns (the others: the row's text)
HTML_CELLS = {"host": lambda r: "<strong>%s</strong>" % esc(r["_host"]), "verdict": lambda r: _badge(r["_verdict"])}


def html_table_body(rows, cols=None):
    """The <tbody> rows of the fleet table, from table_rows() (built here, not in Jinja:
    16 000 rows through the template engine cost about a second). A host's first row
    spans its per-host cells (host, group, verdict) over its workload rows; a host shown
    in one row (no workloads, or a summary) spans nothing and flags nothing."""
    cols = columns("html") if cols is None else cols
    plan = [(c.html_key, "n" if c.align == ">" else "", c.flag, c.per_host, HTML_CELLS.get(c.key)) for c in cols]
    out = []
    for r in rows:
        span = r["_span"]
        flags = r["_flags"] if span else ()
        cells = []
        for key, cls, flag, per_host, show in plan:
            if per_host and span < 0:
                continue
            if flag and flag in flags:
                cls = (cls + " flag").strip()
            cells.append("<td%s%s>%s</td>" % (' class="%s"' % cls if cls else "",
                                              ' rowspan="%d"' % span if per_host and span > 0 else "",
                                              show(r) if show else esc(r[key])))
        out.append('%s%s</tr>' % ('<tr class="first">' if span >= 0 else "<tr>", "".join(cells)))
    return Markup("\n".join(out))


def html_context(fleet, records=None, detail_hosts=100, rows=None):
    """Everything report.html shows, from the fleet dict alone (``records`` is accepted for
    compatibility and not read: fleet.json carries the detail of the hosts drawn)."""
    # detail sections: failing hosts first, then hosts with outliers, then the rest, among
    # the hosts whose detail fleet.json carries
    ranked = sorted((h for h in fleet["hosts"] if h.get("detail") is not None), key=detail_rank)
    detail = []
    for h in ranked[:detail_hosts] if detail_hosts is not None else ranked:
        if not h["workloads"]:
            detail.append({"host": h, "iops_svg": None, "p99_svg": None, "iostat": [], "diagnostics": []})
            continue
        iops_svg, p99_svg = host_thread_charts(h)
        series = (h.get("detail") or {}).get("iostat") or {}
        iostat = []
        for w in h["workloads"]:
            key = row_key(w)
            samples = [tuple(x) for x in series.get(key) or ()]
            iostat.append({"id": key, "svg": svg_timeseries(key, samples), "n": len(samples)})
        detail.append({"host": h, "iops_svg": iops_svg, "p99_svg": p99_svg, "iostat": iostat,
                       "diagnostics": diagnostic_items(h)})
    detail.sort(key=lambda d: natural_key(d["host"]["host"]))
    drives, drives_omitted = drive_table(fleet)
    return {
        "fleet": fleet,
        "summary": summary_line(fleet),
        "table_head": html_table_head(),
        "table_body": html_table_body(table_rows(fleet) if rows is None else rows),
        "verdict_colours": VERDICT_COLOURS,
        "distribution": fleet_distribution_charts(fleet),
        "detail": detail,
        "detail_omitted": max(0, len(fleet["hosts"]) - len(detail)),
        "diagnostics_grid": html_diagnostics_grid(fleet),
        "diagnostic_titles": [diagmod_model.TITLES[n] for n in diagmod.NAMES],
        "strip_max_dots": STRIP_MAX_DOTS,
        "drive_body": html_drive_body(drives),
        "drives_shown": len(drives),
        "drives_omitted": drives_omitted,
        "arrays_html": array_html_section(fleet),      # array mode
        # the power-cut test (docs/durability.md)
        "power_head": [c[0] for c in DURABILITY_COLUMNS],
        "power_rows": [[r[c[1]] for c in DURABILITY_COLUMNS] for r in durability_table(fleet)],
        # the first blocks read back wrong of each host that did not pass (docs/integrity.md)
        "mismatches": {h["host"]: mismatch_lines(h) for h in fleet["hosts"] if h["verdict"] != "PASS"},
    }


def render_html(fleet, records=None, detail_hosts=100, rows=None):
    return render_template("html", "report.html.j2", **html_context(fleet, records, detail_hosts, rows))
