# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet aggregation for the qualify_report callback (controller side, pure Python).

Input: the per-host records the ``qualify`` role hands over with ``set_stats``
(docs/contracts.md section 6) plus what the play itself saw for every host
(unreachable, failed tasks).  Output (``aggregate``): one JSON-safe ``fleet`` dict, the
content of ``fleet.json`` (schema documented in docs/report.md), which every renderer
reads.  The parts live beside it in plugin_utils/fleet/: workload rows (rows.py), host
entries (hosts.py), latency histograms (latency.py), outliers (outliers.py), baseline and
history (baseline.py), drive consistency (drive_consistency.py), the run directory
(run_store.py), the writers (fleet_json.py, summary.py; the Prometheus textfile is
plugin_utils/report/prometheus.py).

Nothing here imports Ansible; every function is testable on synthetic dicts."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arraysmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import drive_consistency
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as historymod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as historymod_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import verdict as verdictmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.baseline import baseline_deltas
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.hosts import (
    apply_verdict,
    attach_detail,
    build_host,
    compact_host,
    detail_rank,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import (
    GENERATOR,
    SCHEMA,
    SCHEMA_VERSION,
    results_root,
    run_id_from,
    utc_now,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.latency import HistogramAccumulator
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import (
    MAD_SCORE,
    MIN_DIFF_MS,
    PCT_BELOW,
    find_outliers,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import gc_paused, natural_key

DEFAULT_OPTIONS = {
    "outliers": "warn",                 # warn | fail | off
    "regressions": "warn",              # warn | fail | off
    "drives": "warn",                   # warn | fail | off: drive consistency (plugin_utils/fleet/drive_consistency.py)
    "outlier_mad_score": MAD_SCORE,
    "outlier_pct_below": PCT_BELOW,
    "outlier_min_diff_ms": MIN_DIFF_MS,
    "regression_tolerance_pct": 10.0,
    "baseline": None,
}


def aggregate(records, play=None, inventory=None, options=None, baseline=None, now=None, run_id=None,
              loader=None, detail_hosts=100, entries=(), entry_sink=None, hist=None, results_root=None):
    """Build the fleet dict (fleet.json content).

    records:   {host: record}, or an iterable of (host, record) pairs consumed one at a
               time (``iter_run_records``: a results directory streamed record by record)
    play:      {host: {counts: {...}, failed: [{task, msg}], unreachable: [{task, msg}]}}
    inventory: {host: [group, ...]}    every host the plays targeted
    options:   see DEFAULT_OPTIONS
    baseline:  a loaded earlier fleet.json (load_baseline) or None
    loader:    host -> record, to read again the records of the hosts drawn in detail
               (default: the ``records`` mapping); None when records is an iterator and
               no loader is given: no host detail
    detail_hosts: how many hosts keep full detail (every check, every metric, iostat
               series): non-passing hosts first, then hosts with outliers; None = all
    entries:   host entries built earlier (stored by ``entry_sink`` of an earlier run:
               the run directory's fleet.d/), used as they are
    hist:      a HistogramAccumulator already holding the histograms of ``entries``
    entry_sink: called with every host entry built here (before its histograms are
               merged), to store it (``EntryWriter``)
    results_root: the results directory holding the run (default: from the records'
               ``results_file``); each host built here is judged against its own history
               there (plugin_utils/history/drift.py, ``history`` of the entry) and this run's
               summary of each host is stored there with its final verdict
    """
    with gc_paused():
        return _aggregate(records, play, inventory, options, baseline, now, run_id, loader, detail_hosts,
                          entries, entry_sink, hist, results_root)


def _records_root(mapping):
    """The results directory of a mapping of records (fleet_json.results_root), or None."""
    if not mapping:
        return None
    return results_root(mapping)


def fleet_options(options):
    """DEFAULT_OPTIONS updated with the given ones (None: the default); a mode that is not
    warn, fail or off is refused, naming the option."""
    opts = dict(DEFAULT_OPTIONS)
    opts.update({k: v for k, v in (options or {}).items() if v is not None and k in DEFAULT_OPTIONS})
    for key in ("outliers", "regressions", "drives"):
        if opts[key] not in drive_consistency.JUDGEMENT_MODES:
            raise ValueError("%s: must be one of %s, got %r" % (key, ", ".join(drive_consistency.JUDGEMENT_MODES), opts[key]))
    return opts


def _aggregate(records, play, inventory, options, baseline, now, run_id, loader, detail_hosts, entries,
               entry_sink, hist, results_root=None):
    opts = fleet_options(options)
    play = play or {}
    inventory = inventory or {}
    now = now or utc_now()
    if isinstance(records, dict) or hasattr(records, "items"):
        mapping = {str(k): v for k, v in records.items() if isinstance(v, dict)}
        pairs = iter(mapping.items())
        loader = loader or mapping.get
    else:
        mapping = None
        pairs = iter(records or ())
    hist = hist or HistogramAccumulator()
    root = results_root if results_root is not None else _records_root(mapping)
    runs = historymod_store.list_runs(root) if root else None      # each host against its history
    hosts = {}
    array_runs = {}                   # array mode: {host: its record's array_run}
    run_ids = {}

    def take(entry, built):
        if built and entry_sink is not None:
            entry_sink(entry)
        hist.add_host(entry["group"], entry.pop("histograms", None))
        hosts[entry["host"]] = entry
        rid = entry.get("run_id")
        if rid:
            run_ids[rid] = run_ids.get(rid, 0) + 1

    for entry in entries or ():
        take(entry, False)
    for name, rec in pairs:
        name = str(name)
        if isinstance(rec, dict):
            entry = build_host(name, rec, play.get(name), inventory.get(name), keep_detail=False, histograms=True)
            historymod.judge_entry(entry, rec, root, runs)
            take(entry, True)
            if isinstance(rec.get("array_run"), dict):
                array_runs[name] = rec["array_run"]
    others = set(inventory) | {h for h, p in play.items()
                               if (p.get("counts") or {}).get("failures")
                               or (p.get("counts") or {}).get("unreachable")
                               or p.get("failed") or p.get("unreachable") or p.get("unreachable_ignored")}
    for name in others - set(hosts):
        take(build_host(name, None, play.get(name), inventory.get(name), keep_detail=False), True)
    hosts = [hosts[n] for n in sorted(hosts, key=natural_key)]

    if run_id is None:
        run_id = max(run_ids, key=lambda r: (run_ids[r], r)) if run_ids else run_id_from(now)
    run_id = str(run_id)
    notes = []
    if len(run_ids) > 1:
        notes.append("records carry different run_ids; report filed under %s" % run_id)

    outliers, groups = [], []
    if opts["outliers"] != "off":
        outliers, groups = find_outliers(hosts, float(opts["outlier_mad_score"]),
                                         float(opts["outlier_pct_below"]),
                                         min_diff_ms=float(opts["outlier_min_diff_ms"]))
        for g in groups:
            if g["note"]:
                notes.append("group '%s': %s" % (g["name"], g["note"]))

    base = None
    if baseline is not None and opts["regressions"] != "off":
        base = baseline_deltas(hosts, baseline, float(opts["regression_tolerance_pct"]))
        if base["missing_hosts"]:
            notes.append("in the baseline but not in this run: %s" % ", ".join(base["missing_hosts"]))

    findings, drive_rows = judge_drives(hosts, opts)
    arrays = arraysmod.fleet_arrays_of(hosts, array_runs, loader)
    del array_runs
    for h in hosts:
        apply_verdict(h, opts, arraysmod.host_arrays(arrays, h["host"]))

    if root:
        for h in hosts:
            historymod.store_entry(h, root)          # this run's history summary, with the final verdict

    # full detail for the hosts a reader looks at first: read their records again
    ranked = sorted(hosts, key=detail_rank)
    chosen = ranked if detail_hosts is None else ranked[:max(0, int(detail_hosts))]
    if loader is not None:
        for h in chosen:
            rec = loader(h["host"]) if h["_record"] is not None else None
            if isinstance(rec, dict):
                attach_detail(h, rec)
            elif h["_record"] is None:
                h["detail"] = {"iostat": {}}
    catalog = {}
    for h in hosts:
        del h["_record"]
        if h["detail"] is None:
            compact_host(h, catalog)

    by_verdict = verdictmod.counts(h["verdict"] for h in hosts)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "generated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run_id": str(run_id),
        "options": {k: opts[k] for k in DEFAULT_OPTIONS},
        "summary": {
            "hosts": len(hosts),
            "passed": by_verdict["PASS"],
            "by_verdict": by_verdict,
            "workloads": sum(len(h["workloads"]) for h in hosts),
            "outliers": len(outliers),
            "outliers_worse": sum(1 for o in outliers if o["worse"]),
            "regressions": len(base["regressions"]) if base else 0,
            "drives": len(drive_rows),
            "drives_failed": sum(1 for d in drive_rows if d["verdict"] == "FAIL"),
            "drive_findings": len(findings),
            "detail_hosts": sum(1 for h in hosts if h["detail"] is not None),
            "slices": sorted({_slice_label(h["slice"]) for h in hosts if h.get("slice")}),
            **({"arrays": len(arrays), "arrays_passed": sum(1 for a in arrays if a["verdict"] == "PASS")}
               if arrays else {}),
        },
        "latency": hist.result(),
        "workloads": [dict(id=wid, **catalog[wid]) for wid in sorted(catalog)],
        "groups": groups,
        "hosts": hosts,
        "outliers": outliers,
        "baseline": base,
        "drives": drive_rows,
        "drive_findings": findings,
        "notes": notes,
        **({"arrays": arrays} if arrays else {}),     # array mode (docs/arrays.md)
    }


def drive_records(hosts):
    """The host entries as the drive judgements read host records (plugin_utils/fleet/drive_consistency.py):
    drives (with their judged checks), the targets (a SAN LUN's paths) and the workload rows
    (per target its IOPS and p99 latency). A stored entry of fleet.d/ carries all of it, so a merge of slices judges the
    drives of the whole fleet."""
    return [{"host": h["host"], "groups": h["groups"], "facts": h["facts"], "test_dir": h["test_dir"],
             "targets": h.get("targets"), "drives": h["drives"], "workloads": h["workloads"]}
            for h in hosts if h.get("drives") is not None]


def target_drive_map(h):
    """{target name: the drive it runs on} of a host entry (drive_consistency.drive_of_record; no
    entry for a target spread over several drives). The JUnit case of a target carries its
    drive's checks and findings."""
    drives = h.get("drives")
    if not drives:
        return {}
    where = {}
    for t in h.get("targets") or []:
        if isinstance(t, dict) and t.get("name"):
            where[str(t["name"])] = {"target": t["name"], "target_path": t.get("path"),
                                     "target_device": t.get("device")}
    for w in h["workloads"]:
        if w.get("target") and w["target"] not in where:
            where[w["target"]] = {k: w.get(k) for k in ("target", "target_path", "target_device")}
    out = {}
    for name, rec in where.items():
        d = drive_consistency.drive_of_record(rec, drives, h.get("test_dir"))
        if d is not None:
            out[name] = d.get("name")
    return out


def judge_drives(hosts, opts):
    """(findings, drive table rows) of the fleet's drives; each host entry gets its own
    findings in ``drive_findings`` (verdict.final_verdict reads them)."""
    records = drive_records(hosts)
    for h in hosts:
        h.setdefault("drive_findings", [])
        h["target_drives"] = target_drive_map(h)
    if not records:
        return [], []
    findings = drive_consistency.drive_findings(records, {
        "drives": opts["drives"], "outlier_mad_score": opts["outlier_mad_score"],
        "outlier_pct_below": opts["outlier_pct_below"], "outlier_min_diff_ms": opts["outlier_min_diff_ms"]})
    by_host = {h["host"]: h for h in hosts}
    for h in hosts:
        h["drive_findings"] = []
    for f in findings:
        by_host[f["host"]]["drive_findings"].append(f)
    return findings, drive_consistency.drive_rows(records, findings)


def _slice_label(s):
    if isinstance(s, dict):
        return "%s/%s" % (s.get("number"), s.get("count"))
    return str(s)
