# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus textfiles (exposition format, written with prometheus_client): the
controller's fleet summary (``prometheus_text`` / ``write_prometheus``) and one host's own
series for its node_exporter textfile directory (``host_prometheus_text``). Names follow
the Prometheus conventions: base units (seconds, bytes), no verdict label on a ``_pass``
metric.  A workload run with foreign-I/O detection adds its foreign share
(``fleetqual_workload_foreign_share_ratio``) to both. Data integrity (docs/integrity.md):
``fleetqual_host_verify_bad_blocks`` / ``fleetqual_host_io_errors`` per host in the fleet's,
``fleetqual_workload_verify_bad_blocks`` / ``fleetqual_workload_io_errors`` in a host's."""

from __future__ import annotations

import datetime
import os

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.durability import durability_summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.arrays import add_array_prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import utc_now
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.drift import (
    add_host_prometheus as add_host_history_prometheus,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.drift import (
    add_prometheus as add_history_prometheus,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import PCT_KEYS, row_key, summarize_workload
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import JUDGED_METRICS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import gc_paused
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float

FOREIGN_SHARE = "fleetqual_workload_foreign_share_ratio"
FOREIGN_SHARE_HELP = ("Share of the device's requests or bytes (the larger) in the workload's measured window that "
                      "were not the benchmark's (metrics foreign_share, 0..1).")


def foreign_share(metrics):
    """A workload's ``foreign_share`` metric (0..1), or None: the job ran without
    foreign-I/O detection, or the metrics are missing."""
    return to_float(metrics.get("foreign_share")) if isinstance(metrics, dict) else None


def add_foreign_share(reg, rows, labels):
    """The per-workload ``fleetqual_workload_foreign_share_ratio`` series of ``rows``
    (``(label values, share)``, share None left out) in the registry ``reg``; the gauge is
    registered only when a row has a share, so a run without foreign-I/O detection writes
    no empty series."""
    from prometheus_client import Gauge  # pylint: disable=import-outside-toplevel

    rows = [(lab, share) for lab, share in rows if share is not None]
    if rows:
        g = Gauge(FOREIGN_SHARE, FOREIGN_SHARE_HELP, labels, registry=reg)
        for lab, share in rows:
            g.labels(**lab).set(share)
    return reg


def _fleet_foreign_rows(fleet):
    """(labels, share) of every workload row of the fleet that carries its metrics (the
    hosts with detail in fleet.json: ``html_detail_hosts``, those not PASS first)."""
    catalog = {w.get("id"): w for w in fleet.get("workloads") or () if isinstance(w, dict)}
    for h in fleet["hosts"]:
        for row in h.get("workloads") or ():
            share = foreign_share(row.get("metrics"))
            if share is None:
                continue
            spec = catalog.get(row.get("id")) or {}
            mode = row["mode"] if "mode" in row else spec.get("mode")
            threads = row["threads"] if "threads" in row else spec.get("threads")
            yield ({"host": h["host"], "group": h.get("group") or "", "workload": row_key(row), "mode": mode or "",
                    "threads": "" if threads is None else str(threads)}, share)


VERIFY_BAD = "fleetqual_%s_verify_bad_blocks"
VERIFY_BAD_HELP = ("Blocks read back wrong in the last run (corrupt, misplaced or stale: a lost write; "
                   "docs/integrity.md), over the %s's verified workloads.")
IO_ERRORS = "fleetqual_%s_io_errors"
IO_ERRORS_HELP = "I/O errors the benchmark got in the last run, over the %s's workloads."


def add_integrity(reg, rows, labels, level):
    """Data integrity series of ``rows`` (``(label values, bad blocks or None, I/O errors)``):
    ``fleetqual_<level>_verify_bad_blocks`` for those that verified (a row that did not is
    left out: no series is not a zero) and ``fleetqual_<level>_io_errors`` for every row."""
    from prometheus_client import Gauge  # pylint: disable=import-outside-toplevel

    rows = list(rows)
    bad = [(lab, n) for lab, n, _e in rows if n is not None]
    if bad:
        g = Gauge(VERIFY_BAD % level, VERIFY_BAD_HELP % level, labels, registry=reg)
        for lab, n in bad:
            g.labels(**lab).set(n)
    if rows:
        g = Gauge(IO_ERRORS % level, IO_ERRORS_HELP % level, labels, registry=reg)
        for lab, _n, errors in rows:
            g.labels(**lab).set(errors or 0)
    return reg


def _fleet_integrity_rows(fleet):
    """(labels, bad blocks or None, I/O errors) of every host with workload rows."""
    for h in fleet["hosts"]:
        rows = [w for w in h.get("workloads") or () if isinstance(w, dict)]
        if not rows:
            continue
        bad = [w.get("bad") for w in rows if w.get("bad") is not None]
        yield ({"host": h["host"], "group": h.get("group") or ""}, sum(bad) if bad else None,
               sum(w.get("errors") or 0 for w in rows))


DURABILITY_LOST = "fleetqual_durability_lost_writes"
DURABILITY_LOST_HELP = ("Writes the drive had acknowledged as durable and did not hold after a power cut (lost, torn, "
                        "misplaced or unreadable), over the last run's power cuts (docs/durability.md).")
DURABILITY_ACKED = "fleetqual_durability_acknowledged_writes"
DURABILITY_ACKED_HELP = "Writes acknowledged as durable before the last run's power cuts, read back after them."


def add_durability(reg, rows, labels):
    """The power-cut test's series of ``rows`` (``(label values, its durability summary)``,
    fleet.json's ``durability``: per target, the writes acknowledged and those not held);
    a host that did not run it has no series."""
    from prometheus_client import Gauge  # pylint: disable=import-outside-toplevel

    rows = [(lab, d) for lab, d in rows if isinstance(d, dict) and d.get("targets")]
    if rows:
        lost = Gauge(DURABILITY_LOST, DURABILITY_LOST_HELP, labels + ["target", "serial"], registry=reg)
        acked = Gauge(DURABILITY_ACKED, DURABILITY_ACKED_HELP, labels + ["target", "serial"], registry=reg)
        for lab, d in rows:
            for name, t in d["targets"].items():
                tl = dict(lab, target=name, serial=t.get("serial") or "")
                lost.labels(**tl).set(sum(t.get(k) or 0 for k in ("lost", "torn", "misplaced", "read_errors")))
                acked.labels(**tl).set(t.get("acked") or 0)
    return reg


def prometheus_registry(fleet):
    """The controller's textfile: the fleet summary only (a host's own series belong in
    that host's node_exporter textfile directory).  Names follow the Prometheus naming
    conventions: base units (seconds), no verdict label on a ``_pass`` metric."""
    from prometheus_client import CollectorRegistry, Gauge  # pylint: disable=import-outside-toplevel

    reg = CollectorRegistry()
    hosts = Gauge("fleetqual_fleet_hosts", "Hosts per verdict in the last run.", ["verdict"], registry=reg)
    for verdict, n in fleet["summary"]["by_verdict"].items():
        hosts.labels(verdict=verdict).set(n)
    passed = Gauge("fleetqual_host_pass", "1 when the host passed qualification in the last run, else 0.",
                   ["host", "group"], registry=reg)
    for h in fleet["hosts"]:
        passed.labels(host=h["host"], group=h["group"]).set(1 if h["verdict"] == "PASS" else 0)
    outl = Gauge("fleetqual_fleet_outliers", "Fleet outliers (worse direction) per metric in the last run.",
                 ["metric"], registry=reg)
    for metric in JUDGED_METRICS:
        outl.labels(metric=metric).set(sum(1 for o in fleet["outliers"] if o["metric"] == metric and o["worse"]))
    lat = Gauge("fleetqual_fleet_latency_seconds",
                "Fleet-wide latency percentile of a workload, merged exactly from every host's histogram.",
                ["workload", "op", "percentile"], registry=reg)
    # a "quantile" label belongs to summary metrics only (promtool): "percentile" p50 ... p999
    for row in (fleet.get("latency") or {}).get("fleet") or []:
        for pct in PCT_KEYS:
            v = row.get("%s_ms" % pct)
            if v is not None:
                lat.labels(workload=row["workload"], op=row["latency_op"], percentile=pct).set(v / 1000.0)
    add_history_prometheus(reg, fleet["hosts"])     # drift, wear, INCONCLUSIVE in a row (docs/compliance.md)
    add_foreign_share(reg, _fleet_foreign_rows(fleet), ["host", "group", "workload", "mode", "threads"])
    add_integrity(reg, _fleet_integrity_rows(fleet), ["host", "group"], "host")    # docs/integrity.md
    add_durability(reg, (({"host": h["host"], "group": h.get("group") or ""}, h.get("durability"))
                         for h in fleet["hosts"]), ["host", "group"])      # docs/durability.md
    ts = Gauge("fleetqual_last_run_timestamp_seconds", "When the fleet report was generated.", registry=reg)
    try:
        ts.set(datetime.datetime.strptime(fleet["generated_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp())
    except (ValueError, KeyError):
        ts.set(0)
    return add_array_prometheus(reg, fleet)      # array mode: per array and step


def host_prometheus_registry(record, now=None):
    """One host's own series, for that host's node_exporter textfile directory (the role
    writes it there when ``fleetqual_node_exporter_textfile_dir`` names one): Prometheus
    adds the host's own labels when it scrapes them.  Base units: operations and bytes per
    second, seconds, a 0..1 ratio."""
    from prometheus_client import CollectorRegistry, Gauge  # pylint: disable=import-outside-toplevel

    reg = CollectorRegistry()
    labels = ["workload", "mode", "threads"]       # workload: <id>@<target> on a host with targets
    g = {
        "ops": Gauge("fleetqual_workload_operations_per_second", "Reads and writes per second of a workload.",
                     labels, registry=reg),
        "bytes": Gauge("fleetqual_workload_throughput_bytes_per_second", "Bytes read and written per second.",
                       labels, registry=reg),
        "lat": Gauge("fleetqual_workload_latency_seconds", "Latency percentile of the workload's latency operation.",
                     labels + ["op", "percentile"], registry=reg),
        "util": Gauge("fleetqual_workload_device_utilization_ratio",
                      "Share of the measured window the test device was busy (iostat %util / 100).", labels,
                      registry=reg),
        "await": Gauge("fleetqual_workload_device_await_seconds", "Average device request time (iostat await).",
                       labels, registry=reg),
    }
    record = record if isinstance(record, dict) else {}
    shares, integrity = [], []
    for w in record.get("workloads") or []:
        if not isinstance(w, dict):
            continue
        row = summarize_workload(w, keep_metrics=False)
        lab = {"workload": row_key(row), "mode": row["mode"] or "", "threads": "" if row["threads"] is None
               else str(row["threads"])}
        shares.append((lab, foreign_share(w.get("metrics"))))
        integrity.append((lab, row["bad"], row["errors"]))
        for key, gauge, factor in (("iops", "ops", 1.0), ("mibps", "bytes", 1048576.0), ("util_pct", "util", 0.01),
                                   ("await_ms", "await", 0.001)):
            if row[key] is not None:
                g[gauge].labels(**lab).set(row[key] * factor)
        for pct in PCT_KEYS:
            if row["%s_ms" % pct] is not None:
                g["lat"].labels(op=row["latency_op"] or "", percentile=pct, **lab).set(row["%s_ms" % pct] / 1000.0)
    Gauge("fleetqual_host_pass", "1 when this host's last qualification verdict (the judge's) was PASS.",
          registry=reg).set(1 if str(record.get("verdict")).upper() == "PASS" else 0)
    Gauge("fleetqual_last_run_timestamp_seconds", "When this host's record was assembled.",
          registry=reg).set((now or utc_now()).timestamp())
    add_foreign_share(reg, shares, labels)      # foreign I/O in the window
    add_integrity(reg, integrity, labels, "workload")     # bad blocks, I/O errors (docs/integrity.md)
    add_durability(reg, [({}, durability_summary(record.get("durability")))], [])   # docs/durability.md
    return add_host_history_prometheus(reg, record)     # against its own history


def host_prometheus_text(record, now=None):
    """A host's own textfile content (host_prometheus_registry)."""
    from prometheus_client import generate_latest  # pylint: disable=import-outside-toplevel
    return generate_latest(host_prometheus_registry(record, now)).decode("utf-8")


def prometheus_text(fleet):
    """The textfile content (prometheus_client's exposition format)."""
    from prometheus_client import generate_latest  # pylint: disable=import-outside-toplevel
    return generate_latest(prometheus_registry(fleet)).decode("utf-8")


def write_prometheus(path, fleet):
    """Write the textfile atomically with prometheus_client's write_to_textfile."""
    from prometheus_client import write_to_textfile  # pylint: disable=import-outside-toplevel
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with gc_paused():
        write_to_textfile(path, prometheus_registry(fleet))
    return path
