#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: validate_hosts
short_description: Every targeted host's qualification variables checked on the controller in one task
version_added: "0.3.0"
description:
  - Runs on the controller only (an action plugin), before any host is contacted.
  - For each host in O(hosts), the variables named in O(spec) that the host sets (inventory, group_vars,
    host_vars, extra vars; each templated in the host's context as C(hostvars[host][name])) are checked against
    O(spec) with Ansible's own argument specification validator (types, choices, its messages), then by the
    collection's validators (the filter P(fleetqual.storage.validate_inputs#filter)) over O(defaults) updated
    with the host's own values.
  - Fails once, with one line per refused host naming the host, the variable and the closest valid value.
  - The C(fleetqual.storage.qualify) role's C(validate.yml) runs it; a host's cost is its variables'
    templating and the checks, one task for the whole fleet.
options:
  hosts:
    description: The hosts to check.
    type: list
    elements: str
    required: true
  spec:
    description: The argument specification's options, C(meta/argument_specs.yml)'s C(argument_specs.main.options).
    type: dict
    required: true
  defaults:
    description: The value of each variable C(validate_inputs) reads when a host does not set it (the role's defaults).
    type: dict
    default: {}
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check every targeted host's variables before any host is contacted
  fleetqual.storage.validate_hosts:
    hosts: "{{ ansible_play_hosts_all }}"
    spec: "{{ (lookup('ansible.builtin.file', role_path ~ '/meta/argument_specs.yml') | from_yaml).argument_specs.main.options }}"
    defaults:
      fleetqual_profile: "{{ fleetqual_profile }}"
      fleetqual_test_dir: "{{ fleetqual_test_dir }}"
  run_once: true
  delegate_to: localhost
  register: validated
"""

RETURN = r"""
inputs:
  description:
    - "C({host: {variable: value}}): the variables of O(spec) each host sets, as they were checked."
    - "Secrets masked: the value of every key named C(password), C(passwd), C(token), C(secret) or ending in C(_key),
      at any depth, is C(********) (C(fleetqual_power.password) for one)."
  returned: when no host is refused
  type: dict
problems:
  description: "One line per refused host, C(<host>: <problem>; <problem>)."
  returned: always
  type: list
  elements: str
  sample: ["db02: value of fleetqual_inconclusive must be one of: fail, warn, got: wran"]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(hosts=dict(type="list", elements="str", required=True),
                                              spec=dict(type="dict", required=True),
                                              defaults=dict(type="dict", default={})))
    module.fail_json(msg="fleetqual.storage.validate_hosts runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
