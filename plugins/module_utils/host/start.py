# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's measuring path in two module runs (module ``fleetqual.storage.qualify_host``).

:func:`start` is everything before the measurement, in one module run, in this order, each
step the same code the separate modules used to run (so every refusal keeps its words):

1. the facts the plan and the record need (``host_facts``);
2. the packages: with ``manage_packages``, a host without iostat whose ``collect`` would use
   it is told to install sysstat (``packages_needed``, nothing changed; the role installs it
   and starts again);
3. the binary: a host of another architecture than the controller's build, or
   ``build_on_host``, is told to build its own (``build_needed``, nothing changed); a binary
   whose sha256 is not the build's is replaced by the transferred copy (``binary_src``), or
   the action is told to transfer it (``deploy_needed``, nothing changed) (``host_deploy``);
4. the drives: identity, health, the raw-device guard of every device target (``drives``);
5. the plan, from the profile or matrix, the RAM and the device capacities just read
   (``plan.plan_on_targets``, the validation's very planner);
6. the preflight of ``fleetqual_test_dir`` and of each directory target (``bench_dir_ops``);
7. the array part of the job, completed from this host's plan (``lockstep.complete_spec``);
8. the detached job (``job_runner.start``), with each workload's timeout and the deadline
   (``plan_summary.timing``).

A step that refuses fails the module with the step named in the message; what earlier steps
of this run created is removed first, so a failed start leaves the host as it was.

:func:`cleanup` is the second module run: it removes what the start created (the job's data
sets, the device regions a killed job left, each directory target's data sets) and writes
the host's node_exporter textfile when asked.
"""

import hashlib
import json
import math
import os
import pwd
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir as _bench
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import collector as _collector
from ansible_collections.fleetqual.storage.plugins.module_utils.devices import drives as _drives
from ansible_collections.fleetqual.storage.plugins.module_utils.devices import inventory as _drives_inventory
from ansible_collections.fleetqual.storage.plugins.module_utils.host import deploy as _deploy
from ansible_collections.fleetqual.storage.plugins.module_utils.host import facts as _facts
from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as _job
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _job_status
from ansible_collections.fleetqual.storage.plugins.module_utils.job import cleanup as _job_cleanup
from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as _lockstep
from ansible_collections.fleetqual.storage.plugins.module_utils.job import payloads as _payloads
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as _plan
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary as _summary
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as _targets
from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic

TEXTFILE = "fleetqual.prom"
ARRAY_KEYS = ("name", "rank", "members", "steps", "max_clock_uncertainty_ms", "ready_timeout_s", "target",
              "target_kind", "target_path", "target_device")


class StartError(Exception):
    """A refusal: ``msg`` names the step; ``result`` the fields gathered so far."""

    def __init__(self, msg, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


def resolved_targets(plan):
    """The plan's targets ``[{name, kind, path | device, serial}]`` in plan order; ``[]``
    for the ``fleetqual_test_dir`` shorthand (the record's ``targets``)."""
    seen, out = set(), []
    for w in plan:
        name = w.get("target")
        if name is None or name in seen:
            continue
        seen.add(name)
        t = {"name": name, "kind": w.get("target_kind")}
        if w.get("target_kind") == "path":
            t["path"] = w.get("target_path")
        else:
            t.update(device=w.get("target_device"), serial=w.get("target_serial"))
            if w.get("device_offset"):
                t["offset"] = w["device_offset"]
            t.update((key, w[spec_key]) for key, spec_key in _targets.LUN_SPEC_KEYS.items() if w.get(spec_key) is not None)
        out.append(t)
    return out


def lun_paths(targets, drives):
    """The targets, each device target that is a dm-multipath map (a SAN LUN) with its
    ``multipath`` as the guard read it (module_utils/devices/multipath.py: the map's alias
    and WWID, its paths with their transport, portal and states): the record's word on the
    paths the run went through."""
    maps = {g.get("device"): g.get("multipath") for g in (drives or {}).get("guard") or [] if g.get("multipath")}
    for t in targets:
        if t.get("kind") == "device" and maps.get(t.get("device")):
            t["multipath"] = maps[t["device"]]
    return targets


def shorthand(plan):
    """The workloads on ``fleetqual_test_dir`` itself (no target)."""
    return [w for w in plan if w.get("target") is None]


def datasets_of(plan):
    out = []
    for w in plan:
        if w.get("dataset") and w["dataset"] not in out:
            out.append(w["dataset"])
    return out


def on_target(plan, name):
    return [w for w in plan if w.get("target") == name]


def _user_targets(p):
    """``fleetqual_targets`` as the user wrote them, resolved (a LUN named by ``wwid`` or
    ``alias`` gets the device path of its multipath map); the controller refused them before
    any host was touched if they were wrong, so what is left unresolved is only skipped."""
    resolved, _errors = _targets.resolve_targets(p.get("targets") or [])
    return resolved


def _inventory_targets(p, targets):
    """What the drive inventory reads: the resolved targets' paths and devices (the test
    directory when there are none)."""
    out = [] if targets else [p["path"]]
    out += [t["path"] for t in targets if t.get("kind") == "path"]
    out += [t["device"] for t in targets if t.get("kind") == "device"]
    return out


def _check_devices(targets):
    """The raw-device guard's entries: the resolved device targets without their report name."""
    return [dict((k, v) for k, v in t.items() if k not in ("name", "kind", "shorthand"))
            for t in targets if t.get("kind") == "device"]


def _packages(p, out):
    """Step 2. True when the start may go on (nothing to install first)."""
    if p.get("manage_packages") and _collector.sysstat_missing(p.get("collect") or "auto"):
        out.update(packages_needed=["sysstat"],
                   msg="iostat is not installed and collect is %s: sysstat to be installed" % (p.get("collect") or "auto"))
        return False
    return True


def _binary(p, facts, out, check_mode):
    """Step 3. True when the start may go on."""
    want_arch = p.get("architecture")
    if p.get("build_on_host") or (want_arch and facts["architecture"] != want_arch):
        out.update(build_needed=True,
                   msg="iobench is built on the host: %s" % (
                       "fleetqual_build_on is target" if p.get("build_on_host") else
                       "the host is %s, the controller's build is %s" % (facts["architecture"], want_arch)))
        return False
    binary, want = p["binary"], p.get("binary_sha256")
    if not want:
        if not os.access(binary, os.X_OK) and not check_mode:
            raise StartError("binary: %s is missing or not executable (built on the host?)" % binary)
        return True
    have = _deploy.sha256_file(binary)
    out["binary_sha256"] = have
    if have == want:
        return True
    ident = out.get("identity")
    if ident and ident["uid"] != 0 and not check_mode:
        # the binary must be installed: its directory must be the run's to write
        _writable_dir("fleetqual_bin_dir", os.path.dirname(binary), ident)
    if p.get("binary_src"):
        try:
            _deploy.install(p["binary_src"], binary, want, check_mode=check_mode)
        except _deploy.DeployError as exc:
            raise StartError("deploy: %s" % exc)
        out.update(changed=True, deployed=True, binary_sha256=want)
        return True
    if check_mode:
        out["deployed"] = False
        out["msg"] = "check mode: would copy iobench (%s) to %s" % (want[:12], binary)
        return True
    out.update(deploy_needed=True, msg="%s has sha256 %s, the controller's build %s: to be transferred"
               % (binary, have or "none (missing)", want))
    return False


def identity():
    """Who this module run is on the host, the identity every later step of the run reads and
    removes the job's files as (docs/privileges.md): ``{user, uid}`` of the effective user,
    and ``login_user``/``login_uid`` when an escalation says who logged in (``SUDO_USER``,
    ``SUDO_UID``, ``DOAS_USER``), else None. The controller adds ``become`` and ``method``."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    login = os.environ.get("SUDO_USER") or os.environ.get("DOAS_USER") or None
    login_uid = os.environ.get("SUDO_UID")
    return {"user": user, "uid": uid, "login_user": login,
            "login_uid": int(login_uid) if login_uid and login_uid.isdigit() else None}


def _who(ident):
    return "user %s (uid %s) without root" % (ident["user"], ident["uid"])


NO_ROOT_FIX = ("or let the run escalate: fleetqual_become: true (the default for a login other than root) with "
               "passwordless sudo or ansible_become_password (docs/privileges.md)")


def _owner(path):
    try:
        st = os.stat(path)
    except OSError:
        return "?"
    try:
        name = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        name = str(st.st_uid)
    return "owned by %s, mode %04o" % (name, st.st_mode & 0o7777)


def _writable_dir(variable, path, ident):
    """Refuse (:class:`StartError` naming ``variable``) when the run's user cannot create or
    write the directory ``path`` (its nearest existing ancestor when it does not exist yet),
    or when it holds a measurement job's files another user owns (a run as root left them:
    the leftover check could neither read nor clear them)."""
    existing = _bench.nearest_existing(path)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise StartError("privileges: %s cannot %s %s %s (%s %s): point %s at a directory it can write, %s"
                         % (_who(ident), "write" if existing == path else "create", variable, path,
                            existing, _owner(existing), variable, NO_ROOT_FIX))
    job = _job_status.job_dir(path)
    try:
        st = os.lstat(job)
    except OSError:
        return
    if st.st_uid != ident["uid"] or not os.access(job, os.R_OK | os.W_OK | os.X_OK):
        raise StartError("privileges: %s %s holds the job files of an earlier run as another user (%s, %s) that %s "
                         "can neither read nor clear: remove %s as that user, or run as it again (fleetqual_become; "
                         "docs/privileges.md)" % (variable, path, job, _owner(job), _who(ident), job))


def privileges(p, ident):
    """The start's first check (before anything is read or written on the host): a run
    without root refuses, with the fix, what needs root: a raw device target, a
    ``fleetqual_bin_dir``, ``fleetqual_test_dir`` or directory target it cannot write
    (the binary's directory only when the binary must be installed: see :func:`_binary`)."""
    if ident["uid"] == 0:
        return
    for t in p.get("targets") or []:
        device = _targets.raw_device(t)
        if device:
            raise StartError("privileges: target %s is the raw device %s, which only root may measure, and this run "
                             "is %s: use a directory target, %s" % (t.get("name") or device, device, _who(ident),
                                                                    NO_ROOT_FIX))
    _writable_dir("fleetqual_test_dir", p["path"], ident)
    for t in p.get("targets") or []:
        if isinstance(t, dict) and t.get("path"):
            _writable_dir("the path of target %s" % (t.get("name") or t["path"]), t["path"], ident)


def _preflight(p, plan, check_mode, created):
    """Step 6: ``(test_dir result, [target results])``; appends what it created."""
    short = shorthand(plan)
    devices = [t["device"] for t in resolved_targets(plan) if t["kind"] == "device"]
    try:
        first = _bench.prepare(p["path"], binary=p["binary"], datasets=datasets_of(short),
                               required_bytes=_summary.required_space(short), margin_pct=p["margin_pct"],
                               direct=any(w.get("direct") for w in short), devices=devices, check_mode=check_mode)
    except _bench.BenchDirError as exc:
        raise StartError("preflight of fleetqual_test_dir %s: %s" % (p["path"], exc.msg), preflight=exc.result)
    created.append((p["path"], datasets_of(short), devices))
    results = []
    for t in resolved_targets(plan):
        if t["kind"] != "path":
            continue
        mine = on_target(plan, t["name"])
        try:
            r = _bench.prepare(t["path"], binary=p["binary"], datasets=datasets_of(mine),
                               required_bytes=_summary.required_space(mine), margin_pct=p["margin_pct"],
                               direct=any(w.get("direct") for w in mine), check_mode=check_mode)
        except _bench.BenchDirError as exc:
            raise StartError("preflight of target %s (%s): %s" % (t["name"], t["path"], exc.msg), preflight=first)
        created.append((t["path"], datasets_of(mine), []))
        results.append(dict(r, target=t["name"]))
    return first, results


# what a job of an earlier run is to this one (``fleetqual_previous``, docs/operations.md)
PREVIOUS = ("attach", "restart", "refuse")
# a workload's keys that differ between two runs of one plan (not the plan's)
_RUN_KEYS = ("seed",)


def plan_fingerprint(plan, binary_sha256=None):
    """The plan's fingerprint: its workloads (their run-specific keys aside), the targets they
    run on and the binary's checksum. Two runs with one fingerprint measure the same."""
    doc = {"plan": [{k: v for k, v in sorted(w.items()) if k not in _RUN_KEYS} for w in plan],
           "binary_sha256": binary_sha256}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def previous_decision(status, fingerprint, previous="attach", array=False, now=None, uncollected_days=7,
                      array_previous=None):
    """What this start does with a job an earlier run left in the test directory (``status``,
    its ``status.json``; None when there is none): ``("attach", why)`` (wait for it or collect it
    as this run's result), ``("refuse", why)`` or ``("clear", why)`` (the preflight reports and
    clears it, as before). A job is attached when ``previous`` is ``attach``, it ran the same
    plan (``fingerprint``), and it still runs or finished (``done``) within ``uncollected_days``;
    one still running another plan is refused by the preflight (in use). An array member's
    (``array``) only with its whole array: ``array_previous`` (``{run_id, why}``, decided on
    the controller from every member: plugin_utils/remote/array_start.py ``whole_array``)
    names the run whose jobs every member attaches; without it the job is cleared, and a
    member told to attach whose job cannot be is refused (the others are attached)."""
    if not isinstance(status, dict) or not status.get("run_id") and not status.get("pid"):
        return "clear", None
    now = time.time() if now is None else now
    alive = _job_status.is_alive(status)
    state = "running" if alive else status.get("state")
    if previous == "restart":
        return "clear", "fleetqual_previous: restart"
    if status.get("collected"):
        return "clear", "its run collected it"
    if previous == "refuse" and (alive or state == "done"):
        return "refuse", ("fleetqual_test_dir holds the measurement job of run %s (%s, %d of %s workloads measured) "
                          "and fleetqual_previous is refuse; collect it (fleetqual_previous: attach) or measure again "
                          "(fleetqual_previous: restart)" % (status.get("run_id"), state,
                                                             len(status.get("results") or []), status.get("of")))
    word = array_previous if previous == "attach" and isinstance(array_previous, dict) else {}
    if array and not word.get("run_id"):
        return "clear", word.get("why") or "an array member's job is attached only with its whole array"
    decision, why = _attachable(status, fingerprint, alive, state, now, uncollected_days)
    if array and decision == "attach" and status.get("run_id") != word["run_id"]:
        decision, why = "clear", "it is of run %s" % status.get("run_id")
    if array and decision != "attach":
        return "refuse", ("the array's jobs of run %s are attached whole, but this member's job cannot be: %s; "
                          "fleetqual_previous: restart measures the whole array again" % (word["run_id"], why))
    if array:
        return "attach", "%s, with its whole array (%s)" % (why, word.get("why") or "every member's job")
    return decision, why


def _attachable(status, fingerprint, alive, state, now, uncollected_days):
    """Whether a job of the same plan, still running or finished uncollected within
    ``uncollected_days``, is attached (:func:`previous_decision`, apart from arrays)."""
    if status.get("fingerprint") != fingerprint:
        return "clear", "it ran another plan"
    if alive:
        return "attach", "still running the same plan"
    if state != "done":
        return "clear", "it ended %s" % state
    if uncollected_too_long(status, now, uncollected_days):
        return "clear", "finished more than fleetqual_uncollected_days (%s) ago" % uncollected_days
    return "attach", "finished the same plan and was never collected"


def uncollected_too_long(status, now, uncollected_days):
    """Whether a finished job ``status`` waited for a run to collect it longer than
    ``uncollected_days`` (``fleetqual_uncollected_days``): then it is cleared, not attached."""
    finished = status.get("finished_epoch") or status.get("started_epoch") or 0
    return now - finished > float(uncollected_days) * 86400


def resumes(previous, resume, fingerprint):
    """True when this start measures nothing because the controller holds the record of a
    killed run that measured this very plan (``resume``: ``{run_id, fingerprint}``) and no job is
    left in the test directory (``previous``: its status, None): a job still there is attached
    or cleared by :func:`previous_decision` instead."""
    return (previous is None and isinstance(resume, dict) and bool(resume.get("run_id"))
            and resume.get("fingerprint") == fingerprint)


def attached_of(status):
    """The record's word on a job collected from an earlier run."""
    return {"run_id": status.get("run_id"), "pid": status.get("pid"), "state": status.get("state"),
            "started_epoch": status.get("started_epoch"), "finished_epoch": status.get("finished_epoch")}


def job_spec(p, plan, array):
    """The job's parameters (``job_runner.start``) for the plan: each workload's timeout and
    planned seconds, the deadline (``plan_summary.timing``) and, in array mode, the array's
    schedule on top of them (``lockstep.array_timing``); ``foreign_io``/``impact`` of ``p``
    set on every workload."""
    workloads = plan
    extra = dict((k, p[k]) for k in ("foreign_io", "impact") if p.get(k))
    if extra:
        workloads = [dict(w, **extra) for w in plan]
    timeouts, planned, planned_s, deadline_s = _summary.timing(workloads, p["slack"], p["prepare_min_mibps"])
    spec = {"path": p["path"], "run_id": p["run_id"], "binary": p["binary"], "datasets": datasets_of(shorthand(plan)),
            "workloads": workloads, "timeouts": timeouts, "planned": planned, "planned_s": planned_s,
            "deadline_s": deadline_s, "seed": p.get("seed"), "collect": p["collect"],
            "fingerprint": plan_fingerprint(plan, p.get("binary_sha256"))}
    if array:
        a_planned, a_extra = _lockstep.array_timing(array)
        spec.update(array=array, planned_s=planned_s + a_planned, deadline_s=deadline_s + a_extra)
    return spec


def lift_warnings(out, *parts):
    """Move the ``warnings`` of each step's result into the result's own list (the module
    gives them as Ansible warnings)."""
    for part in parts:
        if isinstance(part, dict):
            out.setdefault("warnings", []).extend(part.pop("warnings", None) or [])
    return out


def start(p, check_mode=False):
    """The start's result, or :class:`StartError` (after removing what this run created)."""
    facts = _facts.gather()
    out = {"changed": False, "facts": facts, "identity": identity(),
           "ansible_facts": dict(("ansible_" + k, v) for k, v in facts.items())}
    try:
        # a run without root refuses what needs root before it reads or writes anything
        privileges(p, out["identity"])
        # both checks change nothing before they answer: a host that lacks sysstat and its own build
        # is told both at once (roles/qualify/tasks/after_start.yml installs, builds, starts again)
        packages_ok = _packages(p, out)
        binary_ok = _binary(p, facts, out, check_mode)
    except StartError as exc:
        exc.result = dict(out, **exc.result)
        raise
    if not binary_ok or not packages_ok:
        return out
    if not check_mode:
        # the AnsiballZ payloads that killed module runs of this collection left (docs/privileges.md)
        out["stale_payloads_removed"] = _payloads.clean()
    targets = _user_targets(p)
    try:
        drives = _drives_inventory.host_inventory(targets=_inventory_targets(p, targets), health=p.get("health", True),
                                                  check_devices=_check_devices(targets), sysfs_root=p.get("sysfs_root") or "/sys",
                                                  dev_root=p.get("dev_root") or "/dev")
    except _drives.DrivesError as exc:
        raise StartError("drives: %s" % exc.msg, drives=exc.result, **out)
    out["drives"] = drives
    try:
        plan = _plan.plan_on_targets(p["profile"], cache_size=p["cache_size"], mem_total_mb=facts["memtotal_mb"] or 0,
                                     overrides=p.get("overrides"), profiles=p.get("profiles"), matrix=p.get("matrix"),
                                     seed=p.get("seed"), targets=p.get("targets"), test_dir=p["path"],
                                     capacities=drives)
    except _plan.PlanError as exc:
        raise StartError("invalid workload plan:\n  - %s" % "\n  - ".join(exc.errors), **out)
    out.update(plan=plan, targets=lun_paths(resolved_targets(plan), drives), datasets=datasets_of(shorthand(plan)),
               plan_summary=_summary.plan_summary(plan))
    created = []
    # a job of an earlier run in the test directory: attached (waited for, or collected as this
    # run's result), refused, or left to the preflight to report and clear (docs/operations.md)
    previous = _job_status.read_status(_job_status.job_dir(p["path"])) if os.path.isdir(p["path"]) else None
    decision, why = previous_decision(previous, plan_fingerprint(plan, p.get("binary_sha256")),
                                      p.get("previous") or "attach", bool(p.get("array")),
                                      uncollected_days=p.get("uncollected_days", 7),
                                      array_previous=p.get("array_previous"))
    if decision == "refuse":
        raise StartError(why, **out)
    if resumes(previous, p.get("resume"), plan_fingerprint(plan, p.get("binary_sha256"))):
        # the record a killed run stored on the controller is this run's (plugin_utils/judge/resume.py)
        out.update(resumed=p["resume"]["run_id"], created=False, status=None, preflight={"resumed": True},
                   preflight_targets=[],
                   msg="not measured again: run %s measured this plan to its end and stored the record on the "
                       "controller, and no job is left here" % p["resume"]["run_id"])
        return out
    if decision == "attach":
        spec = job_spec(p, plan, None)
        # the job's own deadline (an array member's includes its array's schedule); array None:
        # its array started with the earlier run, none of the lock-step start runs again
        deadline_s = spec["deadline_s"]
        if previous.get("deadline_epoch") and previous.get("started_epoch"):
            deadline_s = max(deadline_s, int(math.ceil(previous["deadline_epoch"] - previous["started_epoch"])))
        out.update(timeouts=spec["timeouts"], planned=spec["planned"], planned_s=previous.get("planned_s"),
                   deadline_s=deadline_s, array=None, preflight={"attached": True}, preflight_targets=[],
                   status=previous, attached=attached_of(previous), created=True,
                   msg="attached to the measurement job of run %s (pid %s, %s): %s"
                       % (previous.get("run_id"), previous.get("pid"), previous.get("state"), why))
        return out
    try:
        out["preflight"], out["preflight_targets"] = _preflight(p, plan, check_mode, created)
        lift_warnings(out, drives, out["preflight"], *out["preflight_targets"])
        array = None
        if p.get("array"):
            try:
                array = _lockstep.complete_spec(p["array"], out["targets"], plan, p["path"], p["prepare_min_mibps"])
            except ValueError as exc:
                raise StartError("array: %s" % exc)
        spec = job_spec(p, plan, array)
        out.update(timeouts=spec["timeouts"], planned=spec["planned"], planned_s=spec["planned_s"],
                   deadline_s=spec["deadline_s"],
                   array=dict((k, array.get(k)) for k in ARRAY_KEYS) if array else None)
        if check_mode:
            out.update(status=None, check_mode=True, msg="check mode: the job would be started")
            return out
        try:
            out["status"] = _job.start(spec)
        except _job_status.JobError as exc:
            raise StartError("job: %s" % exc)
        out["created"] = True
        return out
    except StartError as exc:
        if not check_mode:
            left = remove_created(created, p["binary"])
            if left:
                exc.msg += " (and removing what this run created: %s)" % "; ".join(left)
        exc.result = dict(out, **exc.result)
        raise


def remove_created(created, binary):
    """Remove each ``(path, datasets, devices)`` in reverse order; the problems, if any."""
    problems = []
    for path, datasets, devices in reversed(created):
        try:
            _bench.remove(path, datasets=datasets, binary=binary, devices=devices)
        except _bench.BenchDirError as exc:
            problems.append("%s: %s" % (path, exc.msg))
    return problems


def to_remove(path, datasets, targets, plan):
    """``[(path, datasets, devices)]`` the cleanup removes: ``fleetqual_test_dir`` with its
    data sets and the device of every device target (a region a killed job left is zeroed
    there), then each directory target with its own data sets."""
    # which data sets lie in which directory: the job's own cleanup's answer (job_runner.cleanup_plan)
    dirs, _regions = _job_cleanup.cleanup_plan(path, plan, datasets)
    listed = dict(dirs)
    devices = [t["device"] for t in targets or [] if isinstance(t, dict) and t.get("kind") == "device"]
    return [(path, listed.pop(path, []), devices)] + [(d, names, []) for d, names in listed.items()]


def cleanup(p, check_mode=False):
    """The second module run: what the start created, removed (the job zeroes its device
    regions itself; a region a killed job left is zeroed here), and the textfile. With
    ``health_after`` (a burn-in, docs/integrity.md) the drives' health is read again first:
    ``drives_after``, which ``plugin_utils/judge/burnin.py`` compares with the start's."""
    out = {"changed": False, "removed": []}
    problems = []
    if p.get("health_after"):
        try:
            out["drives_after"] = _drives_inventory.host_inventory(targets=_inventory_targets(p, _user_targets(p)), health=True,
                                                                   sysfs_root=p.get("sysfs_root") or "/sys",
                                                                   dev_root=p.get("dev_root") or "/dev")
            lift_warnings(out, out["drives_after"])
        except _drives.DrivesError as exc:     # said in the record, never taken for "no errors"
            out["drives_after"] = None
            out.setdefault("warnings", []).append("drive health after the run not read: %s" % exc.msg)
    for path, datasets, devices in to_remove(p["path"], p.get("datasets"), p.get("targets"), p.get("plan")):
        try:
            r = _bench.remove(path, datasets=datasets, binary=p["binary"], devices=devices, check_mode=check_mode)
            lift_warnings(out, r)
            out["removed"].append(r)
        except _bench.BenchDirError as exc:
            problems.append("%s: %s" % (path, exc.msg))
    if p.get("textfile") is not None and p.get("textfile_dir"):
        dest = os.path.join(p["textfile_dir"], TEXTFILE)
        if not check_mode:
            try:
                write_atomic(dest, p["textfile"], mode=0o644)
            except (IOError, OSError) as exc:
                problems.append("node_exporter textfile %s: %s" % (dest, exc))
        out["textfile"] = dest
    if problems:
        raise StartError("cleanup: %s" % "; ".join(problems), **out)
    return out
