# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a job removes at its end, and what the cleanup run removes after a job that could
not: the data set directories of each directory target (``iobench cleanup`` in each, then
the emptied directory: iobench removes only its own files) and the region of each device
target, zeroed by ``iobench cleanup --device``."""

import os
import subprocess

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev as _blockdev


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
