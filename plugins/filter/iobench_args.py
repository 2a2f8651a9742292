# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.iobench_args filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: iobench_args
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Module parameters of a workload spec
description:
  - Keeps only the keys of a plan spec that are parameters of the M(fleetqual.storage.iobench)
    module (mode, file_num, total_size, block_size, threads, engine, iodepth, direct, open_flags,
    fsync_freq, fsync_all, fsync_end, fsync_mode, time, requests, warmup, seed, rw_ratio, keep_cache),
    dropping id, workload, working_set, sizing, index and of.
positional: _input
options:
  _input:
    description: One workload spec from P(fleetqual.storage.plan#filter).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Run one workload
  fleetqual.storage.iobench: "{{ item | fleetqual.storage.iobench_args | combine({'dir': fleetqual_test_dir}) }}"
  loop: "{{ _fleetqual_plan }}"
"""

RETURN = r"""
_value:
  description: Module parameters.
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("iobench_args")
