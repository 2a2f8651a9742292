# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.required_space filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: required_space
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Free space a workload plan needs when its data sets are kept for the run
description:
  - Sum of C(total_size) over the distinct data sets (C(dataset)) of the plan. Workloads with
    the same data set share its files, so the files of all data sets exist together when they
    are prepared once and removed at the end of the run.
  - Compare with P(fleetqual.storage.largest_working_set#filter), which is enough only when each
    workload removes its files before the next one starts.
positional: _input
extends_documentation_fragment:
  - fleetqual.storage.plan_input
"""

EXAMPLES = r"""
- name: Check the test directory for every data set of the plan
  fleetqual.storage.bench_dir:
    path: "{{ fleetqual_test_dir }}"
    datasets: "{{ _fleetqual_plan | map(attribute='dataset') | unique | list }}"
    required_bytes: "{{ _fleetqual_plan | fleetqual.storage.required_space }}"
"""

RETURN = r"""
_value:
  description: Bytes all distinct data sets of the plan need together (0 for an empty plan).
  type: int
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("required_space")
