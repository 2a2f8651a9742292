# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A device target's region after its job was SIGKILLed before its cleanup.

The job records the regions it will write in its status before the first byte
(``job.Job.begin``: ``regions``). On real loop devices with the real iobench and the real
job: the job is killed mid-write; the controller's cleanup (``bench_dir state=absent``)
without the device keeps the job's status; the next preflight refuses while the device is
not an opted-in target (another loop device opted in does not count and is not touched),
names the device, the job and how to clear it; with the device opted in it zeroes exactly
the region, and the backing file's bytes outside it are unchanged (sha256)."""
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time

import pytest
from hypothesis import given, settings, strategies as st

import loopdev
import test_module_iobench
from proctree import descendants
from test_module_job import JOB, TEST_DIR, alive, call

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev

iobench_binary = test_module_iobench.iobench_binary   # the fixture

MIB = 1 << 20
REGION = 16 * MIB
DISK = 64 * MIB

pytestmark = pytest.mark.slow


def sha(path, start, end):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left:
            chunk = fh.read(min(left, MIB))
            assert chunk, "short read of %s" % path
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


@pytest.fixture
def loops():
    """Two loop devices on files of their own under /var/tmp; the bytes after REGION are
    random (so 'unchanged' means something), the region starts blank. Detached at the end."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and losetup for loop devices of its own")
    work = tempfile.mkdtemp(prefix="fq-regions-", dir="/var/tmp")
    devs = []
    try:
        for i in range(2):
            backing = os.path.join(work, "disk%d.img" % i)
            with open(backing, "wb") as fh:
                fh.truncate(REGION)
                fh.seek(REGION)
                fh.write(os.urandom(DISK - REGION))
            devs.append((loopdev.attach_or_skip(backing), backing))
        yield work, devs
    finally:
        for dev, backing in devs:
            loopdev.detach(dev, backing)
        shutil.rmtree(work, ignore_errors=True)


def kill_tree(pid):
    """SIGKILL the job we started and what it started (its iobench), found from its PID
    before it dies; returns the PIDs killed."""
    tree = [pid] + descendants(pid)
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return tree


def status_file(tdir):
    with open(os.path.join(tdir, ".fleetqual-job", "status.json")) as fh:
        return json.load(fh)


def wait_until(what, limit, step=0.2):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(step)
    return False


def device_workload(dev, seconds):
    return {"id": "w1", "key": "w1@raw", "target": "raw", "target_kind": "device", "target_device": dev,
            "device_size": REGION, "dataset": "raw@0+16M", "mode": "rndwr", "file_num": 1, "total_size": REGION,
            "block_size": 4096, "threads": 1, "direct": True, "time": seconds, "warmup": 0, "seed": 7}


def test_killed_job_region_is_refused_then_zeroed_when_opted_in(iobench_binary, loops):  # noqa: F811
    work, ((dev, backing), (other, other_backing)) = loops
    tdir = os.path.join(work, "t")
    assert not call(TEST_DIR, {"path": tdir}).get("failed")
    outside = sha(backing, REGION, DISK)
    other_all = sha(other_backing, 0, DISK)

    r = call(JOB, {"state": "started", "path": tdir, "run_id": "r-killed", "binary": iobench_binary, "datasets": [],
                   "workloads": [device_workload(dev, 60)], "timeouts": [120], "planned": [60], "planned_s": 60,
                   "deadline_s": 300, "collect": "none"})
    assert not r.get("failed"), r
    pid = r["status"]["pid"]
    killed = []
    try:
        # recorded before the first byte: the device, the region, what identifies the drive
        region = status_file(tdir)["regions"]
        assert region == [dict(region[0], device=dev, size=REGION, resolved=dev, backing_file=backing)], region
        # mid-write: iobench has written into the region; SIGKILL the job and what it started
        assert wait_until(lambda: loopdev.nonzero(backing, 0, REGION) and descendants(pid), 60), "the job never wrote"
    finally:
        killed = kill_tree(pid)
        assert wait_until(lambda: not any(alive(p) for p in killed), 30), "killed processes still alive"
    status = call(JOB, {"path": tdir})["status"]
    assert status["state"] == "died" and status["cleanup"] is None
    assert loopdev.nonzero(backing, 0, REGION)

    # the controller's cleanup without the device: the status stays for the next preflight
    gone = call(TEST_DIR, {"path": tdir, "binary": iobench_binary, "state": "absent"})
    assert not gone.get("failed") and gone["regions_zeroed"] == [] and gone["left"] == [], gone
    assert os.path.exists(os.path.join(tdir, ".fleetqual-job", "status.json"))
    warned = json.dumps(gone.get("warnings"))
    assert dev in warned and "kept for the next run" in warned, gone

    # next run, the device not opted in (another one is): refused, nothing touched
    refused = call(TEST_DIR, {"path": tdir, "binary": iobench_binary, "devices": [other]})
    assert refused["failed"], refused
    msg = refused["msg"]
    for part in (dev, backing, "run r-killed", "pid %d" % pid, "stopped without its cleanup", "bytes [0, %d)" % REGION,
                 "fleetqual_targets", "destroy_data: true", "cleanup --device %s --size %d" % (dev, REGION)):
        assert part in msg, (part, msg)
    assert loopdev.nonzero(backing, 0, REGION) and sha(other_backing, 0, DISK) == other_all
    assert os.path.exists(os.path.join(tdir, ".fleetqual-job", "status.json"))

    # check mode says what it would zero and zeroes nothing
    dry = call(TEST_DIR, {"path": tdir, "binary": iobench_binary, "devices": [dev], "_ansible_check_mode": True})
    assert not dry.get("failed") and dry["previous_job"]["regions_zeroed"] == ["%s[0+%d]" % (dev, REGION)], dry
    assert loopdev.nonzero(backing, 0, REGION)

    # opted in again: exactly the region is zeroed, the job's status cleared
    ok = call(TEST_DIR, {"path": tdir, "binary": iobench_binary, "devices": [other, dev]})
    assert not ok.get("failed"), ok
    assert ok["previous_job"]["run_id"] == "r-killed" and ok["previous_job"]["state"] == "died"
    assert ok["previous_job"]["regions_zeroed"] == ["%s[0+%d]" % (dev, REGION)]
    assert not loopdev.nonzero(backing, 0, REGION)
    assert sha(backing, REGION, DISK) == outside
    assert sha(other_backing, 0, DISK) == other_all
    assert not os.path.exists(os.path.join(tdir, ".fleetqual-job"))


def test_a_finished_job_leaves_no_region_and_its_cleanup_names_it(iobench_binary, loops):  # noqa: F811
    """A job that ran its cleanup zeroed its region and says so: nothing is left for the next run."""
    work, ((dev, backing), _other) = loops
    tdir = os.path.join(work, "t")
    assert not call(TEST_DIR, {"path": tdir}).get("failed")
    outside = sha(backing, REGION, DISK)
    r = call(JOB, {"state": "started", "path": tdir, "run_id": "r-done", "binary": iobench_binary, "datasets": [],
                   "workloads": [device_workload(dev, 1)], "timeouts": [120], "planned": [1], "planned_s": 1,
                   "deadline_s": 300, "collect": "none"})
    assert not r.get("failed"), r
    assert wait_until(lambda: call(JOB, {"path": tdir})["status"]["state"] != "running", 120)
    status = call(JOB, {"path": tdir})["status"]
    assert status["state"] == "done", status
    assert status["cleanup"]["removed"] == [blockdev.region_label(dev, REGION)]
    assert not loopdev.nonzero(backing, 0, REGION) and sha(backing, REGION, DISK) == outside
    # not opted in now, and still nothing to refuse: the region was zeroed by the job
    nxt = call(TEST_DIR, {"path": tdir, "binary": iobench_binary})
    assert not nxt.get("failed"), nxt
    assert nxt["previous_job"]["regions_zeroed"] == []


IDS = st.fixed_dictionaries({
    "serial": st.sampled_from([None, "", "S1", "s1 ", "S2"]),
    "wwid": st.sampled_from([None, "naa.1", "naa.2"]),
    "backing_file": st.sampled_from([None, "/var/tmp/a.img", "/var/tmp/b.img"]),
    "resolved": st.sampled_from([None, "/dev/loop0", "/dev/loop1"]),
    "size_bytes": st.sampled_from([None, 1 << 30, 2 << 30]),
})


@settings(max_examples=400, deadline=None)
@given(IDS, IDS)
def test_same_device_only_for_the_same_drive(a, b):
    same = blockdev.same_device(a, b)
    assert same == blockdev.same_device(b, a)

    def norm(v):
        return (v or "").strip().lower() or None
    if norm(a["serial"]) or norm(b["serial"]):
        assert same == (norm(a["serial"]) == norm(b["serial"]))
    elif a["wwid"] or b["wwid"]:
        assert same == (a["wwid"] == b["wwid"])
    else:
        # nothing the drive says about itself: a loop device by its file, node and size, else never
        assert same == bool(a["backing_file"] and a["backing_file"] == b["backing_file"]
                            and a["resolved"] == b["resolved"] and a["size_bytes"] == b["size_bytes"])


def test_leftover_regions_are_those_not_zeroed():
    regions = [{"device": "/dev/a", "size": 8 * MIB}, {"device": "/dev/b", "size": 0}]
    assert blockdev.leftover_regions({"regions": regions, "cleanup": None}) == regions
    done = {"regions": regions, "cleanup": {"removed": ["/dev/b[0+all]", "/t/set"]}}
    assert blockdev.leftover_regions(done) == regions[:1]
    assert blockdev.leftover_regions({"state": "done"}) == [] and blockdev.leftover_regions(None) == []


def test_a_region_whose_device_is_gone_is_refused_not_matched(tmp_path):
    zero, refuse = blockdev.match_regions([{"device": str(tmp_path / "nodev"), "size": MIB, "serial": "S1"}],
                                          [str(tmp_path / "nodev")])
    assert zero == [] and refuse[0][0]["serial"] == "S1" and refuse[0][1]["resolved"] is None
