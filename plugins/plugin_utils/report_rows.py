# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every format of the fleet report shows, as rows of text cells (controller side):
the fleet table (one row per host and workload, ``table_rows``), the drive table
(``drive_table``), the diagnostics of a host (``diagnostic_items``) and the summary line.
The terminal table, report.md and report.html render these rows; the columns are
``TABLE_COLUMNS`` / ``DRIVE_COLUMNS``."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils import diagnostics as diagmod
# table cells: '-' for missing, compact (plugin_utils/fmt.py is the one set of formatters)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import DASH
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_ms as fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import cell_pct as fmt_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet_rows import row_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.plain import gc_paused


VERDICT_SHORT = {"PASS": "PASS", "FAIL": "FAIL", "ERROR": "ERROR", "UNREACHABLE": "UNREACH"}

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
    with gc_paused():
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
                "workload": row_key(w),          # <id>@<target>: a row per host and target
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
    """(rows, left out) of the drive table (fleet.json ``drives``, drive_consistency.drive_rows):
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


def summary_line(fleet):
    s = fleet["summary"]
    bv = s["by_verdict"]
    return "fleet: %d/%d hosts passed (PASS %d, FAIL %d, UNREACHABLE %d, ERROR %d)" % (
        s["passed"], s["hosts"], bv.get("PASS", 0), bv.get("FAIL", 0), bv.get("UNREACHABLE", 0),
        bv.get("ERROR", 0))


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
