# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.human_size filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: human_size
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Bytes as a binary human size
description:
  - 2147483648 becomes C(2.0 GiB); below 1 KiB the exact bytes (C(512 B)).
positional: _input
options:
  _input:
    description: Bytes.
    type: int
    required: true
"""

EXAMPLES = r"""
space: "{{ _fleetqual_plan | fleetqual.storage.largest_working_set | fleetqual.storage.human_size }}"
"""

RETURN = r"""
_value:
  description: Size with one decimal and a KiB/MiB/GiB/TiB unit.
  type: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("human_size")
