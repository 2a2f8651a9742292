# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.largest_working_set filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: largest_working_set
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Largest working set of a workload plan, in bytes
description:
  - The largest C(total_size) of the plan, i.e. the free space the test directory needs
    (workload files are prepared and cleaned up per workload).
positional: _input
extends_documentation_fragment:
  - fleetqual.storage.plan_input
"""

EXAMPLES = r"""
- name: Check free space
  ansible.builtin.assert:
    that: _free_bytes | int > (_fleetqual_plan | fleetqual.storage.largest_working_set)
"""

RETURN = r"""
_value:
  description: Bytes of the largest single data set of the plan (0 for an empty plan).
  type: int
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("largest_working_set")
