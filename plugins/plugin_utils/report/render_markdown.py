# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.md: the fleet table, drives, reasons, diagnostics, outliers and baseline as
GitHub-flavoured Markdown (templates/report.md.j2), from the fleet dict alone."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.arrays import markdown as array_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import (
    DRIVE_COLUMNS,
    DURABILITY_COLUMNS,
    columns,
    diagnostic_items,
    drive_table,
    durability_table,
    mismatch_lines,
    summary_line,
    table_rows,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.templating import md_cell, render_template


def table_head_md(cols):
    """The heading and alignment lines of a Markdown table of ``cols``."""
    return "| %s |\n|%s|" % (" | ".join(c.md for c in cols), "|".join("---:" if c.align == ">" else "---" for c in cols))


def _md_table(cols, rows):
    """(head with its separator line, body) of a Markdown table; ``cols``: (header, key, ...)."""
    head = "| %s |\n|%s|" % (" | ".join(c[0] for c in cols), "|".join("---" for _c in cols))
    return head, "\n".join("| " + " | ".join(md_cell(r[c[1]]) for c in cols) + " |" for r in rows)


def render_markdown(fleet, rows=None):
    rows = table_rows(fleet) if rows is None else rows
    cols = columns("md")
    table_md = "\n".join("| " + " | ".join(md_cell(r[c.key]) for c in cols) + " |" for r in rows)
    diag = []
    for h in fleet["hosts"]:
        if h.get("detail") is None:       # the hosts drawn in detail; the others' are in fleet.json
            continue
        items = diagnostic_items(h)
        if items:
            diag.append("\n### %s\n" % md_cell(h["host"]))
            diag.extend("- **%s** (%s): %s" % (i["title"], i["status"], md_cell(i["sentence"])) for i in items)
    drives, drives_omitted = drive_table(fleet)
    drives_head_md, drives_md = _md_table(DRIVE_COLUMNS, drives)
    power = durability_table(fleet)
    power_md = "\n".join(_md_table(DURABILITY_COLUMNS, power)) if power else ""
    return render_template("md", "report.md.j2", fleet=fleet, summary=summary_line(fleet), rows=rows,
                           table_head_md=table_head_md(cols), table_md=table_md, diagnostics_md="\n".join(diag),
                           drives_head_md=drives_head_md, drives_md=drives_md, drives_omitted=drives_omitted,
                           # the first blocks read back wrong of each host that did not pass (docs/integrity.md)
                           mismatches={h["host"]: mismatch_lines(h) for h in fleet["hosts"] if h["verdict"] != "PASS"},
                           arrays_md=array_markdown(fleet),     # array mode
                           power_md=power_md)     # the power-cut test (docs/durability.md)
