# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html (self-contained: inline SVG, no script): the fleet table, the drive table,
the diagnostics grid, the fleet's distributions and the hosts drawn in detail, from the
fleet dict alone (templates/report.html.j2)."""

from __future__ import annotations

from markupsafe import Markup

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet_hosts import detail_rank
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet_rows import row_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.outliers import JUDGED_METRICS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.plain import natural_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.render_svg import STRIP_MAX_DOTS, esc, svg_line_chart, svg_strip_chart, svg_timeseries
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report_rows import diagnostic_items, drive_table, summary_line, table_rows
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import median
from ansible_collections.fleetqual.storage.plugins.plugin_utils.templating import render_template


VERDICT_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#9a6700", "UNREACHABLE": "#6e7781"}


def html_drive_body(rows):
    """<tbody> rows of the drive table."""
    e = esc
    return Markup("\n".join(
        '<tr%s><td>%s</td><td>%s</td><td%s>%s</td><td>%s</td><td%s>%s</td><td%s>%s</td><td><span class="badge %s">%s'
        '</span></td><td>%s</td></tr>' % (
            ' class="flagged"' if r["_flagged"] else "", e(r["host"]), e(r["drive"]),
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
    e = esc
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
    return render_template("html", "report.html.j2", **html_context(fleet, records, detail_hosts, rows))
