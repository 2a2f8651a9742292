#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: The fleet report of a whole run, from every host stored in its run directory
version_added: "0.3.0"
description:
  - Runs on the controller only (an action plugin); C(playbooks/report.yml) is its playbook.
  - Merges every host stored in C(<results_dir>/<run_id>/) (every slice and controller that wrote with the
    same run id, and re-runs, where each host's newest record counts), judges outliers and drive consistency over
    the whole fleet, merges the fleet percentiles from the histograms, prints the fleet table and writes
    every format (C(fleet.json), C(junit.xml), C(report.html), C(report.md), C(not-passed.limit), the
    Prometheus textfile when configured) with the same code as the end of a qualify run.
  - The report's options are those of the C(fleetqual.storage.qualify_report) callback (ansible.cfg
    C([fleetqual_report]), C(FLEETQUAL_REPORT_*)), whether or not it is enabled.
  - Returns the run's summary (no measurements) for the play to gate on and to hand to the next node of an
    AWX workflow.
options:
  run_id:
    description: The run to report (C(fleetqual_run_id) of the qualify runs).
    type: str
    required: true
  results_dir:
    description: The results directory holding C(<run_id>/). Default C($FLEETQUAL_RESULTS_DIR), else C(./results).
    type: path
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Report the run
  fleetqual.storage.fleet_report:
    run_id: "{{ fleetqual_run_id }}"
    results_dir: /srv/fleetqual/results
  register: _fleetqual_merged
"""

RETURN = r"""
run_id:
  description: The run reported.
  returned: always
  type: str
run_dir:
  description: The run directory the reports were written into.
  returned: always
  type: str
hosts:
  description: How many hosts the run has.
  returned: always
  type: int
counts:
  description: Hosts per verdict.
  returned: always
  type: dict
verdicts:
  description: "C({host: verdict})."
  returned: always
  type: dict
not_passed:
  description: The hosts whose verdict is not PASS, in fleet order (also in C(not-passed.limit)).
  returned: always
  type: list
  elements: str
limit_file:
  description: The C(--limit @file) of the hosts to re-run.
  returned: always
  type: str
written:
  description: "C({format: path}) of the files written."
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(run_id=dict(type="str", required=True),
                                              results_dir=dict(type="path")))
    module.fail_json(msg="fleetqual.storage.fleet_report runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
