# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.expected_duration_s filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: expected_duration_s
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Expected run time of a workload plan in seconds
description:
  - Sum of C(warmup + time) over the plan. Prepare and cleanup are not included; a workload bounded
    by C(requests) with C(time 0) counts its warmup only.
positional: _input
extends_documentation_fragment:
  - fleetqual.storage.plan_input
"""

EXAMPLES = r"""
- name: Tell how long it will take
  ansible.builtin.debug:
    msg: "about {{ (_fleetqual_plan | fleetqual.storage.expected_duration_s / 60) | round(1) }} min"
"""

RETURN = r"""
_value:
  description: Seconds.
  type: int
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("expected_duration_s")
