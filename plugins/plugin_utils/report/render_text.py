# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report for the terminal (and AWX's and CI logs): the fleet table and the
drive table at most ``width`` columns, and the short lines under them (reasons, outliers,
regressions, notes, diagnostics).

``max_hosts`` (the report option ``table_max_hosts``): when set and the fleet has
more hosts, the terminal shows the hosts that did not pass (every row of each), one line
counting the PASS hosts left out, only the flagged drives, the diagnostics of the hosts that
did not pass and one line for the outlier groups (instead of a note per group too small to
judge): a passing run prints as many lines for 1,000 hosts as for one. None (the default)
lists every host."""

from __future__ import annotations

import textwrap

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.arrays import array_text_lines
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import truncate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.drift import text_lines as history_lines
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import JUDGED_METRICS, MIN_GROUP_SIZE
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import (
    DRIVE_COLUMNS,
    columns,
    diagnostic_items,
    drive_table,
    table_rows,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import mismatch_lines

# the first verify mismatches listed under a failing host's reason in the terminal
MISMATCH_LINES = 3


def _fit_widths(cols, rows, width):
    """Natural column widths capped per column; the last (rule) column takes what is left,
    and when that is too little the workload (second), then the host (first) column give way.

    Ours rather than a table library's: the rule is specific (which column yields first,
    the reasons column's floor, truncation with an ellipsis at a hard width for AWX's and
    CI logs), and tabulate/rich would still need it written around them."""
    widths = []
    for c in cols:
        lo, hi = c.width
        natural = max([len(c.header)] + [len(r[c.key]) for r in rows]) if rows else len(c.header)
        widths.append(max(lo, min(hi, natural)))
    budget = width - (len(cols) - 1)
    rule_min = 14
    fixed = sum(widths[:-1])
    for idx, floor in ((1, 14), (0, 10), (1, cols[1].width[0]), (0, cols[0].width[0])):
        while fixed + rule_min > budget and widths[idx] > floor:
            widths[idx] -= 1
            fixed -= 1
    widths[-1] = max(cols[-1].width[0], min(widths[-1], budget - fixed))
    return widths


def bounded(fleet, max_hosts):
    """Whether the terminal lists only the hosts that did not pass: ``max_hosts`` (the option
    ``table_max_hosts``) is set and the fleet has more hosts than that (0: always)."""
    return max_hosts is not None and len(fleet["hosts"]) > int(max_hosts)


def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def render_table(fleet, width=110, rows=None, max_hosts=None):
    """The fleet table for the terminal, every line at most ``width`` columns; past
    ``max_hosts`` hosts the rows of the hosts that did not pass and a line counting the others."""
    rows = table_rows(fleet) if rows is None else rows
    left_out = 0
    if bounded(fleet, max_hosts):
        left_out = sum(1 for h in fleet["hosts"] if h["verdict"] == "PASS")
        rows = [r for r in rows if r["_verdict"] != "PASS"]
    cols = columns("table")
    widths = _fit_widths(cols, rows, width)
    out = []

    def line(values):
        cells = []
        for c, w, val in zip(cols, widths, values):
            val = truncate(val, w)
            cells.append(val.ljust(w) if c.align == "<" else val.rjust(w))
        return " ".join(cells).rstrip()[:width]

    out.append(line([c.header for c in cols]))
    out.append(line(["-" * w for w in widths]))
    for r in rows:
        out.append(line([r[c.key] for c in cols]))
    if left_out:
        out.append(truncate("... %s not listed (table_max_hosts %d: only the hosts that did not pass)"
                            % (_plural(left_out, "PASS host"), int(max_hosts)), width))
    elif not rows:
        out.append("(no hosts)")
    return "\n".join(out)


def render_drive_table(fleet, width=110, limit=50, max_hosts=None):
    """The drive table for the terminal (host, device, media, model, serial, firmware, health,
    verdict, reasons), at most ``width`` columns; beyond ``limit`` drives, or past
    ``max_hosts`` hosts, only the flagged."""
    rows, omitted = drive_table(fleet, 0 if bounded(fleet, max_hosts) else limit)
    if not rows and not omitted:
        return ""
    widths = []
    for header, key, lo, hi in DRIVE_COLUMNS:
        natural = max([len(header)] + [len(r[key]) for r in rows])
        widths.append(max(lo, min(hi, natural)))
    budget = width - (len(DRIVE_COLUMNS) - 1)
    keys = [c[1] for c in DRIVE_COLUMNS]
    for idx in (keys.index("model"), keys.index("host"), keys.index("serial")):   # give way to the reasons
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


def detail_lines(fleet, width=110, limit=20, max_hosts=None):
    """Short lines under the table: reasons of non-passing hosts, outliers, regressions, notes,
    diagnostics (past ``max_hosts`` hosts those of the hosts that did not pass), arrays."""
    lines = []
    bad = [h for h in fleet["hosts"] if h["verdict"] != "PASS"]
    for h in bad[:limit]:
        reason = h["reasons"][0] if h["reasons"] else "(no reason recorded)"
        lines.append(truncate("%s %s: %s" % (h["verdict"], h["host"], reason), width))
        # the first blocks read back wrong (docs/integrity.md)
        lines.extend(truncate("  mismatch %s" % m, width) for m in mismatch_lines(h, MISMATCH_LINES))
    if len(bad) > limit:
        lines.append("... and %d more non-passing hosts (see fleet.json)" % (len(bad) - limit))
    mode = fleet["options"]["outliers"]
    only_bad = bounded(fleet, max_hosts)
    passed = {h["host"] for h in fleet["hosts"] if h["verdict"] == "PASS"} if only_bad else set()
    per_host = {}
    for o in fleet["outliers"]:
        per_host.setdefault(o["host"], []).append(o)
    quiet = {"outliers": len(set(per_host) & passed)}       # PASS hosts' warn lines, counted past max_hosts
    per_host = {host: items for host, items in per_host.items() if host not in passed}
    for host, items in list(per_host.items())[:limit]:
        parts = []
        for metric in JUDGED_METRICS:
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
        regs = [r for r in base["regressions"] if r["host"] not in passed]
        quiet["regressions"] = len({r["host"] for r in base["regressions"]} & passed)
        lines.append(truncate("baseline %s: %d workload(s) compared, %d regression(s) (%s)"
                              % (base.get("run_id") or base.get("path"), base["compared_workloads"],
                                 len(base["regressions"]),
                                 fleet["options"]["regressions"]), width))
        for r in regs[:limit]:
            lines.append(truncate("regression %s: %s" % (r["host"], r["text"]), width))
    found = [line for h in fleet["hosts"] if h["host"] not in passed for line in history_lines(h) if line.startswith("[")]
    quiet["history findings"] = sum(1 for h in fleet["hosts"] if h["host"] in passed
                                    and any(line.startswith("[") for line in history_lines(h)))
    lines.extend(truncate("history %s" % line, width) for line in found[:limit])    # each host against its own history (docs/compliance.md)
    if len(found) > limit:
        lines.append("... and %d more history findings (see fleet.json)" % (len(found) - limit))
    notes = fleet["notes"]
    if only_bad:
        # the PASS hosts' warnings (outliers, regressions, history findings in warn mode) grow
        # with the fleet: one line counting them, whatever the fleet's size
        lines.append(truncate("passing hosts with warnings: %s (see report.md, fleet.json)"
                              % ", ".join("%d with %s" % (n, what) for what, n in quiet.items()), width))
        # a group too small to judge is a note of its own in a fleet of 1 or 2 hosts: one
        # line for every group, whatever the fleet's size
        groups = fleet.get("groups") or []
        small = {"group '%s': %s" % (g["name"], g["note"]) for g in groups if g.get("note")}
        notes = [n for n in notes if n not in small]
        if groups:
            lines.append(truncate("outliers (%s): %d of %s judged (a group needs %d hosts with results; see fleet.json groups)"
                                  % (mode, sum(1 for g in groups if g.get("judged")), _plural(len(groups), "group"),
                                     MIN_GROUP_SIZE), width))
    for n in notes[:limit]:
        lines.append(truncate("note: %s" % n, width))
    lines.extend(diagnostic_lines(fleet, width, limit, max_hosts))
    lines.extend(array_text_lines(fleet, width))     # array mode
    return lines


DIAG_MARK = {"pass": "ok", "warn": "warn", "fail": "FAIL", "unproven": "unproven", "info": "info", "n/a": "n/a"}

_DIAG_RANK = {"fail": 0, "warn": 1, "unproven": 2, "info": 3, "pass": 4, "n/a": 5}


def diagnostic_lines(fleet, width=110, limit=20, max_hosts=None):
    """Under the table: each host's diagnostic sentences (n/a left out), wrapped to ``width``.
    Hosts with a failed or warning diagnostic come first; at most ``limit`` hosts. Past
    ``max_hosts`` hosts only those of the hosts that did not pass, the PASS hosts counted."""
    hosts = []
    passed = flagged = 0
    only_bad = bounded(fleet, max_hosts)
    for h in fleet["hosts"]:
        items = diagnostic_items(h)
        if items and only_bad and h["verdict"] == "PASS":
            passed += 1
            flagged += any(i["status"] in ("warn", "fail") for i in items)
        elif items:
            hosts.append((min(_DIAG_RANK.get(i["status"], 5) for i in items), h["host"], items))
    if not hosts and not passed:
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
    if passed:
        lines.append(truncate("... diagnostics of %s (%d with a warning or failure) in report.html, report.md and fleet.json"
                              % (_plural(passed, "PASS host"), flagged), width))
    return lines
