# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode on the controller: an array member's spec and the array part of its job's
``state: started`` (:func:`array_spec`; its timing is ``module_utils/job/lockstep.py``
``array_timing``), the common start ``T0`` fixed once per array (:func:`fix_t0`, :func:`start_lead`),
the clock exchanges over one channel (:func:`stream_exchange`) and the array part of the host
record (:func:`array_run`). Used by the actions ``fleetqual.storage.lockstep``, ``job`` and
``qualify_host`` (docs/arrays.md)."""

import json
import math
import os
import select
import subprocess
import time

from ansible.errors import AnsibleActionFail

from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as _ls
from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as _host_start
from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import read_json_or_none, write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.job.status import pid_start
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as _arrays
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.progress import controller_pid


EXCHANGES = 8            # clock exchanges per host at the start (the smallest round trip is kept)


MIN_LEAD_S = 2.0         # T0 is at least this far ahead of the moment it is fixed


PER_HOST_TASK_S = 1.0    # Ansible's own cost of one host's task (worker, templating), per wave of forks
MAX_LOAD_FACTOR = 8.0    # at most this stretch of a task by the controller's run queue (controller_load)


STREAM_TIMEOUT_S = 30.0  # the exchange's channel must answer within this


def controller_id():
    """This ansible-playbook (the worker's parent): PID and start time, so that a re-run with
    the same run id never takes the T0 of an earlier run."""
    ppid = controller_pid()
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
    failover, _problems = _failover.check((hosts_vars.get(host) or {}).get(_failover.FAILOVER_VAR), steps)
    return {"name": name, "rank": members.index(host), "members": members, "config": cfg, "steps": steps,
            "failover_step": failover["step"] if failover else None,
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


def launch_need(ready_docs):
    """Seconds a member needs from its start file to step 1's warm-up: its probes
    (``launch_s``, rehearsed before it said ready) and its launch lead (``launch_lead_s``),
    the slowest member's; ``LAUNCH_LEAD_S`` when no member measured one."""
    needs = [float(d.get("launch_s") or 0.0) + float(d["launch_lead_s"]) for d in ready_docs
             if isinstance(d, dict) and isinstance(d.get("launch_lead_s"), (int, float))]
    return round(max(needs + [_ls.LAUNCH_LEAD_S]), 3)


def controller_load():
    """How many times longer than on an idle controller a task of Ansible's takes now: the
    run queue per CPU over the last minute (``os.getloadavg`` over the CPUs this process may
    use), at least 1, at most :data:`MAX_LOAD_FACTOR`; 1 where the kernel does not say."""
    try:
        cpus = len(os.sched_getaffinity(0)) or 1
        return min(MAX_LOAD_FACTOR, max(1.0, os.getloadavg()[0] / cpus))
    except (AttributeError, OSError):
        return 1.0


def start_lead(n_members, forks, connect_max, need=None, load=1.0):
    """Seconds from fixing T0 to step 1's warm-up: every member must have its start file
    ``need`` seconds (:func:`launch_need`; default ``LAUNCH_LEAD_S``) before it, handed over in
    waves of ``forks`` hosts; one host's hand-over costs Ansible's task overhead, stretched by
    the controller's run queue (``load``: :func:`controller_load`; a member of a loaded
    controller got its start 2.3 s before step 1's warm-up where its launch needed 2.6 s), plus
    about two connections (``connect_max``: the slowest command round trip measured when the
    hosts were ready), with a factor 2 of margin."""
    waves = int(math.ceil(float(max(1, n_members)) / max(1, int(forks or 1))))
    need = _ls.LAUNCH_LEAD_S if need is None else max(float(need), _ls.LAUNCH_LEAD_S)
    per_host = PER_HOST_TASK_S * min(MAX_LOAD_FACTOR, max(1.0, float(load or 1.0)))
    return round(MIN_LEAD_S + need + waves * 2.0 * (per_host + 2.0 * max(0.0, connect_max or 0.0)), 3)


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
            doc = read_json_or_none(path)
            if doc and doc.get("controller") == me:
                return doc, False
            time.sleep(0.02)
        raise AnsibleActionFail("the array's common start was not fixed within %d s (%s)" % (wait_s, path))
    os.close(fd)
    ready = [read_json_or_none(os.path.join(adir, n)) for n in sorted(os.listdir(adir)) if n.endswith(".json") and n != "t0.json"]
    ours = [d for d in ready if isinstance(d, dict) and d.get("controller") == me]
    rtts = [d["connect_s"] for d in ours if d.get("connect_s") is not None]
    need = launch_need(ours)
    load = controller_load()
    lead = start_lead(n_members, forks, max(rtts or [0.0]), need, load)
    now = time.time()
    doc = {"controller": me, "t0": round(now + lead, 6), "fixed_at": round(now, 6), "lead_s": lead,
           "forks": forks, "members": n_members, "connect_max_s": max(rtts or [0.0]), "launch_need_s": need,
           "controller_load": round(load, 3)}
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


# --------------------------------------------------------------------------- an earlier run's array

PREVIOUS_PREFIX = "previous-"   # <array dir>/previous-<host>.json: the job the probe found on a member


def previous_path(adir, host):
    return os.path.join(adir, PREVIOUS_PREFIX + host + ".json")


def write_previous(adir, host, status):
    """Keep what the probe (``fleetqual.storage.lockstep`` ``phase: previous``) found in a
    member's test directory: the job's status without its results, or None (no job)."""
    if isinstance(status, dict):
        status = dict(status, results=None)
        if isinstance(status.get("array"), dict):
            status["array"] = dict(status["array"], steps=None)
    write_json_atomic(previous_path(adir, host), {"host": host, "status": status}, mode=0o600)


def read_previous(adir, members):
    """``{member: what its probe found}`` for the members whose probe ran (a member missing
    from the answer was not probed: unreachable, or no probe task ran)."""
    out = {}
    for m in members:
        doc = read_json_or_none(previous_path(adir, m))
        if isinstance(doc, dict) and "status" in doc:
            out[m] = doc["status"]
    return out


def _member_mismatch(member, status, spec, now, uncollected_days):
    """Why ``member``'s earlier job cannot be part of a whole array attached (None: it can)."""
    if not isinstance(status, dict):
        return "%s has no job of an earlier run" % member
    arr = status.get("array") if isinstance(status.get("array"), dict) else {}
    arr_spec = arr.get("spec") if isinstance(arr.get("spec"), dict) else {}
    # (the seed is run-specific, as in the plan's fingerprint: module_utils/host/start.py)
    if (arr.get("name"), arr.get("members"), arr.get("rank"), arr.get("config")) != \
            (spec["name"], spec["members"], spec["rank"], spec["config"]):
        return "%s's job of run %s ran another array (%s, members %s)" % (
            member, status.get("run_id"), arr.get("name"), ", ".join(arr.get("members") or []) or "none")
    if spec.get("failover_step") is not None or arr_spec.get("failover_step") is not None:
        return "the array's failover was run by the controller of run %s, not by the job" % status.get("run_id")
    if status.get("collected"):
        return "%s's job of run %s was collected by its run" % (member, status.get("run_id"))
    if not arr.get("start"):
        return "%s's job of run %s never got the array's common start" % (member, status.get("run_id"))
    state = status.get("state")
    if state not in ("running", "done"):
        return "%s's job of run %s ended %s" % (member, status.get("run_id"), state)
    if state == "done" and _host_start.uncollected_too_long(status, now, uncollected_days):
        return "%s's job of run %s finished more than fleetqual_uncollected_days (%s) ago" % (
            member, status.get("run_id"), uncollected_days)
    return None


def whole_array(specs, probes, now=None, uncollected_days=7):
    """Whether this run attaches the jobs an earlier run left on an array's members, all of
    them or none (docs/operations.md, "Arrays"): ``(run_id, why)`` to attach run ``run_id``'s
    jobs, ``(None, why)`` to clear them and measure the array again (``why`` None when no
    member holds a job). ``specs``: ``{member: member_spec}`` of this run; ``probes``: what
    :func:`read_previous` gives. Attached only when every member holds a job of the same
    run that ran this very array (name, members, ranks, configuration), got its
    common start and still runs or finished uncollected, and the array has no failover (its
    cut and restore were run by the controller that died)."""
    now = time.time() if now is None else now
    if not any(isinstance(probes.get(m), dict) for m in specs):
        return None, None
    why = None
    for m in sorted(specs):
        why = why or _member_mismatch(m, probes.get(m), specs[m], now, uncollected_days)
    runs = sorted({str(probes[m].get("run_id")) for m in specs if isinstance(probes.get(m), dict)})
    if why is None and len(runs) > 1:
        why = "the members' jobs are of different runs (%s)" % ", ".join(runs)
    if why is not None:
        return None, "an array is attached whole or not at all: %s" % why
    return runs[0], "every member's job of run %s ran this array and %s" % (
        runs[0], "still runs" if any(probes[m].get("state") == "running" for m in specs) else "finished uncollected")
