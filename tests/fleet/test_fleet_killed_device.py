"""A raw device target whose job is SIGKILLed mid-write, through the whole playbook over SSH
(the module-level test is tests/unit/plugins/module_utils/devices/test_device_regions.py).

Host fq81 qualifies a blank loop device this test creates (``destroy_data: true``, ``size:
32M``; the bytes after 32 MiB of its backing file are random, to show they stay as they
were). Run 1: while its job writes the region, the test SIGKILLs the job and the iobench it
started (their PIDs from the job's status and /proc); the run records the host's ERROR and
its cleanup keeps the job's status, the region stays written. Run 2, the device no longer a
target: the preflight refuses the host, naming the device, the killed job and how to clear
it; nothing on the device changes. Run 3, the device a target again: the preflight zeroes
the region (the record's ``previous_job.regions_zeroed``), the host passes, and the backing
file is zeros in the region and unchanged outside it.
"""
import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time

import pytest

import loopdev
from proctree import alive, descendants, wait_gone
from fleetrun import run_playbook

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOST = "fq81"
REGION = 32 << 20
DISK = 64 << 20


def digest(path, start, end):
    with open(path, "rb") as fh:
        fh.seek(start)
        return hashlib.sha256(fh.read(end - start)).hexdigest()


def written(path):
    return loopdev.nonzero(path, 0, REGION)


@pytest.fixture(scope="module")
def blank_loop():
    if not shutil.which("losetup"):
        pytest.skip("losetup is missing")
    # its image in a tmpfs (docs/integrity.md "Stalls"): a loop device over a loaded machine's
    # disk stalls when that disk does (a CI run's restored host FAILed a 3 s stall of it)
    work = tempfile.mkdtemp(prefix="fq-killed-", dir="/dev/shm")
    img = os.path.join(work, "disk.img")
    with open(img, "wb") as fh:
        fh.truncate(REGION)
        fh.seek(REGION)
        fh.write(os.urandom(DISK - REGION))
    try:
        with loopdev.attached(img) as dev:
            yield dev, img, work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def inventory(fleet, base, name, dev, seconds):
    matrix = [{"workload": "kill", "mode": "rndwr", "threads": 1, "file_num": 1, "total_size": "32M",
               "block_size": "16K", "direct": True, "time": seconds, "warmup": 0}]
    targets = [{"name": "raw", "device": dev, "destroy_data": True, "size": "32M"}] if dev else []
    return fleet.inventory(os.path.join(base, name), [{"name": HOST, "inst": fleet.host(81),
                                                       "vars": {"fleetqual_targets": targets}}],
                           # the wait polls the job every 2 s (not at 30 s round boundaries): run 1's
                           # controller sees the killed job at once
                           group_vars={"all": {"fleetqual_matrix": matrix, "fleetqual_progress_interval": 2}},
                           dirs_root=os.path.join(base, "hostdirs"))


def test_killed_job_region_refused_then_zeroed_by_the_next_runs(fleet, blank_loop, tmp_path):
    dev, img, _work = blank_loop
    base = str(tmp_path)
    outside = digest(img, REGION, DISK)
    status_path = os.path.join(fleet.host_dirs(HOST, os.path.join(base, "hostdirs"))["fleetqual_test_dir"],
                               ".fleetqual-job", "status.json")

    # run 1: SIGKILL the job (and its iobench) while it writes the device: the run's own
    # cleanup (always:, bench_dir absent with the run's device targets) zeroes the region
    killed, run1 = kill_mid_write(fleet, base, "killed", dev, img, status_path, controller_too=False)
    assert run1.rc == 2, run1.out[-4000:]
    assert run1.record(HOST)["verdict"] == "ERROR"
    assert not written(img) and digest(img, REGION, DISK) == outside

    # run 1b: the controller dies with the job (ansible-playbook SIGKILLed too): nothing
    # cleans up in that run, the region stays written and the job's status says which
    killed, _run1b = kill_mid_write(fleet, base, "killed2", dev, img, status_path, controller_too=True)
    assert written(img) and os.path.exists(status_path)
    with open(status_path) as fh:
        assert [(r["device"], r["size"]) for r in json.load(fh)["regions"]] == [(dev, REGION)]

    # run 2: the device is not a target now: refused with the reason, nothing touched
    run2 = run_playbook(fleet, inventory(fleet, base, "inv2", None, 2), base, "refused", timeout=900)
    assert run2.rc == 2, run2.out[-4000:]
    rec2 = run2.record(HOST)
    assert rec2["verdict"] == "ERROR", rec2
    msg = rec2["error"]["msg"]
    for part in ("device %s" % dev, "run killed", "pid %d" % killed[0], "stopped without its cleanup",
                 "bytes [0, %d)" % REGION, "fleetqual_targets", "cleanup --device %s --size %d" % (dev, REGION)):
        assert part in msg, (part, msg)
    # printed as a brief (docs/report.md, "Where the full record is"): its start and where the rest is
    assert "device %s" % dev in run2.out and "%s.json" % HOST in run2.out, run2.out[-3000:]
    assert written(img) and digest(img, REGION, DISK) == outside

    # run 3: the device opted in again: the preflight zeroes the region, the host passes
    run3 = run_playbook(fleet, inventory(fleet, base, "inv3", dev, 2), base, "restored", timeout=900)
    assert run3.rc == 0, run3.out[-4000:]
    rec3 = run3.record(HOST)
    assert rec3["verdict"] == "PASS", rec3["reasons"]
    assert rec3["previous_job"]["run_id"] == "killed2"
    assert rec3["previous_job"]["regions_zeroed"] == ["%s[0+%d]" % (dev, REGION)]
    assert not written(img) and digest(img, REGION, DISK) == outside


def kill_mid_write(fleet, base, run_id, dev, img, status_path, controller_too):
    """Run the playbook, SIGKILL the job and its iobench (and, with ``controller_too``, the
    ansible-playbook this test started, with its forks) once the job writes the device.
    Returns (the killed job's pids, the run)."""
    inv = inventory(fleet, base, "inv-" + run_id, dev, 120)
    box = {}
    t = threading.Thread(target=lambda: box.update(run=run_playbook(fleet, inv, base, run_id, timeout=900)))
    t.start()
    killed = []
    try:
        end = time.monotonic() + 300
        status = None
        while time.monotonic() < end and t.is_alive():
            try:
                with open(status_path) as fh:
                    status = json.load(fh)
            except (OSError, ValueError):
                status = None
            if status and status.get("run_id") == run_id and status.get("index") and descendants(status["pid"]) \
                    and written(img):
                break
            time.sleep(0.5)
        assert status and status.get("run_id") == run_id and status.get("regions"), \
            "the job never started writing (status %s)" % status
        killed = [status["pid"]] + descendants(status["pid"])
        controller = []
        if controller_too:
            # only the ansible-playbook this test started: a child of this process, for this inventory
            for child in descendants(os.getpid()):
                try:
                    with open("/proc/%d/cmdline" % child, "rb") as fh:
                        argv = fh.read().split(b"\0")
                except OSError:
                    continue
                if any(a.endswith(b"ansible-playbook") for a in argv) and inv.encode() in argv:
                    controller = [child] + descendants(child)
                    break
            assert controller, "ansible-playbook of run %s not found" % run_id
        for pid in controller + killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        t.join(900)
    assert all(wait_gone(p, 120) for p in killed), [p for p in killed if alive(p)]
    return killed, box.get("run")
