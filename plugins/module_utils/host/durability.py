# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host side of the power-cut test (docs/durability.md; module ``fleetqual.storage.durability``).

One cycle, each step one short module run (the controller holds no worker while the host
writes or boots):

* :func:`start`: every target checked (a device by the raw-device guard; a directory must
  not be on the filesystem of ``/``), its drive's identity read (serial, model, the write
  cache the kernel declares, whether the kernel sends FUA), its region prepared with
  verified data on the first cycle, then one detached ``iobench run --witness`` per target
  writing with a flush per write (``O_DSYNC``: FUA on a raw device that offers it) until
  the power goes, its witness in shared memory (:data:`WITNESS_ROOT`);
* :func:`snapshot`: the witnesses' bytes, read in one go (the controller keeps them and
  cuts the power right after; it never reads them from the host again), and whether every
  writer still runs;
* :func:`check`: after the power came back, each witness written back to shared memory and
  ``iobench witness-check`` run on its target: what was acknowledged and is not there;
* :func:`cleanup`: writers still running ended (a cut that did not happen), the witnesses
  and a directory target's files removed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import struct
import subprocess
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev, drives, sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _status

WITNESS_ROOT = "/dev/shm"
MARKED = "fleetqual-durability"   # under a directory target: the test's marked directory (bench_dir)
DATASET = "data"                  # its data set
WITNESS_HDR = 4096
START_WAIT_S = 60                 # a writer's first acknowledged write, at most this long after it started
_PROCS = {}                       # pid -> Popen of the writers this process started
HOLD_S = 86400                    # a writer runs at most this long when no cut comes (cleanup ends it first)


class DurabilityError(Exception):
    """A refusal or failure, with the message the module fails with."""


def witness_dir(run_id, root=WITNESS_ROOT):
    return os.path.join(root, "fleetqual-durability-%s" % re.sub(r"[^A-Za-z0-9_.-]", "_", str(run_id)))


def marked_dir(target):
    """The directory the test creates under a directory target (with the collection's marker)."""
    return os.path.join(target["path"], MARKED)


def target_dir(target):
    return os.path.join(marked_dir(target), DATASET)


def writer_target_args(target, settings):
    if target["kind"] == "device":
        return ["--device", target["device"], "--size", str(settings["size"])]
    return ["--dir", target_dir(target), "--file-num", "1", "--total-size", str(settings["size"])]


def _run(argv, timeout=None):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def _whole_disk(name, sysfs_root="/sys"):
    """The whole disk a (partition) kernel name belongs to."""
    node = os.path.realpath(os.path.join(sysfs_root, "class", "block", name))
    return os.path.basename(os.path.dirname(node)) if sysfs.is_partition(node) else name


def drive_of(target, sysfs_root="/sys", dev_root="/dev"):
    """The identity of the drive a target writes on: serial, model, the kernel's write cache
    (``queue/write_cache``) and FUA (``queue/fua``), or the reason it is unknown."""
    where = target["device"] if target["kind"] == "device" else target["path"]
    found = drives.target_drives(where, set(), sysfs_root=sysfs_root)
    names = found["drives"] or found["not_drives"]
    if not names:
        return {"name": None, "reason": found["reason"] or "no drive found under %s" % where}
    name = _whole_disk(names[0], sysfs_root)
    ident = drives.identity(name, sysfs_root=sysfs_root, dev_root=dev_root)
    fua = None
    try:
        with open(os.path.join(sysfs_root, "block", name, "queue", "fua")) as fh:
            fua = fh.read().strip() == "1"
    except OSError:
        pass
    return {"name": name, "serial": ident.get("serial"), "model": ident.get("model"),
            "transport": ident.get("transport"), "write_cache": ident.get("write_cache"),
            "write_cache_source": ident.get("write_cache_source"), "fua": fua,
            "logical_sector_size": ident.get("logical_sector_size"), "reason": None}


def preflight(target, settings, sysfs_root="/sys", dev_root="/dev"):
    """Raise :class:`DurabilityError` when the target must not be power-cut under writes."""
    if target.get("destroy_data") is not True:
        raise DurabilityError("target %s: not opted in (destroy_data: true): a power cut may damage what its drive "
                              "holds" % target["name"])
    if target["kind"] == "device":
        res = blockdev.check_raw_device(target["device"], {"destroy_data": True, "size": settings["size"]},
                                        sysfs_root=sysfs_root, dev_root=dev_root)
        if res["reasons"]:
            raise DurabilityError("target %s: %s" % (target["name"], blockdev.refusal_message(res)))
        return
    path = target["path"]
    if not os.path.isdir(path):
        raise DurabilityError("target %s: %s is not a directory (create it on the drive under test)" % (target["name"], path))
    if os.stat(path).st_dev == os.stat("/").st_dev:
        raise DurabilityError("target %s: %s is on the root filesystem (/): a power cut there risks the host's boot; "
                              "use a directory on a drive of its own" % (target["name"], path))


def _spawn(argv, log):
    """A writer in a session of its own, its output in files (the module's SSH session ends at once)."""
    with open(log + ".out", "w") as out, open(log + ".err", "w") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True,
                                start_new_session=True, cwd="/")
    _PROCS[proc.pid] = proc        # reaped by this process while it runs (no zombie taken for a writer)
    return proc


def acked_entries(data):
    """How many blocks a witness's bytes name as acknowledged (generation not 0)."""
    n = (len(data) - WITNESS_HDR) // 16
    return sum(1 for i in range(n) if struct.unpack_from("<I", data, WITNESS_HDR + 16 * i)[0])


def _read_witness(path):
    with open(path, "rb") as fh:
        return fh.read()


def _writer_alive(t):
    """Whether the writer of a started target still runs: its PID with the start time it had (a
    reused PID has another), any of its threads not yet exited (they hold its exclusive open of
    the device until the last one has)."""
    return bool(t.get("pid")) and t.get("pid_start") is not None and _status.process_holds_on(t["pid"], t["pid_start"])


BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id(path=BOOT_ID):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def start(binary, run_id, cycle, targets, settings, sysfs_root="/sys", dev_root="/dev", root=WITNESS_ROOT,
          controller_boot_id=None):
    """Check, identify, prepare (first cycle) and start one writer per target; returns
    ``{witness_dir, targets: [{name, kind, device|path, drive, witness, pid}]}`` once every
    writer has had a write acknowledged. ``controller_boot_id``: the controller's kernel boot
    id; a host running on that very kernel (the controller itself, a container or chroot of
    it) is refused: cutting its power would cut the controller's."""
    mine = boot_id()
    if controller_boot_id and mine == controller_boot_id:
        raise DurabilityError("this host runs on the controller's own kernel (boot id %s): cutting its power would "
                              "cut the controller's; run the power-cut test from another machine" % mine)
    for t in targets:
        preflight(t, settings, sysfs_root, dev_root)
    wdir = os.path.join(witness_dir(run_id, root), "cycle-%d" % cycle)
    os.makedirs(wdir, mode=0o700, exist_ok=True)
    out = []
    for t in targets:
        entry = {k: t[k] for k in ("name", "kind", "device", "path") if k in t}
        entry["drive"] = drive_of(t, sysfs_root, dev_root)
        if t["kind"] == "path" and cycle == 1:
            bench_dir.prepare(marked_dir(t), binary=binary, datasets=[DATASET], required_bytes=settings["size"],
                              margin_pct=10, direct=True)
        if cycle == 1:
            cmd = ([binary, "prepare"] + writer_target_args(t, settings)
                   + ["--block-size", str(settings["block_size"]), "--verify", "--format", "json"])
            rc, _o, err = _run(cmd)
            if rc != 0:
                raise DurabilityError("target %s: iobench prepare exited %d: %s" % (t["name"], rc, err.strip()[-600:]))
        entry["witness"] = os.path.join(wdir, "%s.witness" % t["name"])
        if os.path.lexists(entry["witness"]):
            os.unlink(entry["witness"])       # ours: this run's, this cycle's (a start again)
        argv = ([binary, "run"] + writer_target_args(t, settings)
                + ["--block-size", str(settings["block_size"]), "--mode", "rndwr", "--verify",
                   "--open-flags", "dsync" if t["kind"] == "device" else "dsync,direct",
                   "--threads", str(settings["threads"]), "--time", str(HOLD_S), "--report-interval", "0",
                   "--witness", entry["witness"]])
        entry["argv"] = argv
        entry["pid"] = _spawn(argv, os.path.join(wdir, t["name"])).pid
        entry["pid_start"] = _status.pid_start(entry["pid"])
        out.append(entry)
    deadline = time.time() + START_WAIT_S
    for entry in out:
        while True:
            if os.path.exists(entry["witness"]) and acked_entries(_read_witness(entry["witness"])):
                break
            # this process started it: poll its Popen (just after the fork, before the exec,
            # /proc/<pid>/cmdline is still this process's own)
            if _PROCS[entry["pid"]].poll() is not None or time.time() > deadline:
                err = ""
                for ext in (".err", ".out"):
                    try:
                        with open(os.path.join(wdir, entry["name"] + ext)) as fh:
                            err = err or fh.read().strip()[-600:]
                    except OSError:
                        pass
                proc = _PROCS.get(entry["pid"])
                if proc is not None and proc.poll() is not None:
                    err = "exit %s; %s" % (proc.returncode, err)
                stop_writers(out)
                raise DurabilityError("target %s: the writer %s: %s" % (
                    entry["name"], "had no write acknowledged within %d s" % START_WAIT_S
                    if time.time() > deadline else "ended", err or "no message"))
            time.sleep(0.2)
    return {"witness_dir": wdir, "targets": out}


def snapshot(targets):
    """Every witness's bytes (base64) read now, with the time and whether its writer runs."""
    taken = {}
    for t in targets:
        data = _read_witness(t["witness"])
        taken[t["name"]] = {"witness": base64.b64encode(data).decode("ascii"), "acked": acked_entries(data),
                            "writer_running": _writer_alive(t)}
    return {"taken_ms": int(time.time() * 1000), "witnesses": taken}


def check(binary, run_id, cycle, targets, witnesses, root=WITNESS_ROOT):
    """Each target read back against the witness copy the controller kept."""
    wdir = os.path.join(witness_dir(run_id, root), "check-%d" % cycle)
    os.makedirs(wdir, mode=0o700, exist_ok=True)
    results = {}
    for t in targets:
        copy = os.path.join(wdir, "%s.witness" % t["name"])
        with open(copy, "wb") as fh:
            w = witnesses[t["name"]]
            fh.write(base64.b64decode(w["witness"] if isinstance(w, dict) else w))   # snapshot's entry, or its bytes
        where = ["--device", t["device"]] if t["kind"] == "device" else ["--dir", target_dir(t)]
        rc, out, err = _run([binary, "witness-check", "--witness", copy] + where)
        if rc not in (0, 4):
            raise DurabilityError("target %s: iobench witness-check exited %d: %s" % (t["name"], rc, err.strip()[-600:]))
        res = json.loads(out)
        res.pop("iobench_version", None)
        res.pop("command", None)
        res["drive"] = drive_of(t)
        results[t["name"]] = res
        os.unlink(copy)
    os.rmdir(wdir)
    return results


def _alive(t):
    proc = _PROCS.get(t.get("pid"))
    if proc is not None:            # started by this process: its Popen knows
        return proc.poll() is None
    return _writer_alive(t)


def stop_writers(targets):
    """End the writers of this start still running (by the PID each was started with, only
    while it is still that writer); the names of the ones ended."""
    ended = []
    for t in targets:
        if _alive(t):
            os.kill(t["pid"], signal.SIGTERM)
            ended.append(t["name"])
    deadline = time.time() + 30
    for t in targets:
        while _alive(t) and time.time() < deadline:
            time.sleep(0.1)
    return ended


def cleanup(binary, run_id, targets, root=WITNESS_ROOT):
    """Writers still running ended, the witnesses removed, a directory target's files and
    marked directory removed (iobench removes only its own files)."""
    ended = stop_writers([t for t in targets if t.get("pid") and t.get("witness")])
    removed = []
    wroot = witness_dir(run_id, root)
    if os.path.isdir(wroot):
        for base, dirs, files in os.walk(wroot, topdown=False):
            for n in files:
                os.unlink(os.path.join(base, n))
            os.rmdir(base)
        removed.append(wroot)
    for t in targets:
        if t["kind"] == "path" and os.path.isdir(marked_dir(t)):
            bench_dir.remove(marked_dir(t), datasets=[DATASET], binary=binary)
            removed.append(marked_dir(t))
    return {"ended_writers": ended, "removed": removed}
