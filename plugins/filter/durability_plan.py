# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.durability_plan filter (logic: plugins/plugin_utils/judge/durability.py)."""

DOCUMENTATION = r"""
name: durability_plan
author: fleetqual.storage developers
version_added: "0.4.0"
short_description: The power-cut test's settings with their defaults, and its targets resolved
description:
  - C(fleetqual_durability) with every default filled in (sizes in bytes) and C(fleetqual_targets) resolved, for the
    role's power-cut test (docs/durability.md). Fails naming every problem; the validation play refused them before
    any host was contacted.
positional: _input, targets
options:
  _input:
    description: C(fleetqual_durability).
    type: dict
    required: true
  targets:
    description: C(fleetqual_targets).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
_fleetqual_dur: "{{ fleetqual_durability | fleetqual.storage.durability_plan(fleetqual_targets) }}"
"""

RETURN = r"""
_value:
  description: C({settings, targets}).
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("durability_plan")
