#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gate
short_description: The verdict gate of one host - fail it, warn about it, or pass it, in one task
version_added: "0.3.0"
description:
  - Runs on the controller (an action plugin), once per host of the verdict gate play of C(playbooks/qualify.yml),
    with the host's verdict from M(fleetqual.storage.fleet_verdicts).
  - A verdict whose C(fails) is true fails the task with C(<host>) C(<VERDICT>) C(<reasons>), so C(ansible-playbook)
    exits non-zero.
  - A verdict that is not C(PASS) and does not fail (C(INCONCLUSIVE) with C(fleetqual_inconclusive=warn)) is
    printed with its reasons, as a C(debug) task would, and given as a warning - never silent.
  - A host the start of its batch found unreachable (O(unreachable)) is tried again with C(ansible.builtin.ping)
    first; still unreachable, the task is unreachable, so the recap counts the host unreachable. Answering,
    its verdict C(UNREACHABLE) (it was not measured) fails it all the same, the message saying it answers now.
  - One task and one worker per host for what used to be three tasks (a ping, a print and a fail), each of
    which cost a worker per host even when skipped.
options:
  verdict:
    description:
      - The host's entry of M(fleetqual.storage.fleet_verdicts)'s C(verdicts) - C(verdict) (PASS, FAIL, ERROR,
        UNREACHABLE or INCONCLUSIVE), C(reasons) (a list) and C(fails) (whether the gate fails the host).
    type: dict
    required: true
  unreachable:
    description: The host was unreachable when its batch started; ping it first.
    type: bool
    default: false
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

EXAMPLES = r"""
# after fleetqual.storage.fleet_verdicts (run once, registered as _fleetqual_final)
- name: Gate on the verdict
  fleetqual.storage.gate:
    verdict: "{{ _fleetqual_final.verdicts[inventory_hostname] }}"
    unreachable: "{{ _fleetqual_started.unreachable | default(false) }}"
"""

RETURN = r"""
verdict:
  description: The host's verdict.
  returned: always
  type: str
  sample: INCONCLUSIVE
reasons:
  description: Why the host has that verdict, as printed (at most 3, each cut at 300 characters; all of them in the host
    record). A failed host's reasons are in RV(msg).
  returned: when the gate does not fail the host
  type: list
  elements: str
  sample: ["cache-rndrd-t1: shared window: foreign I/O 31 % of the device's"]
fails:
  description: Whether the gate failed the host.
  returned: always
  type: bool
  sample: false
msg:
  description: The host, its verdict and its reasons, and for a host not failed, why not.
  returned: always
  type: str
  sample: "db2: INCONCLUSIVE cache-rndrd-t1: shared window (+2 more in /srv/results/r1/db2.json) (not failed: ...)"
pinged:
  description: The ping of a host unreachable at the start succeeded.
  returned: when O(unreachable) is true and the host answered
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(verdict=dict(type="dict", required=True),
                                              unreachable=dict(type="bool", default=False)))
    module.fail_json(msg="fleetqual.storage.gate runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
