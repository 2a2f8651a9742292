# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.plan_summary filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: plan_summary
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Human lines describing a workload plan
description:
  - One line per workload (index, id, mode, threads, files and sizes such as C(2.0 GiB), block size,
    O_DIRECT or buffered, fsync policy, duration), then a total line with the expected duration and
    the largest working set.
positional: _input
extends_documentation_fragment:
  - fleetqual.storage.plan_input
"""

EXAMPLES = r"""
- name: Show the plan
  ansible.builtin.debug:
    msg: "{{ _fleetqual_plan | fleetqual.storage.plan_summary }}"
"""

RETURN = r"""
_value:
  description: Printable lines, e.g. C([6/9] over_cache-rndrd-t64 rndrd, 64 threads, 128 files x 16.0 MiB = 2.0 GiB (over_cache), ...).
  type: list
  elements: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("plan_summary")
