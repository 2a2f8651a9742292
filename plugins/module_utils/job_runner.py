# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The detached measurement job: a host's whole plan run on the host.

The module ``fleetqual.storage.job`` starts it with :func:`detach` and returns at once; the
job then runs every workload of the plan in turn through ``workload.run_workload`` (the
code of the single-workload module ``fleetqual.storage.iobench``, so each result has that
module's shape), writes its progress and results to ``<test_dir>/.fleetqual-job/status.json``
(write to a temporary file, then ``rename``: a reader never sees half a file), removes its
data set files itself at the end (the shorthand's in ``<test_dir>``, each directory target's
in its ``target_path``), zeroes each device target's region (``iobench cleanup --device``)
and stops at its deadline.

Status document (``status.json``)::

    {"schema_version": 1, "run_id": "...", "pid": 1234, "pid_start": <clock ticks>,
     "state": "running" | "done" | "failed" | "expired" | "stopped",
     "started_epoch": .., "deadline_epoch": .., "finished_epoch": null | ..,
     "planned_s": 420, "of": 6, "index": 3, "current": "<workload id>",
     "workload_started_epoch": .., "workload_planned_s": 65,
     "results": [{"index": 1, "id": "...", "key": "<id>[@<target>]", "target": null | "<name>",
                  "failed": false, "msg": null,
                  "warnings": [...], "result": {<iobench module result>}}, ...],
     "error": null | {"index": k, "id": "...", "msg": "..."},
     "cleanup": null | {"removed": [...], "left": [...], "warnings": [...]},
     "regions": [{"device": "<target_device>", "size": <bytes, 0 = whole device>, "resolved": "/dev/X",
                  "name": "X", "serial": .., "wwid": .., "backing_file": .., "size_bytes": ..}, ...],
     "kernel": {<the kernel log's storage messages: module_utils/kmsg.py, docs/kernel-log.md>}}

``regions``: every device region the job may write, written by ``Job.begin`` before the
first byte; ``cleanup.removed`` names each one it zeroed (``blockdev.region_label``). A region
left out of it (the job was killed before its cleanup) is zeroed by the next run's preflight
when its drive is again an opted-in target, else that preflight refuses the host
(``modules/bench_dir.py``, ``blockdev.match_regions``).

``failed``: a workload failed the way the module fails (iobench exit 1/2/3, no JSON), the
job stopped there. ``expired``: the deadline passed; the running iobench was stopped with
SIGTERM (its partial, interrupted result is kept) and the rest was not run. ``stopped``:
the job got SIGTERM/SIGHUP/SIGINT (``bench_dir state=absent`` stops a live job that way).
"""

import errno
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import traceback

from ansible_collections.fleetqual.storage.plugins.module_utils import blockdev as _blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils import workload as _workload
from ansible_collections.fleetqual.storage.plugins.module_utils import foreign as _foreign
from ansible_collections.fleetqual.storage.plugins.module_utils import lockstep as _lockstep
from ansible_collections.fleetqual.storage.plugins.module_utils import payloads as _payloads
from ansible_collections.fleetqual.storage.plugins.module_utils import kmsg as _kmsg
from ansible_collections.fleetqual.storage.plugins.module_utils.atomic import write_json_atomic
from ansible_collections.fleetqual.storage.plugins.module_utils.size import parse_size

JOB_DIR = ".fleetqual-job"
STATUS = "status.json"
# Space kept for the status on the measured filesystem, which a workload may fill up
# (ENOSPC is a result to report, not a reason to lose it): released when a write fails.
RESERVE = "reserve"
RESERVE_BYTES = 4 << 20
RESERVE_PER_WORKLOAD = 1 << 20
RESERVE_MAX = 64 << 20
FINAL_STATES = ("done", "failed", "expired", "stopped")
KERNEL_POLL_S = 5.0         # the kernel log is read this often while a workload runs


def job_dir(test_dir):
    return os.path.join(test_dir, JOB_DIR)


def write_status(directory, doc):
    """Write ``status.json`` atomically (temporary file in the same directory, fsync, rename)."""
    write_json_atomic(os.path.join(directory, STATUS), doc, mode=0o600, fsync=True)


def read_status(directory):
    """The status document, or None when there is none (or it cannot be read)."""
    try:
        with open(os.path.join(directory, STATUS)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_proc_stat(pid):
    """The ``/proc/<pid>/stat`` line of ``pid``, or None (no such process)."""
    try:
        with open("/proc/%d/stat" % int(pid)) as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def start_from_stat(line, pid=None):
    """Start time in clock ticks since boot (field 22) of a ``/proc/<pid>/stat`` line, or
    None: no line, a zombie, a line of another PID than ``pid`` (when given), or unreadable."""
    if not line:
        return None
    try:
        head, rest = line.rsplit(")", 1)
        fields = rest.split()
        if pid is not None and head.split("(", 1)[0].strip() != str(pid):
            return None
        if fields[0] == "Z":
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_start(pid):
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), or None."""
    return start_from_stat(read_proc_stat(pid))


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
            "quiet", "waited_s", "burnin")
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
    process: ``again``, the document read once more after that stat, when it is the same
    job's (same PID), else ``first``. A job writes its final status and then exits: one that
    ended between the first read and the stat was seen gone with its last "running"
    document, and only the read after the stat holds its final state; judging the first
    would call a job that finished "died" (found by the fleet bench: 1 host in 32)."""
    if isinstance(first, dict) and isinstance(again, dict) and again.get("pid") == first.get("pid"):
        return again
    return first


def job_status(path, results=False):
    """The module's ``state=status`` result ``status`` for the test directory ``path``;
    raises :class:`JobError` when it holds no job status."""
    directory = job_dir(path)
    doc = read_status(directory)
    line = job_proc_stat(doc)
    if line is None and (doc or {}).get("state") == "running":
        doc = settled(doc, read_status(directory))
    return evaluate_status(doc, time.time(), line, results=results, directory=directory)


POLL_MARK = "@@fleetqual-job-poll@@"


def poll_command(path):
    """A POSIX sh command line (no Python on the host; fine under ``become``) printing what
    :func:`parse_poll` needs to give the module's ``state=status`` result for the test
    directory ``path``: the host's time (``date +%s.%N``), the job directory, the status
    document, the ``/proc/<pid>/stat`` line of the PID in it, read after it, and, when that
    process is gone while the document said running, the document read again
    (:func:`settled`, as :func:`job_status` does). Each part follows a line
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
            "a=; if [ -z \"$t\" ]; then case \"$s\" in *'\"state\": \"running\"'*) "
            "a=$(cat \"$d\"/%(status)s 2>/dev/null);; esac; fi; "
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
    if line is None:
        doc = settled(doc, again)
    directory = parts["dir"][:-1] if parts["dir"].endswith("\n") else parts["dir"]
    return evaluate_status(doc, float(found.group(1)), line, results=results, directory=directory)


def remove_datasets(path, datasets, binary):
    """Remove the data set directories of a test directory: ``iobench cleanup`` in each
    (iobench removes only its own files), then the emptied directory. Returns
    ``(removed, left, warnings)``."""
    removed, left, warnings = [], [], []
    for name in datasets or []:
        sub = os.path.join(path, name)
        if not os.path.isdir(sub) or os.path.islink(sub):
            continue
        if binary and os.access(binary, os.X_OK) and os.listdir(sub):
            p = subprocess.run([binary, "cleanup", "--dir", sub], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C"), check=False)
            if p.returncode != 0:
                warnings.append("iobench cleanup in %s exited %d: %s"
                                % (sub, p.returncode, p.stderr.decode("utf-8", "replace").strip()))
        try:
            os.rmdir(sub)
            removed.append(sub)
        except OSError:
            left.extend(os.path.join(sub, e) for e in sorted(os.listdir(sub)))
    return removed, left, warnings


def where(wl, test_dir):
    """Where a plan workload runs, as ``run_workload`` parameters (``plan.target_args``):
    ``{dir}`` for the shorthand and a directory target, ``{device, size}`` (no files:
    ``total_size``/``file_num`` unset) for a device target."""
    if wl.get("target_kind") == "device":
        return {"device": wl["target_device"], "size": int(wl.get("device_size") or 0), "dir": None,
                "total_size": None, "file_num": None}
    base = wl["target_path"] if wl.get("target_kind") == "path" else test_dir
    return {"dir": os.path.join(base, wl["dataset"])}


def precondition_argvs(params, passes):
    """The iobench calls of a workload's ``precondition: N`` (SNIA PTS workload-independent
    preconditioning: sequential 128K writes over its whole working set, N passes), run
    before it is measured: ``iobench prepare`` first when the workload prepares its data
    set, then ``iobench precondition``; the run itself then does not prepare again."""
    if params.get("device"):
        where = ["--device", params["device"]] + (["--size", str(params["size"])] if params.get("size") else [])
        direct = []
    else:
        total = parse_size(params["total_size"], "total_size")
        where = ["--dir", params["dir"], "--file-num", str(params["file_num"]), "--total-size", str(total)]
        direct = ["--direct"] if params.get("direct") else []
    argvs = [[params["binary"], "prepare"] + where] if params.get("prepare") else []
    passes_args = ["--passes", str(int(passes)), "--block-size", "131072"]
    argvs.append([params["binary"], "precondition"] + where + passes_args + direct)
    return argvs


def run_precondition(params, passes, timeout, stop):
    """Run :func:`precondition_argvs`; ``(None, seconds)`` or ``(message, seconds)``."""
    began = time.time()
    for argv in precondition_argvs(params, passes):
        rc, _out, err, timed_out, _start, _end = _workload.run_bench(argv, max(1, int(timeout - (time.time() - began))),
                                                                     stop)
        if rc != 0 or timed_out:
            return ("%s failed (exit %s%s): %s" % (" ".join(argv[1:2]) + " before the workload", rc,
                                                   ", stopped" if timed_out else "",
                                                   _workload.error_line(err) or "no error message"),
                    round(time.time() - began, 3))
    return None, round(time.time() - began, 3)


def cleanup_plan(test_dir, workloads, datasets):
    """What the job removes at its end: ``([(directory, [data sets])], [(device, size)])``;
    the shorthand's ``datasets`` in ``test_dir``, each directory target's data sets, each
    device target's region (the largest any workload used; 0 = the whole device)."""
    dirs = {test_dir: list(datasets or [])}
    devices = {}
    for wl in workloads or []:
        kind = wl.get("target_kind")
        if kind == "path":
            names = dirs.setdefault(wl["target_path"], [])
            if wl.get("dataset") and wl["dataset"] not in names:
                names.append(wl["dataset"])
        elif kind == "device":
            size = int(wl.get("device_size") or 0)
            old = devices.get(wl["target_device"])
            devices[wl["target_device"]] = 0 if (size == 0 or old == 0) else max(size, old or 0)
    return [(d, n) for d, n in dirs.items() if n], sorted(devices.items())


def zero_device(binary, device, size):
    """``iobench cleanup --device`` over the region a device target's workloads used (iobench
    zeroes what it can have written). Returns a warning, or None."""
    argv = [binary, "cleanup", "--device", device] + (["--size", str(size)] if size else [])
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, LC_ALL="C"), check=False)
    if p.returncode != 0:
        return "iobench cleanup on %s exited %d: %s" % (
            device, p.returncode, p.stderr.decode("utf-8", "replace").strip())
    return None


def clean_all(spec):
    """Remove every data set of the job's plan and zero its device regions:
    ``(removed, left, warnings)`` (``removed`` names zeroed devices as ``<device>[0+<size>]``)."""
    removed, left, warnings = [], [], []
    dirs, devices = cleanup_plan(spec["path"], spec["workloads"], spec["datasets"])
    for directory, names in dirs:
        r, lf, w = remove_datasets(directory, names, spec["binary"])
        removed += r
        left += lf
        warnings += w
    for device, size in devices:
        warning = zero_device(spec["binary"], device, size)
        if warning:
            warnings.append(warning)
        else:
            removed.append(_blockdev.region_label(device, size))
    return removed, left, warnings


def stop_job(status, directory, grace=60.0):
    """SIGTERM a live job and wait up to ``grace`` s for its final status. Returns the last
    status read (the job's own, final when it stopped in time)."""
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
            return cur
        time.sleep(0.2)
    return read_status(directory)


class Job:
    """One run of a host's plan. ``spec``: the module's parameters (see modules/job.py)."""

    def __init__(self, spec):
        self.spec = spec
        self.dir = job_dir(spec["path"])
        self.stop = threading.Event()
        self.reason = None
        self.status = None
        self.kernel = None
        self.waited = 0.0           # seconds the ended quiet waits took (foreign.wait_quiet)

    def _on_signal(self, signum, frame):
        if self.reason is None:
            self.reason = "signal %d" % signum
        self.stop.set()

    def _on_deadline(self):
        if self.reason is None:
            self.reason = "deadline"
        self.stop.set()

    def params_for(self, wl, timeout):
        """The ``workload.run_workload`` parameters of one plan workload: where it runs
        (``plan.target_args``: ``<target_path>/<dataset>`` on a directory target, the
        device region on a device target, ``<path>/<dataset>`` for the shorthand)."""
        p = _workload.defaults()
        p.update(_workload.opts.workload_params(wl))
        p.update(binary=self.spec["binary"], cleanup=False, collect=self.spec["collect"],
                 collect_interval=self.spec["collect_interval"], timeout=timeout)
        p.update(where(wl, self.spec["path"]))
        if p.get("seed") is None:
            p["seed"] = self.spec.get("seed")
        p["prepare"] = wl.get("prepare", True) if wl.get("prepare") is not None else True
        return p

    def _reserve(self):
        size = min(RESERVE_MAX, RESERVE_BYTES + RESERVE_PER_WORKLOAD * len(self.spec["workloads"]))
        path = os.path.join(self.dir, RESERVE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            block = b"\0" * (1 << 20)
            for chunk in range(size >> 20):
                os.write(fd, block)
            os.fsync(fd)
        except OSError:
            pass   # as much as there is: the preflight checked the space
        finally:
            os.close(fd)

    def save(self):
        """Write the status; on a full filesystem release the reserve and try again. Returns
        whether it was written (a skipped write is retried at the next one)."""
        for attempt in (1, 2):
            try:
                write_status(self.dir, self.status)
                return True
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                try:
                    os.unlink(os.path.join(self.dir, "%s.%d.tmp" % (STATUS, os.getpid())))
                except OSError:
                    pass
                try:
                    os.unlink(os.path.join(self.dir, RESERVE))
                except OSError:
                    return False
        return False

    def begin(self, started):
        spec = self.spec
        pid = os.getpid()
        # The device regions this job will write, in the status before it writes a byte: a job
        # killed before its cleanup leaves them to the next preflight (blockdev.match_regions).
        regions = [dict(_blockdev.device_identity(device), size=size)
                   for device, size in cleanup_plan(spec["path"], spec["workloads"], spec["datasets"])[1]]
        self.status = {
            "schema_version": 1, "run_id": spec["run_id"], "pid": pid, "pid_start": pid_start(pid),
            "state": "running", "started_epoch": round(started, 3),
            "deadline_epoch": round(started + spec["deadline_s"], 3), "finished_epoch": None,
            "planned_s": spec["planned_s"], "of": len(spec["workloads"]), "index": 0, "current": None,
            "workload_started_epoch": None, "workload_planned_s": None,
            "results": [], "error": None, "cleanup": None, "regions": regions,
            "quiet": None, "waited_s": 0.0, "burnin": None,
        }
        write_status(self.dir, self.status)
        self._reserve()

    def quiet_progress(self, quiet):
        """The quiet wait in the status while it lasts (``foreign.wait_quiet`` calls it each
        round): ``quiet`` ``{waiting, util_pct, limit_pct, waited_s, wait_s}`` while the
        device is busy, None once the wait is over; ``waited_s``: every wait of the job so
        far, this one included (the progress line adds them to the planned time)."""
        waited = float(quiet.get("waited_s") or 0)
        self.status["waited_s"] = round(self.waited + waited, 1)
        if quiet.get("waiting"):
            self.status["quiet"] = quiet
        else:
            self.waited += waited
            self.status["quiet"] = None
        self.save()

    def run(self):
        """Run the plan (in the detached process); always ends with a final status."""
        st = self.status
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        timer = threading.Timer(max(0.0, st["deadline_epoch"] - time.time()), self._on_deadline)
        timer.daemon = True
        timer.start()
        # the kernel log from the job's start (docs/kernel-log.md): read after each workload too
        self.kernel = _kmsg.job_open(st, KERNEL_POLL_S)
        try:
            # array mode: the array's lock-step steps first, on the common schedule
            _lockstep.run_array(self)
            workloads = self.spec["workloads"]
            for i, wl in enumerate(workloads):
                if self.stop.is_set():
                    break
                timeout = int(self.spec["timeouts"][i])
                st.update(index=i + 1, current=wl.get("key") or wl.get("id"),
                          workload_started_epoch=round(time.time(), 3),
                          workload_planned_s=int(self.spec["planned"][i]), burnin=wl.get("burnin"))
                if self.kernel is not None:
                    self.kernel.set_workload(st["current"])
                self.save()
                params = self.params_for(wl, timeout)
                params = _foreign.job_params(self.spec, params, st["started_epoch"], wl, i)   # foreign I/O, impact
                params["quiet_progress"] = self.quiet_progress
                pre = None
                if wl.get("precondition"):
                    pre_error, pre_s = run_precondition(params, wl["precondition"], timeout, self.stop)
                    pre = {"passes": int(wl["precondition"]), "elapsed_s": pre_s, "error": pre_error}
                    params["prepare"] = False       # prepared (and preconditioned) above
                if pre and pre["error"]:
                    result, failed, msg, warnings = {}, True, pre["error"], []
                else:
                    result, failed, msg, warnings = _workload.run_workload(params, stop=self.stop)
                _kmsg.job_read(self.kernel, st)
                st["results"].append({"index": i + 1, "id": wl.get("id"), "key": wl.get("key") or wl.get("id"),
                                      "target": wl.get("target"), "failed": failed, "msg": msg,
                                      "warnings": warnings, "result": result, "precondition": pre})
                if failed:
                    st["error"] = {"index": i + 1, "id": wl.get("key") or wl.get("id"), "msg": msg}
                    break
                self.save()
        except Exception as e:  # noqa: BLE001 - recorded, never lost with the process
            st["error"] = {"index": st["index"], "id": st["current"],
                           "msg": "the job failed: %s: %s" % (e, traceback.format_exc(limit=5)[-1500:])}
        finally:
            timer.cancel()
            # no signal may cut the cleanup short: the files must go
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
            try:
                removed, left, warnings = clean_all(self.spec)
                st["cleanup"] = {"removed": removed, "left": left, "warnings": warnings}
            except Exception as e:  # noqa: BLE001
                st["cleanup"] = {"removed": [], "left": [], "warnings": ["cleanup failed: %s" % e]}
            _kmsg.job_read(self.kernel, st, close=True)
            if st["error"]:
                st["state"] = "failed"
            elif self.reason == "deadline":
                st["state"] = "expired"
            elif self.reason:
                st["state"] = "stopped"
            else:
                st["state"] = "done"
            st["stop_reason"] = self.reason
            st["finished_epoch"] = round(time.time(), 3)
            try:
                saved = self.save()
            except Exception as e:  # noqa: BLE001 - a status that cannot be written whole still says how it ended
                saved = False
                st["error"] = st["error"] or {"index": st["index"], "id": st["current"],
                                              "msg": "the final status could not be written whole: %s" % e}
                st["state"] = "failed"
            if not saved:
                # nothing left for the full status: say at least how it ended
                st["results"] = [dict(r, result={"rc": (r.get("result") or {}).get("rc")}) for r in st["results"]]
                st["status_truncated"] = True
                self.save()
            try:
                os.unlink(os.path.join(self.dir, RESERVE))
            except OSError:
                pass


def detach(spec):
    """Start the job in a detached process (double fork + setsid, stdio on /dev/null, every
    other descriptor closed, so the SSH session of the module ends at once) and return its
    first status document, written before this returns. The job removes the module run's
    AnsiballZ payload once that run has ended (``payloads.reap``)."""
    directory = job_dir(spec["path"])
    os.makedirs(directory, mode=0o700, exist_ok=True)
    payload, module_pid = _payloads.payload_dir(), os.getpid()
    module_start = pid_start(module_pid)
    r, w = os.pipe()
    started = time.time()
    pid = os.fork()
    if pid == 0:  # child: new session, fork again so the job is no session leader
        try:
            os.close(r)
            os.setsid()
            if os.fork():
                os._exit(0)
            os.chdir("/")
            os.umask(0o077)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            job = Job(spec)
            try:
                job.begin(started)
                os.write(w, b"ok")
            except Exception as e:  # noqa: BLE001
                os.write(w, ("error: %s" % e).encode("utf-8", "replace"))
                os._exit(1)
            os.close(w)
            os.closerange(3, 65536)
            if payload:
                threading.Thread(target=_payloads.reap, daemon=True,
                                 args=(payload, lambda: pid_start(module_pid) == module_start)).start()
            job.run()
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    answer = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        answer += chunk
    os.close(r)
    if answer != b"ok":
        raise RuntimeError("the measurement job did not start: %s" % (answer.decode("utf-8", "replace")
                                                                      or "no answer"))
    return read_status(directory)


# The module's parameters for state=started and their defaults (modules/job.py's
# argument_spec takes them from here; :func:`start` fills in the ones left out).
START_DEFAULTS = {
    "run_id": "", "binary": "/opt/fleetqual/bin/iobench", "datasets": [], "workloads": [], "timeouts": [],
    "planned": [], "planned_s": 0, "deadline_s": 3600, "seed": None, "collect": "auto", "collect_interval": 1,
    "foreign_io": None, "impact": None, "array": None,
}


def start(spec, check_mode=False):
    """Start the measurement job of ``spec`` (the module's ``state=started`` parameters, a
    key left out takes its :data:`START_DEFAULTS` value; ``path`` is required) and return
    the module's result ``status`` (:func:`summary` of its first status document), or None
    in check mode (nothing started). Raises :class:`JobError` with the module's message
    when it refuses (no test directory, a job still running there, a malformed plan) or
    the job does not start."""
    full = dict((k, list(v) if isinstance(v, list) else v) for k, v in START_DEFAULTS.items())
    full.update(spec)
    if check_mode:
        return None
    path = full["path"]
    if not os.path.isdir(path):
        raise JobError("test directory %s does not exist (the preflight creates it)" % path)
    current = read_status(job_dir(path))
    if is_alive(current):
        raise JobError("a measurement job of run %s is still running in %s (pid %s, deadline %s)"
                       % (current.get("run_id"), path, current.get("pid"), current.get("deadline_epoch")))
    n = len(full["workloads"])
    if len(full["timeouts"]) != n or len(full["planned"]) != n:
        raise JobError("timeouts and planned need one entry per workload (%d)" % n)
    for i, wl in enumerate(full["workloads"]):
        if not wl.get("dataset") or not wl.get("id"):
            raise JobError("workload %d has no dataset or id" % (i + 1))
    try:
        status = detach(full)
    except (OSError, RuntimeError) as e:
        raise JobError("could not start the measurement job: %s" % e)
    return summary(status)
