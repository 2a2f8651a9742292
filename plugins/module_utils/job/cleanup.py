# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a job removes at its end, and what the cleanup run removes after a job that could
not: the data set directories of each directory target (``iobench cleanup`` in each, then
the emptied directory: iobench removes only its own files) and the region of each device
target, zeroed by ``iobench cleanup --device``."""

import os

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev as _blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils.job.hung import run_bounded

# how long one cleanup command may take when the job gives no bound of its own
CLEANUP_TIMEOUT_S = 3600


def _cleanup_command(argv, where, timeout):
    """Run one ``iobench cleanup``, bounded (``hung.run_bounded``): ``(warning or None,
    whether it would not end)``."""
    rc, _out, err, hung = run_bounded(argv, timeout or CLEANUP_TIMEOUT_S, "iobench cleanup",
                                      env=dict(os.environ, LC_ALL="C"))
    if hung:
        return "iobench cleanup %s did not end: %s" % (where, hung), True
    if rc != 0:
        return "iobench cleanup %s exited %d: %s" % (where, rc, err.decode("utf-8", "replace").strip()), False
    return None, False


def remove_datasets(path, datasets, binary, timeout=None):
    """Remove the data set directories of a test directory: ``iobench cleanup`` in each
    (iobench removes only its own files), then the emptied directory. Returns
    ``(removed, left, warnings)``; ``timeout``: seconds each cleanup command may take."""
    removed, left, warnings = [], [], []
    for name in datasets or []:
        sub = os.path.join(path, name)
        if not os.path.isdir(sub) or os.path.islink(sub):
            continue
        if binary and os.access(binary, os.X_OK) and os.listdir(sub):
            warning, hung = _cleanup_command([binary, "cleanup", "--dir", sub], "in %s" % sub, timeout)
            if warning:
                warnings.append(warning)
            if hung:
                left.append(sub)
                continue
        try:
            os.rmdir(sub)
            removed.append(sub)
        except OSError:
            left.extend(os.path.join(sub, e) for e in sorted(os.listdir(sub)))
    return removed, left, warnings


def cleanup_plan(test_dir, workloads, datasets):
    """What the job removes at its end: ``([(directory, [data sets])], [(device, size,
    offset)])``; the shorthand's ``datasets`` in ``test_dir``, each directory target's data
    sets, each device target's region (from its ``offset``, the largest any workload used; 0
    = up to the device's end)."""
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
            key = (wl["target_device"], int(wl.get("device_offset") or 0))
            old = devices.get(key)
            devices[key] = 0 if (size == 0 or old == 0) else max(size, old or 0)
    return [(d, n) for d, n in dirs.items() if n], sorted((d, size, off) for (d, off), size in devices.items())


def _zero_argv(binary, device, size, offset=0):
    return ([binary, "cleanup", "--device", device] + (["--offset", str(offset)] if offset else [])
            + (["--size", str(size)] if size else []))


def zero_device(binary, device, size, timeout=None, offset=0):
    """``iobench cleanup --device`` over the region a device target's workloads used (iobench
    zeroes what it can have written). Returns a warning, or None."""
    return _cleanup_command(_zero_argv(binary, device, size, offset), "on %s" % device, timeout)[0]


def clean_all(spec, hung=(), timeout=None):
    """Remove every data set of the job's plan and zero its device regions:
    ``(removed, left, warnings)`` (``removed`` names zeroed devices as ``<device>[<offset>+<size>]``).
    ``hung``: the targets (device, or directory) whose requests a workload saw never
    complete: nothing more is asked of them (a cleanup would hang beside the benchmark);
    they are ``left``, for the next run's preflight. ``timeout``: seconds each cleanup
    command may take."""
    removed, left, warnings = [], [], []
    dirs, devices = cleanup_plan(spec["path"], spec["workloads"], spec["datasets"])
    for directory, names in dirs:
        if directory in hung:
            left += [os.path.join(directory, n) for n in names]
            warnings.append("%s not cleaned up: its device stopped completing requests" % directory)
            continue
        r, lf, w = remove_datasets(directory, names, spec["binary"], timeout)
        removed += r
        left += lf
        warnings += w
    for device, size, offset in devices:
        label = _blockdev.region_label(device, size, offset)
        if device in hung:
            left.append(label)
            warnings.append("%s not zeroed: the device stopped completing requests" % device)
            continue
        warning, stuck = _cleanup_command(_zero_argv(spec["binary"], device, size, offset), "on %s" % device, timeout)
        if warning:
            warnings.append(warning)
        if stuck:
            left.append(label)
        elif not warning:
            removed.append(label)
    return removed, left, warnings
