# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The marked test directory iobench writes in (the logic of the module
``fleetqual.storage.bench_dir``, callable without an AnsibleModule).

:func:`prepare` (``state=present``) and :func:`remove` (``state=absent``) return the
module's result (its warnings in ``warnings``, only when there are any) and raise
:class:`BenchDirError` with the module's message and result fields where it fails.
"""

import errno
import mmap
import os
import shutil
import stat
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev as _blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _job
from ansible_collections.fleetqual.storage.plugins.module_utils.job import cleanup as _job_cleanup

MARKER = ".fleetqual-storage"
MARKER_TEXT = "This directory was created by fleetqual.storage for storage benchmarks.\n"
JOB = _job.JOB_DIR


class BenchDirError(Exception):
    """A refusal of the module: ``msg`` its message, ``result`` the result fields it fails
    with (``warnings``: the warnings given before, when any)."""

    def __init__(self, msg, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


class _Call(object):
    """One call's options, check mode and warnings (what the module's params, check_mode
    and warn were)."""

    def __init__(self, binary, devices, check_mode):
        self.binary = binary
        self.devices = list(devices or [])
        self.check_mode = check_mode
        self.warnings = []

    def warn(self, msg):
        self.warnings.append(msg)

    def fail(self, msg, result=None):
        fields = dict(result or {})
        if self.warnings:
            fields["warnings"] = list(self.warnings)
        raise BenchDirError(msg, **fields)

    def done(self, result):
        if self.warnings:
            result["warnings"] = list(self.warnings)
        return result


def restore_regions(call, directory, status):
    """The device regions a dead job left written (its status' ``regions`` not in its
    cleanup): zero each whose drive is one of this run's opted-in device targets
    (``devices``). Returns ``(zeroed, problems)``: the regions zeroed (or, in check mode,
    to zero) and a message per region refused or not zeroed."""
    regions = _blockdev.leftover_regions(status)
    if not regions:
        return [], []
    zero, refuse = _blockdev.match_regions(regions, call.devices)
    try:
        last_alive = os.stat(os.path.join(directory, _job.STATUS)).st_mtime
    except OSError:
        last_alive = None
    binary = call.binary
    problems = [_blockdev.region_refusal(region, current, status, directory, binary, last_alive)
                for region, current in refuse]
    zeroed = []
    for region, device in zero:
        label = _blockdev.region_label(device, region.get("size"), region.get("offset"))
        if call.check_mode:
            zeroed.append(label)
            continue
        warning = _job_cleanup.zero_device(binary or "iobench", device, region.get("size"),
                                           offset=region.get("offset") or 0)
        if warning:
            problems.append("device %s: the region the measurement job of run %s (pid %s) left written could not "
                            "be zeroed: %s" % (device, status.get("run_id"), status.get("pid"), warning))
        else:
            zeroed.append(label)
            # in the job's status too: when it is kept (a problem), the next run knows it is done
            cleanup = status.get("cleanup") or {"removed": [], "left": [], "warnings": []}
            cleanup["removed"] = list(cleanup.get("removed") or []) + [
                _blockdev.region_label(region["device"], region.get("size"), region.get("offset"))]
            status["cleanup"] = cleanup
    if zeroed and problems and not call.check_mode:
        _job.write_status(directory, status)
    return zeroed, problems


def previous_job(call, path, result):
    """A measurement job's status left in the test directory: refuse while that job still
    runs (with its PID and deadline); else restore the device regions it left written
    (:func:`restore_regions`: refuse when one is not an opted-in target now), report it and
    clear it (its directory)."""
    directory = _job.job_dir(path)
    status = _job.read_status(directory)
    if _job.is_alive(status):
        call.fail(
            "fleetqual_test_dir %s is in use by the measurement job of run %s (pid %s), still running until its "
            "deadline %s; wait for it to end or stop it (kill %s)."
            % (path, status.get("run_id"), status.get("pid"),
               time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(status.get("deadline_epoch") or 0)),
               status.get("pid")),
            result)
    summary = _job.summary(status)
    if summary is not None:
        summary["results"] = [{"index": r.get("index"), "id": r.get("id"), "failed": r.get("failed"),
                               "msg": r.get("msg")} for r in status.get("results") or []]
        summary["regions_zeroed"], problems = restore_regions(call, directory, status)
        if problems:
            result["previous_job"] = summary
            call.fail("; ".join(problems), result)
        if summary["regions_zeroed"]:
            call.warn("the measurement job of run %s (pid %s, state %s) left device regions written; %s: %s"
                      % (summary.get("run_id"), summary.get("pid"), summary.get("state"),
                         "would zero" if call.check_mode else "zeroed", ", ".join(summary["regions_zeroed"])))
    if not call.check_mode:
        # the dead job's iobench results outside the test directory (status.SCRATCH_PREFIX)
        _job.remove_scratch(status)
        shutil.rmtree(directory, ignore_errors=True)
    if summary is not None:
        call.warn("a measurement job of run %s was left in %s (state %s, %d of %s workloads measured); "
                  "cleared" % (summary.get("run_id"), path, summary.get("state"), len(summary["results"]),
                               summary.get("of")))
    return summary


def mount_of(path):
    """(mount point, fstype) of the filesystem holding path, matched on st_dev."""
    st = os.stat(path)
    want = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    best = ("/", "unknown")
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            sep = fields.index("-")
            if fields[2] == want:
                best = (fields[4].replace("\\040", " "), fields[sep + 1])
    return best


def nearest_existing(path):
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def probe_direct(path):
    """Write one aligned 4 KiB block with O_DIRECT; return None or the error text."""
    probe = os.path.join(path, ".fleetqual-odirect-probe.%d" % os.getpid())
    buf = mmap.mmap(-1, 4096)
    buf.write(os.urandom(4096))
    fd = None
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT | os.O_NOFOLLOW, 0o600)
        os.write(fd, buf)
        return None
    except OSError as exc:
        return "%s (%s)" % (os.strerror(exc.errno), errno.errorcode.get(exc.errno, exc.errno))
    finally:
        if fd is not None:
            os.close(fd)
        # Some filesystems (ramfs) create the file before refusing O_DIRECT with EINVAL.
        # O_EXCL on a per-process name means whatever is there now is ours.
        if os.path.lexists(probe):
            os.unlink(probe)
        buf.close()


def checked_path(path, datasets, required_bytes=0, margin_pct=0):
    """The module's checks of its parameters (before anything is looked at): raises
    :class:`BenchDirError` (no result fields) or returns the normalized path."""
    if not os.path.isabs(path) or ".." in path.split(os.sep):
        raise BenchDirError("fleetqual_test_dir must be an absolute path without '..' components, got %r" % path)
    for name in datasets or []:
        if not name or "/" in name or name in (".", ".."):
            raise BenchDirError("data set name %r must be a plain directory name" % name)
    if required_bytes < 0 or margin_pct < 0:
        raise BenchDirError("required_bytes and margin_pct must not be negative")
    return os.path.normpath(path)


def prepare(path, binary=None, datasets=(), required_bytes=0, margin_pct=10, direct=False, devices=(),
            check_mode=False):
    """``state=present``: check the test directory ``path`` and create it, its marker and
    one directory per data set; report (``previous_job``) and clear a previous run's job,
    zeroing the device regions it left written on ``devices``. Returns the module's result
    (``changed``, ``path``, ``created``, ``filesystem``, ``mount_point``, ``free_bytes``,
    ``needed_bytes``, ``sysstat``, ``direct_supported``, ``previous_job`` when there was one,
    ``warnings`` when any); raises :class:`BenchDirError` where the module fails."""
    path = checked_path(path, datasets, required_bytes, margin_pct)
    call = _Call(binary, devices, check_mode)
    result = dict(changed=False, path=path, created=False)
    if os.path.lexists(path):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            call.fail("fleetqual_test_dir %s is a symlink; refusing to follow it. Point it at a real directory." % path, result)
        if not stat.S_ISDIR(st.st_mode):
            call.fail("fleetqual_test_dir %s exists and is not a directory." % path, result)
        entries = sorted(os.listdir(path))
        if entries and MARKER not in entries:
            shown = ", ".join(entries[:5]) + (" ..." if len(entries) > 5 else "")
            call.fail(
                "fleetqual_test_dir %s already holds %d entries not created by fleetqual.storage (%s) and has no %s marker; "
                "refusing to write there. Choose an empty or new directory." % (path, len(entries), shown, MARKER),
                result)
        if MARKER in entries and JOB in entries:
            result["previous_job"] = previous_job(call, path, result)

    existing = nearest_existing(path)
    mount_point, fstype = mount_of(existing)
    result.update(mount_point=mount_point, filesystem=fstype)
    vfs = os.statvfs(existing)
    free = vfs.f_bavail * vfs.f_frsize
    needed = required_bytes + required_bytes * margin_pct // 100
    result.update(free_bytes=free, needed_bytes=needed)
    if vfs.f_blocks == 0:
        # ramfs and some virtual filesystems report no capacity at all: unknown, not zero.
        call.warn("the %s filesystem at %s reports no capacity; free space was not checked" % (fstype, mount_point))
    elif free < needed:
        call.fail(
            "not enough space for the working set at %s (%s filesystem on %s): needs %s (%s largest working set + %d %%), has %s free. "
            "Free space, point fleetqual_test_dir elsewhere, or lower fleetqual_cache_size."
            % (path, fstype, mount_point, human_size(needed), human_size(required_bytes), margin_pct, human_size(free)),
            result)

    result["sysstat"] = shutil.which("iostat")
    if binary and not check_mode and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        call.fail("%s is missing; run the fleetqual.storage.iobench role first." % binary, result)
    if check_mode:
        result["direct_supported"] = None
        result["changed"] = not os.path.exists(path)
        return call.done(result)

    made = []  # what this call creates, undone (in reverse) if the O_DIRECT probe fails
    if not os.path.exists(path):
        os.makedirs(path, mode=0o700)
        made.append(path)
        result.update(created=True, changed=True)
    marker = os.path.join(path, MARKER)
    if not os.path.exists(marker):
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(MARKER_TEXT)
        made.append(marker)
        result["changed"] = True
    for name in datasets or []:
        sub = os.path.join(path, name)
        if not os.path.isdir(sub):
            os.mkdir(sub, 0o700)
            made.append(sub)
            result["changed"] = True

    result["direct_supported"] = None
    if direct:
        error = probe_direct(path)
        result["direct_supported"] = error is None
        if error:
            for made_path in reversed(made):
                (os.rmdir if os.path.isdir(made_path) else os.unlink)(made_path)
            result.update(created=False, changed=False)
            call.fail(
                "O_DIRECT is refused by the %s filesystem at %s (mounted on %s): %s. Run buffered (direct: false) "
                "or move fleetqual_test_dir to a filesystem that supports direct I/O." % (fstype, path, mount_point, error),
                result)
    return call.done(result)


def remove(path, datasets=(), binary=None, devices=(), check_mode=False):
    """``state=absent``: stop a live job, run ``iobench cleanup`` in each data set directory,
    zero a dead job's device regions on ``devices``, remove what the collection created.
    Returns the module's result (``changed``, ``path``, ``removed``, ``left``,
    ``regions_zeroed``, ``filesystem`` and ``mount_point`` when the directory was there,
    ``stopped_job`` when a live job was stopped, ``warnings`` when any); raises
    :class:`BenchDirError` where the module fails."""
    path = checked_path(path, datasets)
    call = _Call(binary, devices, check_mode)
    datasets = list(datasets or [])
    result = dict(changed=False, path=path, removed=[], left=[], regions_zeroed=[])
    if not os.path.lexists(path):
        return call.done(result)
    if os.path.islink(path) or not os.path.isdir(path):
        call.fail("fleetqual_test_dir %s is not a directory; nothing removed." % path, result)
    if not os.path.exists(os.path.join(path, MARKER)):
        call.fail("fleetqual_test_dir %s has no %s marker; it is not ours, nothing removed." % (path, MARKER), result)
    result["mount_point"], result["filesystem"] = mount_of(path)
    directory = _job.job_dir(path)
    if check_mode:
        result["changed"] = any(os.path.isdir(os.path.join(path, n)) for n in datasets)
        return call.done(result)
    status = _job.read_status(directory)
    if _job.is_alive(status):
        # the controller is here and done with it: stop the job (it removes its files)
        status = _job.stop_job(status, directory)
        result["stopped_job"] = _job.summary(status)
    removed, left, warnings = _job_cleanup.remove_datasets(path, datasets, binary)
    for w in warnings:
        call.warn(w)
    result["removed"].extend(removed)
    result["left"].extend(left)
    status = _job.read_status(directory)
    keep = False
    if status and not _job.is_alive(status):
        result["regions_zeroed"], problems = restore_regions(call, directory, status)
        for problem in problems:
            call.warn("%s (the job's status is kept for the next run's preflight)" % problem)
        keep = bool(problems)
        if keep:
            # its controller has its results: the next run reports it, never collects it again
            status["collected"] = True
            _job.write_status(directory, status)
    if status and not _job.is_alive(status):
        _job.remove_scratch(status)
    if os.path.isdir(directory) and not os.path.islink(directory) and not keep and not _job.is_alive(status):
        shutil.rmtree(directory, ignore_errors=True)
    # a dead job's status kept for its device regions (warned above) keeps the directory too
    others = [e for e in sorted(os.listdir(path)) if e != MARKER and not (keep and e == JOB)]
    if others:
        result["left"].extend(os.path.join(path, e) for e in others)
    elif not keep:
        os.unlink(os.path.join(path, MARKER))
        os.rmdir(path)
        result["removed"].append(path)
    result["changed"] = bool(result["removed"])
    if result["left"]:
        call.warn("left in place, not created by fleetqual.storage: %s" % ", ".join(result["left"][:10]))
    return call.done(result)
