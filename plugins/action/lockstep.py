# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode, the controller side of the lock-step start (module docs:
plugins/modules/lockstep.py, host side: module_utils/job/lockstep.py).

Every member's detached job was started first (it prepares the array's data set, then waits).
Two tasks follow, each run on every host before the next (Ansible's linear strategy), so they
work with fewer forks than hosts:

* ``phase: ready``: waits until this host's job says ``ready`` (data set prepared), then
  measures the connection's round trip (:data:`RTT_EXCHANGES` clock exchanges) and writes
  ``<progress_dir>/array-<name>/<host>.json``;
* ``phase: start``: the first host to get here fixes the common start ``T0`` ONCE for the
  array (``<progress_dir>/array-<name>/t0.json``, claimed with ``O_EXCL``): now + a lead long
  enough to hand it to every member (:func:`start_lead`, from the waves of forks and the
  slowest round trip). Each host then measures its clock offset (:data:`EXCHANGES`
  round-trip-bounded exchanges, smallest round trip kept, uncertainty = half of it,
  ``module_utils/lockstep.best_exchange``), is refused or warned about when the
  uncertainty is a material part of a step (``lockstep.clock_check``), and gets the start
  file (one command). The job runs every step on that schedule: no round trip per step.

Also the array part of the job's ``state: started`` (:func:`array_spec`; its timing is
``module_utils/lockstep.array_timing``)
and of the host record (:func:`array_run`), used by the job's action plugin.
"""

import json
import os
import shlex
import time

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as _ls
from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.job.status import job_dir
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.array_start import (
    EXCHANGES,
    array_dir,
    write_previous,
    controller_id,
    fix_t0,
    stream_exchange,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.identity import STARTED_VAR, apply_identity
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.interrupt import interrupted
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.job_wait import poll_status, stop_interrupted

display = Display()
JOB_MODULE = "fleetqual.storage.job"
READY_STATES = ("ready", "running", "done", "failed")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("phase", "path", "array", "progress_dir", "timeout", "test_clock", "failover"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        host = task_vars.get("inventory_hostname", "?")
        if args.get("phase") == "previous":
            result.update(self._previous(args, host))
            return result
        array = args.get("array") or {}
        if not array or not array.get("name"):
            result.update(skipped=True, msg="not a member of an array")
            return result
        if self._task.check_mode:
            result.update(skipped=True, msg="check mode: no job was started")
            return result
        adir = array_dir(args["progress_dir"], array["name"])
        # the job's files are the identity's the start decided (docs/privileges.md): the
        # status reads and the hand-over of the start file run as it (action/qualify_host.py)
        self._fq_identity = (task_vars.get(STARTED_VAR) or {}).get("identity") or {}
        apply_identity(self, self._fq_identity, task_vars)
        if args.get("phase") == "ready":
            result.update(self._ready(args, host, adir, task_vars))
        elif args.get("phase") == "start":
            result.update(self._start(args, host, adir, task_vars))
        else:
            raise AnsibleActionFail("phase must be previous, ready or start, got %r" % args.get("phase"))
        result["changed"] = False
        return result

    def _previous(self, args, host):
        """Before the start: what an earlier run left in this member's test directory (its
        job's status, by the wait's raw poll: no Python on the host), kept in the array's
        progress directory for every member's start to decide on the whole array
        (array_start.whole_array). Nothing on the host changes."""
        name = (args.get("array") or {}).get("name")
        if not isinstance(name, str) or not name:
            return {"skipped": True, "msg": "not a member of an array"}
        try:
            res = poll_status(self, args["path"])
        except AnsibleConnectionFailure as exc:
            # the start finds the host unreachable and ends it; no whole array without it
            return {"unreachable": True, "msg": str(exc)}
        status = res.get("status")     # a poll that found no job fails: nothing was left
        write_previous(array_dir(args["progress_dir"], name), host, status)
        return {"changed": False, "previous": {k: (status or {}).get(k) for k in ("run_id", "state", "pid")}
                if status else None}

    def _exchange(self, test_clock):
        """One exchange as a command of its own (a new channel each: the fallback)."""
        sent = time.time()
        res = self._low_level_execute_command(_ls.CLOCK_COMMAND, sudoable=False)
        received = time.time()
        host = _ls.parse_clock_reply(res.get("stdout"), test_clock) if res.get("rc") == 0 else None
        return (sent, host, received)

    def _stream_argv(self, start_path):
        """The command line of one channel to the host running ``lockstep.stream_command``:
        the ssh connection's own command (its ControlMaster, options, key), or a local shell;
        None for other connections (then each exchange is a command of its own)."""
        conn = self._connection
        transport = getattr(conn, "transport", "")
        cmd = _ls.stream_command(start_path)
        if transport in ("local", "ansible.builtin.local"):
            return ["/bin/sh", "-c", cmd]
        if transport in ("ssh", "ansible.builtin.ssh") and hasattr(conn, "_build_command"):
            if conn.get_option("password") or getattr(conn._play_context, "password", None):
                return None     # sshpass would need its pipe
            conn.host = conn.get_option("host") or conn._play_context.remote_addr
            return [a.decode() if isinstance(a, bytes) else a
                    for a in conn._build_command(conn.get_option("ssh_executable"), "ssh", conn.host, cmd)]
        return None

    def _ready(self, args, host, adir, task_vars):
        timeout = float(args.get("timeout") or 3600)
        limit = time.monotonic() + timeout
        array_state, job_state = None, None
        stopped = False
        while True:
            res = self._execute_module(module_name=JOB_MODULE, module_args={"path": args["path"], "state": "status"},
                                       task_vars=task_vars)
            st = res.get("status") or {}
            array_state = (st.get("array") or {}).get("state")
            job_state = st.get("state")
            if res.get("failed") or array_state in READY_STATES or job_state != "running":
                break
            reason = interrupted()
            if reason and not stopped:
                # the run was stopped by the operator: the member's job ends, the array never starts
                stopped = True
                stop_interrupted(self, args["path"], st.get("run_id"), reason, task_vars)
                continue
            if time.monotonic() > limit:
                break
            time.sleep(1.0)
        sample = self._exchange(bool(args.get("test_clock")))
        arr = st.get("array") or {}
        doc = {"host": host, "controller": controller_id(), "ready": array_state in READY_STATES,
               "array_state": array_state, "job_state": job_state, "connect_s": round(sample[2] - sample[0], 6),
               "launch_s": arr.get("launch_s"), "launch_lead_s": arr.get("launch_lead_s"),
               "at": round(time.time(), 6)}
        write_json_atomic(os.path.join(adir, host + ".json"), doc, mode=0o644)
        return {"ready": doc["ready"], "array_state": array_state, "job_state": job_state,
                "connect_s": doc["connect_s"], "launch_s": doc["launch_s"], "launch_lead_s": doc["launch_lead_s"]}

    def _start(self, args, host, adir, task_vars):
        array = args["array"]
        test_clock = bool(args.get("test_clock"))
        forks = context.CLIARGS.get("forks") or C.DEFAULT_FORKS
        t0doc, fixed = fix_t0(adir, len(array.get("members") or []), forks)
        failover = None
        if fixed and args.get("failover"):
            # validated before any host was touched (validate_arrays); the timer runs detached
            checked, problems = _failover.check(args["failover"], array.get("steps") or [])
            if problems:
                raise AnsibleActionFail("; ".join(problems))
            failover = _failover.launch(adir, checked, t0doc["t0"], array.get("steps") or [])
        path = os.path.join(job_dir(args["path"]), _ls.START_FILE)

        def make_doc(samples):
            return self._start_doc(host, array, t0doc, samples)

        # through become the start file is written by a command of its own (sudo reads its
        # password from the channel's stdin; the exchange's shell runs as the login user)
        escalated = bool(getattr(self, "_fq_identity", {}).get("become"))
        try:
            argv = self._stream_argv(path)
        except (AttributeError, TypeError, KeyError) as e:   # another connection plugin's internals
            display.warning("fleetqual array %s: host %s: no channel for the clock exchange (%s); one command per "
                            "exchange instead" % (array["name"], host, e))
            argv = None
        written = None
        if argv:
            try:
                samples, start, written = stream_exchange(argv, EXCHANGES, test_clock,
                                                          None if escalated else make_doc)
                if escalated:
                    start = make_doc(samples)
            except (OSError, TimeoutError, EOFError) as e:
                display.warning("fleetqual array %s: host %s: the clock exchange's channel failed (%s); one command "
                                "per exchange instead" % (array["name"], host, e))
                argv = None
        if not argv:
            start = make_doc([self._exchange(test_clock) for _i in range(EXCHANGES)])
        if not written:
            tmp = path + ".tmp"
            cmd = "umask 077 && printf '%%s' %s > %s && mv -f %s %s" % (
                shlex.quote(json.dumps(start)), shlex.quote(tmp), shlex.quote(tmp), shlex.quote(path))
            res = self._low_level_execute_command(cmd, sudoable=escalated)
            if res.get("rc") != 0:
                raise AnsibleActionFail("could not hand the array's start to the job in %s: %s"
                                        % (path, (res.get("stderr") or res.get("stdout") or "").strip()[-500:]))
        handed = time.time()
        for msg in (start["refused"], start["warning"]):
            if msg:
                display.warning("fleetqual array %s: %s" % (array["name"], msg))
        first = (array.get("steps") or [{}])[0]
        warm0 = t0doc["t0"] + float(first.get("offset_s") or 0) - float(first.get("warmup") or 0)
        need = float(t0doc.get("launch_need_s") or _ls.LAUNCH_LEAD_S)
        if handed > warm0 - need:
            display.warning("fleetqual array %s: host %s got the common start %.1f s before step 1's warm-up "
                            "(less than the %.1f s the slowest member's launch needs): its first steps may be "
                            "incomplete" % (array["name"], host, warm0 - handed, need))
        return {"t0": t0doc["t0"], "fixed_here": fixed, "lead_s": t0doc["lead_s"], "failover": failover,
                "clock": {k: start.get(k) for k in ("offset_s", "uncertainty_s", "rtt_s", "exchanges", "method")},
                "refused": start["refused"], "warning": start["warning"], "handed_at": round(handed, 6),
                "margin_s": round(warm0 - handed, 3)}

    @staticmethod
    def _start_doc(host, array, t0doc, samples):
        """The start file of a host: T0, its clock offset from the exchanges, and whether its
        uncertainty refuses or warns (``lockstep.clock_check``)."""
        clock = _ls.best_exchange(samples)
        start = {"t0": t0doc["t0"], "lead_s": t0doc["lead_s"], "refused": None, "warning": None}
        if clock is None:
            start.update(offset_s=0.0, uncertainty_s=None, rtt_s=None, exchanges=len(samples), method="none",
                         refused="host %s: no clock reading (date +%%s.%%N) in %d exchanges" % (host, len(samples)))
            return start
        start.update(clock)
        level, msg = _ls.clock_check(host, clock["uncertainty_s"], array.get("steps") or [],
                                     array.get("max_clock_uncertainty_ms"))
        start["refused" if level == "refuse" else "warning"] = msg if level else None
        return start
