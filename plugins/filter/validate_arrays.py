# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.validate_arrays filter (logic: plugins/plugin_utils/validate/arrays.py)."""

DOCUMENTATION = r"""
name: validate_arrays
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Every problem of array mode (fleetqual_array, fleetqual_arrays) across the targeted hosts
description:
  - Array mode (docs/arrays.md) qualifies a shared array (a SAN, a Ceph pool, a filer) from several hosts at
    once. An array is a property of several hosts, so this filter takes every targeted host's variables
    together and returns the problems found, each naming the variable, the host(s) and the closest valid value.
  - Refused are a host naming an array that C(fleetqual_arrays) does not define, a host in two arrays
    (C(fleetqual_array) given as a list, or an array's C(groups) holding a host of another array), an array
    that no targeted host joins (or whose C(groups) names a group without hosts), an array defined differently
    on its hosts, unknown keys and modes (did-you-mean), more initiators than the array has hosts, a data set
    per initiator larger than a device target's C(size) or a total working set larger than the array's
    C(capacity), an unknown C(target), and array rules (C(thresholds)) with unknown keys, bad limits or naming
    a step the sweep does not plan.
positional: _input, group_names, defaults
options:
  _input:
    description: Host name -> that host's C(fleetqual_*) variables (those it sets).
    type: dict
    required: true
  group_names:
    description: Host name -> the inventory groups it is in (for an array's C(groups)).
    type: dict
  defaults:
    description: Values of the variables a host does not set (the role's defaults), e.g. C(fleetqual_arrays),
      C(fleetqual_cache_size), C(fleetqual_latency_bound_ms), C(fleetqual_targets), C(fleetqual_test_dir).
    type: dict
"""

EXAMPLES = r"""
- name: Check array mode across the targeted hosts, on the controller
  run_once: true
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _hosts: "{{ ansible_play_hosts_all }}"
    _problems: >-
      {{ dict(_hosts | zip(_hosts | map('extract', hostvars)))
         | fleetqual.storage.validate_arrays(dict(_hosts | zip(_hosts | map('extract', hostvars, 'group_names'))),
                                             {'fleetqual_arrays': {}, 'fleetqual_cache_size': '256M'}) }}
"""

RETURN = r"""
_value:
  description: One sentence per problem, naming the variable and the host(s); empty when array mode's inputs are valid.
  type: list
  elements: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("validate_arrays")
