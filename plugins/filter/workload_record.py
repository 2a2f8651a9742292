# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.workload_record filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: workload_record
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: The stored record of one workload
description:
  - Builds the record of docs/contracts.md section 4 from a plan spec and the registered result of
    M(fleetqual.storage.iobench) - the spec's keys, C(result) (the module result without
    C(invocation)) and C(metrics) (as P(fleetqual.storage.workload_metrics#filter)).
positional: _input, result
options:
  _input:
    description: One workload spec from P(fleetqual.storage.plan#filter).
    type: dict
    required: true
  result:
    description: The registered module result.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Keep the result of this workload
  ansible.builtin.set_fact:
    _fleetqual_records: "{{ _fleetqual_records + [_fleetqual_wl | fleetqual.storage.workload_record(_fleetqual_result)] }}"
"""

RETURN = r"""
_value:
  description: The record (spec keys, result, metrics).
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("workload_record")
