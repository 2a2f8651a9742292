# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report files of a run: every requested format rendered from the ``fleet`` dict
(fleet.json content, built by ``fleet.aggregate``) and written atomically into the run
directory (``write_reports``), or rendered again from a stored fleet.json alone
(``rerender``).

The renderers live beside it, one format each: render_text.py (terminal table),
plugin_utils/fleet/fleet_json.py (fleet.json), render_junit.py (JUnit XML), render_html.py
with render_svg.py (report.html), render_markdown.py (report.md), prometheus.py (textfiles);
what they show is rows.py's. Missing or NaN numbers render as "-".
"""
from __future__ import annotations

import json
import os

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.baseline import append_history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import SCHEMA, iter_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.summary import LIMIT_FILE, limit_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import gc_paused
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.retention import after_report as apply_retention
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.prometheus import write_prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_html import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_junit import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_markdown import render_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.config import table_max_hosts
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_text import (
    detail_lines,
    render_drive_table,
    render_table,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import summary_line, table_rows

FORMATS = ("table", "json", "junit", "html", "md")
FILE_NAMES = {"json": "fleet.json", "junit": "junit.xml", "html": "report.html", "md": "report.md"}
WHO = "fleetqual.storage.qualify_report"


def publish(fleet, root, run_dir, get_option, display, history=True):
    """Everything a report of a run puts out, as the callback's options say (``get_option``:
    formats, table_width, table_max_hosts, html_detail_hosts, history, prometheus_textfile): the
    terminal table, the drive table and the lines under them (on ``display``: Ansible's Display
    or a callback's; past table_max_hosts hosts only the hosts that did not pass), every file format into ``run_dir``, a line per host appended to
    ``<root>/history.jsonl`` (``history``: False when each qualify run appended its own), the
    Prometheus textfile. Returns {what: path} of the files written."""
    formats = [str(f).strip().lower() for f in (get_option("formats") or []) if str(f).strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        display.warning("%s: unknown formats ignored: %s" % (WHO, ", ".join(unknown)))

    width = int(get_option("table_width") or 110)
    try:
        max_hosts = table_max_hosts(get_option)
    except ValueError as exc:
        display.warning("%s: %s; every host is listed" % (WHO, exc))
        max_hosts = None
    rows = table_rows(fleet)
    if "table" in formats:
        display.banner("FLEET REPORT [%s]" % fleet["run_id"])
        display.display(render_table(fleet, width=width, rows=rows, max_hosts=max_hosts))
        drives = render_drive_table(fleet, width=width, max_hosts=max_hosts)
        if drives:
            display.display("drives (%s):" % fleet["options"]["drives"])
            display.display(drives)
        for line in detail_lines(fleet, width=width, max_hosts=max_hosts):
            display.display(line)

    written = write_reports(fleet, run_dir, formats, rows=rows, detail_hosts=int(get_option("html_detail_hosts") or 0))
    if history and get_option("history"):
        written["history"] = append_history(os.path.join(root, "history.jsonl"), fleet)
    prom = get_option("prometheus_textfile")
    if prom:
        written["prometheus"] = write_prometheus(prom, fleet)

    colour = "green" if fleet["summary"]["passed"] == fleet["summary"]["hosts"] and fleet["hosts"] else "red"
    display.display(summary_line(fleet), color=colour)
    if written:
        display.display("fleet report: %s" % ", ".join(
            written[k] for k in ("json", "junit", "html", "md", "limit", "history", "prometheus") if k in written))
    return written


def write_reports(fleet, run_dir, formats=FORMATS, records=None, detail_hosts=100, rows=None):
    """Write the requested file formats into run_dir; returns {format: path}.

    ``rows`` (table_rows(fleet)) may be passed to share the formatted table with the terminal."""
    written = {}
    if rows is None and ("html" in formats or "md" in formats):
        rows = table_rows(fleet)
    renderers = {
        "json": lambda: iter_json(fleet),     # written piece by piece
        "junit": lambda: render_junit(fleet),
        "html": lambda: render_html(fleet, records, detail_hosts, rows),
        "md": lambda: render_markdown(fleet, rows),
    }
    for fmt in formats:
        if fmt in renderers:
            path = os.path.join(run_dir, FILE_NAMES[fmt])
            with gc_paused():
                text = renderers[fmt]()
            write_atomic(path, text)
            written[fmt] = path
    if written:
        # the hosts to run again: ansible-playbook ... --limit @<run_dir>/not-passed.limit
        written["limit"] = write_atomic(os.path.join(run_dir, LIMIT_FILE), limit_text(fleet))
    # the end of the report step: fleetqual_retention prunes the results directory, this run kept
    apply_retention(fleet, run_dir)
    return written


def rerender(fleet_json, run_dir=None, formats=("junit", "html", "md")):
    """Render report formats again from a stored fleet.json alone (no host record is read);
    returns {format: path}.  The files equal those the callback wrote with the same fleet."""
    with open(fleet_json, encoding="utf-8") as f:
        fleet = json.load(f)
    if fleet.get("schema") != SCHEMA:
        raise ValueError("%s is not a fleetqual fleet.json" % fleet_json)
    run_dir = run_dir or os.path.dirname(os.path.abspath(fleet_json))
    detail = fleet["summary"].get("detail_hosts", 100)
    return write_reports(fleet, run_dir, formats, detail_hosts=detail)
