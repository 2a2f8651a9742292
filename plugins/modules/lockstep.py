#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lockstep
short_description: Fix an array's common start and hand it to each member's measurement job
version_added: "0.3.0"
description:
  - Array mode (docs/arrays.md). Runs on the controller only (an action plugin); the
    member hosts' detached jobs (M(fleetqual.storage.job) with O(fleetqual.storage.job#module:array))
    were started first, prepare the array's data set, then wait for their start file.
  - With O(phase=previous), run on every member before its start, reads what an earlier run left in the
    host's test directory (its job's status, by a raw command, with no Python on the host) and keeps it in the
    array's progress directory. Each member's start then decides for the whole array at once. The earlier
    run's jobs are attached when every member holds one of the same run that ran this very array, got its
    common start and still runs or finished uncollected, and the array has no failover; else every member's
    job is cleared and the array measured again (docs/operations.md). Nothing on the host changes.
  - With O(phase=ready), waits until this host's job says it is ready (its data set prepared),
    then measures the connection's round trip. Run it on every member before O(phase=start).
  - With O(phase=start), the first host to get there fixes the common start C(T0) (controller
    clock, now plus a lead that covers handing it to every member in waves of C(forks)); each
    host then measures its clock offset with several round-trip-bounded clock exchanges
    (C(date +%s.%N) over the connection; the smallest round trip is kept and the offset is
    known within half of it), and gets the start file C(<path>/.fleetqual-job/array-start.json)
    with C(T0), its offset and uncertainty. Each step's measured window then opens at
    C(T0 + offset_s) on every active host, expressed in each host's own clock, with no
    controller round trip per step.
  - A host whose offset uncertainty is over C(max_clock_uncertainty_ms) of the array (default 5 %
    of the shortest step's time) is refused (its steps are recorded incomplete, the host named);
    over 1 % of it, it is warned about.
options:
  phase:
    description:
      - V(previous) reads what an earlier run left on the member; V(ready) waits for the host's job to be ready;
        V(start) fixes and hands over the common start.
    type: str
    choices: [previous, ready, start]
    required: true
  path:
    description: The test directory of the job (M(fleetqual.storage.job)'s O(fleetqual.storage.job#module:path)).
    type: path
    required: true
  array:
    description:
      - The array part of the job's start result (C(name), C(members), C(steps), C(max_clock_uncertainty_ms));
        with O(phase=previous), C({name}) of the host's C(fleetqual_array).
        Without it (the host is in no array) the task is skipped.
    type: dict
  progress_dir:
    description: Controller directory of the run's progress; the array's T0 and the members' readiness live under it.
    type: path
    required: true
  timeout:
    description: With O(phase=ready), seconds to wait for the job to be ready.
    type: int
    default: 3600
  failover:
    description:
      - With O(phase=start), the value of C(fleetqual_failover) (docs/san.md). The host that fixes the array's
        common start starts the failover's timer on the controller (detached), which runs the cut and the restore
        at their times in the step's measured window.
    type: dict
    default: {}
  test_clock:
    description:
      - B(Test only.) Read the host's clock with the test hook (C(FLEETQUAL_TEST_CLOCK_OFFSET_S) in the host's
        environment shifts it), as the job does with the same flag. Never set it in production.
    type: bool
    default: false
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - The clock exchange needs GNU C(date) (C(%N)) on the host; without it the host is refused.
"""

EXAMPLES = r"""
- name: Read what an earlier run left on the member, before its start
  fleetqual.storage.lockstep:
    phase: previous
    path: /var/tmp/fleetqual
    array:
      name: san1
    progress_dir: /srv/results/run1/.progress

- name: Wait for the array's data sets
  fleetqual.storage.lockstep:
    phase: ready
    path: /var/tmp/fleetqual
    array: "{{ _job.array }}"
    progress_dir: /srv/results/run1/.progress

- name: Fix and hand over the common start
  fleetqual.storage.lockstep:
    phase: start
    path: /var/tmp/fleetqual
    array: "{{ _job.array }}"
    progress_dir: /srv/results/run1/.progress
"""

RETURN = r"""
previous:
  description: With O(phase=previous), C({run_id, state, pid}) of the job an earlier run left, or null.
  returned: phase previous
  type: dict
ready:
  description: With O(phase=ready), whether the job reached C(ready).
  returned: phase ready
  type: bool
rtt_s:
  description: With O(phase=ready), the smallest round trip of the clock exchanges.
  returned: phase ready
  type: float
t0:
  description: With O(phase=start), the common start (Unix seconds, controller clock).
  returned: phase start
  type: float
clock:
  description: With O(phase=start), C({offset_s, uncertainty_s, rtt_s, exchanges, method}) (host - controller).
  returned: phase start
  type: dict
refused:
  description: Why the host does not take part (its steps are incomplete), or null.
  returned: phase start
  type: str
warning:
  description: The clock warning naming the host, or null.
  returned: phase start
  type: str
margin_s:
  description: Seconds between handing the start over and step 1's warm-up.
  returned: phase start
  type: float
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        phase=dict(type="str", choices=["previous", "ready", "start"], required=True),
        path=dict(type="path", required=True),
        array=dict(type="dict"),
        progress_dir=dict(type="path", required=True),
        timeout=dict(type="int", default=3600),
        test_clock=dict(type="bool", default=False),
        failover=dict(type="dict", default={}),
    ))
    module.fail_json(msg="fleetqual.storage.lockstep runs on the controller (its action plugin); it has no host part")


if __name__ == "__main__":
    main()
