# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of the detached measurement job, shared by the actions
``fleetqual.storage.job`` and ``fleetqual.storage.qualify_host`` (which extends it): the start
through the module, the raw status polls over the open connection, the wait and the
records of a finished job. See ``plugins/action/job.py`` for what each state does."""

import json
import os
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as _host_start
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _job_runner
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import array_start as _lockstep
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import interrupt as _interrupt
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.progress import (
    AWAY,
    away_deadline,
    away_delay,
    away_line,
    claim_round,
    controller_pid,
    exit_if_orphaned,
    fleet_line,
    next_poll,
    progress_dir_ready,
    read_progress,
    show_plan,
    watch_controller,
    write_json,
)

display = Display()
MODULE = "fleetqual.storage.job"


def stop_interrupted(action, path, run_id, stopped_by, task_vars):
    """Stop the job in ``path`` (run ``run_id``'s only) over ``action``'s connection, as
    ``playbooks/stop.yml`` does: the run was interrupted (remote/interrupt.py). Returns the
    module's result; a failure to reach the host is a result, never raised (the wait goes on
    reading the job's status)."""
    margs = {"path": path, "state": "stopped", "grace": _interrupt.STOP_GRACE_S, "stopped_by": stopped_by}
    if run_id:
        margs["run_id"] = run_id
    try:
        return action._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)
    except AnsibleError as exc:
        return {"failed": True, "msg": str(exc)}


def poll_status(action, path):
    """The job's status in the test directory ``path`` as the module's ``state=status`` gives
    it, read by a raw command over the action's connection: no Python started on the host. It
    runs as the host's identity: escalated (``sudoable``) exactly when the start was, the
    role's wait having set the connection's become from it (``qualify_host.apply_identity``,
    docs/privileges.md). ``{"status": ...}``, or ``{"failed": True, "msg": ...}``; raises
    AnsibleConnectionFailure when the host does not answer."""
    res = action._low_level_execute_command(_job_runner.poll_command(path), sudoable=True)
    if res.get("rc") != 0:
        return {"failed": True, "msg": "reading the job's status in %s failed (rc %s): %s"
                                       % (path, res.get("rc"), (res.get("stderr") or res.get("stdout") or "").strip())}
    try:
        return {"status": _job_runner.parse_poll(res.get("stdout") or "")}
    except _job_runner.JobError as exc:
        return {"failed": True, "msg": str(exc)}
    except ValueError as exc:
        return {"failed": True, "msg": "unreadable job status from %s: %s" % (path, exc)}


def not_started(reason):
    """The start's refusal once the run was interrupted (``reason``: who interrupted it)."""
    return {"failed": True, "changed": False,
            "msg": "not started: the run was stopped by the operator (%s) before this host's job started" % reason}


class JobAction(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "path", "run_id", "binary", "datasets", "workloads", "seed", "collect",
                             "collect_interval", "slack", "prepare_min_mibps", "progress_dir", "interval",
                             "margin", "array", "arrays", "targets", "test_clock", "grace", "stopped_by"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        watch_controller(controller_pid())      # this worker ends with its ansible-playbook
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        state = args.get("state", "status")
        host = task_vars.get("inventory_hostname", "?")
        progress_dir = progress_dir_ready(args.get("progress_dir"))
        if self._task.check_mode and state == "wait":
            # check mode started nothing (the module says what it would run)
            result.update(records=[], error=None, skipped=True, msg="check mode: no job was started")
        elif state == "started":
            result.update(self._start(args, host, progress_dir, task_vars))
        elif state == "wait":
            result.update(self._wait(args, host, progress_dir, task_vars))
        elif state == "stopped":
            # the operator's stop (playbooks/stop.yml): the module signals the job on the host
            margs = {k: args[k] for k in ("path", "state", "run_id", "grace", "stopped_by") if args.get(k) is not None}
            result.update(self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars))
            return result
        else:
            result.update(self._execute_module(module_name=MODULE, module_args={"path": args["path"]},
                                               task_vars=task_vars))
        result["changed"] = False
        return result

    def _progress(self, progress_dir, host, status, state=None, polls=None):
        """``<progress_dir>/<host>.json``: the job's progress as last read, and ``polls``, the
        wait's raw status reads so far (each one SSH session that starts no Python)."""
        if not progress_dir:
            return
        doc = {k: status.get(k) for k in ("run_id", "pid", "started_epoch", "deadline_epoch", "planned_s", "of",
                                          "index", "current", "quiet", "waited_s", "burnin")} if status else {}
        doc.update(host=host, state=state or (status or {}).get("state"), updated=round(time.time(), 3))
        if polls is not None:
            doc["polls"] = polls
        write_json(os.path.join(progress_dir, host + ".json"), doc)

    def _start(self, args, host, progress_dir, task_vars):
        reason = _interrupt.interrupted()
        if reason:
            return not_started(reason)
        workloads = list(args.get("workloads") or [])
        array = self._array_spec(args, host, workloads, task_vars) if args.get("array") else None
        # the job's timeouts, deadline and array timing: the one-run host module's very code
        spec = _host_start.job_spec(dict({"run_id": "", "binary": None, "collect": "auto", "slack": 300,
                                          "prepare_min_mibps": 20}, **args), workloads, array)
        # the plan's fingerprint is the one-run start's (an attachable job): not this module's
        margs = {k: v for k, v in spec.items() if v is not None and k != "fingerprint"}
        if args.get("datasets") is not None:
            margs["datasets"] = args["datasets"]
        if args.get("collect_interval") is not None:
            margs["collect_interval"] = args["collect_interval"]
        margs["state"] = "started"
        res = self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)
        if res.get("failed") or not res.get("status"):
            return res
        self._progress(progress_dir, host, res["status"])
        show_plan(progress_dir, workloads, spec["planned"], margs["planned_s"], margs["deadline_s"])
        return {"status": res["status"], "timeouts": spec["timeouts"], "planned": spec["planned"],
                "planned_s": margs["planned_s"], "deadline_s": margs["deadline_s"],
                "array": {k: array[k] for k in _host_start.ARRAY_KEYS} if array else None}

    def _hosts_vars(self, host, task_vars):
        """Every play host's ``fleetqual_array`` and ``group_names`` (array membership)."""
        hostvars = task_vars.get("hostvars") or {}
        out = {}
        for h in task_vars.get("ansible_play_hosts_all") or [host]:
            hv = hostvars.get(h) or {}
            out[h] = {"fleetqual_array": hv.get("fleetqual_array"), "group_names": hv.get("group_names") or []}
        # this host's failover (the same on every member: validate_arrays), templated
        out.setdefault(host, {})["fleetqual_failover"] = self._templar.template(task_vars.get("fleetqual_failover") or {})
        return out

    def _array_spec(self, args, host, workloads, task_vars):
        """The job's ``array`` (action/lockstep.py ``array_spec``) from every play host's vars."""
        return _lockstep.array_spec(args["array"], args.get("arrays") or {}, self._hosts_vars(host, task_vars), host,
                                    args["path"], targets=args.get("targets"), workloads=workloads,
                                    seed=args.get("seed"), test_clock=args.get("test_clock"),
                                    prepare_min_mibps=args.get("prepare_min_mibps", 20))

    def _poll(self, path, task_vars):
        """One read of the job's status by the wait (:func:`poll_status`)."""
        del task_vars       # the raw command needs none; kept as the action's other reads
        return poll_status(self, path)

    def _wait(self, args, host, progress_dir, task_vars):
        path = args["path"]
        interval = max(1, int(args.get("interval", 30)))
        margin = int(args.get("margin", 120))
        workloads = list(args.get("workloads") or [])
        controller = controller_pid()   # this worker's ansible-playbook
        overdue = 0                 # polls in a row that found the workload past its planned end
        polls = 0
        last, read_at = None, None  # the last status read, and when (this clock)
        away = {"episodes": 0, "seconds": 0.0, "longest_s": 0.0}
        since, attempts = None, 0   # the host not answering: since when, how many polls in a row
        stop_sent = False           # the run was interrupted and this wait stopped the job
        # the host's start record (the job's deadline), read before this wait writes over it
        start_record = self._start_record(progress_dir, host)
        while True:
            try:
                polls += 1
                res = self._poll(path, task_vars)
            except AnsibleConnectionFailure:
                # the job goes on without the controller: poll again until its deadline
                # (docs/operations.md, "A host away for a while")
                now = time.time()
                until = away_deadline(last, read_at, start_record, margin)
                if since is None:
                    since, away["episodes"] = now, away["episodes"] + 1
                attempts += 1
                if until is None or now >= until or _interrupt.interrupted():
                    # (an interrupted run waits for no host: its job ends by its deadline)
                    self._progress(progress_dir, host, last, state="unreachable", polls=polls)
                    raise
                self._progress(progress_dir, host, last, state=AWAY, polls=polls)
                if attempts == 1 or not progress_dir or claim_round(
                        progress_dir, "away-%s-%d" % (host, int(now // interval))):
                    display.display(away_line(host, now - since, until - now))
                self._reconnect()
                self._sleep(away_delay(attempts, interval, until - now), controller)
                continue
            if since is not None:
                back = time.time() - since
                away["seconds"] += back
                away["longest_s"] = max(away["longest_s"], back)
                since, attempts = None, 0
            if res.get("failed") or not res.get("status"):
                self._progress(progress_dir, host, None, state="lost", polls=polls)
                return res
            st = res["status"]
            last, read_at = st, time.time()
            state = st.get("state")
            final = state not in ("running",)
            self._progress(progress_dir, host, st, polls=polls)
            now = time.time()
            if progress_dir and claim_round(progress_dir, "round-%d" % int(now // interval)):
                display.display(fleet_line(read_progress(progress_dir), now))
            if final:
                break
            reason = _interrupt.interrupted()
            if reason and not stop_sent:
                stop_sent = True
                res = stop_interrupted(self, path, st.get("run_id"), reason, task_vars)
                if res.get("failed"):
                    display.warning("%s: the measurement job could not be stopped: %s" % (host, res.get("msg")))
                continue
            host_now = st.get("now") or now
            if host_now > (st.get("deadline_epoch") or host_now) + margin:
                self._progress(progress_dir, host, st, state="lost", polls=polls)
                return {"failed": True, "status": st,
                        "msg": "the measurement job (pid %s) is still running %d s after its deadline"
                               % (st.get("pid"), margin)}
            delay, overdue = next_poll(now, interval, st, overdue)
            self._sleep(delay, controller)
        exit_if_orphaned(controller)
        out = self._finish(st, workloads, progress_dir)
        if away["episodes"]:
            out["away"] = dict(away, seconds=round(away["seconds"], 1), longest_s=round(away["longest_s"], 1))
        return out

    @staticmethod
    def _sleep(delay, controller):
        until = time.time() + delay
        while time.time() < until:
            time.sleep(min(_interrupt.INTERRUPTED_POLL_S, max(0.0, until - time.time())))
            # the job on the host goes on and ends by its deadline
            exit_if_orphaned(controller)
            if _interrupt.interrupted():
                return      # an interrupted run stops and collects its jobs now

    def _reconnect(self):
        """Drop the connection that failed (an SSH master whose server went away), so that the
        next poll logs in afresh."""
        try:
            self._connection.reset()
        except Exception:  # pylint: disable=broad-except
            pass            # a connection that cannot reset: the next poll says what it can

    @staticmethod
    def _start_record(progress_dir, host):
        """The host's progress record (written with the start: the job's deadline), or None."""
        if not progress_dir:
            return None
        try:
            with open(os.path.join(progress_dir, host + ".json")) as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def _finish(self, st, workloads, progress_dir=None):
        results = st.get("results") or []
        # by key (<id>@<target>): with targets a workload id is in the plan once per target
        by_key = {w.get("key") or w.get("id"): w for w in workloads}
        records = []
        for r in results:
            if r.get("failed"):
                continue
            res = dict(r.get("result") or {}, failed=False)
            if r.get("warnings"):
                res["warnings"] = r["warnings"]
            key = r.get("key") or r.get("id")
            records.append(workload_record(by_key.get(key, {"id": r.get("id")}), res))
        error = None
        of = len(workloads)

        def at(index, ident):
            # where the job was: a workload, or its preparation before the first one began
            if not index or ident is None:
                return "Before workload 1/%d" % of, "before its first workload began (preparing)"
            return "Workload %s/%d: %s" % (index, of, ident), "at workload %s/%d (%s)" % (index, of, ident)
        if st.get("error"):
            e = st["error"]
            error = {"task": at(e.get("index"), e.get("id"))[0], "msg": e.get("msg")}
        elif st.get("state") == "died":
            error = {"task": at(st.get("index"), st.get("current"))[0],
                     "msg": "the measurement job (pid %s) died without a final status" % st.get("pid")}
        elif st.get("state") in ("expired", "stopped"):
            task, when = at(st.get("index"), st.get("current"))
            reason = st.get("stop_reason") or ""
            how = ("stopped by its deadline" if st["state"] == "expired"
                   else reason if reason.startswith(_job_runner.OPERATOR_STOP) else "stopped")
            error = {"task": task, "msg": "the measurement job was %s %s" % (how, when)}
        cleanup = st.get("cleanup") or {}
        run = _lockstep.array_run(st.get("array"))
        if run and progress_dir:
            _failover.attach(run, _failover.read_log(_lockstep.array_dir(progress_dir, run["name"])), st.get("kernel"))
        return {"status": {k: v for k, v in st.items() if k not in ("results", "array")}, "records": records,
                "error": error, "cleanup": cleanup, "array_run": run,
                "msg": "job %s: %d of %d workloads measured" % (st.get("state"), len(records), of)}
