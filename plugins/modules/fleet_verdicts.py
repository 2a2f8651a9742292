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
    in each host's C(_fleetqual_result.record) (the role's M(fleetqual.storage.qualify_host) result) and decides every host's final verdict with the one verdict
    function (plugin_utils/judge/verdict.py) after the fleet judgements (outliers among like hosts, regressions
    against the baseline, drive consistency), with the options of the C(fleetqual.storage.qualify_report)
    callback (ansible.cfg C([fleetqual_report]), C(FLEETQUAL_REPORT_*)), whether or not it is enabled, so
    the verdict gate and the fleet report decide alike.
  - The verdict gate play of C(playbooks/qualify.yml) runs it once and registers it; a host without a
    record is not in the result (the gate fails it as C(ERROR)).
  - Says per host whether the gate fails it (C(fails) in RV(verdicts)) - every verdict but C(PASS), except
    C(INCONCLUSIVE) when the host's policy (O(inconclusive)) is C(warn).
options:
  hosts:
    description: The hosts to judge. Default the play's hosts (C(ansible_play_hosts_all)).
    type: list
    elements: str
  inconclusive:
    description:
      - Exit-code policy of an C(INCONCLUSIVE) host (the role variable C(fleetqual_inconclusive)); C(fail) - the
        gate fails the host (C(ansible-playbook) exits non-zero); C(warn) - it does not (the gate play prints
        its verdict and reasons instead, M(fleetqual.storage.gate)).
      - Either one policy for every host (C(fail) or C(warn)) or a mapping of host name to policy (a host
        not in it, or null, is C(fail)); C(playbooks/qualify.yml) passes each host's own C(fleetqual_inconclusive).
      - Any other value fails the task, naming the host and the closest policy, before any host is judged.
    type: raw
    default: fail
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge every host's record with the fleet judgements
  fleetqual.storage.fleet_verdicts:
  run_once: true
  delegate_to: localhost
  register: _fleetqual_final

- name: Gate on the verdict (an INCONCLUSIVE host fails unless its policy is warn)
  fleetqual.storage.gate:
    verdict: "{{ _fleetqual_final.verdicts[inventory_hostname] }}"

- name: Judge with one policy per host (fleetqual_inconclusive of each host)
  fleetqual.storage.fleet_verdicts:
    inconclusive: {db1: fail, db2: warn}
  run_once: true
  delegate_to: localhost
  register: _fleetqual_final
"""

RETURN = r"""
verdicts:
  description:
    - "C({host: {verdict, reasons, fails, results_file}}) of every host with a record; C(verdict) is PASS, FAIL, ERROR,
      UNREACHABLE or INCONCLUSIVE; C(fails) is whether the verdict gate fails the host (every verdict but PASS, except
      INCONCLUSIVE with the policy C(warn)); C(results_file) the host record's path, when the record names it."
  returned: always
  type: dict
  sample: {"db1": {"verdict": "PASS", "reasons": [], "fails": false},
           "db2": {"verdict": "INCONCLUSIVE", "reasons": ["cache-rndrd-t1: shared window: ..."], "fails": false},
           "db5": {"verdict": "FAIL", "reasons": ["fleet outlier: ..."], "fails": true}}
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(hosts=dict(type="list", elements="str"),
                                              inconclusive=dict(type="raw", default="fail")))
    module.fail_json(msg="fleetqual.storage.fleet_verdicts runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
