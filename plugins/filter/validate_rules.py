# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.validate_rules filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: validate_rules
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Check threshold rules (fleetqual_thresholds)
description:
  - "A rule selects workloads by optional C(workload), C(mode), C(threads), C(id) (a value or a list;
    absent means any) and sets limits: C(min_iops), C(min_mibps), C(max_<op>_<pct>_ms) with op
    read, write or fsync and pct p50, p90, p95, p99 or p999, or C(metric) (a JMESPath over the
    workload record) with C(min) and/or C(max). Optional C(name) and C(description)."
  - Rejects unknown keys (with a suggestion), wrong types, negative limits, latency limits <= 0,
    min > max, a JMESPath that does not parse, min/max without metric, metric without min/max,
    and rules without any limit. Each message names the path, for example
    C(fleetqual_thresholds[2].max_raed_p99_ms unknown key (did you mean max_read_p99_ms?); known ...).
positional: _input
options:
  _input:
    description: The rules (C(fleetqual_thresholds)); null means no rules.
    type: list
    elements: dict
    required: true
  var_name:
    description: Variable name used in the messages.
    type: str
    default: fleetqual_thresholds
"""

EXAMPLES = r"""
- name: Check thresholds before touching any host
  run_once: true
  delegate_to: localhost
  ansible.builtin.assert:
    that: (fleetqual_thresholds | fleetqual.storage.validate_rules) | length == 0
    fail_msg: "{{ fleetqual_thresholds | fleetqual.storage.validate_rules }}"
"""

RETURN = r"""
_value:
  description: Error strings; empty when every rule is valid.
  type: list
  elements: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("validate_rules")
