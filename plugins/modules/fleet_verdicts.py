#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_verdicts
short_description: Every host's final verdict, its record judged with the fleet judgements
version_added: "0.3.0"
description:
  - Runs on the controller only (an action plugin). Reads the record the C(fleetqual.storage.qualify) role left
    in each host's C(_fleetqual_host_record) and decides every host's final verdict with the one verdict
    function (plugin_utils/verdict.py) after the fleet judgements (outliers among like hosts, regressions
    against the baseline, drive consistency), with the options of the C(fleetqual.storage.qualify_report)
    callback (ansible.cfg C([fleetqual_report]), C(FLEETQUAL_REPORT_*)), whether or not it is enabled, so
    the verdict gate and the fleet report decide alike.
  - The verdict gate play of C(playbooks/qualify.yml) runs it once and registers it; a host without a
    record is not in the result (the gate fails it as C(ERROR)).
options:
  hosts:
    description: The hosts to judge. Default the play's hosts (C(ansible_play_hosts_all)).
    type: list
    elements: str
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge every host's record with the fleet judgements
  fleetqual.storage.fleet_verdicts:
  run_once: true
  delegate_to: localhost
  register: _fleetqual_final

- name: Gate on the verdict
  ansible.builtin.fail:
    msg: "{{ _fleetqual_final.verdicts[inventory_hostname].reasons | join('; ') }}"
  when: _fleetqual_final.verdicts[inventory_hostname].verdict != 'PASS'
"""

RETURN = r"""
verdicts:
  description: "C({host: {verdict, reasons}}) of every host with a record; C(verdict) is PASS, FAIL, ERROR or UNREACHABLE."
  returned: always
  type: dict
  sample: {"db1": {"verdict": "PASS", "reasons": []}, "db5": {"verdict": "FAIL", "reasons": ["fleet outlier: ..."]}}
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(hosts=dict(type="list", elements="str")))
    module.fail_json(msg="fleetqual.storage.fleet_verdicts runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
