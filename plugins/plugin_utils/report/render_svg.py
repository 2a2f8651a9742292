# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inline SVG charts of report.html (no JavaScript, no external file): IOPS and p99 by
thread count (``svg_line_chart``), the fleet's distribution per group with its outliers
(``svg_strip_chart``) and a workload's iostat %util and await over time
(``svg_timeseries``)."""

from __future__ import annotations

import html
import math
import statistics

from markupsafe import Markup

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import truncate


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#d62728")

STRIP_MAX_DOTS = 200      # a group with more hosts is drawn as a box plot (outliers as dots)


def esc(text):
    """HTML/XML-escaped text (quotes too); None is empty."""
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


def svg_line_chart(title, series, x_values, y_label, width=420, height=230, x_label="threads"):
    """Lines over a categorical x axis (thread counts, or what ``x_label`` names).  series: [(label, {x: y})]."""
    ml, mr, mt, mb = 54, 12, 26, 58
    pw, ph = width - ml - mr, height - mt - mb
    ys = [y for _label, pts in series for y in pts.values() if y is not None]
    vmax = _nice_max(max(ys) if ys else None)
    xs = list(x_values)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" '
             'role="img" aria-label="%s">' % (width, height, width, height, esc(title)),
             '<text x="%d" y="16" class="ct">%s</text>' % (ml, esc(title))]
    for t in _ticks(vmax):
        y = mt + ph - t / vmax * ph
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>' % (ml, ml + pw, y, y))
        parts.append('<text x="%d" y="%.1f" class="tl" text-anchor="end">%s</text>' % (ml - 4, y + 3, _axis_label(t)))
    n = len(xs)

    def xpos(i):
        return ml + (pw * (i + 0.5) / n if n else pw / 2)
    for i, x in enumerate(xs):
        parts.append('<text x="%.1f" y="%d" class="tl" text-anchor="middle">%s</text>' % (xpos(i), mt + ph + 13, esc(x)))
    parts.append('<text x="%.1f" y="%d" class="al" text-anchor="middle">%s</text>' % (ml + pw / 2, mt + ph + 26, esc(x_label)))
    parts.append('<text x="12" y="%.1f" class="al" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>'
                 % (mt + ph / 2, mt + ph / 2, esc(y_label)))
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
                         % (lx, legend_y - 9, colour, lx + 13, legend_y, esc(truncate(label, 22))))
            lx += 20 + 6 * min(len(label), 22)
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" class="frame"/>' % (ml, mt, pw, ph))
    parts.append("</svg>")
    return Markup("".join(parts))


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
             'role="img" aria-label="%s">' % (width, height, width, height, esc(title)),
             '<text x="8" y="16" class="ct">%s</text>' % esc(title)]
    base_y = mt + row_h * max(1, len(rows))
    for t in _ticks(vmax, 5):
        x = ml + t / vmax * pw
        parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" class="grid"/>' % (x, x, mt, base_y))
        parts.append('<text x="%.1f" y="%d" class="tl" text-anchor="middle">%s</text>' % (x, base_y + 13, _axis_label(t)))
    parts.append('<text x="%.1f" y="%d" class="al" text-anchor="middle">%s</text>' % (ml + pw / 2, base_y + 26, esc(unit)))
    if not rows:
        parts.append('<text x="%.1f" y="%d" class="empty" text-anchor="middle">no data</text>' % (ml + pw / 2, mt + 16))
    for ri, (gname, pts, med) in enumerate(rows):
        cy = mt + row_h * ri + row_h / 2
        parts.append('<text x="%d" y="%.1f" class="tl" text-anchor="end">%s</text>'
                     % (ml - 6, cy + 3, esc(truncate(gname, 20))))
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="lane"/>' % (ml, ml + pw, cy, cy))
        if len(pts) > STRIP_MAX_DOTS:
            # a large group: its spread as a box (p25-p75) with whiskers (p5-p95) instead of
            # a dot per host; the outliers are still drawn one by one below
            q = statistics.quantiles([v for _host, v, _out in pts], n=20)
            x5, x25, x75, x95 = (ml + q[i] / vmax * pw for i in (0, 4, 14, 18))
            parts.append('<g class="box"><title>%s: %d hosts, p5 %s, p25 %s, p75 %s, p95 %s</title>'
                         '<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><rect x="%.1f" y="%.1f" width="%.1f" '
                         'height="%.1f"/></g>' % (esc(gname), len(pts), _axis_label(q[0]), _axis_label(q[4]),
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
                              % (x, cy + jitter, esc(host), _axis_label(v)))
            parts.append('<g class="dot">%s</g>' % "".join(normal))
        if med is not None:
            mx = ml + med / vmax * pw
            parts.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="median"/>' % (mx, mx, cy - row_h / 2 + 3, cy + row_h / 2 - 3))
        # outliers on top, labelled; close labels merge into "host +N" so they never overlap
        outs = sorted(((ml + v / vmax * pw, host, v) for host, v, out in pts if out), key=lambda o: o[0])
        labels = []          # [x, text, extra]
        for x, host, v in outs:
            parts.append('<circle cx="%.1f" cy="%.1f" r="5" class="outlier"><title>%s: %s (outlier)</title></circle>'
                         % (x, cy, esc(host), _axis_label(v)))
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
                         % (lx, cy - 6, anchor, esc(label)))
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
             'role="img" aria-label="%s">' % (width, height, width, height, esc(title)),
             '<text x="4" y="13" class="ct sm">%s</text>' % esc(truncate(title, 40))]
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
