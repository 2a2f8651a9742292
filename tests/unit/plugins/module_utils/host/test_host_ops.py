"""The modules' logic as functions: bench_dir_ops.prepare/remove, drives.host_inventory,
job_runner.start/job_status give what the modules give, and the controller's raw poll
(job_runner.poll_command run by /bin/sh, then parse_poll) gives exactly the module's
state=status for a running job, a finished one, one whose process was SIGKILLed (died) and a
directory with no job, also in a path with spaces and quotes. Real directories, real jobs
with the real iobench binary; nothing of the code under test is mocked."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import test_module_iobench
from test_device_regions import kill_tree
from test_drives import build_fake_sysfs
from test_module_job import JOB, TEST_DIR, alive, call, wl

from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir as ops
from ansible_collections.fleetqual.storage.plugins.module_utils.devices import drives as dr
from ansible_collections.fleetqual.storage.plugins.module_utils.devices import inventory as dr_inventory
from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as jr
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as jr_status

iobench_binary = test_module_iobench.iobench_binary   # the fixture

DRIVES = "ansible_collections.fleetqual.storage.plugins.modules.drives"
# Ansible's own: the arguments, and the owner, mode, ... of a result's ``path`` (add_path_info)
BOOKKEEPING = ("invocation", "failed", "uid", "gid", "owner", "group", "mode", "state", "size", "secontext")


@pytest.fixture
def work():
    d = tempfile.mkdtemp(prefix="fq-ops-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def module_result(r, path=None, placeholder="<path>"):
    """A module's JSON without Ansible's bookkeeping, its own path made ``placeholder``."""
    out = {k: v for k, v in r.items() if k not in BOOKKEEPING}
    if "warnings" in out:       # ansible-core 2.19 sends each as a WarningSummary
        out["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w for w in out["warnings"]]
    return swap(out, path, placeholder) if path else out


def swap(obj, path, placeholder="<path>"):
    return json.loads(json.dumps(obj).replace(json.dumps(path)[1:-1], placeholder))


def function_result(fn, *args, **kw):
    """(result, None) or (None, (msg, fields)) of a function raising the module's failure."""
    try:
        return fn(*args, **kw), None
    except (ops.BenchDirError, dr.DrivesError) as e:
        return None, (e.msg, e.result)


def module_failure(r):
    return r["msg"], without(module_result(r), "msg")


# --------------------------------------------------------------------------- bench_dir

def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def test_prepare_and_remove_give_the_module_results(work):
    a, b = os.path.join(work, "a", "t"), os.path.join(work, "b", "t")
    present = dict(datasets=["s1", "s2"], required_bytes=1 << 20, margin_pct=10, direct=True)
    for check_mode in (True, False, False):        # check mode, create, again (nothing to change)
        mod = call(TEST_DIR, dict(present, path=a, _ansible_check_mode=check_mode))
        fn = ops.prepare(b, check_mode=check_mode, **present)
        assert not mod.get("failed"), mod
        # free space moves between two calls; the rest is the same
        assert without(module_result(mod, a), "free_bytes") == without(swap(fn, b), "free_bytes")
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) == [".fleetqual-storage", "s1", "s2"]
    open(os.path.join(a, "foreign"), "w").close()
    open(os.path.join(b, "foreign"), "w").close()
    for check_mode in (True, False):
        mod = call(TEST_DIR, dict(path=a, datasets=["s1", "s2"], state="absent", _ansible_check_mode=check_mode))
        fn = ops.remove(b, datasets=["s1", "s2"], check_mode=check_mode)
        assert module_result(mod, a) == swap(fn, b)
    assert fn["left"] == [os.path.join(b, "foreign")] and fn["warnings"]      # what stayed, said
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) == [".fleetqual-storage", "foreign"]


def unfree(failure):
    msg, fields = failure
    return re.sub(r"has \S+ free", "has <free> free", msg), without(fields, "free_bytes")


def test_refusals_raise_the_module_message_and_fields(work):
    for name in ("a", "b"):
        os.makedirs(os.path.join(work, name, "theirs"))
        open(os.path.join(work, name, "theirs", "file"), "w").close()
    cases = [("theirs", "present", dict()),                        # someone else's directory
             ("new", "present", dict(required_bytes=1 << 60)),     # not enough space
             ("new", "present", dict(datasets=["x/y"])),           # a bad data set name
             ("theirs", "absent", dict())]                         # no marker: not ours
    for sub, state, args in cases:
        mod = call(TEST_DIR, dict(args, path=os.path.join(work, "a", sub), state=state))
        fn = ops.prepare if state == "present" else ops.remove
        res, failure = function_result(fn, os.path.join(work, "b", sub), **args)
        assert mod["failed"] and res is None
        # free space moves between two calls; the rest is the same
        assert unfree(swap(failure, os.path.join(work, "b"))) == unfree(swap(module_failure(mod), os.path.join(work, "a")))
    res, failure = function_result(ops.prepare, "relative/t")
    assert failure == (call(TEST_DIR, {"path": "relative/t"})["msg"], {})
    assert os.listdir(os.path.join(work, "b", "theirs")) == ["file"] and not os.path.exists(os.path.join(work, "b", "new"))


def test_a_dead_previous_job_is_reported_and_cleared_alike(work):
    """A job that died while running (a PID that is gone): the preflight reports it (state
    died) with the module's warnings and clears it."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    for name in ("a", "b"):
        path = os.path.join(work, name, "t")
        assert not call(TEST_DIR, {"path": path, "datasets": ["set"]}).get("failed")
        os.makedirs(jr_status.job_dir(path))
        jr_status.write_status(jr_status.job_dir(path), {"run_id": "r0", "pid": gone.pid, "pid_start": 1, "state": "running",
                                                         "of": 2, "results": [{"index": 1, "id": "w1", "failed": False}]})
    mod = call(TEST_DIR, {"path": os.path.join(work, "a", "t"), "datasets": ["set"]})
    fn = ops.prepare(os.path.join(work, "b", "t"), datasets=["set"])
    for r in (mod, fn):
        assert r["previous_job"]["state"] == "died" and r["previous_job"]["results"][0]["id"] == "w1"
        r["previous_job"].pop("now")
    assert without(module_result(mod, os.path.join(work, "a")), "free_bytes") == \
        without(swap(fn, os.path.join(work, "b")), "free_bytes")
    assert any("cleared" in w for w in fn["warnings"])
    assert not os.path.exists(jr_status.job_dir(os.path.join(work, "b", "t")))


# --------------------------------------------------------------------------- drives

def test_host_inventory_gives_the_module_result_on_a_fake_tree(tmp_path):
    sysfs, dev = build_fake_sysfs(str(tmp_path / "host"))
    for health in (True, False):
        mod = call(DRIVES, {"sysfs_root": sysfs, "dev_root": dev, "health": health, "targets": [sysfs]})
        assert module_result(mod) == dr_inventory.host_inventory(sysfs_root=sysfs, dev_root=dev, health=health, targets=[sysfs])


def twice(module_call, function_call, attempts=3):
    """(module's, function's) of two calls that read this host's block devices, repeated
    while they differ: other tests on a shared machine attach and detach loop devices."""
    for attempt in range(attempts):
        mod, fn = module_call(), function_call()
        if mod == fn:
            break
    return mod, fn


def test_host_inventory_gives_the_module_result_on_this_host(tmp_path):
    f = tmp_path / "plain-file"
    f.write_bytes(b"x" * 4096)
    guard = [{"device": str(f), "destroy_data": True}]
    mod, failure = twice(lambda: module_failure(call(DRIVES, {"targets": ["/"], "health": False, "check_devices": guard})),
                         lambda: function_result(dr_inventory.host_inventory, targets=["/"], health=False, check_devices=guard)[1])
    assert failure == mod
    assert failure[0] == "raw device target %s refused: %s is not a block device" % (f, f)
    mod, fn = twice(lambda: module_result(call(DRIVES, {"targets": ["/"], "health": False, "fail_on_refusal": False,
                                                        "check_devices": [{"device": str(f)}]})),
                    lambda: dr_inventory.host_inventory(targets=["/"], health=False, check_devices=[{"device": str(f)}],
                                                        fail_on_refusal=False))
    assert mod == fn and fn["guard"][0]["ok"] is False
    assert f.read_bytes() == b"x" * 4096


# --------------------------------------------------------------------------- job: start, status, the raw poll

def module_status(path, **kw):
    r = call(JOB, dict(kw, path=path))
    if r.get("failed"):
        return r["msg"]
    return r["status"]


def polled(path, **kw):
    p = subprocess.run(["/bin/sh", "-c", jr_status.poll_command(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, check=False)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    try:
        return jr_status.parse_poll(p.stdout, **kw)
    except jr_status.JobError as e:
        return e.msg


def same_status(path, **kw):
    """The poll's status and the module's for the same moment: equal but for the time read
    and equal to job_status read in this process (the job may move on between the three reads:
    retried a few times)."""
    for attempt in range(5):
        before = time.time()
        poll, mod = polled(path, **kw), module_status(path, **kw)
        if isinstance(poll, str) or isinstance(mod, str):
            assert poll == mod
            return poll
        lib = jr_status.job_status(path, **kw)
        assert before - 1 <= poll["now"] <= mod["now"] <= time.time() + 1
        if without(poll, "now") == without(mod, "now") == without(lib, "now"):
            return mod
    raise AssertionError("poll %r != module %r != job_status %r" % (poll, mod, lib))


@pytest.fixture(params=["plain", "spaces and 'quotes' \"$(x)\""])
def job_dir_path(request, work):
    path = os.path.join(work, request.param, "t")
    r = call(TEST_DIR, {"path": path, "datasets": ["set"]})
    assert not r.get("failed"), r
    return path


def start_args(binary, path, seconds):
    return {"path": path, "run_id": "r1", "binary": binary, "datasets": ["set"], "workloads": [wl(1, seconds)],
            "timeouts": [120], "planned": [seconds], "planned_s": seconds, "deadline_s": 300, "collect": "none"}


@pytest.mark.slow
def test_poll_gives_the_module_status_running_done_and_without_a_job(iobench_binary, job_dir_path):  # noqa: F811
    path = job_dir_path
    assert same_status(path) == "no measurement job status in %s" % jr_status.job_dir(path)
    r = call(JOB, dict(start_args(iobench_binary, path, 3), state="started"))
    assert not r.get("failed"), r
    pid = r["status"]["pid"]
    # the job's runner held (SIGSTOP) while the polls look: it cannot record a result or finish,
    # however long the three readers take on a busy machine
    os.kill(pid, signal.SIGSTOP)
    try:
        try:
            st = same_status(path)
            assert st["state"] == "running" and st["alive"] is True and "results" not in st
            assert same_status(path, results=True)["results"] == []
        finally:
            os.kill(pid, signal.SIGCONT)
        end = time.monotonic() + 120
        while same_status(path)["state"] == "running":
            assert time.monotonic() < end
            time.sleep(0.5)
        # the job writes "done", then exits: alive until it has (a loaded CI run read done and
        # alive once)
        st = same_status(path)
        assert st["state"] == "done" and st["results"][0]["id"] == "w1", st
        while st["alive"]:
            assert time.monotonic() < end and st["state"] == "done", st
            time.sleep(0.2)
            st = same_status(path)
        assert st["state"] == "done" and st["alive"] is False and st["results"][0]["id"] == "w1"
    finally:
        if alive(pid):
            kill_tree(pid)


@pytest.mark.slow
def test_poll_says_died_as_the_module_for_a_sigkilled_job(iobench_binary, job_dir_path):  # noqa: F811
    path = job_dir_path
    r = call(JOB, dict(start_args(iobench_binary, path, 60), state="started"))
    assert not r.get("failed"), r
    pid = r["status"]["pid"]
    try:
        end = time.monotonic() + 60
        while not (jr_status.read_status(jr_status.job_dir(path)) or {}).get("index"):   # its workload started
            assert time.monotonic() < end
            time.sleep(0.2)
        assert same_status(path)["state"] == "running"
    finally:
        kill_tree(pid)
    end = time.monotonic() + 30
    while alive(pid):
        assert time.monotonic() < end
        time.sleep(0.1)
    st = same_status(path)
    assert st["state"] == "died" and st["alive"] is False and st["results"] == []
    # a reused PID (another process, another start time) is no job of ours either
    doc = jr_status.read_status(jr_status.job_dir(path))
    mine = subprocess.Popen(["sleep", "30"])
    try:
        doc["pid"] = mine.pid
        jr_status.write_status(jr_status.job_dir(path), doc)
        st = same_status(path)
        assert st["state"] == "died" and st["pid"] == mine.pid
        doc["pid_start"] = jr_status.pid_start(mine.pid)          # the same start time: that is the job
        jr_status.write_status(jr_status.job_dir(path), doc)
        assert same_status(path)["state"] == "running"
    finally:
        os.kill(mine.pid, signal.SIGKILL)
        mine.wait()
        jr_status.remove_scratch(doc)     # what the next preflight would remove (the killed job's)


def test_start_refuses_as_the_module(iobench_binary, work):  # noqa: F811
    missing = os.path.join(work, "missing")
    args = start_args(iobench_binary, missing, 1)
    mod = call(JOB, dict(args, state="started"))
    with pytest.raises(jr_status.JobError) as e:
        jr.start(args)
    assert mod["failed"] and e.value.msg == mod["msg"] == \
        "test directory %s does not exist (the preflight creates it)" % missing
    os.makedirs(missing)
    bad = dict(args, timeouts=[])
    with pytest.raises(jr_status.JobError) as e:
        jr.start(bad)
    assert e.value.msg == call(JOB, dict(bad, state="started"))["msg"]
    assert jr.start(args, check_mode=True) is None


def test_evaluate_status_decides_from_the_stat_line_alone():
    doc = {"run_id": "r", "pid": 4242, "pid_start": 777, "state": "running", "results": [{"id": "w1"}],
           "array": {"steps": [{"n": 1, "result": {"x": 1}}]}}
    line = "4242 (python3) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 777 1 1 1"
    st = jr_status.evaluate_status(doc, 1000.12345, line)
    assert st["alive"] is True and st["state"] == "running" and st["now"] == 1000.123
    assert "results" not in st and st["array"]["steps"] == [{"n": 1}]
    for other in (line.replace(" 777 ", " 778 "),              # the PID reused: another start time
                  line.replace(") S ", ") Z "),                # a zombie
                  line.replace("4242 (", "4243 ("),            # another PID's line
                  None, ""):
        st = jr_status.evaluate_status(doc, 1000, other)
        assert st["state"] == "died" and st["results"] == [{"id": "w1"}] and st["array"]["steps"][0]["result"]
    with pytest.raises(jr_status.JobError, match="no measurement job status in /x"):
        jr_status.evaluate_status(None, 0, None, directory="/x")
