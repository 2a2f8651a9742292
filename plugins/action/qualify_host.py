# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ``fleetqual.storage.qualify_host``: a host's measuring path in two
module runs (module docs: plugins/modules/qualify_host.py).

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
stores the record (``plugin_utils/judge/record.py``), handing it to the fleet report
(``ansible_stats``, as ``set_stats`` does) and returning it as ``record``. A host whose job
failed is stored as ERROR and the task fails with the job's error.

``state: failed`` (the role's rescue): a host whose start or wait failed: removes what the
start created (only when it created anything), then judges and stores the ERROR record.
"""

import json
import os
import time

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import brief as _brief
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import record as _record
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import resume as _resume
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.durability import merge_into_record
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import effective_safety
from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import FILTERS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.array_start import (
    array_dir,
    member_spec,
    read_previous,
    whole_array,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.identity import (
    IDENTITY_FACT,
    STARTED_VAR,
    apply_identity,
    become_refusal,
    decide_identity,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.job_wait import JobAction, not_started
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.interrupt import interrupted
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.progress import (
    controller_pid,
    exit_if_orphaned,
    progress_dir_ready,
    show_plan,
    watch_controller,
)

display = Display()
MODULE = "fleetqual.storage.qualify_host"
REPORT_STAT = "fleetqual_report"
# what the cleanup needs of each planned workload (module_utils/job_runner.cleanup_plan)
CLEANUP_KEYS = ("target_kind", "target_path", "target_device", "device_size", "device_offset", "dataset")

# the module's own arguments, passed through from the task
START_ARGS = ("path", "binary", "binary_sha256", "architecture", "build_on_host", "manage_packages", "profile",
              "profiles", "matrix", "overrides", "cache_size", "seed", "targets", "margin_pct", "health", "sysfs_root", "dev_root", "run_id",
              "collect", "slack", "prepare_min_mibps", "test_clock", "previous", "uncollected_days")


# ------------------------------------------------------------------ what a failed task prints
# A failed task's result is printed whole by ansible-core's default callback: a failed start
# or wait carries its brief (plugin_utils/report/brief.py: the verdict and the first reasons, bounded),
# never the record nor the start's plan, drives and facts (docs/report.md, "Where the full
# record is"). Those go to files on the controller, read back by the rescue (state: failed).
RESULT_VAR = "_fleetqual_result"   # the role registers the wait's result (and the rescue's) under this name
# <progress_dir>/.failed-start-<host>: a failed start's whole result (a dot file: not a host's progress
# record for action/job.py's fleet line, and removed with the run by plugin_utils/history/retention.py)
FAILED_START = ".failed-start-%s"
# what a failed start's printed result keeps of the module's (small; the rescue reads the rest,
# the decided identity too, from the start's file)
START_BRIEF_KEYS = ("changed", "failed", "unreachable", "warnings", "deprecations")


def result_message(res):
    """A module result's message: ``msg``, else the message of its ``exception`` (a module that
    raised: ansible-core 2.19 keeps the message in the error summary's event)."""
    event = getattr(res.get("exception"), "event", None)
    return str(res.get("msg") or getattr(event, "msg", None) or res.get("exception") or "failed")


def brief_start(res, host, progress_dir):
    """A failed start's result as printed: its message bounded (``brief.text``: the ERROR record
    has it whole), and the path of the file (``start_file``, 0600) that holds the whole result for
    the rescue's ERROR record. Without a progress directory (no run directory) the result stays whole."""
    if not progress_dir:
        return res
    path = os.path.join(progress_dir, FAILED_START % host)
    whole = {k: v for k, v in res.items() if k not in ("exception", "warnings", "deprecations")}
    whole["msg"] = result_message(res)
    write_atomic(path, json.dumps(whole, default=str), mode=0o600)
    out = {k: res[k] for k in START_BRIEF_KEYS if k in res}
    # no "exception": ansible-core prints it as an [ERROR] line with the module's whole message;
    # without it, the [ERROR] line says this brief
    # cut: the ERROR record has it whole (the gate's line names the record)
    out.update(failed=True, start_file=path, msg=_brief.text(whole["msg"], limit=_brief.MAX_CHARS))
    return out


def whole_start(started, error):
    """``(started, error)`` for the rescue: the failed start's whole result from its
    ``start_file``, and the error's message whole when it is the start's (the rescue templates
    the brief the start printed, ``ansible_failed_result.msg``)."""
    path = started.get("start_file")
    if not path:
        return started, error
    try:
        with open(path) as fh:
            whole = json.load(fh)
    except (OSError, ValueError):
        return started, error
    if isinstance(error, dict) and error.get("msg") == started.get("msg") and whole.get("msg"):
        error = dict(error, msg=whole["msg"])
    return whole, error


def stored_by_wait(args, task_vars):
    """The record the wait task judged and stored before it failed (with the job's error), or
    None: the ``stored`` argument, else the file its failed result names (``results_file``) when
    the rescue's error is that failure's."""
    if isinstance(args.get("stored"), dict):
        return args["stored"]
    failed = task_vars.get(RESULT_VAR)
    error = args.get("error") or {}
    if not (isinstance(failed, dict) and failed.get("failed") and failed.get("results_file")
            and isinstance(error, dict) and error.get("msg") == failed.get("msg")):
        return None
    try:
        with open(failed["results_file"]) as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def collected_text(attached):
    """The record's word on a host whose results a job of an earlier run measured."""
    def when(epoch):
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch)) if epoch else "?"
    return ("collected from run %s, measured %s to %s: the job of a run that did not collect it (its controller "
            "was killed or lost the host), the same plan; not measured again"
            % (attached.get("run_id"), when(attached.get("started_epoch")), when(attached.get("finished_epoch"))))


def away_text(away):
    """The record's word on a host the wait lost and found again while its job ran on."""
    n = int(away.get("episodes") or 0)
    return ("not answering for %s s during the wait (%s; the longest %s s); its job went on and was collected "
            "when the host came back" % (fmt_num(away.get("seconds")), "once" if n == 1 else "%d times" % n,
                                         fmt_num(away.get("longest_s"))))


def outcome(host, record, error, fail):
    """The wait's or the rescue's result. Not failed: the record, handed to the fleet report
    (``ansible_stats``). Failed (the job's error): the brief and where the record is."""
    if error is not None and fail:
        return {"changed": False, "failed": True, "verdict": record["verdict"], "results_file": record.get("results_file"),
                "msg": _brief.message(host, record["verdict"], record.get("reasons"), record.get("results_file"))}
    out = {"changed": False, "record": record, "verdict": record["verdict"],
           "ansible_stats": {"data": {REPORT_STAT: record}, "per_host": True, "aggregate": False}}
    out["msg"] = _brief.message(host, record["verdict"], record.get("reasons") if error is not None else [],
                                record.get("results_file"))
    return out


class ActionModule(JobAction):
    TRANSFERS_FILES = False   # a temporary directory only when the build must be transferred
    _VALID_ARGS = frozenset(START_ARGS + ("state", "build", "progress_dir", "array", "arrays", "foreign_io", "impact",
                                          "profile_safety", "started", "record", "thresholds", "latency_bound_ms",
                                          "textfile_dir", "error", "interval", "stored", "kernel_log",
                                          "durability", "results_dir"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        controller = controller_pid()   # this worker's ansible-playbook
        watch_controller(controller)
        result = super(JobAction, self).run(tmp, task_vars)
        args = dict(self._task.args)
        state = args.get("state")
        host = task_vars.get("inventory_hostname", "?")
        progress_dir = progress_dir_ready(args.get("progress_dir"))
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
        exit_if_orphaned(controller)
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
            margs["array"] = member_spec(args["array"], args.get("arrays") or {}, self._hosts_vars(host, task_vars),
                                         host, seed=args.get("seed"), test_clock=args.get("test_clock"))
        margs["state"] = "started"
        return margs

    def _started(self, args, host, progress_dir, task_vars):
        reason = interrupted()
        if reason:
            return brief_start(not_started(reason), host, progress_dir)
        margs = self._start_args(args, host, task_vars)
        if margs.get("array") and (args.get("previous") or "attach") == "attach" and progress_dir:
            margs["array_previous"] = self._array_previous(margs["array"], progress_dir, args)
        found = self._unfinished(args, host)
        if found:
            margs["resume"] = {"run_id": found[1]["run_id"], "fingerprint": found[1]["job"]["fingerprint"]}
        try:
            res = self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)
        except AnsibleError as exc:
            # the connection raises on a password prompt it cannot answer (Missing sudo password)
            if become_refusal(host, {"failed": True, "msg": str(exc)}, self) is None:
                raise
            res = {"failed": True, "msg": str(exc)}
        refusal = become_refusal(host, res, self)
        if refusal:
            return brief_start({"failed": True, "msg": refusal, "changed": False}, host, progress_dir)
        self._identity(res)
        if res.get("deploy_needed") and not res.get("failed"):
            if not args.get("build"):
                return brief_start(dict(res, failed=True, msg="%s has sha256 %s, not the controller's build %s, and no "
                                                              "build was given to deploy" % (
                                                                  margs.get("binary"), res.get("binary_sha256"),
                                                                  margs.get("binary_sha256"))), host, progress_dir)
            res = self._deploy_and_start(args["build"], margs, task_vars)
            self._identity(res)
        if res.get("failed"):
            return brief_start(res, host, progress_dir)
        if res.get("resumed") and found:
            # the host's record the killed run stored is this run's (_finished reports it)
            res["resumed"] = {"run_id": res["resumed"], "path": found[0]}
            return res
        if res.get("build_needed") or not res.get("status"):
            return res
        self._progress(progress_dir, host, res["status"])
        show_plan(progress_dir, res.get("plan") or [], res.get("planned") or [], res.get("planned_s"),
                  res.get("deadline_s"))
        return res

    @staticmethod
    def _array_previous(spec, progress_dir, args):
        """The whole array's word on the jobs an earlier run left on its members, from what the
        probe before the start found on each (``lockstep`` ``phase: previous``): the same on
        every member, which attaches its job of run ``run_id`` only with all the others
        (array_start.whole_array); ``run_id`` None: each member's job is cleared."""
        members = list(spec.get("members") or [])
        specs = dict((m, dict(spec, rank=members.index(m))) for m in members)
        run_id, why = whole_array(specs, read_previous(array_dir(progress_dir, spec["name"]), members),
                                  uncollected_days=args.get("uncollected_days", 7))
        return {"run_id": run_id, "why": why}

    @staticmethod
    def _unfinished(args, host):
        """``(path, record)`` of the host's record a killed run stored and never reported
        (judge/resume.py), when this run may take it: fleetqual_previous attach, outside array
        mode (an array is attached whole) and the durability profile (its cut ran now)."""
        if (args.get("previous") or "attach") != "attach" or args.get("array") or args.get("profile") == "durability":
            return None
        return _resume.unfinished_record(args.get("results_dir"), args.get("run_id"), host,
                                         args.get("uncollected_days", 7))

    def _identity(self, res):
        """The host's identity, decided here once (:func:`decide_identity`), into the start's
        result (``identity``, read by every later step) and its facts (``fleetqual_identity``:
        ``fleetqual_become``'s default follows it, so the role's later tasks agree)."""
        if isinstance(res.get("identity"), dict):
            res["identity"] = decide_identity(self, res["identity"])
            res.setdefault("ansible_facts", {})[IDENTITY_FACT] = res["identity"]

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
        apply_identity(self, started.get("identity"), task_vars)
        if self._task.check_mode or started.get("check_mode"):
            return {"changed": False, "skipped": True, "record": None,
                    "msg": "check mode: no job was started, nothing to collect"}
        if isinstance(started.get("resumed"), dict):
            return self._resumed(args, host, started["resumed"], task_vars)
        wait = self._wait({"path": args["path"], "interval": args.get("interval", 30),
                           "workloads": started.get("plan") or []}, host, progress_dir, task_vars)
        if wait.get("failed") and "records" not in wait:
            # the job's status could not be read: its records are lost, the host is an ERROR
            error = {"task": self._task.get_name(), "msg": wait.get("msg") or "the job's status could not be read"}
            return self._judge_clean_store(args, host, started, [], error, None, task_vars)
        return self._judge_clean_store(args, host, started, wait["records"], wait.get("error"), wait.get("array_run"),
                                       task_vars, kernel=(wait.get("status") or {}).get("kernel"), away=wait.get("away"),
                                       job=_resume.job_of(wait.get("status") or started.get("status")))

    @staticmethod
    def _resumed(args, host, found, task_vars):
        """The record the killed run ``found["run_id"]`` stored for the host, whose job finished
        and was cleaned up: this run's result, ``collected_from`` that run; the host was not
        measured again (judge/resume.py)."""
        try:
            with open(found["path"], encoding="utf-8") as fh:
                stored = json.load(fh)
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail("%s: the record of run %s (%s) could not be read: %s"
                                    % (host, found["run_id"], found["path"], exc))
        inputs = dict(args.get("record") or {})
        inputs["slice"] = _record.slice_of(task_vars)
        record = _resume.resumed(stored, inputs, collected_text(stored.get("job") or {}))
        _record.store(record)
        _resume.mark_taken(found["path"], record["run_id"])
        return outcome(host, record, None, True)

    @staticmethod
    def _started_result(args, task_vars):
        """The start's result: the ``started`` argument, else the variable the role registers
        it in (``_fleetqual_started``), read as it was registered. The role passes no
        ``started``: templating the whole result (the plan, the drives, the facts) into the
        task's arguments cost the most of this task's CPU on the controller."""
        if "started" in args:
            return args.get("started") or {}
        return task_vars.get(STARTED_VAR) or {}

    def _failed(self, args, host, task_vars):
        record = stored_by_wait(args, task_vars)
        if record is not None:
            # judged and stored by the wait task, which failed with the job's error: Ansible
            # hands a failed task's ansible_stats to nobody, so the record is handed over here
            return {"changed": False, "record": record, "verdict": record.get("verdict"),
                    "msg": "%s: %s (stored by the wait)" % (host, record.get("verdict")),
                    "ansible_stats": {"data": {REPORT_STAT: record}, "per_host": True, "aggregate": False}}
        started = self._started_result(args, task_vars)
        if not isinstance(started, dict) or started.get("skipped"):
            started = {}
        error = args.get("error") or {"task": "unknown task", "msg": "failed"}
        if started.get("failed"):
            # a start that failed removed what it had created; what it learnt before the refusal
            # (facts, drives, the plan, the refusing preflight's filesystem) goes into the record
            started, error = whole_start(started, error)
            started = {k: started[k] for k in ("facts", "drives", "plan", "targets", "preflight", "identity")
                       if k in started}
        # the cleanup, when the start created anything, runs as the start did (docs/privileges.md)
        apply_identity(self, started.get("identity"), task_vars)
        # the task that failed was printed with its message; this one stores the host's ERROR and
        # must not fail itself (a host failed in the rescue would miss the verdict gate play)
        return self._judge_clean_store(args, host, started, [], error, None, task_vars, fail=False)

    def _cleanup(self, args, started, content, task_vars):
        """The one module run that removes what the start created (and writes the textfile)."""
        margs = {"state": "absent", "path": args["path"], "binary": args.get("binary"),
                 "datasets": started.get("datasets") or [], "targets": started.get("targets") or [],
                 "plan": [{k: w[k] for k in CLEANUP_KEYS if k in w} for w in started.get("plan") or []]}
        if content is not None:
            margs.update(textfile_dir=args["textfile_dir"], textfile=content)
        if any(isinstance(w.get("burnin"), dict) for w in started.get("plan") or []):
            margs["health_after"] = True     # a burn-in: health read again (docs/integrity.md)
        return self._execute_module(module_name=MODULE, module_args=margs, task_vars=task_vars)

    def _judge_clean_store(self, args, host, started, records, error, array_run, task_vars, fail=True, kernel=None,
                           away=None, job=None):
        inputs = dict(args.get("record") or {})
        inputs["slice"] = _record.slice_of(task_vars)
        plan = started.get("plan") or []
        drives = (started.get("drives") or {}).get("drives") if started else None
        # a planned failover's path events are the cut, not a drive's errors (array/failover.py)
        kernel = _failover.path_events(kernel, array_run, (started or {}).get("targets"))

        def judge(err, drives_after=None):
            diag, verdict = _record.judged(records, plan, args.get("thresholds") or [], args.get("latency_bound_ms"),
                                           error=err, drives=drives, kernel=kernel, kernel_log=args.get("kernel_log"),
                                           drives_after=drives_after)
            rec = _record.assemble(host, inputs, started, records, diag, verdict, error=err, array_run=array_run,
                                   kernel=kernel, job=job)
            # who the run was on the host (docs/privileges.md); null when the start did not get that far
            rec["identity"] = started.get("identity") if started else None
            # the wait lost the host for a while and found it again (docs/operations.md)
            rec["away"] = away
            # a job an earlier run left, collected as this run's (fleetqual_previous: attach)
            rec["collected_from"] = started.get("attached") if started else None
            if rec["collected_from"]:
                rec["warnings"] = list(rec.get("warnings") or []) + [collected_text(rec["collected_from"])]
            if away:
                rec["warnings"] = list(rec.get("warnings") or []) + [away_text(away)]
            # the power-cut test, when the host ran it (docs/durability.md)
            return merge_into_record(rec, args.get("durability"))

        record = judge(error)
        stored = False
        if started.get("created") and not self._task.check_mode:
            # stored before the cleanup removes the job from the host: a controller killed from
            # here on leaves the record for the next run (judge/resume.py), never neither
            _record.store(record)
            stored = True
            content = None
            if args.get("textfile_dir"):
                content = FILTERS["host_prometheus"](record)
            cleaned = self._cleanup(args, started, content, task_vars)
            if cleaned.get("failed") and error is None:
                error = {"task": self._task.get_name(), "msg": "cleanup: %s" % cleaned.get("msg")}
                record = judge(error)
            elif "drives_after" in cleaned:
                # a burn-in: judged again with the health read after the run (the textfile written by
                # the same cleanup holds the verdict before it)
                after = (cleaned.get("drives_after") or {}).get("drives")
                record = judge(error, drives_after=after)
                record["drives_after"] = after
        if not self._task.check_mode:
            _record.store(record, keep_replaced=not stored)
        return outcome(host, record, error, fail)
