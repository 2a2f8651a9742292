#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: job
short_description: Run a host's whole workload plan as one detached job on the host, and read its status
version_added: "0.2.0"
description:
  - With O(state=started), starts ONE detached process on the host that runs every workload of
    O(workloads) in turn (prepare, iostat/vmstat beside each, exactly the result of
    M(fleetqual.storage.iobench) per workload), and returns at once with its PID and deadline.
    The job writes its progress and results to C(<path>/.fleetqual-job/status.json) (atomic
    rename), removes its data set files itself at the end, and stops at its deadline
    (now + O(deadline_s)). Then the running iobench gets SIGTERM (an interrupted, partial
    result), the rest is not run, the files are removed and the status says C(expired).
  - With O(state=status), returns the job's status (its results only once it has ended, or
    with O(results=true)).
  - With O(state=stopped), stops the job when it runs (and is O(run_id)'s when that is set); it
    leaves a stop request naming O(stopped_by), sends the job SIGTERM and waits up to O(grace)
    seconds for its final status. The job ends its workload (iobench's interrupted result),
    removes its files, restores the device regions it wrote and keeps its status, state
    C(stopped), for the run that collects it (docs/operations.md, "Stopping a run"). The
    playbook C(fleetqual.storage.stop) does this on every host.
  - Use it through the role C(fleetqual.storage.qualify), whose action plugin of the same name
    computes the timeouts and deadline from the plan and waits with one fleet progress line per
    round (docs/testing.md).
options:
  path:
    description: The test directory (created and marked by M(fleetqual.storage.bench_dir)).
    type: path
    required: true
  state:
    description: V(started) starts the job; V(status) reads its status; V(stopped) stops it.
    type: str
    choices: [started, status, stopped]
    default: status
  run_id:
    description:
      - Run identifier recorded in the status.
      - With O(state=stopped), only a job of this run is stopped (empty, any run's).
    type: str
    default: ""
  binary:
    description: Path of the iobench binary.
    type: path
    default: /opt/fleetqual/bin/iobench
  datasets:
    description: Data set subdirectories the job removes at its end.
    type: list
    elements: str
    default: []
  workloads:
    description: The plan (the role's workload specs; each needs C(dataset) and C(id)).
    type: list
    elements: dict
    default: []
  timeouts:
    description: Per workload, seconds after which its iobench is stopped (as the module's O(fleetqual.storage.iobench#module:timeout)).
    type: list
    elements: int
    default: []
  planned:
    description: Per workload, its planned seconds (warm-up + time, or the search's steps).
    type: list
    elements: int
    default: []
  planned_s:
    description: Planned seconds of the whole job (shown in the progress line).
    type: int
    default: 0
  deadline_s:
    description: Seconds from the start after which the job stops itself.
    type: int
    default: 3600
  seed:
    description: Seed of the workloads that set none.
    type: int
  collect:
    description: As the module's O(fleetqual.storage.iobench#module:collect).
    type: str
    choices: [auto, sysstat, procfs, none]
    default: auto
  collect_interval:
    description: Sampling interval in seconds.
    type: int
    default: 1
  results:
    description: With O(state=status), return the results while the job still runs too.
    type: bool
    default: false
  grace:
    description: With O(state=stopped), seconds to wait for the job's final status after its SIGTERM.
    type: int
    default: 10
  stopped_by:
    description: With O(state=stopped), who stops the job (its status' C(stop_reason) names it).
    type: str
    default: fleetqual.storage.stop
  foreign_io:
    description:
      - Foreign-I/O accounting and the quiet wait (docs/compliance.md). When set (even V({})),
        each workload first waits for a quiet device, runs in a block-I/O cgroup of its own, and its
        result gains C(foreign) (samples of the device's and our own counters, the quiet wait, the guard).
      - Keys (defaults in C(module_utils/collect/foreign_settings.py) C(FOREIGN_DEFAULTS)) C(enabled) (true),
        C(max_share) (0.1; recorded for the judge), C(wait_s) (120), C(on_busy) (C(inconclusive), C(fail),
        C(warn); recorded for the judge), C(sample_s) (3), C(quiet_util_pct) (10), C(interval) (1),
        C(guard_await_ms) (0 = no guard), C(guard_samples) (2), C(guard_min_iops) (5), C(cgroup) (C(auto) or C(off)).
    type: dict
  impact:
    description:
      - Impact limits of every workload. Keys (C(IMPACT_DEFAULTS)) C(ioprio) (C(none) or C(idle)),
        C(nice) (0), C(max_iops) (0 = none), C(max_mibps) (0 = none; a request rate from the block size),
        C(max_threads) (0 = none), C(max_free_share) (0 = none; working set at most this share of the free
        space), C(budget_s) (0 = none; workloads not started by then are not run).
    type: dict
  array:
    description:
      - Array mode (docs/arrays.md) - the host's part of an array's lock-step schedule, run before
        O(workloads) - C({name, rank, steps, dataset, target_kind, target_path | target_device, device_size,
        total_size, file_num, seed, prepare_timeout_s, ready_timeout_s, test_clock}). The job prepares the
        array's data set, says C(ready), waits for the common start that the action
        C(fleetqual.storage.lockstep) writes, then runs each step (module_utils/job/lockstep.py).
      - Built by the action plugin from C(fleetqual_array) / C(fleetqual_arrays); C(test_clock) is test-only.
    type: dict
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - No check mode support in O(state=started) (nothing is started in check mode).
"""

EXAMPLES = r"""
- name: Start the plan
  fleetqual.storage.job:
    state: started
    path: /var/tmp/fleetqual
    workloads: "{{ plan }}"
    datasets: [cache]
    timeouts: [320]
    planned: [20]
    deadline_s: 640
"""

RETURN = r"""
found:
  description: With O(state=stopped), whether the test directory held a job status.
  returned: with O(state=stopped)
  type: bool
stopped:
  description: With O(state=stopped), whether a running job was signalled.
  returned: with O(state=stopped)
  type: bool
status:
  description:
    - The job's status document (module_utils/job/runner.py), without C(results) unless the job ended or O(results=true).
    - With O(state=stopped), its summary after the stop (C(state), C(done) workloads of C(of), C(stop_reason)); null without a job.
  returned: always
  type: dict
  contains:
    array:
      description:
        - With O(array), the array part of the status (module_utils/job/lockstep.py) - state, step, clock and the
          steps so far; each step's C(result) only once the job ended or with O(results=true).
      returned: when the job has an array part
      type: dict
"""

# Why a detached process of our own and not async + poll 0: async_wrapper ends the payload
# with SIGKILL at its time limit (no SIGTERM to iobench, no partial result, no cleanup),
# keeps its result under ~/.ansible_async and only at the end (no progress), and
# async_status polls with until: print a line per host per retry. This job forks (twice,
# setsid) after every import is done, so it needs nothing from the module's temporary
# files, and it owns its deadline (before anything else could kill it), its cleanup and its
# status file in the marked test directory.
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as _job
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _job_status


def main():
    d = _job.START_DEFAULTS
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["started", "status", "stopped"], default="status"),
            run_id=dict(type="str", default=d["run_id"]),
            binary=dict(type="path", default=d["binary"]),
            datasets=dict(type="list", elements="str", default=d["datasets"]),
            workloads=dict(type="list", elements="dict", default=d["workloads"]),
            timeouts=dict(type="list", elements="int", default=d["timeouts"]),
            planned=dict(type="list", elements="int", default=d["planned"]),
            planned_s=dict(type="int", default=d["planned_s"]),
            deadline_s=dict(type="int", default=d["deadline_s"]),
            seed=dict(type="int"),
            collect=dict(type="str", choices=["auto", "sysstat", "procfs", "none"], default=d["collect"]),
            collect_interval=dict(type="int", default=d["collect_interval"]),
            results=dict(type="bool", default=False),
            foreign_io=dict(type="dict"),
            impact=dict(type="dict"),
            array=dict(type="dict"),
            grace=dict(type="int", default=10),
            stopped_by=dict(type="str", default="fleetqual.storage.stop"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "status":
            module.exit_json(changed=False, status=_job_status.job_status(p["path"], results=p["results"]))
        if p["state"] == "stopped":
            # check mode decides as the stop does (the run's job only), and signals nothing
            out = _job_status.operator_stop(p["path"], run_id=p["run_id"] or None, grace=p["grace"], by=p["stopped_by"],
                                            check_mode=module.check_mode)
            module.exit_json(changed=out["stopped"], **out)
        if module.check_mode:
            module.exit_json(changed=False, status=None, msg="check mode: the job would be started")
        module.exit_json(changed=False, status=_job.start(p))
    except _job_status.JobError as e:
        module.fail_json(msg=e.msg)


if __name__ == "__main__":
    main()
