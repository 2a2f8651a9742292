#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_dir
short_description: Prepare, check and remove the marked directory iobench writes in
version_added: "0.1.0"
description:
  - With O(state=present), checks everything the benchmark needs before a single byte is
    written, in this order, and fails with a message saying what to change.
  - The path must be absolute and free of C(..) components, must not be a symlink, and, if it
    already exists and holds anything, must carry the collection's marker file. A directory
    holding someone else's files is refused and left untouched.
  - Free space (statvfs) must cover O(required_bytes) plus O(margin_pct) percent. The message
    states both numbers.
  - With O(direct=true), a 4 KiB O_DIRECT write is probed in the directory; a filesystem that
    refuses it (tmpfs, some FUSE) is named in the message, with the advice to run buffered.
  - Only then is the directory created (mode 0700) with its marker, and one owner-only
    subdirectory per data set in O(datasets).
  - A previous run's job status found in the directory is reported and cleared; while that
    job still runs the module fails. Device regions that job left written are zeroed or
    refused, see O(devices).
  - With O(state=absent), runs C(iobench cleanup) in each data set directory (iobench removes
    only its own files), then removes the empty data set directories, the marker, and the
    directory itself when it is empty. Anything else found there is left and reported. A
    dead job's device regions not zeroed (not among O(devices)) keep its status in place for
    the next run.
options:
  path:
    description: Absolute path of the test directory.
    type: path
    required: true
  state:
    description: V(present) checks and creates; V(absent) cleans up what the collection created.
    type: str
    choices: [present, absent]
    default: present
  datasets:
    description: Names of the data set subdirectories (one per working set).
    type: list
    elements: str
    default: []
  required_bytes:
    description: Largest working set, in bytes, that must fit (with O(state=present)).
    type: int
    default: 0
  margin_pct:
    description: Extra free space required, in percent of O(required_bytes).
    type: int
    default: 10
  direct:
    description: Probe that the filesystem accepts O_DIRECT.
    type: bool
    default: false
  devices:
    description:
      - The device targets this run opted in by name (C(fleetqual_targets) entries with
        C(destroy_data=true) whose raw-device guard passed).
      - A measurement job killed before its cleanup leaves the device regions it recorded in
        its status written. Each such region whose drive (same serial, else WWID, else a loop
        device's backing file) is one of these devices is zeroed (C(iobench cleanup --device));
        any other makes O(state=present) fail, naming the device, the job and how to clear it,
        and leaves the device and the job's status untouched.
    type: list
    elements: path
    default: []
  binary:
    description:
      - Path of the iobench binary. With O(state=absent) it removes the benchmark's files; with
        O(state=present) it must exist and be executable (not checked in check mode), else the
        module fails saying to run the C(fleetqual.storage.iobench) role first.
    type: path
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - Supports check mode; in check mode nothing is created or removed and the result says what would be.
attributes:
  check_mode:
    description: Nothing is created or removed; the result says what would be.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
  platform:
    description: Reads statvfs and /proc/self/mountinfo; probes O_DIRECT with a real file.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Check and create the test directory for a 2 GiB working set with O_DIRECT
  fleetqual.storage.bench_dir:
    path: /var/tmp/fleetqual
    datasets: [cache, over_cache]
    required_bytes: 2147483648
    direct: true
  register: preflight

- name: Remove what the benchmark created
  fleetqual.storage.bench_dir:
    path: /var/tmp/fleetqual
    datasets: [cache, over_cache]
    binary: /opt/fleetqual/bin/iobench
    state: absent
"""

RETURN = r"""
path:
  description: The test directory.
  returned: always
  type: str
created:
  description: Whether this call created the test directory.
  returned: state=present
  type: bool
filesystem:
  description: Filesystem type of the test directory (from /proc/self/mountinfo).
  returned: always
  type: str
  sample: ext4
mount_point:
  description: Mount point holding the test directory.
  returned: always
  type: str
free_bytes:
  description: Bytes available to an unprivileged writer (statvfs f_bavail * f_frsize).
  returned: state=present
  type: int
needed_bytes:
  description: O(required_bytes) plus the margin.
  returned: state=present
  type: int
direct_supported:
  description: Result of the O_DIRECT probe; null when not probed.
  returned: state=present
  type: bool
sysstat:
  description: Path of iostat, or null when sysstat is not installed.
  returned: state=present
  type: str
removed:
  description: Paths removed, with O(state=absent).
  returned: state=absent
  type: list
  elements: str
left:
  description: Entries left in place because the collection did not create them.
  returned: state=absent
  type: list
  elements: str
previous_job:
  description:
    - Summary of a previous run's job found in the directory (run_id, pid, state, results),
      or absent when there was none. C(regions_zeroed) lists the device regions it left
      written that were zeroed now (C(<device>[0+<size>|all])).
  returned: state=present and a previous job was found
  type: dict
regions_zeroed:
  description: Device regions of a dead job zeroed by this call (C(<device>[0+<size>|all])).
  returned: state=absent
  type: list
  elements: str
"""

import errno
import mmap
import os
import shutil
import stat
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fleetqual.storage.plugins.module_utils import blockdev as _blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils.size import human_size
from ansible_collections.fleetqual.storage.plugins.module_utils import job_runner as _job

MARKER = ".fleetqual-storage"
MARKER_TEXT = "This directory was created by fleetqual.storage for storage benchmarks.\n"
JOB = _job.JOB_DIR


def restore_regions(module, directory, status):
    """The device regions a dead job left written (its status' ``regions`` not in its
    cleanup): zero each whose drive is one of this run's opted-in device targets
    (``devices``). Returns ``(zeroed, problems)``: the regions zeroed (or, in check mode,
    to zero) and a message per region refused or not zeroed."""
    regions = _blockdev.leftover_regions(status)
    if not regions:
        return [], []
    zero, refuse = _blockdev.match_regions(regions, module.params["devices"])
    try:
        last_alive = os.stat(os.path.join(directory, _job.STATUS)).st_mtime
    except OSError:
        last_alive = None
    binary = module.params["binary"]
    problems = [_blockdev.region_refusal(region, current, status, directory, binary, last_alive)
                for region, current in refuse]
    zeroed = []
    for region, device in zero:
        label = _blockdev.region_label(device, region.get("size"))
        if module.check_mode:
            zeroed.append(label)
            continue
        warning = _job.zero_device(binary or "iobench", device, region.get("size"))
        if warning:
            problems.append("device %s: the region the measurement job of run %s (pid %s) left written could not "
                            "be zeroed: %s" % (device, status.get("run_id"), status.get("pid"), warning))
        else:
            zeroed.append(label)
            # in the job's status too: when it is kept (a problem), the next run knows it is done
            cleanup = status.get("cleanup") or {"removed": [], "left": [], "warnings": []}
            cleanup["removed"] = list(cleanup.get("removed") or []) + [
                _blockdev.region_label(region["device"], region.get("size"))]
            status["cleanup"] = cleanup
    if zeroed and problems and not module.check_mode:
        _job.write_status(directory, status)
    return zeroed, problems


def previous_job(module, path, result):
    """A measurement job's status left in the test directory: refuse while that job still
    runs (with its PID and deadline); else restore the device regions it left written
    (:func:`restore_regions`: refuse when one is not an opted-in target now), report it and
    clear it (its directory)."""
    directory = _job.job_dir(path)
    status = _job.read_status(directory)
    if _job.is_alive(status):
        module.fail_json(
            msg="fleetqual_test_dir %s is in use by the measurement job of run %s (pid %s), still running until its "
                "deadline %s; wait for it to end or stop it (kill %s)."
                % (path, status.get("run_id"), status.get("pid"),
                   time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(status.get("deadline_epoch") or 0)),
                   status.get("pid")),
            **result)
    summary = _job.summary(status)
    if summary is not None:
        summary["results"] = [{"index": r.get("index"), "id": r.get("id"), "failed": r.get("failed"),
                               "msg": r.get("msg")} for r in status.get("results") or []]
        summary["regions_zeroed"], problems = restore_regions(module, directory, status)
        if problems:
            result["previous_job"] = summary
            module.fail_json(msg="; ".join(problems), **result)
        if summary["regions_zeroed"]:
            module.warn("the measurement job of run %s (pid %s, state %s) left device regions written; %s: %s"
                        % (summary.get("run_id"), summary.get("pid"), summary.get("state"),
                           "would zero" if module.check_mode else "zeroed", ", ".join(summary["regions_zeroed"])))
    if not module.check_mode:
        shutil.rmtree(directory, ignore_errors=True)
    if summary is not None:
        module.warn("a measurement job of run %s was left in %s (state %s, %d of %s workloads measured); "
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


def check_path(module, path):
    if not os.path.isabs(path) or ".." in path.split(os.sep):
        module.fail_json(msg="fleetqual_test_dir must be an absolute path without '..' components, got %r" % path)


def present(module, path):
    p = module.params
    result = dict(changed=False, path=path, created=False)
    if os.path.lexists(path):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            module.fail_json(msg="fleetqual_test_dir %s is a symlink; refusing to follow it. Point it at a real directory." % path, **result)
        if not stat.S_ISDIR(st.st_mode):
            module.fail_json(msg="fleetqual_test_dir %s exists and is not a directory." % path, **result)
        entries = sorted(os.listdir(path))
        if entries and MARKER not in entries:
            shown = ", ".join(entries[:5]) + (" ..." if len(entries) > 5 else "")
            module.fail_json(
                msg="fleetqual_test_dir %s already holds %d entries not created by fleetqual.storage (%s) and has no %s marker; "
                    "refusing to write there. Choose an empty or new directory." % (path, len(entries), shown, MARKER),
                **result)
        if MARKER in entries and JOB in entries:
            result["previous_job"] = previous_job(module, path, result)

    existing = nearest_existing(path)
    mount_point, fstype = mount_of(existing)
    result.update(mount_point=mount_point, filesystem=fstype)
    vfs = os.statvfs(existing)
    free = vfs.f_bavail * vfs.f_frsize
    needed = p["required_bytes"] + p["required_bytes"] * p["margin_pct"] // 100
    result.update(free_bytes=free, needed_bytes=needed)
    if vfs.f_blocks == 0:
        # ramfs and some virtual filesystems report no capacity at all: unknown, not zero.
        module.warn("the %s filesystem at %s reports no capacity; free space was not checked" % (fstype, mount_point))
    elif free < needed:
        module.fail_json(
            msg="not enough space for the working set at %s (%s filesystem on %s): needs %s (%s largest working set + %d %%), has %s free. "
                "Free space, point fleetqual_test_dir elsewhere, or lower fleetqual_cache_size."
                % (path, fstype, mount_point, human_size(needed), human_size(p["required_bytes"]), p["margin_pct"], human_size(free)),
            **result)

    result["sysstat"] = shutil.which("iostat")
    if p["binary"] and not module.check_mode and not (os.path.isfile(p["binary"]) and os.access(p["binary"], os.X_OK)):
        module.fail_json(msg="%s is missing; run the fleetqual.storage.iobench role first." % p["binary"], **result)
    if module.check_mode:
        result["direct_supported"] = None
        result["changed"] = not os.path.exists(path)
        return result

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
    for name in p["datasets"]:
        sub = os.path.join(path, name)
        if not os.path.isdir(sub):
            os.mkdir(sub, 0o700)
            made.append(sub)
            result["changed"] = True

    result["direct_supported"] = None
    if p["direct"]:
        error = probe_direct(path)
        result["direct_supported"] = error is None
        if error:
            for made_path in reversed(made):
                (os.rmdir if os.path.isdir(made_path) else os.unlink)(made_path)
            result.update(created=False, changed=False)
            module.fail_json(
                msg="O_DIRECT is refused by the %s filesystem at %s (mounted on %s): %s. Run buffered (direct: false) "
                    "or move fleetqual_test_dir to a filesystem that supports direct I/O." % (fstype, path, mount_point, error),
                **result)
    return result


def absent(module, path):
    p = module.params
    result = dict(changed=False, path=path, removed=[], left=[], regions_zeroed=[])
    if not os.path.lexists(path):
        return result
    if os.path.islink(path) or not os.path.isdir(path):
        module.fail_json(msg="fleetqual_test_dir %s is not a directory; nothing removed." % path, **result)
    if not os.path.exists(os.path.join(path, MARKER)):
        module.fail_json(msg="fleetqual_test_dir %s has no %s marker; it is not ours, nothing removed." % (path, MARKER), **result)
    result["mount_point"], result["filesystem"] = mount_of(path)
    directory = _job.job_dir(path)
    if module.check_mode:
        result["changed"] = any(os.path.isdir(os.path.join(path, n)) for n in p["datasets"])
        return result
    status = _job.read_status(directory)
    if _job.is_alive(status):
        # the controller is here and done with it: stop the job (it removes its files)
        status = _job.stop_job(status, directory)
        result["stopped_job"] = _job.summary(status)
    removed, left, warnings = _job.remove_datasets(path, p["datasets"], p["binary"])
    for w in warnings:
        module.warn(w)
    result["removed"].extend(removed)
    result["left"].extend(left)
    status = _job.read_status(directory)
    keep = False
    if status and not _job.is_alive(status):
        result["regions_zeroed"], problems = restore_regions(module, directory, status)
        for problem in problems:
            module.warn("%s (the job's status is kept for the next run's preflight)" % problem)
        keep = bool(problems)
    if os.path.isdir(directory) and not os.path.islink(directory) and not keep and not _job.is_alive(status):
        shutil.rmtree(directory, ignore_errors=True)
    if module.check_mode:
        return result
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
        module.warn("left in place, not created by fleetqual.storage: %s" % ", ".join(result["left"][:10]))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            datasets=dict(type="list", elements="str", default=[]),
            required_bytes=dict(type="int", default=0),
            margin_pct=dict(type="int", default=10),
            direct=dict(type="bool", default=False),
            binary=dict(type="path"),
            devices=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    check_path(module, path)
    for name in module.params["datasets"]:
        if not name or "/" in name or name in (".", ".."):
            module.fail_json(msg="data set name %r must be a plain directory name" % name)
    if module.params["required_bytes"] < 0 or module.params["margin_pct"] < 0:
        module.fail_json(msg="required_bytes and margin_pct must not be negative")
    path = os.path.normpath(path)
    if module.params["state"] == "present":
        module.exit_json(**present(module, path))
    module.exit_json(**absent(module, path))


if __name__ == "__main__":
    main()
