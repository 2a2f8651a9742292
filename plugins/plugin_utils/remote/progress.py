# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's progress while the hosts' detached jobs run: each host's progress record in
the run's progress directory, the one progress line per round for the whole fleet (the poll
that first claims a round prints it), when to poll next, and the end of a worker whose
ansible-playbook is gone. Used by the wait (:mod:`.job_wait`)."""

import hashlib
import json
import math
import multiprocessing
import os
import threading
import time

from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_json_atomic

display = Display()


FAILED_STATES = ("failed", "expired", "stopped", "died", "unreachable", "lost")
# a host whose connection failed while its job runs on (the wait polls it again: away_wait)
AWAY = "away"
# the first retry of a host that stopped answering, doubled up to the wait's interval
AWAY_FIRST_RETRY_S = 2.0


def away_deadline(status, read_at, start_record, margin):
    """The controller's instant after which a host that stopped answering while its job runs
    is UNREACHABLE: its job's deadline plus ``margin`` (the slack the wait gives a job past it),
    from the last status read (``deadline_epoch`` in the host's clock, mapped through the
    status' ``now`` and the controller's ``read_at``), else the host's start record (its
    progress file, written with the start); None when neither says (UNREACHABLE at once)."""
    for doc, at in ((status, read_at), (start_record, None)):
        if not isinstance(doc, dict):
            continue
        deadline = doc.get("deadline_epoch")
        if not isinstance(deadline, (int, float)) or isinstance(deadline, bool) or deadline <= 0:
            continue
        offset = (at - doc["now"]) if at is not None and isinstance(doc.get("now"), (int, float)) else 0.0
        return deadline + offset + margin
    return None


def away_delay(attempt, interval, left):
    """Seconds before the next poll of a host that did not answer ``attempt`` times in a row:
    2, 4, 8 ... up to the wait's ``interval``, never past its deadline (``left`` seconds away),
    at least 1."""
    return max(1.0, min(AWAY_FIRST_RETRY_S * 2.0 ** max(0, attempt - 1), float(interval), left))


def away_line(host, away_s, left_s):
    """The progress line of a host that stopped answering while its job runs."""
    return ("fleetqual: %s: not answering for %s, its job's deadline in %s; polled again until then"
            % (host, duration_text(away_s), duration_text(left_s)))


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
    """A host's progress record, written atomically (module_utils/common/atomic.py)."""
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
    out = {"hosts": len(hosts), "running": len(running), "away": sum(1 for h in hosts if h.get("state") == AWAY),
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
    away = ", %d not answering" % p["away"] if p["away"] else ""
    return ("fleetqual: %s | %d hosts: %d running%s, %d done, %d failed%s | %s of %s"
            % (work, p["hosts"], p["running"], away, p["done"], p["failed"], wait, duration_text(p["elapsed_s"]),
               planned))


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


def controller_pid():
    """The PID of this worker's ansible-playbook, as it forked the worker
    (``multiprocessing.parent_process()``; Ansible forks its workers): not ``os.getppid()``,
    which is already the reaper's PID when the controller died between the fork and this call
    (a worker so started would never see that it is orphaned, and would go on to judge, clean up
    and store for nobody). ``os.getppid()`` outside a multiprocessing worker."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid else os.getppid()


def exit_if_orphaned(controller):
    """End this worker at once when its ansible-playbook (``controller``, its parent's PID) is
    gone (killed): nobody will read its result, and a worker handing a result to the dead
    parent's queue (whose pipe siblings still hold) blocks forever once the pipe is full."""
    if os.getppid() != controller:
        os._exit(1)


def watch_controller(controller, poll_s=1.0):
    """End this worker within ``poll_s`` seconds of its ansible-playbook (``controller``) going
    away, whatever the worker is doing then, in a daemon thread: a check before the result is
    handed over (:func:`exit_if_orphaned`) leaves a window in which the parent dies after the
    check and the worker then blocks forever writing a large result (a start's plan and
    drives, a record) into the dead parent's full pipe. Returns the thread."""
    def watch():
        while True:
            time.sleep(poll_s)
            exit_if_orphaned(controller)

    thread = threading.Thread(target=watch, name="fleetqual-controller-watch", daemon=True)
    thread.start()
    return thread


def claim_round(progress_dir, name):
    """True for the one caller that creates the marker ``name`` first."""
    try:
        fd = os.open(os.path.join(progress_dir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True
