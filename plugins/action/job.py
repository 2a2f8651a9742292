# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the detached measurement job (module ``fleetqual.storage.job``).

``state: started``: computes each workload's timeout and planned seconds from the plan
(``module_utils/plan_summary.py``, the one place of durations), the job's deadline (planned time +
data set preparation at the slowest accepted rate + ``slack``), starts the job through the
module, and writes the host's start record into the run's progress directory.

``state: wait``: polls the host's job status with a raw read over the open connection
(``job_runner.poll_command``/``parse_poll``: one SSH round trip, no Python started on the
host, no callback event) at the planned workload boundaries and at least once per
``interval`` seconds, writes the host's state into ``<progress_dir>/<host>.json``, and prints
the fleet's progress line: time is cut into rounds of ``interval`` seconds, and the poll that
first creates a round's marker file (``O_EXCL``) prints ONE line for the whole fleet from every
host's progress file. Hosts not waited on yet (forks < hosts) are running according to their
start record. When the job has ended, it returns the workloads' records (``workload_record``
of each module result) and the job's error, if any. The wait holds a fork only while it
waits: every job was started first and they run side by side, so the later hosts' waits find
their job done and return at once. A lost connection is the task's UNREACHABLE.
"""

import hashlib
import json
import math
import os
import time

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.module_utils import host_start as _host_start
from ansible_collections.fleetqual.storage.plugins.module_utils import job_runner as _job_runner
from ansible_collections.fleetqual.storage.plugins.module_utils.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.action import lockstep as _lockstep
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload_record

display = Display()
MODULE = "fleetqual.storage.job"
FAILED_STATES = ("failed", "expired", "stopped", "died", "unreachable", "lost")


def duration_text(seconds):
    seconds = max(0, int(seconds))
    m, s = divmod(seconds, 60)
    h, m = divmod(m, 60)
    if h:
        return "%dh%02dm" % (h, m)
    if m:
        return "%dm%02ds" % (m, s) if s else "%dm" % m
    return "%ds" % s


def write_json(path, doc):
    """A host's progress record, written atomically (module_utils/atomic.py)."""
    write_json_atomic(path, doc, mode=0o644)


def read_progress(progress_dir):
    hosts = []
    try:
        names = os.listdir(progress_dir)
    except OSError:
        return hosts
    for name in names:
        if name.endswith(".json"):
            try:
                with open(os.path.join(progress_dir, name)) as fh:
                    hosts.append(json.load(fh))
            except (OSError, ValueError):
                continue
    return hosts


def _num(value):
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0.0
    return out if math.isfinite(out) else 0.0


def _waiting(h):
    """The host's quiet wait now (its progress record's ``quiet``), or None."""
    q = h.get("quiet")
    return q if h.get("state") == "running" and isinstance(q, dict) and q.get("waiting") else None


def host_bound(h):
    """``(planned, waits)`` seconds of one host: its plan, and its quiet waits so far plus
    what the wait going on may still take (its ``wait_s`` bound)."""
    waits = max(0.0, _num(h.get("waited_s")))
    q = _waiting(h)
    if q is not None:
        waits += max(0.0, _num(q.get("wait_s")) - _num(q.get("waited_s")))
    return max(0.0, _num(h.get("planned_s"))), waits


def fleet_progress(hosts, now=None):
    """The figures of the fleet's progress line (:func:`fleet_line`) from every host's
    progress record: counts, the workload k of n, the elapsed and planned time (the plan
    plus the quiet waits' bound), the hosts waiting for a quiet disk, the burnin round."""
    now = time.time() if now is None else now
    running = [h for h in hosts if h.get("state") == "running"]
    out = {"hosts": len(hosts), "running": len(running),
           "done": sum(1 for h in hosts if h.get("state") == "done"),
           "failed": sum(1 for h in hosts if h.get("state") in FAILED_STATES)}
    out["of"] = max([int(_num(h.get("of"))) for h in hosts] or [0])
    slowest = min(running, key=lambda h: max(int(_num(h.get("index"))), 1)) if running else None
    out["k"] = min(max(int(_num(slowest.get("index"))), 1), out["of"]) if slowest else out["of"]
    started = [_num(h.get("started_epoch")) for h in hosts if _num(h.get("started_epoch")) > 0]
    out["elapsed_s"] = max(0.0, now - min(started)) if started else 0.0
    bounds = [host_bound(h) for h in hosts] or [(0.0, 0.0)]
    out["planned_s"], out["waits_s"] = max(bounds, key=lambda b: (b[0] + b[1], b[1]))
    waiting = [q for q in (_waiting(h) for h in running) if q is not None]
    out["waiting"] = len(waiting)
    if waiting:
        out["wait"] = {"util_pct": max(_num(q.get("util_pct")) for q in waiting),
                       "limit_pct": max(_num(q.get("limit_pct")) for q in waiting),
                       "waited_s": max(_num(q.get("waited_s")) for q in waiting),
                       "wait_s": max(_num(q.get("wait_s")) for q in waiting)}
    burn = [h for h in running if isinstance(h.get("burnin"), dict)]
    if burn:
        first = min(burn, key=lambda h: max(int(_num(h.get("index"))), 1))["burnin"]
        passes = {}
        for h in burn:
            name = str(h["burnin"].get("pass") or "?")
            passes[name] = passes.get(name, 0) + 1
        out["burnin"] = {"round": int(_num(first.get("round"))), "rounds": int(_num(first.get("rounds"))),
                         "pass": str(first.get("pass") or "?"), "passes": passes}
    return out


def fleet_line(hosts, now=None):
    """The one progress line of the fleet, from every host's progress record: the workload
    of the slowest host, the hosts' states, the hosts waiting for a quiet disk (how many,
    the devices' %util, how long of the wait's bound), a burnin run's round and passes, the
    time elapsed against the plan plus the quiet waits' bound."""
    p = fleet_progress(hosts, now)
    work = "workload %d/%d" % (p["k"], p["of"])
    b = p.get("burnin")
    if b:
        work += " (burnin round %d/%d, %s pass" % (b["round"], b["rounds"], b["pass"])
        if len(b["passes"]) > 1:
            work += "; hosts in %s" % ", ".join("%s %d" % (k, v) for k, v in sorted(b["passes"].items()))
        work += ")"
    wait = ""
    if p["waiting"]:
        w = p["wait"]
        wait = (" | %d waiting for a quiet disk (%%util %.0f > %.0f, %s of %s)"
                % (p["waiting"], w["util_pct"], w["limit_pct"], duration_text(w["waited_s"]), duration_text(w["wait_s"])))
    planned = "~%s planned" % duration_text(p["planned_s"] + p["waits_s"])
    if p["waits_s"]:
        planned += " (%s + %s of quiet waits)" % (duration_text(p["planned_s"]), duration_text(p["waits_s"]))
    return ("fleetqual: %s | %d hosts: %d running, %d done, %d failed%s | %s of %s"
            % (work, p["hosts"], p["running"], p["done"], p["failed"], wait, duration_text(p["elapsed_s"]), planned))


def progress_dir_ready(progress_dir):
    """The run's progress directory, created (0700) when given; None when not."""
    if progress_dir:
        # the run's directory (its parent) holds the records: 0700 like them, whichever task creates it first
        os.makedirs(os.path.dirname(os.path.normpath(progress_dir)), mode=0o700, exist_ok=True)
        os.makedirs(progress_dir, mode=0o700, exist_ok=True)
    return progress_dir or None


def show_plan(progress_dir, workloads, planned, planned_s, deadline_s):
    """Print the plan once per distinct plan for the whole fleet (the first host to claim it)."""
    if not progress_dir:
        return
    lines = ["Workload %d/%d: %s (%d s with warm-up)" % (i + 1, len(workloads), w.get("key") or w.get("id"), planned[i])
             for i, w in enumerate(workloads)]
    key = "plan-" + hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    if claim_round(progress_dir, key):
        display.display("fleetqual: %d workloads per host, ~%s planned, deadline +%s:\n  %s"
                        % (len(workloads), duration_text(planned_s), duration_text(deadline_s), "\n  ".join(lines)))


def next_poll(now, interval, status, overdue=0):
    """``(seconds until the next poll, overdue)`` for a running job's ``status``: the planned
    end of the current workload (+1 s) when it comes before the next round of ``interval``
    seconds, else the next round. A workload already past its planned end (preparing a large
    data set, the job's own cleanup after the last one) is polled again after 1, 2, 4, ...
    seconds up to the round, so the wait ends within seconds of the job, not up to a whole
    round later (the polls are raw reads, cheap enough). ``overdue`` counts such
    polls in a row; the host's clock is mapped onto this one through ``status['now']``."""
    nxt = (int(now // interval) + 1) * interval
    started, planned = status.get("workload_started_epoch"), status.get("workload_planned_s")
    if started and planned is not None:
        boundary = started + planned + 1 + (now - (status.get("now") or now))
        if now + 1 < boundary < nxt:
            return max(1.0, boundary - now), 0
        if boundary <= now + 1:
            return max(1.0, min(2.0 ** overdue, nxt - now)), overdue + 1
    return max(1.0, nxt - now), 0


def exit_if_orphaned(controller):
    """End this worker at once when its ansible-playbook (``controller``, its parent's PID) is
    gone (killed): nobody will read its result, and a worker handing a result to the dead
    parent's queue (whose pipe siblings still hold) blocks forever once the pipe is full."""
    if os.getppid() != controller:
        os._exit(1)


def claim_round(progress_dir, name):
    """True for the one caller that creates the marker ``name`` first."""
    try:
        fd = os.open(os.path.join(progress_dir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "path", "run_id", "binary", "datasets", "workloads", "seed", "collect",
                             "collect_interval", "slack", "prepare_min_mibps", "progress_dir", "interval",
                             "margin", "array", "arrays", "targets", "test_clock"))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
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
        else:
            result.update(self._execute_module(module_name=MODULE, module_args={"path": args["path"]},
                                               task_vars=task_vars))
        result["changed"] = False
        return result

    def _progress(self, progress_dir, host, status, state=None):
        if not progress_dir:
            return
        doc = {k: status.get(k) for k in ("run_id", "pid", "started_epoch", "deadline_epoch", "planned_s", "of",
                                          "index", "current", "quiet", "waited_s", "burnin")} if status else {}
        doc.update(host=host, state=state or (status or {}).get("state"), updated=round(time.time(), 3))
        write_json(os.path.join(progress_dir, host + ".json"), doc)

    def _start(self, args, host, progress_dir, task_vars):
        workloads = list(args.get("workloads") or [])
        array = self._array_spec(args, host, workloads, task_vars) if args.get("array") else None
        # the job's timeouts, deadline and array timing: the one-run host module's very code
        spec = _host_start.job_spec(dict({"run_id": "", "binary": None, "collect": "auto", "slack": 300,
                                          "prepare_min_mibps": 20}, **args), workloads, array)
        margs = {k: v for k, v in spec.items() if v is not None}
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
        return out

    def _array_spec(self, args, host, workloads, task_vars):
        """The job's ``array`` (action/lockstep.py ``array_spec``) from every play host's vars."""
        return _lockstep.array_spec(args["array"], args.get("arrays") or {}, self._hosts_vars(host, task_vars), host,
                                    args["path"], targets=args.get("targets"), workloads=workloads,
                                    seed=args.get("seed"), test_clock=args.get("test_clock"),
                                    prepare_min_mibps=args.get("prepare_min_mibps", 20))

    def _poll(self, path, task_vars):
        """The job's status as the module's ``state=status`` gives it, read by a raw command
        over the open connection: no Python started on the host. It runs as the
        host's identity: escalated (``sudoable``) exactly when the start was, the role's wait
        having set the connection's become from it (``qualify_host.apply_identity``,
        docs/privileges.md)."""
        res = self._low_level_execute_command(_job_runner.poll_command(path), sudoable=True)
        if res.get("rc") != 0:
            return {"failed": True, "msg": "reading the job's status in %s failed (rc %s): %s"
                                           % (path, res.get("rc"), (res.get("stderr") or res.get("stdout") or "").strip())}
        try:
            return {"status": _job_runner.parse_poll(res.get("stdout") or "")}
        except _job_runner.JobError as exc:
            return {"failed": True, "msg": str(exc)}
        except ValueError as exc:
            return {"failed": True, "msg": "unreadable job status from %s: %s" % (path, exc)}

    def _wait(self, args, host, progress_dir, task_vars):
        path = args["path"]
        interval = max(1, int(args.get("interval", 30)))
        margin = int(args.get("margin", 120))
        workloads = list(args.get("workloads") or [])
        controller = os.getppid()   # this worker's ansible-playbook
        overdue = 0                 # polls in a row that found the workload past its planned end
        while True:
            try:
                res = self._poll(path, task_vars)
            except AnsibleConnectionFailure:
                self._progress(progress_dir, host, None, state="unreachable")
                raise
            if res.get("failed") or not res.get("status"):
                self._progress(progress_dir, host, None, state="lost")
                return res
            st = res["status"]
            state = st.get("state")
            final = state not in ("running",)
            self._progress(progress_dir, host, st)
            now = time.time()
            if progress_dir and claim_round(progress_dir, "round-%d" % int(now // interval)):
                display.display(fleet_line(read_progress(progress_dir), now))
            if final:
                break
            host_now = st.get("now") or now
            if host_now > (st.get("deadline_epoch") or host_now) + margin:
                self._progress(progress_dir, host, st, state="lost")
                return {"failed": True, "status": st,
                        "msg": "the measurement job (pid %s) is still running %d s after its deadline"
                               % (st.get("pid"), margin)}
            delay, overdue = next_poll(now, interval, st, overdue)
            until = time.time() + delay
            while time.time() < until:
                time.sleep(min(1.0, max(0.0, until - time.time())))
                # the job on the host goes on and ends by its deadline
                exit_if_orphaned(controller)
        exit_if_orphaned(controller)
        return self._finish(st, workloads)

    def _finish(self, st, workloads):
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
        if st.get("error"):
            e = st["error"]
            error = {"task": "Workload %s/%d: %s" % (e.get("index"), of, e.get("id")), "msg": e.get("msg")}
        elif st.get("state") == "died":
            error = {"task": "Workload %s/%d: %s" % (st.get("index"), of, st.get("current")),
                     "msg": "the measurement job (pid %s) died without a final status" % st.get("pid")}
        elif st.get("state") in ("expired", "stopped"):
            error = {"task": "Workload %s/%d: %s" % (st.get("index"), of, st.get("current")),
                     "msg": "the measurement job was %s at workload %s/%d (%s)"
                            % ("stopped by its deadline" if st["state"] == "expired" else "stopped",
                               st.get("index"), of, st.get("current"))}
        cleanup = st.get("cleanup") or {}
        return {"status": {k: v for k, v in st.items() if k not in ("results", "array")}, "records": records,
                "error": error, "cleanup": cleanup, "array_run": _lockstep.array_run(st.get("array")),
                "msg": "job %s: %d of %d workloads measured" % (st.get("state"), len(records), of)}
