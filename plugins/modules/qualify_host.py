#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: qualify_host
short_description: A host's storage qualification in two module runs - start it, then clean up after it
version_added: "0.3.0"
description:
  - The measuring path of the role C(fleetqual.storage.qualify). Use it through the role; its
    action plugin of the same name adds the controller's part (the deploy transfer, the waits and polls, the
    judgement and the record).
  - With O(state=started), ONE module run reads the facts the plan needs (RAM, vCPUs, architecture, kernel,
    product, disk models; returned as C(ansible_facts)), checks the binary's sha256 against the controller's
    build, inventories the drives (identity, health, the raw-device guard of every device target, as
    M(fleetqual.storage.drives)), plans the workloads (the validation's planner, with the RAM and device
    capacities just read), preflights C(fleetqual_test_dir) and each directory target (as
    M(fleetqual.storage.bench_dir)) and starts the detached job (as M(fleetqual.storage.job)). A refusal
    names its step; what the run created before it is removed first.
  - When the host's binary is not the controller's build and O(binary_src) is not given, nothing is changed and
    C(deploy_needed) is returned; the action then transfers the build and runs the module again with
    O(binary_src). A host of another architecture, or O(build_on_host), gets C(build_needed); a host that lacks
    iostat, with O(manage_packages), gets C(packages_needed) (both at once when both hold).
  - With O(state=absent), removes what the start created and writes the node_exporter textfile when
    O(textfile_dir) and O(textfile) are given.
  - The action plugin's O(state=finished) and O(state=failed) run no module of their own beyond O(state=absent).
options:
  state:
    description: V(started), V(absent); the action also takes V(finished) and V(failed).
    type: str
    choices: [started, absent, finished, failed]
    required: true
  path:
    description: C(fleetqual_test_dir) (the job's status, and the data sets of the shorthand target).
    type: path
    required: true
  binary:
    description: Where iobench is installed on the host.
    type: path
    default: /opt/fleetqual/bin/iobench
  binary_sha256:
    description: The sha256 of the controller's build; without it the host's binary is used as it is.
    type: str
  binary_src:
    description: The transferred copy of the build (set by the action); installed only when its sha256 is O(binary_sha256).
    type: path
  architecture:
    description: The architecture of the controller's build; a host of another one gets C(build_needed).
    type: str
  build_on_host:
    description: The host builds its own binary (C(fleetqual_build_on=target)); the start returns C(build_needed).
    type: bool
    default: false
  manage_packages:
    description:
      - C(fleetqual_manage_packages) - when iostat is not installed and O(collect) would use it (V(auto), V(sysstat)),
        nothing is changed and C(packages_needed) is returned; the role installs sysstat and starts again (without
        this option, so a failed install is not asked for again and V(auto) samples /proc instead).
    type: bool
    default: false
  run_id:
    description: The run identifier, recorded in the job's status.
    type: str
    default: ""
  previous:
    description:
      - C(fleetqual_previous) - with O(state=started), what to do with a measurement job an earlier run left in O(path)
        (a killed controller's). V(attach) returns that job's status as this run's (C(attached) says which run) when
        it runs or finished the same plan (the plan's fingerprint); an array member's only with its whole array
        (O(array_previous)). V(restart) lets the preflight report and clear it; V(refuse) fails naming it. Any other
        job is cleared.
    type: str
    choices: [attach, restart, refuse]
    default: attach
  uncollected_days:
    description: C(fleetqual_uncollected_days) - a finished job older than this many days is cleared, not attached.
    type: int
    default: 7
  array_previous:
    description:
      - In array mode with O(previous=attach), the whole array's word on the jobs an earlier run left on its members,
        C({run_id, why}). The action plugin decides it from what M(fleetqual.storage.lockstep) with
        O(fleetqual.storage.lockstep#module:phase=previous) found on every member. This member attaches its job only
        when it is of run C(run_id) and ran the same plan and array (then every member does); C(run_id) null clears
        it (C(why) says which member lacked). A member told to attach whose job ran another plan fails, and the others
        are attached.
    type: dict
  resume:
    description:
      - With O(state=started), C({run_id, fingerprint}) of a host record that a run whose controller was killed stored on
        the controller (the action plugin finds it in C(fleetqual_results_dir)). When O(path) holds no job and the plan
        made now has that fingerprint, nothing is started and C(resumed) names the run; the record is this run's.
    type: dict
  profile:
    description: C(fleetqual_profile).
    type: raw
  profiles:
    description: C(fleetqual_profiles).
    type: dict
  matrix:
    description: C(fleetqual_matrix).
    type: list
    elements: raw
  overrides:
    description: C(fleetqual_workload_overrides).
    type: raw
  cache_size:
    description: C(fleetqual_cache_size).
    type: raw
    default: 256M
  seed:
    description: C(fleetqual_seed).
    type: int
  targets:
    description: C(fleetqual_targets) (as the user wrote them; resolved here).
    type: list
    elements: raw
  margin_pct:
    description: C(fleetqual_space_margin_pct).
    type: int
    default: 10
  health:
    description: Collect each drive's health (smartctl, nvme-cli) as M(fleetqual.storage.drives) does.
    type: bool
    default: true
  sysfs_root:
    description: Test hook - a fake sysfs tree for the drive inventory.
    type: path
  dev_root:
    description: Test hook - a fake /dev tree for the drive inventory.
    type: path
  collect:
    description: As M(fleetqual.storage.job)'s O(fleetqual.storage.job#module:collect).
    type: str
    choices: [auto, sysstat, procfs, none]
    default: auto
  slack:
    description: Seconds added to each workload's timeout and to the job's deadline (C(fleetqual_workload_timeout_slack)).
    type: int
    default: 300
  prepare_min_mibps:
    description: The slowest accepted rate of writing a data set, for the timeouts (C(fleetqual_prepare_min_mibps)).
    type: int
    default: 20
  foreign_io:
    description: The effective foreign-I/O settings, set on every workload.
    type: dict
  impact:
    description: The effective impact limits, set on every workload.
    type: dict
  array:
    description: The controller's part of the array spec (set by the action); completed here from the host's plan.
    type: dict
  test_clock:
    description: Test-only clock hook of array mode.
    type: bool
    default: false
  datasets:
    description: With O(state=absent), the data sets in O(path).
    type: list
    elements: str
    default: []
  plan:
    description: With O(state=absent), C({target_kind, target_path, target_device, device_size, dataset}) of each planned workload.
    type: list
    elements: dict
    default: []
  textfile_dir:
    description: With O(state=absent), the node_exporter textfile directory to write C(fleetqual.prom) into.
    type: path
  textfile:
    description: With O(state=absent), the host's Prometheus series (the filter C(fleetqual.storage.host_prometheus)).
    type: str
  health_after:
    description:
      - With O(state=absent), read the drives' identity and health again before removing anything (a burn-in,
        docs/integrity.md), returned as RV(drives_after).
    type: bool
    default: false
  build:
    description: Action - the controller's build, transferred only when the host's binary differs (set by the role).
    type: path
  progress_dir:
    description: Action - the run's progress directory on the controller (one progress line per round for the fleet).
    type: path
  results_dir:
    description:
      - Action - O(state=started) - C(fleetqual_results_dir) on the controller, where a run whose controller was killed
        may have stored the host's record before writing its fleet report; with O(previous=attach), outside array mode
        and the durability profile, such a record of the same plan is this run's result (O(resume)).
    type: path
  interval:
    description: Action - O(state=finished) - seconds between progress rounds (C(fleetqual_progress_interval)).
    type: int
    default: 30
  arrays:
    description: Action - C(fleetqual_arrays), with O(array) the host's C(fleetqual_array).
    type: dict
  profile_safety:
    description: Action - C(fleetqual_profile_safety), merged with O(foreign_io) and O(impact) as the validation merges them.
    type: dict
  started:
    description:
      - Action - O(state=finished) and O(state=failed) - the registered result of O(state=started).
      - Default - the variable C(_fleetqual_started), which the role registers it in, read as it was registered (not templated).
    type: dict
  record:
    description:
      - Action - O(state=finished) and O(state=failed) - the record's inputs C({run_id, profile, groups, test_dir,
        results_dir, drift, retention}).
    type: dict
  durability:
    description:
      - Action - O(state=finished) and O(state=failed) - the power-cut test's verdict (the filter
        C(fleetqual.storage.durability_verdict), docs/durability.md), kept in the record as C(durability); the record's
        verdict is the worse of the two, the test's reasons first.
    type: dict
  thresholds:
    description: Action - C(fleetqual_thresholds), the rules the host is judged by.
    type: list
    elements: raw
  latency_bound_ms:
    description: Action - C(fleetqual_latency_bound_ms), for the diagnostics.
    type: float
  error:
    description: Action - O(state=failed) - C({task, msg}) of the task that failed.
    type: dict
  stored:
    description: Action - O(state=failed) - the record O(state=finished) stored before it failed with the job's error; handed to the report as it is.
    type: dict
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - Check mode - the start reports the plan and what it would deploy and create; nothing is started or changed.
"""

EXAMPLES = r"""
- name: Check, deploy, plan, preflight and start (the role passes every input)
  fleetqual.storage.qualify_host:
    state: started
    path: /var/tmp/fleetqual
    binary: /opt/fleetqual/bin/iobench
    profile: quick
    cache_size: 256M
  register: started

- name: Wait for the job, judge, clean up and store the record
  fleetqual.storage.qualify_host:
    state: finished
    started: "{{ started }}"
    path: /var/tmp/fleetqual
    record: {run_id: "{{ started.status.run_id }}", profile: quick, groups: [], test_dir: /var/tmp/fleetqual,
             results_dir: results, drift: {}, retention: {}}
"""

RETURN = r"""
facts:
  description: The facts read (module_utils/host/facts.py), also returned as C(ansible_facts) with the C(ansible_) prefix.
  returned: always
  type: dict
plan:
  description: The host's workload plan, as the filter C(fleetqual.storage.plan) gives it.
  returned: O(state=started), once planned
  type: list
  elements: dict
targets:
  description: The plan's targets C([{name, kind, path | device, serial}]); C([]) for the fleetqual_test_dir shorthand.
  returned: O(state=started), once planned
  type: list
  elements: dict
drives:
  description: What M(fleetqual.storage.drives) returns.
  returned: O(state=started), once inventoried
  type: dict
drives_after:
  description: The drives read again with O(health_after) (a burn-in), as M(fleetqual.storage.drives) returns them; null when they
    could not be read (a warning says why).
  returned: O(state=absent) with O(health_after)
  type: dict
preflight:
  description: What M(fleetqual.storage.bench_dir) returns for O(path).
  returned: O(state=started), once preflighted
  type: dict
status:
  description: The job's first status (M(fleetqual.storage.job)); null in check mode. Attached (O(previous)), the
    earlier run's job's status as read.
  returned: O(state=started), once started
  type: dict
attached:
  description: "C({run_id, pid, state, started_epoch, finished_epoch}) of the earlier run's job this start attached to
    (O(previous)): no job was started and the preflight did not run; the wait collects that job as this run's."
  returned: O(state=started), when a job was attached
  type: dict
resumed:
  description: The run whose stored record is this run's result (O(resume)); no job was started, the preflight did
    not run.
  returned: O(state=started), when resumed
  type: str
deploy_needed:
  description: The host's binary is not the controller's build and no O(binary_src) was given; nothing was changed.
  returned: when true
  type: bool
build_needed:
  description: The host must build its own binary; nothing was changed.
  returned: when true
  type: bool
packages_needed:
  description: The packages to install before the job can start (O(manage_packages)); nothing was changed but the binary's deploy.
  returned: when not empty
  type: list
  elements: str
  sample: [sysstat]
record:
  description: The action's O(state=finished) and O(state=failed) - the host record (docs/contracts.md section 6). A failed
    result carries only its brief (verdict, first reasons) and RV(results_file); the record is never printed.
  returned: O(state=finished) when the job did not fail, O(state=failed)
  type: dict
results_file:
  description: The action's O(state=finished) when the job failed - the stored record's path (the failed task prints its
    brief, not the record).
  returned: O(state=finished) when the job failed
  type: str
start_file:
  description: The action's O(state=started) when the start failed and a progress directory is given - the controller's
    file with the start's whole result (facts, drives, plan, preflight), read by O(state=failed); the printed result has
    only the message, cut at 300 characters. RV(facts), RV(plan), RV(targets), RV(drives) and RV(preflight) are not in a
    failed start's result.
  returned: O(state=started) when the start failed
  type: str
identity:
  description:
    - Who the job runs as on the host, decided once by the start and followed by every later step (docs/privileges.md),
      also the host fact C(fleetqual_identity) and the record's C(identity).
    - C({user, uid, become, method, become_user, login_user, login_uid}).
  returned: O(state=started)
  type: dict
stale_payloads_removed:
  description: Module payloads of this collection left in the temporary directory by earlier runs whose connection died
    (same user, untouched for an hour, not in use), removed by the start.
  returned: O(state=started)
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as _start


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["started", "absent", "finished", "failed"], required=True),
            path=dict(type="path", required=True),
            binary=dict(type="path", default="/opt/fleetqual/bin/iobench"),
            binary_sha256=dict(type="str"),
            binary_src=dict(type="path"),
            architecture=dict(type="str"),
            build_on_host=dict(type="bool", default=False),
            manage_packages=dict(type="bool", default=False),
            run_id=dict(type="str", default=""),
            previous=dict(type="str", choices=["attach", "restart", "refuse"], default="attach"),
            uncollected_days=dict(type="int", default=7),
            array_previous=dict(type="dict"),
            resume=dict(type="dict"),
            profile=dict(type="raw"),
            profiles=dict(type="dict"),
            matrix=dict(type="list", elements="raw"),
            overrides=dict(type="raw"),
            cache_size=dict(type="raw", default="256M"),
            seed=dict(type="int"),
            targets=dict(type="list", elements="raw"),
            margin_pct=dict(type="int", default=10),
            health=dict(type="bool", default=True),
            sysfs_root=dict(type="path"),
            dev_root=dict(type="path"),
            collect=dict(type="str", choices=["auto", "sysstat", "procfs", "none"], default="auto"),
            slack=dict(type="int", default=300),
            prepare_min_mibps=dict(type="int", default=20),
            foreign_io=dict(type="dict"),
            impact=dict(type="dict"),
            array=dict(type="dict"),
            test_clock=dict(type="bool", default=False),
            datasets=dict(type="list", elements="str", default=[]),
            plan=dict(type="list", elements="dict", default=[]),
            textfile_dir=dict(type="path"),
            textfile=dict(type="str"),
            health_after=dict(type="bool", default=False),
            build=dict(type="path"),
            progress_dir=dict(type="path"),
            results_dir=dict(type="path"),
            interval=dict(type="int", default=30),
            arrays=dict(type="dict"),
            profile_safety=dict(type="dict"),
            started=dict(type="dict"),
            record=dict(type="dict"),
            thresholds=dict(type="list", elements="raw"),
            durability=dict(type="dict"),
            latency_bound_ms=dict(type="float"),
            error=dict(type="dict"),
            stored=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] not in ("started", "absent"):
        module.fail_json(msg="state %s is the action plugin's; the module takes started or absent" % p["state"])
    run = _start.start if p["state"] == "started" else _start.cleanup
    try:
        result = run(p, check_mode=module.check_mode)
    except _start.StartError as exc:
        result = dict(exc.result, failed=True, msg=exc.msg)
    for warning in result.pop("warnings", None) or []:
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
