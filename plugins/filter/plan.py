# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.plan filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: plan
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Resolve a qualification profile or matrix into workload specs
description:
  - Turns a profile of C(fleetqual_profiles) (by name or as a mapping) or a list of workload
    entries into the list of workload specs the C(qualify) role runs, each with C(id), C(index),
    C(of) and C(total_size) resolved in bytes (docs/contracts.md section 4).
  - "Precedence, lowest first: built-in defaults (threads 1, block_size 16K, direct true, time 60,
    warmup 5), the profile's C(defaults) (after those of the profile it C(extends)), the matrix entry,
    O(overrides)."
  - "Working-set sizing: C(working_set: cache) is half of O(cache_size) in 1 file;
    C(working_set: over_cache) is max(4 x O(cache_size), 2 x host RAM) in 128 files, where the RAM
    term applies only to buffered runs (C(direct: false)). Sized working sets are rounded up to a
    multiple of file_num x block_size. An entry may give C(total_size) instead."
  - C(threads) and C(rw_ratio) may be lists; the entry expands to one workload per value, and a
    derived workload identical to an earlier one is dropped.
  - Fails listing every problem with the variable path (for example C(fleetqual_matrix[1].threads)).
positional: _input
options:
  _input:
    description: A profile name (needs O(profiles)), a profile mapping, or a list of workload entries.
    type: raw
    required: true
  cache_size:
    description: Declared controller / SAN cache (C(fleetqual_cache_size)), a size such as C(256M) or bytes.
    type: raw
    default: 256M
  mem_total_mb:
    description: Host RAM in MiB (C(ansible_memtotal_mb)); required when a buffered over_cache workload is planned (0 means unknown).
    type: int
  overrides:
    description: "Values applied to every workload (C(fleetqual_workload_overrides)), for example C({time: 10})."
    type: dict
  profiles:
    description: All profiles (C(fleetqual_profiles)), to resolve a name and C(extends).
    type: dict
  matrix:
    description: C(fleetqual_matrix); when a non-empty list it replaces the profile's matrix (defaults are kept).
    type: list
    elements: dict
  seed:
    description: Default iobench C(seed) of every workload (C(fleetqual_seed)); an entry's own seed wins.
    type: int
  targets:
    description:
      - C(fleetqual_targets), the directories and whole block devices to qualify on this host; the plan is run
        on each target, one after the other, and every spec gains C(target), C(target_kind), C(target_path)
        or C(target_device), and C(key) (C(<id>@<target>)).
      - Empty or omitted, the plan runs on O(test_dir) as it is.
    type: list
    elements: dict
  test_dir:
    description: C(fleetqual_test_dir), the one target used when O(targets) is empty.
    type: path
  capacities:
    description: "Device sizes for device targets, a mapping C({device path: bytes}) or the
      M(fleetqual.storage.drives) result."
    type: raw
"""

EXAMPLES = r"""
- name: Plan the chosen profile for this host
  ansible.builtin.set_fact:
    _fleetqual_plan: >-
      {{ fleetqual_profile | fleetqual.storage.plan(
           cache_size=fleetqual_cache_size, mem_total_mb=ansible_memtotal_mb,
           overrides=fleetqual_workload_overrides, profiles=fleetqual_profiles,
           matrix=fleetqual_matrix, seed=fleetqual_seed) }}

- name: Plan a custom matrix against a 64M cache
  ansible.builtin.set_fact:
    # [{id: cache-rndrd-t1, total_size: 33554432, file_num: 1, ...}]
    one: "{{ [{'workload': 'cache', 'mode': 'rndrd', 'working_set': 'cache'}] | fleetqual.storage.plan('64M') }}"
"""

RETURN = r"""
_value:
  description: Workload specs in run order (keys id, workload, mode, threads, file_num, total_size,
    block_size, direct, time, warmup, other iobench options, working_set, sizing, index, of).
  type: list
  elements: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("plan")
