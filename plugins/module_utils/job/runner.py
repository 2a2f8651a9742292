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
     "kernel": {<the kernel log's storage messages: module_utils/collect/kmsg.py, docs/kernel-log.md>}}

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
import os
import shutil
import signal
import tempfile
import threading
import time
import traceback

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev as _blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload as _workload
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign as _foreign
from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as _lockstep
from ansible_collections.fleetqual.storage.plugins.module_utils.job import payloads as _payloads
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import kmsg as _kmsg
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.job.cleanup import clean_all, cleanup_plan
from ansible_collections.fleetqual.storage.plugins.module_utils.job.status import (
    JobError,
    SCRATCH_PREFIX,
    STATUS,
    is_alive,
    job_dir,
    pid_start,
    read_status,
    stop_reason,
    stop_request,
    summary,
    write_status,
)

# Space kept for the status on the measured filesystem, which a workload may fill up
# (ENOSPC is a result to report, not a reason to lose it): released when a write fails.
RESERVE = "reserve"
RESERVE_BYTES = 4 << 20
RESERVE_PER_WORKLOAD = 1 << 20
RESERVE_MAX = 64 << 20
KERNEL_POLL_S = 5.0         # the kernel log is read this often while a workload runs
CLEANUP_MIN_S = 60          # the cleanup commands may take this long at least, past the deadline too


def where(wl, test_dir):
    """Where a plan workload runs, as ``run_workload`` parameters (``plan.target_args``):
    ``{dir}`` for the shorthand and a directory target, ``{device, size}`` (no files:
    ``total_size``/``file_num`` unset) for a device target."""
    if wl.get("target_kind") == "device":
        return {"device": wl["target_device"], "size": int(wl.get("device_size") or 0),
                "offset": int(wl.get("device_offset") or 0), "dir": None, "total_size": None, "file_num": None}
    base = wl["target_path"] if wl.get("target_kind") == "path" else test_dir
    return {"dir": os.path.join(base, wl["dataset"])}


def precondition_argvs(params, passes):
    """The iobench calls of a workload's ``precondition: N`` (SNIA PTS workload-independent
    preconditioning: sequential 128K writes over its whole working set, N passes), run
    before it is measured: ``iobench prepare`` first when the workload prepares its data
    set, then ``iobench precondition``; the run itself then does not prepare again."""
    if params.get("device"):
        where = (["--device", params["device"]] + (["--offset", str(params["offset"])] if params.get("offset") else [])
                 + (["--size", str(params["size"])] if params.get("size") else []))
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
        self.hung = set()           # targets whose requests never completed (hung.py): not cleaned up
        self.scratch = None         # where the workloads' iobench results go (status.SCRATCH_PREFIX)

    def _on_signal(self, signum, frame):
        if self.reason is None:
            self.reason = stop_reason(stop_request(self.dir), signum)
        self.stop.set()

    def _on_deadline(self):
        if self.reason is None:
            self.reason = "deadline"
        self.stop.set()

    def stopped_by(self):
        """Who stopped the job (the operator's reason, a signal's), or None: not stopped, or
        stopped by its deadline (a timeout of the run, not a stop)."""
        return self.reason if self.reason not in (None, "deadline") else None

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
        regions = [dict(_blockdev.device_identity(device), size=size, offset=offset)
                   for device, size, offset in cleanup_plan(spec["path"], spec["workloads"], spec["datasets"])[1]]
        # in the status too: a job killed before its cleanup leaves it to the next preflight
        self.scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
        try:
            self._first_status(spec, pid, started, regions)
        except BaseException:
            # the job does not start (the module says why): nothing names the directory
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
            raise

    def _first_status(self, spec, pid, started, regions):
        self.status = {
            "schema_version": 1, "run_id": spec["run_id"], "pid": pid, "pid_start": pid_start(pid),
            "state": "running", "started_epoch": round(started, 3),
            "deadline_epoch": round(started + spec["deadline_s"], 3), "finished_epoch": None,
            "planned_s": spec["planned_s"], "of": len(spec["workloads"]), "index": 0, "current": None,
            "workload_started_epoch": None, "workload_planned_s": None,
            "results": [], "error": None, "cleanup": None, "regions": regions,
            "quiet": None, "waited_s": 0.0, "burnin": None,
            # the plan's fingerprint: a later run of the same plan attaches to this job (host/start.py)
            "fingerprint": spec.get("fingerprint"),
            "scratch_dir": self.scratch,
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
                    result, failed, msg, warnings = _workload.run_workload(params, stop=self.stop,
                                                                           stopped_by=self.stopped_by,
                                                                           scratch_dir=self.scratch)
                _kmsg.job_read(self.kernel, st)
                st["results"].append({"index": i + 1, "id": wl.get("id"), "key": wl.get("key") or wl.get("id"),
                                      "target": wl.get("target"), "failed": failed, "msg": msg,
                                      "warnings": warnings, "result": result, "precondition": pre})
                if failed:
                    st["error"] = {"index": i + 1, "id": wl.get("key") or wl.get("id"), "msg": msg}
                    if result.get("hung"):
                        self.hung.add(wl.get("target_device") or wl.get("target_path") or self.spec["path"])
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
                removed, left, warnings = clean_all(self.spec, self.hung,
                                                    max(CLEANUP_MIN_S, st["deadline_epoch"] - time.time()))
                st["cleanup"] = {"removed": removed, "left": left, "warnings": warnings}
            except Exception as e:  # noqa: BLE001
                st["cleanup"] = {"removed": [], "left": [], "warnings": ["cleanup failed: %s" % e]}
            if self.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)
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
            try:
                job.run()
            except BaseException as e:  # noqa: BLE001 - Job.run ends with a final status; if it could not, say why
                job.status.update(state="failed", finished_epoch=round(time.time(), 3),
                                  error={"index": job.status.get("index"), "id": job.status.get("current"),
                                         "msg": "the job ended before its final status: %s: %s"
                                                % (e.__class__.__name__, e)})
                job.save()
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
