# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The detached job's status, as the host and the controller read it: ``status.json`` in
``<test_dir>/.fleetqual-job/`` (written to a temporary file, then renamed; its fields are
in :mod:`.runner`'s docstring), whether the job's process is alive (its PID and start
time in ``/proc``), the status the module's ``state=status`` returns, the controller's raw
poll (one shell command, no Python on the host) and stopping a live job."""

import json
import os
import re
import shlex
import shutil
import signal
import stat
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import read_json_or_none, write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as _lockstep


JOB_DIR = ".fleetqual-job"


STATUS = "status.json"
# the operator's stop request (:func:`operator_stop`), read by the job when the signal comes
STOP_REQUEST = "stop_request.json"
# how the stop reason of a job the operator stopped begins (the controller's message keeps it)
OPERATOR_STOP = "stopped by the operator"


FINAL_STATES = ("done", "failed", "expired", "stopped")


def job_dir(test_dir):
    return os.path.join(test_dir, JOB_DIR)


# The prefix of a job's scratch directory in the system's temporary directory, where its
# workloads' iobench results go (status ``scratch_dir``): not on the filesystem under test,
# which a run may fill (a full filesystem must not cost the ENOSPC result its evidence).
SCRATCH_PREFIX = "fleetqual-job-"


def remove_scratch(status):
    """Remove the scratch directory a dead job's status names (``scratch_dir``), only when it
    is one: a directory, not a symlink, named with :data:`SCRATCH_PREFIX`, owned by this
    user. Returns the path removed, or None."""
    path = (status or {}).get("scratch_dir")
    if not isinstance(path, str) or not os.path.basename(path).startswith(SCRATCH_PREFIX):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    shutil.rmtree(path, ignore_errors=True)
    return path


def write_status(directory, doc):
    """Write ``status.json`` atomically (temporary file in the same directory, fsync, rename)."""
    write_json_atomic(os.path.join(directory, STATUS), doc, mode=0o600, fsync=True)


def read_status(directory):
    """The status document, or None when there is none (or it cannot be read)."""
    return read_json_or_none(os.path.join(directory, STATUS))


def read_proc_stat(pid):
    """The ``/proc/<pid>/stat`` line of ``pid``, or None (no such process)."""
    try:
        with open("/proc/%d/stat" % int(pid)) as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def _state_and_start(line, pid=None):
    """``(state, start)`` of a ``/proc/<pid>/stat`` line (fields 3 and 22), or None: no line, a
    line of another PID than ``pid`` (when given), or unreadable (proc(5))."""
    if not line:
        return None
    try:
        head, rest = line.rsplit(")", 1)
        fields = rest.split()
        if pid is not None and head.split("(", 1)[0].strip() != str(pid):
            return None
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def start_from_stat(line, pid=None):
    """Start time in clock ticks since boot (field 22) of a ``/proc/<pid>/stat`` line, or
    None: no line, a zombie, a line of another PID than ``pid`` (when given), or unreadable."""
    got = _state_and_start(line, pid)
    return None if got is None or got[0] == "Z" else got[1]


def pid_start(pid):
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), or None."""
    return start_from_stat(read_proc_stat(pid))


def process_holds_on(pid, start):
    """Whether any thread of the process ``pid`` that started at ``start`` still runs. A
    killed multi-threaded process's first thread is a zombie as soon as it has exited, while
    its other threads may still be finishing an I/O, holding the files the process opened
    (an exclusive open of a block device among them) until the last of them exits: its
    ``/proc/<pid>/stat`` says Z, its ``/proc/<pid>/task/`` still lists them (proc(5))."""
    got = _state_and_start(read_proc_stat(pid), pid=int(pid))
    if got is None or got[1] != start:
        return False
    if got[0] != "Z":
        return True
    try:
        tids = os.listdir("/proc/%d/task" % int(pid))
    except OSError:
        return False
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (int(pid), tid)) as fh:
                state = _state_and_start(fh.read())
        except OSError:
            continue
        if state is not None and state[0] not in ("Z", "X"):
            return True
    return False


def alive_from(status, proc_stat_line):
    """Whether the job of this status document runs, given the ``/proc/<pid>/stat`` line of
    its PID read now (None: no such process): same PID and start time (a reused PID has
    another start time). Pure: the module and the controller's raw poll decide alike."""
    if not status or not status.get("pid"):
        return False
    start = start_from_stat(proc_stat_line, pid=int(status["pid"]))
    return start is not None and start == status.get("pid_start")


def job_proc_stat(status):
    """The ``/proc/<pid>/stat`` line of a status document's PID now, or None."""
    if not status or not status.get("pid"):
        return None
    return read_proc_stat(int(status["pid"]))


def is_alive(status):
    """Whether the job of this status document still runs (same PID and start time)."""
    return alive_from(status, job_proc_stat(status))


def brief(status, now, proc_stat_line):
    """:func:`summary` of a status document given the time and its PID's stat line (pure)."""
    if not status:
        return None
    keys = ("run_id", "pid", "state", "started_epoch", "deadline_epoch", "finished_epoch", "planned_s", "of",
            "index", "current", "workload_started_epoch", "workload_planned_s", "error",
            # the quiet wait (Job.quiet_progress) and the burnin round of the workload running
            "quiet", "waited_s", "burnin", "stop_reason",
            # the plan's fingerprint: the record keeps it, so the next run knows the plan it measured
            "fingerprint")
    out = {k: status.get(k) for k in keys}
    out["done"] = len(status.get("results") or [])
    out["alive"] = alive_from(status, proc_stat_line)
    if status.get("state") == "running" and not out["alive"]:
        out["state"] = "died"
    out["now"] = round(now, 3)
    out["cleanup"] = status.get("cleanup")
    return out


def summary(status, now=None):
    """A short description of a job status (no results): for the controller's progress and
    for the record of the next run's preflight."""
    if not status:
        return None
    line = job_proc_stat(status)
    return brief(status, time.time() if now is None else now, line)


class JobError(Exception):
    """What the module ``fleetqual.storage.job`` fails with: ``msg`` is its message."""

    def __init__(self, msg):
        Exception.__init__(self, msg)
        self.msg = msg


def evaluate_status(doc, now, proc_stat_line, results=False, directory=None):
    """The status the module's ``state=status`` returns, from the status document ``doc``
    (None: none, or unreadable), the host's time ``now`` and the ``/proc/<pid>/stat`` line of
    the job's PID read after ``doc`` (None: no such process). Pure: :func:`job_status` (the
    module) and :func:`parse_poll` (the controller's raw poll) both decide here. Results
    once the job ended (or died) or with ``results``. Raises :class:`JobError` without a
    document (``directory`` is named in the message)."""
    if doc is None:
        raise JobError("no measurement job status in %s" % directory)
    status = brief(doc, now, proc_stat_line)
    if status["state"] in FINAL_STATES or status["state"] == "died" or results:
        status["results"] = doc.get("results") or []
        status["kernel"] = doc.get("kernel")    # the kernel's word on the drives (docs/kernel-log.md)
    if doc.get("array"):
        status["array"] = _lockstep.status_view(doc["array"], full="results" in status)
    return status


def settled(first, again):
    """The status document to judge together with a ``/proc/<pid>/stat`` read that found no
    live process (none, or a zombie its reaper has not collected yet): ``again``, the document read once more after that stat, when it is the same
    job's (same PID), else ``first``. A job writes its final status and then exits: one that
    ended between the first read and the stat was seen gone with its last "running"
    document, and only the read after the stat holds its final state; judging the first
    would call a job that finished "died" (found by the fleet bench: 1 host in 32). The
    process may still be there as a zombie: a job is an orphan, reaped by the host's init or
    subreaper when that gets to it (over a second on some container inits)."""
    if isinstance(first, dict) and isinstance(again, dict) and again.get("pid") == first.get("pid"):
        return again
    return first


def job_status(path, results=False):
    """The module's ``state=status`` result ``status`` for the test directory ``path``;
    raises :class:`JobError` when it holds no job status."""
    directory = job_dir(path)
    doc = read_status(directory)
    line = job_proc_stat(doc)
    if (doc or {}).get("state") == "running" and not alive_from(doc, line):
        doc = settled(doc, read_status(directory))
    return evaluate_status(doc, time.time(), line, results=results, directory=directory)


POLL_MARK = "@@fleetqual-job-poll@@"


def poll_command(path):
    """A POSIX sh command line (no Python on the host; fine under ``become``) printing what
    :func:`parse_poll` needs to give the module's ``state=status`` result for the test
    directory ``path``: the host's time (``date +%s.%N``), the job directory, the status
    document, the ``/proc/<pid>/stat`` line of the PID in it, read after it, and, when the
    document said running, the document read again after that line, used when the process
    is gone or a zombie (:func:`settled`, as :func:`job_status` does). Each part follows a line
    ``POLL_MARK <name>``; the status comes last."""
    directory = job_dir(path)
    pid_of = "tr ',' '\\n' | sed -n 's/^ *\"pid\": *\\([0-9][0-9]*\\)[ }]*$/\\1/p' | head -n 1"
    return ("m=%(mark)s; d=%(dir)s; "
            "printf '%%s now\\n' \"$m\"; date +%%s.%%N; "
            "printf '%%s dir\\n%%s\\n' \"$m\" \"$d\"; "
            "s=$(cat \"$d\"/%(status)s 2>/dev/null); "
            "p=$(printf '%%s\\n' \"$s\" | %(pid_of)s); "
            "printf '%%s stat\\n' \"$m\"; "
            "t=; if [ -n \"$p\" ]; then t=$(cat /proc/\"$p\"/stat 2>/dev/null); printf '%%s\\n' \"$t\"; fi; "
            "a=; case \"$s\" in *'\"state\": \"running\"'*) "
            "a=$(cat \"$d\"/%(status)s 2>/dev/null);; esac; "
            "printf '%%s again\\n%%s\\n' \"$m\" \"$a\"; "
            "printf '%%s status\\n%%s\\n' \"$m\" \"$s\""
            % {"mark": shlex.quote(POLL_MARK), "dir": shlex.quote(directory), "status": shlex.quote(STATUS),
               "pid_of": pid_of})


def _json_or_none(text):
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def parse_poll(stdout, results=False):
    """The module's ``state=status`` result ``status`` from the output of
    :func:`poll_command` (through :func:`evaluate_status`, as the module); raises
    :class:`JobError` as the module fails (no status), ValueError on output that is not a
    poll's."""
    text = stdout.replace("\r\n", "\n")
    names = ("now", "dir", "stat", "again", "status")
    bounds = []   # (start of the mark, start of the part) of each part, in order
    pos = 0
    for name in names:
        mark = "%s %s\n" % (POLL_MARK, name)
        at = text.find(mark, pos)
        if at < 0:
            raise ValueError("not the output of the job poll command (no %r): %r" % (mark, stdout[:200]))
        pos = at + len(mark)
        bounds.append((at, pos))
    ends = [b[0] for b in bounds[1:]] + [len(text)]
    parts = dict((name, text[b[1]:end]) for name, b, end in zip(names, bounds, ends))
    found = re.match(r"\s*(\d+(?:\.\d+)?)", parts["now"])
    if not found:
        raise ValueError("the job poll printed no time: %r" % parts["now"])
    doc, again = (_json_or_none(parts[name]) for name in ("status", "again"))
    line = parts["stat"].strip("\n") or None
    if not alive_from(doc, line):
        doc = settled(doc, again)
    directory = parts["dir"][:-1] if parts["dir"].endswith("\n") else parts["dir"]
    return evaluate_status(doc, float(found.group(1)), line, results=results, directory=directory)


def stop_job(status, directory, grace=60.0):
    """SIGTERM a live job and wait up to ``grace`` s for its final status. Returns the last
    status read (the job's own, final when it stopped in time). A job found gone is judged on
    the status read after that finding (:func:`settled`): it writes its final status and then
    exits, so the read before may be its last "running" one."""
    if not is_alive(status):
        return status
    try:
        os.kill(int(status["pid"]), signal.SIGTERM)
    except OSError:
        return read_status(directory)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        cur = read_status(directory)
        if cur and cur.get("state") in FINAL_STATES and not is_alive(cur):
            return cur
        if not is_alive(status):
            return settled(cur, read_status(directory))
        time.sleep(0.2)
    return read_status(directory)


def stop_request(directory):
    """The stop request :func:`operator_stop` left in the job directory, or None."""
    return read_json_or_none(os.path.join(directory, STOP_REQUEST))


def stop_reason(request, signum):
    """The job's stop reason for ``signum``: the operator's (who asked, from ``request``, the
    document :func:`stop_request` reads) when there is one, else the signal's number."""
    if isinstance(request, dict) and request.get("by"):
        return "%s (%s)" % (OPERATOR_STOP, request["by"])
    return "signal %d" % signum


def operator_stop(path, run_id=None, grace=10.0, by="fleetqual.storage.stop", check_mode=False):
    """Stop the measurement job in the test directory ``path`` (the module's ``state=stopped``,
    the playbook ``fleetqual.storage.stop``): when it runs, and is ``run_id``'s when that is
    given, leave a stop request naming ``by`` and SIGTERM it; the job ends its workload,
    removes its files, restores its device regions and writes its final status, which stays
    for the run that collects it. Waits up to ``grace`` seconds for that status. Returns
    ``{"found", "stopped", "status", "msg"}``: ``stopped`` when a live job was signalled,
    ``status`` the job's :func:`summary` after it (None without a job). ``check_mode``: the
    same decision, nothing signalled or written (``stopped``: whether it would be)."""
    directory = job_dir(path)
    status = read_status(directory)
    if not status:
        return {"found": False, "stopped": False, "status": None, "msg": "no measurement job in %s" % path}
    if run_id and status.get("run_id") != run_id:
        return {"found": True, "stopped": False, "status": summary(status),
                "msg": "the measurement job in %s is run %s's, not run %s's: left as it is"
                       % (path, status.get("run_id"), run_id)}
    if not is_alive(status):
        brief_ = summary(status)
        return {"found": True, "stopped": False, "status": brief_,
                "msg": "the measurement job of run %s had already ended (%s)" % (status.get("run_id"), brief_["state"])}
    if check_mode:
        return {"found": True, "stopped": True, "status": summary(status),
                "msg": "check mode: the measurement job of run %s (pid %s) would be stopped"
                       % (status.get("run_id"), status.get("pid"))}
    write_json_atomic(os.path.join(directory, STOP_REQUEST), {"by": by, "epoch": round(time.time(), 3)},
                      mode=0o600, fsync=True)
    final = stop_job(status, directory, grace)
    brief_ = summary(final)
    ended = brief_["state"] in FINAL_STATES
    return {"found": True, "stopped": True, "status": brief_,
            "msg": "the measurement job of run %s (pid %s) %s: %d of %s workloads measured"
                   % (status.get("run_id"), status.get("pid"),
                      "stopped" if ended else "was sent SIGTERM and still runs after %g s" % grace,
                      brief_["done"], status.get("of"))}
