# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode, the controller side of the lock-step start (module docs:
plugins/modules/lockstep.py, host side: module_utils/lockstep.py).

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
import math
import os
import select
import shlex
import subprocess
import time

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.module_utils import lockstep as _ls
from ansible_collections.fleetqual.storage.plugins.module_utils.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.job_runner import job_dir, pid_start
from ansible_collections.fleetqual.storage.plugins.plugin_utils import arrays as _arrays
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload_record

display = Display()
JOB_MODULE = "fleetqual.storage.job"
EXCHANGES = 8            # clock exchanges per host at the start (the smallest round trip is kept)
MIN_LEAD_S = 2.0         # T0 is at least this far ahead of the moment it is fixed
PER_HOST_TASK_S = 1.0    # Ansible's own cost of one host's task (worker, templating), per wave of forks
STREAM_TIMEOUT_S = 30.0  # the exchange's channel must answer within this
READY_STATES = ("ready", "running", "done", "failed")


def controller_id():
    """This ansible-playbook (the worker's parent): PID and start time, so that a re-run with
    the same run id never takes the T0 of an earlier run."""
    ppid = os.getppid()
    return "%d:%s" % (ppid, pid_start(ppid))


def array_dir(progress_dir, name):
    d = os.path.join(progress_dir, _ls.dataset_name(name))
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def member_spec(name, arrays, hosts_vars, host, seed=None, test_clock=False):
    """The controller's part of the job's ``array`` parameter for ``host``: its rank among
    the array's members (from every play host's vars), the planned steps
    (``arrays.plan_steps``) and their schedule's length. Where the data set lives and the
    waits are completed on the host, from its own plan (``module_utils/lockstep.complete_spec``)."""
    cfg = dict((arrays or {}).get(name) or {})
    members = _arrays.members(name, hosts_vars, arrays)
    if host not in members:
        raise AnsibleActionFail("host %s is not a member of array %s (members: %s)" % (host, name, ", ".join(members)))
    steps = _arrays.plan_steps(cfg, len(members), cfg.get("cache_size"))
    first = steps[0] if steps else {}
    return {"name": name, "rank": members.index(host), "members": members, "config": cfg, "steps": steps,
            "dataset": _ls.dataset_name(name), "total_size": first.get("total_size"), "file_num": first.get("file_num"),
            "seed": seed, "test_clock": bool(test_clock),
            "max_clock_uncertainty_ms": cfg.get("max_clock_uncertainty_ms"),
            "schedule_s": int(math.ceil(_arrays.schedule_seconds(steps)))}


def array_spec(name, arrays, hosts_vars, host, test_dir, targets=None, workloads=None, seed=None,
               test_clock=False, prepare_min_mibps=20):
    """The job's whole ``array`` parameter: :func:`member_spec` completed as the host does."""
    spec = member_spec(name, arrays, hosts_vars, host, seed=seed, test_clock=test_clock)
    try:
        return _ls.complete_spec(spec, targets, workloads, test_dir, prepare_min_mibps)
    except ValueError as exc:
        raise AnsibleActionFail(str(exc))


def start_lead(n_members, forks, connect_max):
    """Seconds from fixing T0 to step 1's warm-up: every member must have its start file
    ``LAUNCH_LEAD_S`` before it, handed over in waves of ``forks`` hosts; one host's hand-over
    costs Ansible's task overhead plus about two connections (``connect_max``: the slowest
    command round trip measured when the hosts were ready), with a factor 2 of margin."""
    waves = int(math.ceil(float(max(1, n_members)) / max(1, int(forks or 1))))
    return round(MIN_LEAD_S + _ls.LAUNCH_LEAD_S + waves * 2.0 * (PER_HOST_TASK_S + 2.0 * max(0.0, connect_max or 0.0)), 3)


class _Lines:
    """Lines of a pipe, each read with a time limit (no hang on a dead channel)."""

    def __init__(self, fh):
        self.fd = fh.fileno()
        self.buf = b""

    def readline(self, timeout):
        limit = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = limit - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer within %g s" % timeout)
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise EOFError("the channel closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")


def stream_exchange(argv, n, test_clock, make_doc=None, env=None):
    """Clock exchanges over ONE channel (``argv`` runs ``lockstep.stream_command`` on the
    host): ``n`` x (send a line, the host answers its clock), so each round trip is the open
    channel's, not a new connection's. With ``make_doc`` (``samples -> start file``), then
    hands its document over on the same channel. ``(samples, doc, written)``."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    samples, doc, written = [], None, None
    try:
        lines = _Lines(p.stdout)
        hook = lines.readline(STREAM_TIMEOUT_S)
        for _i in range(n):
            sent = time.time()
            p.stdin.write(b"\n")
            p.stdin.flush()
            reply = lines.readline(STREAM_TIMEOUT_S)
            received = time.time()
            samples.append((sent, _ls.parse_clock_reply("%s\n%s" % (hook, reply), test_clock), received))
        if make_doc is not None:
            doc = make_doc(samples)
            p.stdin.write(json.dumps(doc).encode() + b"\n")
            p.stdin.flush()
            written = lines.readline(STREAM_TIMEOUT_S) == "written"
    finally:
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return samples, doc, written


def _read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def fix_t0(adir, n_members, forks, wait_s=60.0):
    """The array's T0 of this playbook run: fixed by the first caller (``O_EXCL`` claim), read
    by the others. ``(t0_doc, fixed_here)``."""
    me = controller_id()
    path = os.path.join(adir, "t0.json")
    claim = os.path.join(adir, "t0.%s.claim" % me.replace(":", "-"))
    try:
        fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        limit = time.monotonic() + wait_s
        while time.monotonic() < limit:
            doc = _read_json(path)
            if doc and doc.get("controller") == me:
                return doc, False
            time.sleep(0.02)
        raise AnsibleActionFail("the array's common start was not fixed within %d s (%s)" % (wait_s, path))
    os.close(fd)
    ready = [_read_json(os.path.join(adir, n)) for n in sorted(os.listdir(adir)) if n.endswith(".json") and n != "t0.json"]
    rtts = [d["connect_s"] for d in ready if isinstance(d, dict) and d.get("controller") == me and d.get("connect_s") is not None]
    lead = start_lead(n_members, forks, max(rtts or [0.0]))
    now = time.time()
    doc = {"controller": me, "t0": round(now + lead, 6), "fixed_at": round(now, 6), "lead_s": lead,
           "forks": forks, "members": n_members, "connect_max_s": max(rtts or [0.0])}
    write_json_atomic(path, doc, mode=0o644)
    return doc, True


def _metrics_of(step, spec_doc, result):
    if not isinstance(result, dict) or not isinstance(result.get("bench"), dict) or not result["bench"]:
        return None
    try:
        wl = _ls.step_workload(spec_doc, step)
        return workload_record(wl, dict(result, failed=False))["metrics"]
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def array_run(doc):
    """The host record's ``array_run`` (docs/contracts.md) from the job status's ``array``:
    controller-clock times, the clock, and per step its plan, entry, result and metrics."""
    if not isinstance(doc, dict):
        return None
    start = doc.get("start") or {}
    off = start.get("offset_s")
    sync = doc.get("sync") or {}
    plan = {s["index"]: s for s in doc.get("plan") or []}
    spec_doc = doc.get("spec") or {}
    steps = []
    for e in doc.get("steps") or []:
        p = plan.get(e.get("index"), {})
        entry = {k: p.get(k) for k in ("initiators", "threads", "mode", "time", "warmup", "offset_s", "end_s")}
        entry.update(e)
        entry["metrics"] = _metrics_of(p, spec_doc, e.get("result")) if p else None
        steps.append(entry)
    ready = doc.get("ready_epoch")
    received = start.get("received_epoch")
    received = None if received is None or off is None else round(received - off, 6)
    first = (doc.get("plan") or [{}])[0]
    warm0 = None if start.get("t0") is None else start["t0"] + float(first.get("offset_s") or 0) - float(first.get("warmup") or 0)
    return {
        "name": doc.get("name"), "rank": doc.get("rank"), "members": doc.get("members"), "config": doc.get("config"),
        "t0": start.get("t0"), "state": doc.get("state"),
        "clock": {"offset_s": off, "uncertainty_s": start.get("uncertainty_s"), "rtt_s": start.get("rtt_s"),
                  "method": start.get("method"), "exchanges": start.get("exchanges"),
                  "synchronized": sync.get("synchronized"), "source": sync.get("source"),
                  "system_offset_s": sync.get("system_offset_s"), "test_clock_skew_s": doc.get("test_clock_skew_s")},
        "ready": None if ready is None or off is None else round(ready - off, 6),
        "prepare": doc.get("prepare"), "refused": start.get("refused"), "warning": start.get("warning"),
        "lead_s": start.get("lead_s"), "steps": steps,
        # when the job got the common start (controller clock) and how long before step 1's warm-up
        "handover": {"received": received, "margin_s": None if received is None or warm0 is None else round(warm0 - received, 3)},
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("phase", "path", "array", "progress_dir", "timeout", "test_clock"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        host = task_vars.get("inventory_hostname", "?")
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
        from ansible_collections.fleetqual.storage.plugins.action import qualify_host as _qh
        self._fq_identity = (task_vars.get(_qh.STARTED_VAR) or {}).get("identity") or {}
        _qh.apply_identity(self, self._fq_identity, task_vars)
        if args.get("phase") == "ready":
            result.update(self._ready(args, host, adir, task_vars))
        elif args.get("phase") == "start":
            result.update(self._start(args, host, adir, task_vars))
        else:
            raise AnsibleActionFail("phase must be ready or start, got %r" % args.get("phase"))
        result["changed"] = False
        return result

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
        while True:
            res = self._execute_module(module_name=JOB_MODULE, module_args={"path": args["path"], "state": "status"},
                                       task_vars=task_vars)
            st = res.get("status") or {}
            array_state = (st.get("array") or {}).get("state")
            job_state = st.get("state")
            if res.get("failed") or array_state in READY_STATES or job_state != "running":
                break
            if time.monotonic() > limit:
                break
            time.sleep(1.0)
        sample = self._exchange(bool(args.get("test_clock")))
        doc = {"host": host, "controller": controller_id(), "ready": array_state in READY_STATES,
               "array_state": array_state, "job_state": job_state, "connect_s": round(sample[2] - sample[0], 6),
               "at": round(time.time(), 6)}
        write_json_atomic(os.path.join(adir, host + ".json"), doc, mode=0o644)
        return {"ready": doc["ready"], "array_state": array_state, "job_state": job_state,
                "connect_s": doc["connect_s"]}

    def _start(self, args, host, adir, task_vars):
        array = args["array"]
        test_clock = bool(args.get("test_clock"))
        forks = context.CLIARGS.get("forks") or C.DEFAULT_FORKS
        t0doc, fixed = fix_t0(adir, len(array.get("members") or []), forks)
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
        if handed > warm0 - _ls.LAUNCH_LEAD_S:
            display.warning("fleetqual array %s: host %s got the common start %.1f s before step 1's warm-up "
                            "(less than the %.1f s its iobench needs): its first steps may be incomplete"
                            % (array["name"], host, warm0 - handed, _ls.LAUNCH_LEAD_S))
        return {"t0": t0doc["t0"], "fixed_here": fixed, "lead_s": t0doc["lead_s"],
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
