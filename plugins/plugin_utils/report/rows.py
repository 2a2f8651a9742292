# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every format of the fleet report shows, as rows of text cells (controller side):
the fleet table (one row per host and workload, ``table_rows``), the drive table
(``drive_table``), the diagnostics of a host (``diagnostic_items``) and the summary line.
The terminal table, report.md and report.html render these rows; their columns come from
one table, ``COLUMNS`` (a column added there shows in all three), the drive table's from
``DRIVE_COLUMNS``."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import model as diagmod_model
# table cells: '-' for missing, compact (plugin_utils/common/fmt.py is the one set of formatters)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import DASH
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_ms as fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_pct as fmt_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import row_key
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.integrity import mismatch_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import gc_paused


VERDICT_SHORT = {"PASS": "PASS", "FAIL": "FAIL", "ERROR": "ERROR", "UNREACHABLE": "UNREACH", "INCONCLUSIVE": "INCONCL"}


class Column:
    """One column of the fleet table, in every format that shows it.

    ``key``: the row's cell; ``header`` (terminal), ``md`` (report.md) and ``html``
    (report.html) its heading; ``align`` ``<`` or ``>`` (numbers: right-aligned everywhere);
    ``width``: (min, max) in the terminal; ``cell(host entry, workload row)``: the cell of a
    workload row (None: the row builder fills it, as for host, verdict and rule);
    ``formats``: where it is shown (``table``, ``md``, ``html``); ``title``: the HTML
    heading's tooltip; ``html_key``: the row key report.html shows instead of ``key``;
    ``flag``: the outlier metric whose flag marks the cell in report.html; ``per_host``: one
    cell per host (report.html spans it over the host's rows)."""

    def __init__(self, key, header, md=None, html=None, align="<", width=(1, 60), cell=None,
                 formats=("table", "md", "html"), title=None, html_key=None, flag=None, per_host=False):
        self.key, self.header, self.align, self.width = key, header, align, width
        self.md = header if md is None else md
        self.html = self.md if html is None else html
        self.cell, self.formats, self.title = cell, tuple(formats), title
        self.html_key, self.flag, self.per_host = html_key or key, flag, per_host


COLUMNS = [
    Column("host", "host", width=(6, 24), per_host=True),
    Column("group", "group", formats=("html",), per_host=True),
    Column("workload", "workload", width=(8, 26), cell=lambda h, w: row_key(w)),   # <id>@<target>
    Column("threads", "thr", "threads", align=">", width=(3, 4),
           cell=lambda h, w: DASH if w["threads"] is None else str(w["threads"])),
    Column("iops", "IOPS", align=">", width=(5, 7), cell=lambda h, w: fmt_num(w["iops"]), flag="iops"),
    Column("mibps", "MiB/s", align=">", width=(5, 7), cell=lambda h, w: fmt_num(w["mibps"])),
    Column("p95", "p95ms", "p95 ms", align=">", width=(5, 6), cell=lambda h, w: fmt_ms(w["p95_ms"])),
    Column("p99", "p99ms", "p99 ms", align=">", width=(5, 6), cell=lambda h, w: fmt_ms(w["p99_ms"]), flag="p99_ms"),
    # the operation the latency columns are (metrics.latency_op)
    Column("op", "op", width=(2, 6), cell=lambda h, w: w.get("latency_op") or DASH,
           title="the operation the latency columns are: read, write, commit (write + the fsync that makes it "
                 "durable) or fsync"),
    # data verification (docs/integrity.md): blocks checked (report.md and .html: the terminal has no
    # room) and the bad ones, "off" in both when the workload did not verify
    Column("verified", "verified", align=">", width=(3, 8), cell=lambda h, w: verified_cell(w),
           formats=("md", "html"), title="blocks whose checksum, offset and generation were checked (off: not verified)"),
    Column("bad", "bad", align=">", width=(3, 5), cell=lambda h, w: bad_cell(w),
           title="blocks read back wrong: corrupt, misplaced or stale (a lost write); off: not verified"),
    Column("util", "%util", align=">", width=(5, 5), html_key="_util1",
           cell=lambda h, w: fmt_pct(w["util_pct"], 0) if w["util_pct"] is not None else DASH),
    Column("await", "await", "await ms", align=">", width=(5, 6), cell=lambda h, w: fmt_ms(w["await_ms"])),
    Column("verdict", "verdict", width=(7, 7), per_host=True),
    Column("rule", "first failing rule", width=(6, 60)),
]


def verified_cell(w):
    """Blocks a workload verified, ``off`` when it did not verify, ``-`` when not reported."""
    if w.get("verify_off"):
        return "off"
    return DASH if w.get("verified") is None else fmt_num(w["verified"])


def bad_cell(w):
    """Blocks read back wrong, exact (a count, never rounded), ``off`` when the workload did not
    verify, ``-`` when not reported."""
    if w.get("verify_off"):
        return "off"
    return DASH if w.get("bad") is None else "%d" % w["bad"]


def mismatch_lines(h, limit=6):
    """The first verify mismatches of a host's workloads, one text each
    (``<workload>: <kind> (<op>) <where>: expected .., found ..``), at most ``limit``."""
    out = []
    for w in h.get("workloads") or []:
        for f in w.get("verify_first") or []:
            if len(out) >= limit:
                return out
            op = "verify pass" if f.get("op") == "verify_pass" else f.get("op") or "read"
            out.append("%s: %s (%s) %s" % (row_key(w), f.get("kind") or "mismatch", op, mismatch_text(f)))
    return out


def columns(fmt):
    """The columns a format shows (``table``, ``md`` or ``html``), in order."""
    return [c for c in COLUMNS if fmt in c.formats]


def table_rows(fleet):
    """One row per host and workload (one row for a host without workloads)."""
    with gc_paused():
        return _table_rows(fleet)


def _blank_row(h, verdict, rule, flags=()):
    row = {c.key: DASH for c in COLUMNS}
    row.update({"host": h["host"], "group": h["group"], "verdict": verdict, "rule": rule, "_util1": DASH,
                # for the HTML table
                "_host": h["host"], "_group": h["group"], "_verdict": h["verdict"], "_span": 0, "_flags": flags})
    return row


def _table_rows(fleet):
    """Hosts with detail in fleet.json get one row per workload; the others (the passing
    hosts beyond ``html_detail_hosts`` in a large fleet) one summary row each."""
    rows = []
    cells = [c for c in COLUMNS if c.cell is not None]
    for h in fleet["hosts"]:
        v = VERDICT_SHORT.get(h["verdict"], h["verdict"])
        if h["workloads"] and h.get("detail") is None:
            flagged = sorted({m for w in h["workloads"] for m in w["outliers"]})
            rule = h["first_failing_rule"] or (("outlier: " + ",".join(flagged)) if flagged else DASH)
            if rule == DASH and h["verdict"] != "PASS" and h["reasons"]:
                rule = h["reasons"][0]
            iops = [w["iops"] for w in h["workloads"] if w["iops"] is not None]
            p99 = [w["p99_ms"] for w in h["workloads"] if w["p99_ms"] is not None]
            row = _blank_row(h, v, rule, tuple(flagged))
            row.update({"workload": "%d workloads" % len(h["workloads"]),
                        "iops": "min " + fmt_num(min(iops)) if iops else DASH,
                        "p99": "max " + fmt_ms(max(p99)) if p99 else DASH})
            rows.append(row)
            continue
        if not h["workloads"]:
            rows.append(_blank_row(h, v, h["first_failing_rule"] or short_reason(h)))
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
            row = {c.key: c.cell(h, w) for c in cells}
            row.update({
                "host": h["host"] if i == 0 else "", "group": h["group"],
                "verdict": v if i == 0 else "",
                "rule": rule or DASH,
                "_host": h["host"], "_group": h["group"], "_verdict": h["verdict"], "_span": span if i == 0 else -1,
                "_flags": w["outliers"], "_util1": fmt_pct(w["util_pct"]),
            })
            rows.append(row)
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
    ("media", "media", 5, 5),         # hdd | ssd (the kernel's queue/rotational)
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


# the power-cut test, one row per host and target (fleet.json ``durability``, docs/durability.md)
DURABILITY_COLUMNS = (("host", "host"), ("target", "target"), ("drive", "drive"), ("write cache", "write_cache"),
                      ("cuts", "cuts"), ("acked", "acked"), ("lost", "lost"), ("torn", "torn"),
                      ("misplaced", "misplaced"), ("unreadable", "read_errors"), ("lost window ms", "window"),
                      ("verdict", "verdict"))


def _count(value):
    """An exact count (the writes of a power cut are counted, not rounded), '-' when missing."""
    return str(int(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else DASH


def durability_table(fleet):
    """Rows of the power-cut table: each host that ran the test, each of its targets (cells are
    text): the drive (model and serial), its write cache and FUA, the cuts made of those planned,
    the writes acknowledged and those not held after the cuts, how long before the cut the
    lost ones had been acknowledged, the target's verdict."""
    rows = []
    for h in fleet.get("hosts") or []:
        d = h.get("durability")
        if not isinstance(d, dict):
            continue
        cuts = "%s/%s" % (_count(d.get("cycles")), _count(d.get("planned_cycles")))
        for name, t in sorted((d.get("targets") or {}).items()):
            cache = t.get("write_cache") or DASH
            if t.get("fua") is not None:
                cache = "%s, FUA %s" % (cache, "on" if t["fua"] else "off")
            rows.append({"host": h["host"], "target": name,
                         "drive": " ".join(str(x) for x in (t.get("model"), t.get("serial")) if x) or DASH,
                         "write_cache": cache, "cuts": cuts, "acked": _count(t.get("acked")),
                         "lost": _count(t.get("lost")), "torn": _count(t.get("torn")),
                         "misplaced": _count(t.get("misplaced")), "read_errors": _count(t.get("read_errors")),
                         "window": _count(t.get("lost_window_ms")),
                         "verdict": t.get("verdict") or d.get("verdict") or DASH})
    return rows


def lun_text(lun):
    """``path 1 of 2 of LUN mpatha (WWID 3600...) on target lun: iscsi 10.0.2.2:3260,
    active/running; 2 of 2 paths usable``: a drive row's word on the SAN path it is."""
    where = ", ".join(x for x in (" ".join(y for y in (lun.get("transport"), lun.get("portal")) if y),
                                  "/".join(y for y in (lun.get("dm_state"), lun.get("scsi_state")) if y)) if x)
    return "path %s of %s of LUN %s (WWID %s) on target %s%s; %s of %s paths usable" % (
        lun.get("path"), lun.get("paths"), lun.get("alias") or "?", lun.get("wwid") or "?", lun.get("target") or "?",
        ": " + where if where else "", lun.get("usable"), lun.get("paths"))


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
        rows.append({"host": d["host"], "drive": d.get("drive") or DASH, "media": d.get("media") or DASH,
                     "model": d.get("model") or DASH,
                     "serial": d.get("serial") or DASH, "firmware": d.get("firmware") or DASH,
                     "health": d["health"], "verdict": d["verdict"],
                     "reasons": "; ".join(list(d.get("reasons") or []) + list(d.get("findings") or [])
                                          + ([d["health_note"]] if d.get("health_note") and d["health"] != "PASSED"
                                             and not d.get("reasons") else [])
                                          + ["note: %s" % n for n in d.get("kernel_notes") or []]
                                          + ([lun_text(d["lun"])] if d.get("lun") else [])) or DASH,
                     "_flagged": drive_flagged(d),
                     "_odd": {k for k in ("model", "firmware") if (d["host"], d.get("drive"), k) in odd}})
    return rows, len(drives) - len(shown)


def summary_line(fleet):
    s = fleet["summary"]
    bv = s["by_verdict"]
    return "fleet: %d/%d hosts passed (PASS %d, FAIL %d, UNREACHABLE %d, ERROR %d%s)" % (
        s["passed"], s["hosts"], bv.get("PASS", 0), bv.get("FAIL", 0), bv.get("UNREACHABLE", 0),
        bv.get("ERROR", 0), ", INCONCLUSIVE %d" % bv["INCONCLUSIVE"] if bv.get("INCONCLUSIVE") else "")


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
        out.append({"name": name, "title": diagmod_model.TITLES.get(name, name), "status": status,
                    "conclusion": d.get("conclusion"), "sentence": d.get("sentence") or ""})
    return out
