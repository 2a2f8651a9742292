# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.first_failing_rule filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: first_failing_rule
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Name of the rule that best explains a non-PASS host
description:
  - The rule of the first integrity error, else of the first failed limit, of a judgement or host record
    (anything with C(checks)); null when nothing failed.
positional: _input
options:
  _input:
    description: Output of P(fleetqual.storage.judge#filter) or a host record.
    type: dict
    required: true
  workload:
    description: Only the checks of this workload id; omitted, the host's first failing check.
    type: str
"""

EXAMPLES = r"""
culprit: "{{ _fleetqual_judgement | fleetqual.storage.first_failing_rule }}"
"""

RETURN = r"""
_value:
  description: Rule name such as C(max_read_p99_ms@over_cache) or C(io_errors), or null.
  type: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("first_failing_rule")
