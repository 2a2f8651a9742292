# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ``fleetqual.storage.qualify_host``: a host's measuring path in two
module runs (issue 18; module docs: plugins/modules/qualify_host.py).

``state: started``: ONE module run on the host reads the facts the plan needs, checks the
binary's sha256, inventories the drives (health, raw-device guard), plans, preflights each
target and starts the detached job. Only when the host's binary is not the controller's
build does the module stop before changing anything; the build is then transferred and the
module run again (a host's first run: one more). The plan is printed once per distinct plan
for the fleet, and the host's start is written to the run's progress directory.

``state: finished``: waits for the job with polls that start no Python on the host (a raw
read of the job's status over the open connection, ``job_runner.poll_command``), printing
one progress line per round for the fleet (action ``job``); then judges the results on the
controller (the role's diagnostics and judge filters), runs ONE module run that removes
what the run created (and writes the host's node_exporter textfile when asked), and
stores the record (``plugin_utils/host_record.py``), handing it to the fleet report
(``ansible_stats``, as ``set_stats`` does) and returning it as ``record``. A host whose job
failed is stored as ERROR and the task fails with the job's error.

``state: failed`` (the role's rescue): a host whose start or wait failed: removes what the
start created (only when it created anything), then judges and stores the ERROR record.
"""

import os

from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.action import job as _job_action
from ansible_collections.fleetqual.storage.plugins.action import lockstep as _lockstep
from ansible_collections.fleetqual.storage.plugins.plugin_utils import host_record as _record
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import effective_safety

display = Display()
MODULE = "fleetqual.storage.qualify_host"
REPORT_STAT = "fleetqual_report"
# the role registers the start's result under this name; O(started) defaults to it
STARTED_VAR = "_fleetqual_started"
# what the cleanup needs of each planned workload (module_utils/job_runner.cleanup_plan)
CLEANUP_KEYS = ("target_kind", "target_path", "target_device", "device_size", "dataset")

# the module's own arguments, passed through from the task
START_ARGS = ("path", "binary", "binary_sha256", "architecture", "build_on_host", "manage_packages", "profile",
              "profiles", "matrix", "overrides", "cache_size", "seed", "targets", "margin_pct", "health", "sysfs_root", "dev_root", "run_id",
              "collect", "slack", "prepare_min_mibps", "test_clock")


class ActionModule(_job_action.ActionModule):
    TRANSFERS_FILES = False   # a temporary directory only when the build must be transferred
    _VALID_ARGS = frozenset(START_ARGS + ("state", "build", "progress_dir", "array", "arrays", "foreign_io", "impact",
                                          "profile_safety", "started", "record", "thresholds", "latency_bound_ms",
                                          "textfile_dir", "error", "interval", "stored"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        controller = os.getppid()   # this worker's ansible-playbook
        result = super(_job_action.ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        state = args.get("state")
        host = task_vars.get("inventory_hostname", "?")
        progress_dir = _job_action.progress_dir_ready(args.get("progress_dir"))
        if state == "started":
            result.update(self._started(args, host, progress_dir, task_vars))
        elif state == "finished":
            result.update(self._finished(args, host, progress_dir, task_vars))
        elif state == "failed":
            result.update(self._failed(args, host, task_vars))
        else:
            raise AnsibleActionFail("state: must be started, finished or failed, got %r" % (state,))
        # the results are large (plan, drives, the record): after the wait, the judge, the cleanup
        # and the store, a worker whose ansible-playbook was killed meanwhile must not hand them over
        _job_action.exit_if_orphaned(controller)
        return result

    # ------------------------------------------------------------------ started
    def _start_args(self, args, host, task_vars):
        margs = {k: args[k] for k in START_ARGS if args.get(k) is not None}
        # the validation checked these (validate.safety_errors): merged by the same function
        foreign_io, impact, _errors = effective_safety({"fleetqual_profile": args.get("profile"),
                                                        "fleetqual_profile_safety": args.get("profile_safety") or {},
                                                        "fleetqual_foreign_io": args.get("foreign_io") or {},
                                                        "fleetqual_impact": args.get("impact") or {}})
        margs.update({k: v for k, v in (("foreign_io", foreign_io), ("impact", impact)) if v})
        if args.get("array"):
            margs["array"] = _lockstep.member_spec(args["array"], args.get("arrays") or {}, self._hosts_vars(host, task_vars),
                                                   host, seed=args.get("seed"), test_clock=args.get("test_clock"))
        margs["state"] = "started"
        return margs

    def _started(self, args, host, progress_dir, task_vars):
        margs = self._start_args(args, host, task_vars)
        res = self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)
        if res.get("deploy_needed") and not res.get("failed"):
            if not args.get("build"):
                return dict(res, failed=True, msg="%s has sha256 %s, not the controller's build %s, and no build was "
                                                  "given to deploy" % (margs.get("binary"), res.get("binary_sha256"),
                                                                       margs.get("binary_sha256")))
            res = self._deploy_and_start(args["build"], margs, task_vars)
        if res.get("failed") or res.get("build_needed") or not res.get("status"):
            return res
        self._progress(progress_dir, host, res["status"])
        _job_action.show_plan(progress_dir, res.get("plan") or [], res.get("planned") or [], res.get("planned_s"),
                              res.get("deadline_s"))
        return res

    def _deploy_and_start(self, build, margs, task_vars):
        """Transfer the controller's build into a temporary directory of the host and run the
        module again with it (``binary_src``): it installs the copy only when its sha256 is
        the build's."""
        tmpdir = self._make_tmp_path()
        try:
            remote = self._connection._shell.join_path(tmpdir, "iobench")
            self._transfer_file(build, remote)
            self._fixup_perms2((tmpdir, remote))
            return self._execute_module(module_name=MODULE, module_args=dict(margs, binary_src=remote),
                                        task_vars=task_vars)
        finally:
            self._remove_tmp_path(tmpdir)

    # ------------------------------------------------------------------ finished / failed
    def _finished(self, args, host, progress_dir, task_vars):
        started = self._started_result(args, task_vars)
        if self._task.check_mode or started.get("check_mode"):
            return {"changed": False, "skipped": True, "record": None,
                    "msg": "check mode: no job was started, nothing to collect"}
        wait = self._wait({"path": args["path"], "interval": args.get("interval", 30),
                           "workloads": started.get("plan") or []}, host, progress_dir, task_vars)
        if wait.get("failed") and "records" not in wait:
            # the job's status could not be read: its records are lost, the host is an ERROR
            error = {"task": self._task.get_name(), "msg": wait.get("msg") or "the job's status could not be read"}
            return self._judge_clean_store(args, host, started, [], error, None, task_vars)
        return self._judge_clean_store(args, host, started, wait["records"], wait.get("error"), wait.get("array_run"),
                                       task_vars)

    @staticmethod
    def _started_result(args, task_vars):
        """The start's result: the ``started`` argument, else the variable the role registers
        it in (``_fleetqual_started``), read as it was registered. The role passes no
        ``started``: templating the whole result (the plan, the drives, the facts) into the
        task's arguments cost the most of this task's CPU on the controller (issue 18)."""
        if "started" in args:
            return args.get("started") or {}
        return task_vars.get(STARTED_VAR) or {}

    def _failed(self, args, host, task_vars):
        if isinstance(args.get("stored"), dict):
            # judged and stored by the wait task, which failed with the job's error: Ansible
            # hands a failed task's ansible_stats to nobody, so the record is handed over here
            record = args["stored"]
            return {"changed": False, "record": record, "verdict": record.get("verdict"),
                    "msg": "%s: %s (stored by the wait)" % (host, record.get("verdict")),
                    "ansible_stats": {"data": {REPORT_STAT: record}, "per_host": True, "aggregate": False}}
        started = self._started_result(args, task_vars)
        if not isinstance(started, dict) or started.get("skipped"):
            started = {}
        elif started.get("failed"):
            # a start that failed removed what it had created; what it learnt before the refusal
            # (facts, drives, the plan, the refusing preflight's filesystem) goes into the record
            started = {k: started[k] for k in ("facts", "drives", "plan", "targets", "preflight") if k in started}
        error = args.get("error") or {"task": "unknown task", "msg": "failed"}
        out = self._judge_clean_store(args, host, started, [], error, None, task_vars)
        # the task that failed was printed with its message; this one stores the host's ERROR and
        # must not fail itself (a host failed in the rescue would miss the verdict gate play)
        out.pop("failed", None)
        return out

    def _cleanup(self, args, started, content, task_vars):
        """The one module run that removes what the start created (and writes the textfile)."""
        margs = {"state": "absent", "path": args["path"], "binary": args.get("binary"),
                 "datasets": started.get("datasets") or [], "targets": started.get("targets") or [],
                 "plan": [{k: w[k] for k in CLEANUP_KEYS if k in w} for w in started.get("plan") or []]}
        if content is not None:
            margs.update(textfile_dir=args["textfile_dir"], textfile=content)
        return self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)

    def _judge_clean_store(self, args, host, started, records, error, array_run, task_vars):
        inputs = dict(args.get("record") or {})
        inputs["slice"] = _record.slice_of(task_vars)
        plan = started.get("plan") or []
        drives = (started.get("drives") or {}).get("drives") if started else None

        def judge(err):
            diag, verdict = _record.judged(records, plan, args.get("thresholds") or [], args.get("latency_bound_ms"),
                                           error=err, drives=drives)
            return _record.assemble(host, inputs, started, records, diag, verdict, error=err, array_run=array_run)

        record = judge(error)
        if started.get("created") and not self._task.check_mode:
            content = None
            if args.get("textfile_dir"):
                content = _record.FILTERS["host_prometheus"](record)
            cleaned = self._cleanup(args, started, content, task_vars)
            if cleaned.get("failed") and error is None:
                error = {"task": self._task.get_name(), "msg": "cleanup: %s" % cleaned.get("msg")}
                record = judge(error)
        if not self._task.check_mode:
            _record.store(record)
        out = {"changed": False, "record": record, "verdict": record["verdict"],
               "ansible_stats": {"data": {REPORT_STAT: record}, "per_host": True, "aggregate": False}}
        if error is not None:
            out.update(failed=True, msg="%s: %s" % (error.get("task"), error.get("msg")))
        else:
            out["msg"] = "%s: %s" % (host, record["verdict"])
        return out
