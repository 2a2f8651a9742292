"""The detached measurement job (plugins/modules/job.py, plugins/module_utils/job/runner.py) with the
real iobench binary in real directories: it returns at once, runs the plan on its own,
gives each workload the single-workload module's result shape, removes its files, stops at
its deadline (SIGTERM to iobench: an interrupted partial result) and leaves a status that
the next preflight (test_dir) reports and clears, or refuses on while the job lives."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import given, settings, strategies as st

import test_module_iobench
from test_module_iobench import run_module
from proctree import alive
import unitpaths

iobench_binary = test_module_iobench.iobench_binary   # the fixture

ROOT = unitpaths.ROOT
COLLECTIONS = os.path.join(ROOT, "build", "collections")
JOB = "ansible_collections.fleetqual.storage.plugins.modules.job"
TEST_DIR = "ansible_collections.fleetqual.storage.plugins.modules.bench_dir"

pytestmark = pytest.mark.slow


def call(module, args, timeout=120):
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    try:
        p = subprocess.run([sys.executable, "-m", module, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, PYTHONPATH=COLLECTIONS), timeout=timeout, check=False)
    finally:
        os.unlink(path)
    return json.loads(p.stdout)


def wl(i, time_s, **kw):
    """A workload of the plan; paced (``rate_iops``): the job is the subject, not the disk."""
    w = {"id": "w%d" % i, "dataset": "set", "mode": "rndrd", "file_num": 2, "total_size": 8 << 20,
         "block_size": 16384, "threads": 1, "direct": True, "time": time_s, "warmup": 0, "seed": 1,
         "rate_iops": 200}
    w.update(kw)
    return w


@pytest.fixture
def tdir():
    d = tempfile.mkdtemp(prefix="fq-job-", dir="/var/tmp")
    r = call(TEST_DIR, {"path": os.path.join(d, "t"), "datasets": ["set"]})
    assert not r.get("failed"), r
    yield os.path.join(d, "t")
    shutil.rmtree(d, ignore_errors=True)


def start(binary, path, workloads, deadline_s, timeouts=None):
    return call(JOB, {"state": "started", "path": path, "run_id": "r1", "binary": binary, "datasets": ["set"],
                      "workloads": workloads, "timeouts": timeouts or [120] * len(workloads),
                      "planned": [w["time"] for w in workloads], "planned_s": sum(w["time"] for w in workloads),
                      "deadline_s": deadline_s, "collect": "auto"})


def wait_final(path, limit=120):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        r = call(JOB, {"path": path})
        if r["status"]["state"] != "running":
            return r["status"]
        time.sleep(0.5)
    raise AssertionError("the job did not end within %d s" % limit)


def test_job_runs_the_plan_detached_with_the_module_result_shape(iobench_binary, tdir):  # noqa: F811
    r = start(iobench_binary, tdir, [wl(1, 2), wl(2, 2, mode="rndwr")], deadline_s=300)
    assert not r.get("failed"), r
    st = r["status"]
    # the module returned while the job goes on, in its own session
    assert st["state"] == "running" and st["alive"] and st["of"] == 2
    assert os.getsid(st["pid"]) == st["pid"] or os.getsid(st["pid"]) != os.getsid(0)
    final = wait_final(tdir)
    assert final["state"] == "done" and final["error"] is None, final
    results = final["results"]
    assert [x["id"] for x in results] == ["w1", "w2"] and not any(x["failed"] for x in results)
    other = tempfile.mkdtemp(prefix="fq-single-", dir="/var/tmp")
    try:
        single = run_module(dict(binary=iobench_binary, dir=other, mode="rndrd", file_num=2,
                                 total_size=8 << 20, threads=1, direct=True, time=1, warmup=0, cleanup=True))
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert single.get("failed") is False, single.get("msg")
    for x in results:
        res = x["result"]
        assert res["rc"] == 0 and res["bench"]["config"]["mode"] in ("rndrd", "rndwr")
        # the same keys as the single-workload module's result (Ansible adds its own bookkeeping)
        assert set(res) | {"failed", "warnings", "invocation", "_module_rc"} >= set(single) - {"failed"}, \
            set(single) - set(res)
        assert "--prepare" in res["argv"] and "--cleanup" not in res["argv"]
    # the job removed its data set files, its status stays for the controller
    assert glob.glob(os.path.join(tdir, "**", "test_file.*"), recursive=True) == []
    assert final["cleanup"]["removed"] == [os.path.join(tdir, "set")]
    assert not alive(final["pid"])


def test_job_runs_each_directory_target_in_its_own_directory(iobench_binary, tdir):  # noqa: F811
    """Targets: the same workload id on two directory targets, each run in
    <target_path>/<dataset>, results keyed <id>@<target>, each target's files removed."""
    root = os.path.dirname(tdir)
    paths = [os.path.join(root, "data%d" % i) for i in (1, 2)]
    for p in paths:
        r = call(TEST_DIR, {"path": p, "datasets": ["set"]})
        assert not r.get("failed"), r
    plan = [wl(1, 1, target="data%d" % i, target_kind="path", target_path=p, key="w1@data%d" % i)
            for i, p in ((1, paths[0]), (2, paths[1]))]
    r = call(JOB, {"state": "started", "path": tdir, "run_id": "r1", "binary": iobench_binary, "datasets": [],
                   "workloads": plan, "timeouts": [120, 120], "planned": [1, 1], "planned_s": 2,
                   "deadline_s": 300, "collect": "none"})
    assert not r.get("failed"), r
    final = wait_final(tdir)
    assert final["state"] == "done" and final["error"] is None, final
    res = final["results"]
    assert [(x["id"], x["key"], x["target"]) for x in res] == [("w1", "w1@data1", "data1"), ("w1", "w1@data2", "data2")]
    for x, p in zip(res, paths):
        argv = x["result"]["argv"]
        assert argv[argv.index("--dir") + 1] == os.path.join(p, "set")
    assert final["cleanup"]["removed"] == [os.path.join(p, "set") for p in paths]
    assert glob.glob(os.path.join(root, "**", "test_file.*"), recursive=True) == []


def test_cleanup_plan_and_where_of_each_target_kind():
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as job_utils
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import cleanup as job_utils_cleanup
    plan = [{"id": "a", "dataset": "s1"},
            {"id": "a", "dataset": "s1", "target": "d1", "target_kind": "path", "target_path": "/d1"},
            {"id": "b", "dataset": "s2", "target": "d1", "target_kind": "path", "target_path": "/d1"},
            {"id": "a", "dataset": "n@0+8M", "target": "n", "target_kind": "device", "target_device": "/dev/x",
             "device_size": 8 << 20},
            {"id": "b", "dataset": "n@0+64M", "target": "n", "target_kind": "device", "target_device": "/dev/x",
             "device_size": 64 << 20}]
    dirs, devices = job_utils_cleanup.cleanup_plan("/t", plan, ["s1"])
    assert dirs == [("/t", ["s1"]), ("/d1", ["s1", "s2"])]
    assert devices == [("/dev/x", 64 << 20, 0)]
    assert job_utils_cleanup.cleanup_plan("/t", plan[3:] + [dict(plan[3], device_size=0)], [])[1] == [("/dev/x", 0, 0)]
    # a region from an offset (a LUN shared by initiators, each in its own region)
    assert job_utils_cleanup.cleanup_plan("/t", [dict(plan[3], device_offset=1 << 30)], [])[1] == [
        ("/dev/x", 8 << 20, 1 << 30)]
    assert job_utils.where(plan[0], "/t") == {"dir": "/t/s1"}
    assert job_utils.where(plan[2], "/t") == {"dir": "/d1/s2"}
    assert job_utils.where(plan[3], "/t") == {"device": "/dev/x", "size": 8 << 20, "offset": 0, "dir": None,
                                              "total_size": None, "file_num": None}


def test_deadline_stops_iobench_with_a_partial_result_and_cleans_up(iobench_binary, tdir):  # noqa: F811
    r = start(iobench_binary, tdir, [wl(1, 60), wl(2, 60)], deadline_s=4)
    assert not r.get("failed"), r
    final = wait_final(tdir, limit=90)
    assert final["state"] == "expired", final
    assert final["finished_epoch"] - final["deadline_epoch"] < 30
    (only,) = final["results"]             # the second workload never started
    res = only["result"]
    assert only["failed"] is False and res["timed_out"] is True
    assert res["bench"]["interrupted"] is True and res["bench"]["signal"] == "SIGTERM"
    assert res["bench"]["total"]["count"] > 0
    assert glob.glob(os.path.join(tdir, "**", "test_file.*"), recursive=True) == []
    # the next preflight reports it and clears it
    p = call(TEST_DIR, {"path": tdir, "datasets": ["set"]})
    assert not p.get("failed"), p
    prev = p["previous_job"]
    assert prev["state"] == "expired" and prev["run_id"] == "r1" and prev["results"][0]["id"] == "w1"
    assert not os.path.exists(os.path.join(tdir, ".fleetqual-job"))


def test_live_job_refuses_preflight_and_a_second_job_then_absent_stops_it(iobench_binary, tdir):  # noqa: F811
    r = start(iobench_binary, tdir, [wl(1, 60)], deadline_s=300)
    st = r["status"]
    try:
        p = call(TEST_DIR, {"path": tdir, "datasets": ["set"]})
        assert p["failed"] and "pid %d" % st["pid"] in p["msg"] and "deadline" in p["msg"], p["msg"]
        again = start(iobench_binary, tdir, [wl(1, 1)], deadline_s=300)
        assert again["failed"] and "still running" in again["msg"] and str(st["pid"]) in again["msg"]
        # the controller's cleanup stops the live job, which removes its files
        gone = call(TEST_DIR, {"path": tdir, "datasets": ["set"], "binary": iobench_binary, "state": "absent"})
        assert not gone.get("failed"), gone
        assert gone["stopped_job"]["state"] == "stopped"
        assert not os.path.exists(tdir)
        assert not alive(st["pid"])
    finally:
        if alive(st["pid"]):
            os.kill(st["pid"], signal.SIGKILL)


def test_the_operators_stop_ends_only_its_runs_job_within_the_grace_and_keeps_its_status(iobench_binary, tdir):  # noqa: F811
    """state=stopped (playbooks/stop.yml): a job of another run is left running; the job of
    the run named ends its workload with iobench's interrupted result, removes its files and
    keeps its final status, stopped by the operator, which the next preflight reports."""
    r = start(iobench_binary, tdir, [wl(1, 2), wl(2, 60), wl(3, 60)], deadline_s=300)
    st = r["status"]
    try:
        other = call(JOB, {"path": tdir, "state": "stopped", "run_id": "another"})
        assert other["found"] and not other["stopped"] and not other["changed"], other
        assert alive(st["pid"]) and "run r1's, not run another's" in other["msg"], other["msg"]
        # check mode decides the same, and stops nothing
        checked = {r: call(JOB, {"path": tdir, "state": "stopped", "run_id": r, "_ansible_check_mode": True})
                   for r in ("another", "r1")}
        assert not checked["another"]["changed"] and "not run another's" in checked["another"]["msg"], checked
        assert checked["r1"]["changed"] and "would be stopped" in checked["r1"]["msg"], checked
        assert alive(st["pid"]) and call(JOB, {"path": tdir})["status"]["state"] == "running"
        end = time.monotonic() + 60
        while call(JOB, {"path": tdir})["status"]["done"] < 1:     # the first workload measured
            assert time.monotonic() < end, "the first workload never ended"
            time.sleep(0.5)
        began = time.monotonic()
        out = call(JOB, {"path": tdir, "state": "stopped", "run_id": "r1", "grace": 10, "stopped_by": "a test"})
        took = time.monotonic() - began
        assert out["stopped"] and out["changed"], out
        brief = out["status"]
        assert brief["state"] == "stopped" and brief["stop_reason"] == "stopped by the operator (a test)", brief
        assert brief["done"] == 2 and "2 of 3 workloads measured" in out["msg"], out
        assert not alive(st["pid"]), "the job still runs %.1f s after its stop" % took
        final = call(JOB, {"path": tdir})["status"]
        second = final["results"][1]["result"]
        assert second["bench"]["interrupted"] is True and second["bench"]["signal"] == "SIGTERM", second["bench"]
        assert glob.glob(os.path.join(tdir, "**", "test_file.*"), recursive=True) == []
        # a job that has ended is not stopped again
        again = call(JOB, {"path": tdir, "state": "stopped"})
        assert again["found"] and not again["stopped"] and "already ended (stopped)" in again["msg"], again
        p = call(TEST_DIR, {"path": tdir, "datasets": ["set"]})
        assert not p.get("failed") and p["previous_job"]["state"] == "stopped", p
        none = call(JOB, {"path": tdir, "state": "stopped"})
        assert not none["found"] and not none["stopped"] and none["status"] is None, none
    finally:
        if alive(st["pid"]):
            os.kill(st["pid"], signal.SIGKILL)


def test_a_job_ended_by_sigkill_leaves_its_benchmark_output_for_the_next_preflight(iobench_binary, tdir):  # noqa: F811
    """iobench writes its JSON result in the job's scratch directory, which the job's status
    names, in the system's temporary directory (not on the filesystem under test, which a run
    may fill): a SIGKILL reaches no cleanup, and the next preflight removes it."""
    from proctree import cmdline, descendants, wait_gone
    r = start(iobench_binary, tdir, [wl(1, 60)], deadline_s=300)
    pid = r["status"]["pid"]
    job_dir = os.path.join(tdir, ".fleetqual-job")
    with open(os.path.join(job_dir, "status.json")) as fh:
        scratch = json.load(fh)["scratch_dir"]
    assert os.path.dirname(scratch) == tempfile.gettempdir() and os.path.basename(scratch).startswith("fleetqual-job-")
    below, argv, out = [], [], []
    try:
        end = time.monotonic() + 60
        while not (out and argv):
            assert time.monotonic() < end, "the workload never started: %s" % os.listdir(scratch)
            time.sleep(0.2)
            out = glob.glob(os.path.join(scratch, "iobench-*"))
            below = descendants(pid)
            argv = next((a for a in map(cmdline, below) if a and a[0] == iobench_binary), [])
        assert os.path.join(out[0], "result.json") in argv, argv
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
    finally:
        # the job's children (iobench, the collectors) outlive its SIGKILL: this test ends them
        for child in [pid] + below:
            if alive(child):
                os.kill(child, signal.SIGKILL)
                wait_gone(child)
    assert os.path.isdir(out[0])            # no cleanup ran
    p = call(TEST_DIR, {"path": tdir, "datasets": ["set"]})
    assert not p.get("failed"), p
    assert p["previous_job"]["run_id"] == "r1" and p["previous_job"]["state"] == "died", p["previous_job"]
    assert not os.path.exists(scratch) and not os.path.exists(job_dir)


def test_a_finished_job_removes_its_scratch_directory(iobench_binary, tdir):  # noqa: F811
    start(iobench_binary, tdir, [wl(1, 1)], deadline_s=300)
    final = wait_final(tdir)
    assert final["state"] == "done" and final["results"][0]["result"]["bench"], final
    with open(os.path.join(tdir, ".fleetqual-job", "status.json")) as fh:
        scratch = json.load(fh)["scratch_dir"]
    assert not os.path.exists(scratch)


def test_a_job_whose_first_status_cannot_be_written_leaves_no_scratch_directory(tmp_path, monkeypatch):
    """Job.begin makes the scratch directory, then writes the status that names it: when that
    write fails (here the test directory's filesystem is full) the job does not start and the
    directory is gone, since no status names it for a later preflight to remove."""
    import errno
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as job_runner
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as job_status

    def full(_directory, _doc):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(job_runner, "write_status", full)
    spec = {"path": str(tmp_path / "t"), "run_id": "r1", "workloads": [], "datasets": [], "planned_s": 1,
            "deadline_s": 60}
    job = job_runner.Job(spec)
    with pytest.raises(OSError):
        job.begin(time.time())
    assert job.scratch is None
    assert [n for n in os.listdir(tmp_path) if n.startswith(job_status.SCRATCH_PREFIX)] == []


def test_a_failing_workload_stops_the_job_with_its_message(iobench_binary, tdir):  # noqa: F811
    bad = wl(2, 1, block_size=1000)        # not a multiple of 512 with O_DIRECT
    start(iobench_binary, tdir, [wl(1, 1), bad, wl(3, 1)], deadline_s=300)
    final = wait_final(tdir)
    assert final["state"] == "failed"
    assert final["error"]["index"] == 2 and "512" in final["error"]["msg"]
    assert [x["failed"] for x in final["results"]] == [False, True]
    assert glob.glob(os.path.join(tdir, "**", "test_file.*"), recursive=True) == []


# --------------------------------------------------------------------------- controller side (action plugin)

def test_fleet_line_counts_every_host_once():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    hosts = [{"state": "running", "index": 3, "of": 6, "started_epoch": 100, "planned_s": 300},
             {"state": "running", "index": 4, "of": 6, "started_epoch": 101, "planned_s": 300},
             {"state": "done", "index": 6, "of": 6, "started_epoch": 100, "planned_s": 290},
             {"state": "expired", "index": 2, "of": 6, "started_epoch": 100, "planned_s": 300},
             {"state": "unreachable"}]
    assert action.fleet_line(hosts, now=230) == \
        "fleetqual: workload 3/6 | 5 hosts: 2 running, 1 done, 2 failed | 2m10s of ~5m planned"


def test_a_host_not_answering_is_counted_apart_in_the_fleet_line():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    hosts = [{"state": "running", "index": 2, "of": 3, "started_epoch": 100, "planned_s": 60},
             {"state": "away", "index": 1, "of": 3, "started_epoch": 100, "planned_s": 60}]
    assert action.fleet_line(hosts, now=130) == \
        "fleetqual: workload 2/3 | 2 hosts: 1 running, 1 not answering, 0 done, 0 failed | 30s of ~1m planned"
    assert action.away_line("lab-2", 40, 290) == \
        "fleetqual: lab-2: not answering for 40s, its job's deadline in 4m50s; polled again until then"


@settings(max_examples=300, deadline=None)
@given(deadline=st.floats(1e9, 2e9), host_ahead=st.floats(-600, 600), margin=st.integers(0, 600),
       from_status=st.booleans())
def test_a_host_away_is_waited_for_until_its_jobs_deadline_in_this_clock(
        deadline, host_ahead, margin, from_status):
    """A host that stops answering is polled again until its job's deadline (the host's clock,
    mapped onto the controller's through the last status' ``now``) plus the wait's margin; from
    the start record when no status was read yet; never without a deadline."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    read_at = 1.5e9
    status = {"deadline_epoch": deadline, "now": read_at + host_ahead} if from_status else None
    record = {"deadline_epoch": deadline + 7.0}
    got = action.away_deadline(status, read_at if from_status else None, record, margin)
    want = deadline - host_ahead + margin if from_status else deadline + 7.0 + margin
    assert abs(got - want) < 1e-3
    assert action.away_deadline(None, None, {"state": "running"}, margin) is None
    assert action.away_deadline(None, None, None, margin) is None


@given(attempt=st.integers(1, 60), interval=st.integers(1, 300), left=st.floats(0, 1e5))
def test_the_polls_of_a_host_away_back_off_within_the_round_and_the_deadline(attempt, interval, left):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    d = action.away_delay(attempt, interval, left)
    assert 1.0 <= d <= max(1.0, min(float(interval), left))
    if attempt > 1:
        assert d >= min(action.away_delay(attempt - 1, interval, left), max(1.0, min(float(interval), left)))


def test_one_caller_claims_a_round(tmp_path):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    got = [action.claim_round(str(tmp_path), "round-7") for attempt in range(5)]
    assert got == [True, False, False, False, False]
    assert action.claim_round(str(tmp_path), "round-8") is True


def test_timeouts_and_deadline_from_the_plan():
    from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary as plan_summary
    plan = [{"time": 4, "warmup": 1, "total_size": 40 << 20},
            {"search": "threads", "search_max": 8, "search_step_time": 2, "total_size": 100 << 20, "prepare": False}]
    timeouts, planned, total, deadline = plan_summary.timing(plan, slack=300, prepare_min_mibps=20)
    # 4 search steps (1, 2, 4, 8) x 2 s; 40 MiB at 20 MiB/s = 2 s of preparation
    assert planned == [5, 8] and timeouts == [5 + 300 + 2, 8 + 300] and total == 13
    assert deadline == 13 + 2 + 300


def test_ansible_doc_renders_the_job_module():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "fleetqual.storage.job"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=120, check=False)
    assert p.returncode == 0 and "deadline_s" in p.stdout and "ERROR" not in p.stderr, p.stderr


def test_precondition_runs_before_the_workload_without_a_second_prepare(iobench_binary, tdir):  # noqa: F811
    """precondition: N writes the prepared working set sequentially N times before the
    workload is measured (SNIA PTS preconditioning); the run then does not prepare again."""
    r = start(iobench_binary, tdir, [wl(1, 1, mode="rndwr", precondition=2), wl(2, 1, mode="rndwr")], deadline_s=300)
    assert not r.get("failed"), r
    final = wait_final(tdir)
    assert final["state"] == "done" and final["error"] is None, final
    first, second = final["results"]
    assert first["precondition"]["passes"] == 2 and first["precondition"]["error"] is None
    assert first["precondition"]["elapsed_s"] > 0
    assert "--prepare" not in first["result"]["argv"]           # prepared by the precondition step
    assert second["precondition"] is None and "--prepare" in second["result"]["argv"]
    assert glob.glob(os.path.join(tdir, "**", "test_file.*"), recursive=True) == []


def test_precondition_argvs_for_files_and_devices():
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as modjob
    files = modjob.precondition_argvs({"binary": "/b/iobench", "dir": "/t/set", "file_num": 2, "total_size": "8M",
                                       "direct": True, "prepare": True}, 3)
    assert files == [["/b/iobench", "prepare", "--dir", "/t/set", "--file-num", "2", "--total-size", "8388608"],
                     ["/b/iobench", "precondition", "--dir", "/t/set", "--file-num", "2", "--total-size", "8388608",
                      "--passes", "3", "--block-size", "131072", "--direct"]]
    dev = modjob.precondition_argvs({"binary": "/b/iobench", "device": "/dev/loop7", "size": 64 << 20,
                                     "prepare": False}, 1)
    assert dev == [["/b/iobench", "precondition", "--device", "/dev/loop7", "--size", str(64 << 20),
                    "--passes", "1", "--block-size", "131072"]]


def test_precondition_passes_count_in_the_timeout_and_deadline():
    from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary as plan_summary
    plan = [{"time": 4, "warmup": 1, "total_size": 40 << 20, "precondition": 2}]
    timeouts, _planned, total, deadline = plan_summary.timing(plan, slack=300, prepare_min_mibps=20)
    # prepare + 2 passes = 3 x 40 MiB at 20 MiB/s = 6 s
    assert timeouts == [5 + 300 + 6] and deadline == total + 6 + 300


def test_next_poll_meets_the_planned_end_and_backs_off_past_it():
    """The wait's schedule (action job.next_poll): the planned end of the current workload when
    it comes before the next round; past it, 1, 2, 4, ... s up to the round; never under 1 s."""
    from hypothesis import given, strategies as st

    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.progress import next_poll
    # a workload that ends in 10 s, rounds of 30 s: poll at its end (+1 s)
    assert next_poll(1000.0, 30, {"workload_started_epoch": 995.0, "workload_planned_s": 15, "now": 1000.0}) == (11.0, 0)
    # past its end: 1, 2, 4, 8, 16, then capped by the round
    late = {"workload_started_epoch": 900.0, "workload_planned_s": 15, "now": 1000.0}
    delays, overdue = [], 0
    for _poll in range(7):
        delay, overdue = next_poll(1000.0, 30, late, overdue)
        delays.append(delay)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0] and overdue == 7
    # the host's clock 100 s ahead: its times are mapped onto the controller's
    ahead = {"workload_started_epoch": 1095.0, "workload_planned_s": 15, "now": 1100.0}
    assert next_poll(1000.0, 30, ahead) == (11.0, 0)

    @given(now=st.floats(0, 1e6), interval=st.integers(1, 300), started=st.floats(0, 1e6),
           planned=st.integers(0, 10000), overdue=st.integers(0, 40))
    def bounded(now, interval, started, planned, overdue):
        status = {"workload_started_epoch": started, "workload_planned_s": planned, "now": now}
        delay, _overdue = next_poll(now, interval, status, overdue)
        round_end = (int(now // interval) + 1) * interval
        assert 1.0 <= delay <= max(1.0, round_end - now) + 1e-6
    bounded()
