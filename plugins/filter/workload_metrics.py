# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.workload_metrics filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: workload_metrics
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Flat metrics of a workload record
description:
  - Computes the C(metrics) mapping of docs/contracts.md section 4 from C(result.bench) (iobench JSON)
    and C(result.iostat.avg) of a workload record (or of a bare M(fleetqual.storage.iobench) result).
  - C(iops) and C(mibps) are reads + writes; latencies are milliseconds (C(p999) is p99.9); C(dev_*)
    are the device's own counters read at the measured window's edges when iobench gave them
    (C(dev_source=devstat)), else iostat averages over the window (C(dev_source=iostat)).
  - C(latency_op) names the operation whose latency describes the workload (read, write, commit = a
    write plus the fsync that makes it durable, or fsync) and C(lat_<pct>_ms) are its percentiles.
  - A missing op, a missing collector, NaN or a wrong type gives null; an op with count 0 has rate 0
    and null latencies. Never fails.
  - Also returns C(read_count), C(write_count), C(fsync_count), C(elapsed_s), and C(dev_read_ratio) /
    C(dev_write_ratio) (device r/s or w/s divided by the benchmark's ops/s; near 1 for O_DIRECT, near 0
    when a cache served the reads, above 1 for write amplification).
positional: _input
options:
  _input:
    description: A workload record (spec + result) or a module result.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Store the record with its metrics
  ansible.builtin.set_fact:
    _record: "{{ item.item | combine({'result': item, 'metrics': item | fleetqual.storage.workload_metrics}) }}"
"""

RETURN = r"""
_value:
  description: "Flat mapping (docs/contracts.md section 4): iops, mibps, read_iops, write_iops, fsync_per_sec,
    <read|write|fsync|commit>_<p50|p90|p95|p99|p999>_ms, latency_op, lat_<pct>_ms, concurrency, device, dev_source,
    dev_r_s, dev_w_s, dev_rkb_s, dev_wkb_s, dev_r_await_ms, dev_w_await_ms, dev_aqu_sz, dev_util_pct,
    dev_rareq_sz_kb, dev_wareq_sz_kb, dev_read_bytes, dev_write_bytes, bench_read_bytes, bench_write_bytes,
    errors, interrupted, read_count, write_count, fsync_count, commit_count, elapsed_s, dev_read_ratio,
    dev_write_ratio, steady_state, stability."
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("workload_metrics")
