# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Flat per-workload metrics (docs/contracts.md section 4, ``metrics``).

Computed once from ``record['result']['bench']`` (iobench JSON) and
``record['result']['iostat']['avg']`` and stored in the workload record, so the judge,
the callback and the reports read the same numbers. Never raises on odd input: a
missing op, a missing collector, NaN or a wrong type gives ``None``.

Conventions:

* ``iops`` / ``mibps`` are read + write (fsyncs are not I/O transfers; see
  ``fsync_per_sec``).
* An op the benchmark reports with ``count`` 0 has rate 0.0 and latency ``None`` (the
  workload does not do that op); an op absent from the JSON has everything ``None``.
* Latencies are milliseconds (iobench reports microseconds); ``p999`` is p99.9.
* ``dev_*`` are iostat -x averages over the measured window, summed over the
  devices behind the test directory for rates.
* Additions to the contract: ``read_count``, ``write_count``, ``fsync_count``,
  ``elapsed_s``, and ``dev_read_ratio`` / ``dev_write_ratio`` = device r/s (w/s) divided
  by the benchmark's read (write) ops/s. An over-cache random-read run that really
  reaches the disk has ``dev_read_ratio`` near 1 (or above, when the device splits
  requests); near 0 means the page or controller cache served the reads. A write ratio
  above 1 shows journal / metadata amplification.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fleetqual.storage.plugins.plugin_utils._common import (
    dig,
    OPS,
    PCT_SOURCE,
    PCTS,
    as_number,
    is_int,
)

# metrics key -> iostat -x column
DEVICE_FIELDS = (
    ("dev_r_s", "r/s"),
    ("dev_w_s", "w/s"),
    ("dev_rkb_s", "rkB/s"),
    ("dev_wkb_s", "wkB/s"),
    ("dev_r_await_ms", "r_await"),
    ("dev_w_await_ms", "w_await"),
    ("dev_aqu_sz", "aqu-sz"),
    ("dev_util_pct", "%util"),
    ("dev_rareq_sz_kb", "rareq-sz"),
    ("dev_wareq_sz_kb", "wareq-sz"),
)

METRIC_KEYS = (
    ("iops", "mibps", "read_iops", "write_iops", "fsync_per_sec")
    + tuple("%s_%s_ms" % (op, pct) for op in OPS for pct in PCTS)
    + tuple(k for k, _ in DEVICE_FIELDS)
    + ("errors", "interrupted", "read_count", "write_count", "fsync_count", "elapsed_s",
       "dev_read_ratio", "dev_write_ratio")
)


def op_count(record_or_bench, op):
    """Number of ``op`` operations iobench reported, or None when unknown."""
    bench = record_or_bench
    if isinstance(bench, dict) and "result" in bench:
        bench = dig(bench, "result", "bench")
    count = dig(bench, "ops", op, "count")
    return count if is_int(count) else as_number(count)


def _sum(*values):
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def workload_metrics(record):
    """Flat metrics dict of a workload record (or of a bare module result)."""
    m = dict.fromkeys(METRIC_KEYS)
    m["interrupted"] = False
    if not isinstance(record, dict):
        return m
    result = record.get("result") if "result" in record else record
    bench = dig(result, "bench")
    if not isinstance(bench, dict):
        bench = {}

    for op in OPS:
        opd = dig(bench, "ops", op)
        if not isinstance(opd, dict):
            continue
        count = as_number(opd.get("count"))
        m["%s_count" % op] = int(count) if count is not None else None
        rate = as_number(opd.get("per_sec"))
        if op == "fsync":
            m["fsync_per_sec"] = rate
        else:
            m["%s_iops" % op] = rate
        if count:  # latency only for ops the workload did
            lat = opd.get("latency_us") if isinstance(opd.get("latency_us"), dict) else {}
            for pct in PCTS:
                v = as_number(lat.get(PCT_SOURCE[pct]))
                m["%s_%s_ms" % (op, pct)] = v / 1000.0 if v is not None else None

    m["iops"] = _sum(m["read_iops"], m["write_iops"])
    m["mibps"] = _sum(as_number(dig(bench, "ops", "read", "mib_per_sec")),
                      as_number(dig(bench, "ops", "write", "mib_per_sec")))
    m["elapsed_s"] = as_number(bench.get("elapsed_s"))

    avg = dig(result, "iostat", "avg")
    if isinstance(avg, dict):
        for key, col in DEVICE_FIELDS:
            m[key] = as_number(avg.get(col))
    m["dev_read_ratio"] = _ratio(m["dev_r_s"], m["read_iops"])
    m["dev_write_ratio"] = _ratio(m["dev_w_s"], m["write_iops"])

    errors = dig(bench, "errors", "total")
    m["errors"] = int(errors) if as_number(errors) is not None else None
    m["interrupted"] = bool(bench.get("interrupted")) if bench else False
    return m


# keys of a registered module result that only repeat the spec or Ansible bookkeeping
_DROP_FROM_RESULT = ("invocation", "_ansible_no_log", "_ansible_verbose_always", "ansible_loop_var", "item")


def workload_record(spec, result):
    """The stored record of one workload (contracts section 4): the plan spec, plus
    ``result`` (the registered module result without ``invocation``) and ``metrics``."""
    rec = dict(spec or {})
    res = {k: v for k, v in (result or {}).items() if k not in _DROP_FROM_RESULT} if isinstance(result, dict) else result
    rec["result"] = res
    rec["metrics"] = workload_metrics(rec)
    return rec


__all__ = ["workload_metrics", "workload_record", "op_count", "METRIC_KEYS", "DEVICE_FIELDS"]
