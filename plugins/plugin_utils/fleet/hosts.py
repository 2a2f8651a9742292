# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host entries of fleet.json (controller side, pure Python): one per host from its record
(or none) and what the play saw of it (``build_host``), its verdict decided by
plugin_utils/judge/verdict.py (``apply_verdict`` once the fleet judgements are known), and its
two shapes: full detail (``attach_detail``) or the compact summary (``compact_host``)."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.durability import durability_summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as diagmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import drive_consistency
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as historymod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import verdict as verdictmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.latency import latency_histogram
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import (
    clean_metrics,
    host_detail,
    row_key,
    spec_key,
    summarize_workload,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import drive_list
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import first_failing_rule
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import (
    checked_kernel_errors,
    checked_kernel_notes,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import group_of
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key, plain
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import drive_media


def _last_events(play, has_record=True):
    """(last failed task, last unreachable event) of a host's play outcome, as counted by
    ansible's stats (rescued failures do not count). A host without a record that nothing
    counted against but an unreachable event ansible ignored (``ignore_unreachable``: the
    role's start, which then ends the host so that the rest of its batch goes on) was away
    when it was to be measured: that event is its last unreachable one, though the host may
    have answered a later task (the gate's ping)."""
    play = play or {}
    failed = play.get("failed") or []          # [{task, msg}], not-ignored, not-rescued
    unreachable = play.get("unreachable") or []
    counts = play.get("counts") or {}
    n_fail = int(counts.get("failures", len(failed)) or 0)
    n_dark = int(counts.get("unreachable", len(unreachable)) or 0)
    last_fail = failed[-1] if failed and n_fail else None
    last_dark = unreachable[-1] if unreachable and n_dark else None
    if n_fail and not last_fail:
        last_fail = {"task": "?", "msg": "failed"}
    if n_dark and not last_dark:
        last_dark = {"task": "?", "msg": "host unreachable"}
    ignored = play.get("unreachable_ignored") or []
    if not has_record and not last_fail and not last_dark and ignored:
        last_dark = ignored[-1]
    return last_fail, last_dark


def build_host(name, record, play=None, inventory_groups=None, keep_detail=True, histograms=False):
    """One host entry of fleet.json from its record (or None) and its play outcome.

    The verdict is decided by ``verdict.final_verdict`` (the one owner; rules in
    docs/report.md); ``aggregate`` applies it again once the fleet judgements (outliers,
    regressions) are known.  ``keep_detail``: keep every check, each workload's full
    metrics and the iostat series (what report.html draws for a host); without it the
    entry keeps the summary and the checks that did not pass.  ``hist``: a
    ``HistogramAccumulator`` that receives the workloads' latency histograms."""
    play = play or {}
    record = record if isinstance(record, dict) else None
    last_fail, last_dark = _last_events(play, has_record=record is not None)
    counts = play.get("counts") or {}
    if record is None:
        groups = list(inventory_groups or [])
        facts = {}
        workloads = []
        checks = []
    else:
        groups = list(record.get("groups") or inventory_groups or [])
        facts = record.get("facts") if isinstance(record.get("facts"), dict) else {}
        workloads = [w for w in record.get("workloads") or [] if isinstance(w, dict)] \
            if isinstance(record.get("workloads"), list) else []
        checks = [c for c in (record.get("checks") or []) if isinstance(c, dict)]
    decided = verdictmod.final_verdict(record, last_fail, last_dark)
    group, group_source = group_of(groups, facts)
    rows = [summarize_workload(w, keep_metrics=keep_detail) for w in workloads]
    diagnostics = host_diagnostics(record, workloads)
    for row in rows:
        mine = checks if not row["target"] else [c for c in checks if c.get("target") == row["target"]]
        row["first_failing_rule"] = first_failing_rule({"checks": mine}, row["id"])
    ffr = first_failing_rule({"checks": checks})
    kept_checks = checks if keep_detail else [c for c in checks if c.get("passed") is not True]
    entry = {
        "host": str(name),
        "verdict": decided["verdict"],
        "record_verdict": decided["record_verdict"],
        "first_failing_rule": ffr,
        "reasons": decided["reasons"],
        "notes": decided["notes"],
        "group": group,
        "group_source": group_source,
        "groups": [str(g) for g in groups],
        "run_id": plain(record.get("run_id")) if record else None,
        "slice": plain(record.get("slice")) if record else None,
        "profile": plain(record.get("profile")) if record else None,
        "facts": plain(facts),
        "test_dir": plain(record.get("test_dir")) if record else None,
        "targets": plain(record.get("targets")) if record else None,
        "drives": host_drives(record, checks),
        "target_drives": {},
        "device": plain(record.get("device")) if record else None,
        "results_file": plain(record.get("results_file")) if record else None,
        "warnings": plain(record.get("warnings") or []) if record else [],
        "checks": plain(kept_checks),
        "checks_total": len(checks),
        "play": {
            "counts": {k: int(v or 0) for k, v in counts.items()},
            "failed_task": plain(last_fail),
            "unreachable_task": plain(last_dark),
        },
        "workloads": rows,
        "diagnostics": diagnostics,
        "outliers": [],
        "regressions": [],
        "drive_findings": [],
        "detail": None,
    }
    # what verdict.final_verdict needs again once the fleet judgements are known
    entry["_record"] = None if record is None else {
        "verdict": record.get("verdict"), "reasons": list(record.get("reasons") or []), "workloads": bool(workloads)}
    # the power-cut test's summary (docs/durability.md); null when the host did not run it
    entry["durability"] = durability_summary(record.get("durability")) if record else None
    run = record.get("array_run") if record else None
    if isinstance(run, dict) and run.get("name"):
        entry["array"] = str(run["name"])     # array mode: arrays.fleet_arrays_of judges it
    if histograms:
        entry["histograms"] = {}
        for w, row in zip(workloads, rows):
            h = latency_histogram(row, w)
            if h:
                if row.get("target"):
                    h["workload"] = row["id"]       # the fleet's percentiles are per workload id
                entry["histograms"][row_key(row)] = h
    if keep_detail:
        entry["detail"] = host_detail(workloads)
    return entry


HOST_DRIVE_KEYS = ("name", "path", "id_path", "by_id", "model", "serial", "firmware", "size_bytes", "transport",
                   "rotational", "media", "targets")

HOST_HEALTH_KEYS = ("collected", "reason", "passed", "problems")


def host_drives(record, checks=()):
    """The host's drives (the drives module's ``drives``, docs/contracts.md section 7) as
    a host summary keeps them: what the drive judgements (plugin_utils/fleet/drive_consistency.py) and
    the drive table need (identity, media, the targets on each, the health verdict) and
    ``judged``, the judge's drive checks of it (drive_consistency.drive_checks); None when the
    record has no drive inventory. The record keeps the rest (every health figure)."""
    drives = drive_list(record.get("drives")) if isinstance(record, dict) else None
    if drives is None:
        return None
    out = []
    for d in drives:
        item = {k: plain(d.get(k)) for k in HOST_DRIVE_KEYS if k in d}
        item["media"] = drive_media(d)      # also of a record written before the inventory said it
        if isinstance(d.get("health"), dict):
            item["health"] = {k: plain(d["health"].get(k)) for k in HOST_HEALTH_KEYS if k in d["health"]}
        item["judged"] = drive_consistency.drive_checks(checks, d.get("name"))
        # the kernel's storage messages the judge counted (docs/kernel-log.md); absent: not judged
        kernel = checked_kernel_errors(checks, d.get("name"))
        if kernel is not None:
            item["kernel_errors"] = kernel
        notes = checked_kernel_notes(checks, d.get("name"))
        if notes:
            item["kernel_notes"] = notes     # the kernel's capability probes: notes, never errors
        out.append(item)
    return out


def host_diagnostics(record, workloads):
    """The host's diagnostics (docs/diagnostics.md): the record's own ``diagnostics``
    (computed by the role), else computed here from its workloads (records written before
    diagnostics existed); {} for a host without workloads."""
    diags = record.get("diagnostics") if isinstance(record, dict) else None
    if isinstance(diags, dict) and diags:
        return plain(diags)
    if not workloads:
        return {}
    # built from plain types already: no copy needed
    return diagmod.diagnose([w for w in workloads if isinstance(w, dict)], drives=drive_list(record.get("drives")))


def detail_rank(h):
    """Order of the hosts drawn in detail: not PASS, then with outliers, then by name."""
    return (h["verdict"] == "PASS", not h["outliers"], natural_key(h["host"]))


def apply_verdict(h, opts, arrays=()):
    """Final verdict of a fleet host (verdict.final_verdict with its fleet judgements and
    the arrays it is an initiator of)."""
    play = h["play"]
    decided = verdictmod.final_verdict(h["_record"], play.get("failed_task"), play.get("unreachable_task"),
                                       h["outliers"], h["regressions"], opts, h.get("drive_findings") or (), arrays,
                                       history_findings=historymod.findings_of(h))
    h["verdict"] = decided["verdict"]
    h["reasons"] = decided["reasons"]
    h["notes"] = decided["notes"]
    if decided["first_failing_rule"] and not h["first_failing_rule"]:
        h["first_failing_rule"] = decided["first_failing_rule"]


CATALOG_KEYS = ("workload", "mode", "threads", "block_size", "direct", "time_s", "devices", "collector")


def compact_host(h, catalog):
    """A host without detail keeps its measured figures; what every host shares (the
    workload's spec) moves to the fleet's ``workloads`` catalog, and diagnostics that did
    not apply (n/a) are left out: fleet.json stays readable at 10,000 hosts."""
    for row in h["workloads"]:
        spec = {k: row.pop(k) for k in CATALOG_KEYS if k in row}
        catalog.setdefault(row["id"], spec)
    if h.get("drives"):
        # the names only: each drive is a row of the fleet's drive table (fleet.json "drives")
        h["drives"] = [d.get("name") for d in h["drives"]]
    diags = h.get("diagnostics")
    if diags:
        h["diagnostics"] = {k: v for k, v in diags.items() if not (isinstance(v, dict) and v.get("status") == "n/a")}


def attach_detail(h, record):
    """Give a summarized host entry its full detail from its record again."""
    workloads = [w for w in record.get("workloads") or [] if isinstance(w, dict)]
    checks = [c for c in (record.get("checks") or []) if isinstance(c, dict)]
    h["checks"] = plain(checks)
    by_key = {}
    for w in workloads:
        by_key[spec_key(w)] = w.get("metrics") if isinstance(w.get("metrics"), dict) else {}
    for row in h["workloads"]:
        row["metrics"] = clean_metrics(by_key.get(row_key(row)) or {})
    h["detail"] = host_detail(workloads)
