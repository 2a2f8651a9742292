# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.validate_profile filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: validate_profile
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Check the profile choice, a custom matrix and workload settings
description:
  - Returns the list of problems P(fleetqual.storage.plan#filter) would reject, each naming the
    variable path, for example C(fleetqual_profile unknown profile 'stnadard'; known compliance, quick,
    san, standard) or C(fleetqual_matrix[1].threads must be an integer between 1 and 1024, got 0).
  - A missing host RAM figure is not reported (meant for a C(run_once) preflight on the controller).
positional: _input, profile
options:
  _input:
    description: All profiles (C(fleetqual_profiles)).
    type: dict
    required: true
  profile:
    description: The chosen profile name (C(fleetqual_profile)).
    type: str
    required: true
  matrix:
    description: C(fleetqual_matrix), when set.
    type: list
    elements: dict
  cache_size:
    description: C(fleetqual_cache_size).
    type: raw
    default: 256M
  overrides:
    description: C(fleetqual_workload_overrides).
    type: dict
"""

EXAMPLES = r"""
- name: Check the workload settings before touching any host
  run_once: true
  delegate_to: localhost
  vars:
    _problems: "{{ fleetqual_profiles | fleetqual.storage.validate_profile(fleetqual_profile,
                   matrix=fleetqual_matrix, cache_size=fleetqual_cache_size,
                   overrides=fleetqual_workload_overrides) }}"
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem of the profile or matrix, naming the entry; empty when the plan is valid.
  type: list
  elements: str
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("validate_profile")
