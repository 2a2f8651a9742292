# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.validate_inputs filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: validate_inputs
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Every preflight problem of a host's qualification variables
description:
  - Takes a mapping of variable name to value and returns the problems found, each naming the variable
    path. Variables that are absent are not checked.
  - C(fleetqual_profile), C(fleetqual_profiles), C(fleetqual_matrix), C(fleetqual_cache_size),
    C(fleetqual_workload_overrides) and C(fleetqual_seed) are checked like
    P(fleetqual.storage.validate_profile#filter) (a non-empty C(fleetqual_matrix) makes the profile
    name irrelevant).
  - C(fleetqual_thresholds) is checked like P(fleetqual.storage.validate_rules#filter); when the plan and the
    rules are valid, a workload rule whose selectors match no workload of the plan is a problem too (a
    misspelled workload name must not pass a host).
  - C(fleetqual_targets) is checked (paths, devices, C(destroy_data), C(serial)); messages name the host
    when O(host) is given.
  - C(fleetqual_test_dir) must be an absolute path without C(..) components and not a system
    directory itself (C(/), C(/var/tmp), C(/tmp), C(/etc), ...).
positional: _input
options:
  _input:
    description: Variable name -> value.
    type: dict
    required: true
  names:
    description: "Variable names to use in the messages instead of the C(fleetqual_*) defaults, keyed like
      C({profile: my_profile})."
    type: dict
  host:
    description: Host name that prefixes the messages about C(fleetqual_targets) (C(host <name>:)).
    type: str
"""

EXAMPLES = r"""
- name: Check every targeted host's variables on the controller
  run_once: true
  delegate_to: localhost
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: >-
      {{ {'fleetqual_profile': fleetqual_profile, 'fleetqual_profiles': fleetqual_profiles,
          'fleetqual_matrix': fleetqual_matrix, 'fleetqual_cache_size': fleetqual_cache_size,
          'fleetqual_test_dir': fleetqual_test_dir, 'fleetqual_thresholds': fleetqual_thresholds}
         | fleetqual.storage.validate_inputs }}
"""

RETURN = r"""
_value:
  description: One sentence per problem of the host's variables, naming the variable; empty when all are valid.
  type: list
  elements: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("validate_inputs")
