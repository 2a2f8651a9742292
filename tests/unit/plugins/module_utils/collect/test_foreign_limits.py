"""The attribution cgroup never makes the benchmark less limited than the session that
started it (docs/compliance.md, "Limits inherited").

The job makes each workload's block-I/O group a CHILD of the group it runs in; on cgroup v1
(throttling is not hierarchical) it copies the strictest ``blkio.throttle.*_device`` rule of
its group and every ancestor into the child. The slow tests start the workload runner (the
code the detached job runs, ``workload.run_workload`` with ``foreign_io`` on) in a blkio group
of the test's own, limited to N read IOPS on a loop device the test creates, and read the
device's own counters over the measured window: never above N; without the limit, well
above N. Only the test's own child process is moved into the group (it writes its own PID
into ``cgroup.procs`` before it executes Python); the group is removed in every exit path,
its processes moved out first.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import cgroups

import loopdev
import test_module_iobench
import unitpaths

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary

LIMIT = 150          # read IOPS of the session's group
ROOT = unitpaths.ROOT

RUNNER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload
p = json.loads(sys.argv[2])
params = workload.defaults()
params.update(p)
res, failed, msg, _w = workload.run_workload(params)
with open(sys.argv[3], "w") as fh:
    json.dump({"failed": failed, "msg": msg, "result": res}, fh)
"""


# --------------------------------------------------------------------------- pure parts

def test_own_cgroups_reads_the_v1_and_v2_paths():
    text = "9:name=systemd:/\n7:blkio:/db/batch\n4:memory:/x\n0::/user.slice/job.scope\n"
    assert cgroups.own_cgroups(text) == ("/db/batch", "/user.slice/job.scope")
    assert cgroups.own_cgroups("0::/only\n") == (None, "/only")
    assert cgroups.own_cgroups("7:cpu,blkio:/a\n") == ("/a", None)
    assert cgroups.own_cgroups("") == (None, None)


def _tree(tmp_path, rules):
    """A v1-like hierarchy under tmp_path: ``rules`` = [(depth, rule, value)] on /g1/g2/..."""
    depth = max([d for d, _r, _v in rules] or [0])
    rel = "/" + "/".join("g%d" % i for i in range(1, depth + 1)) if depth else "/"
    for path, _name in cgroups.ancestry(str(tmp_path), rel):
        os.makedirs(path, exist_ok=True)
    for d, rule, value in rules:
        name = "/" + "/".join("g%d" % i for i in range(1, d + 1)) if d else "/"
        path = os.path.join(str(tmp_path), name.strip("/")) if d else str(tmp_path)
        f = os.path.join(path, "blkio.throttle." + rule)
        with open(f, "a") as fh:
            fh.write("7:3 %d\n" % value)
    return rel


RULE = st.sampled_from(cgroups.THROTTLE_RULES)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), RULE, st.integers(0, 10 ** 9)), max_size=12))
def test_the_strictest_rule_of_the_group_and_every_ancestor_is_inherited(tmp_path_factory, rules):
    tmp = tmp_path_factory.mktemp("cg")
    # one value per (group, rule): a kernel file holds one line per device
    seen = {}
    for d, rule, value in rules:
        seen[(d, rule)] = value
    rules = [(d, r, v) for (d, r), v in seen.items()]
    rel = _tree(tmp, rules)
    got = {r["rule"]: r for r in cgroups.strictest_rules(str(tmp), rel, {"7:3": "loop3"})}
    for rule in cgroups.THROTTLE_RULES:
        limits = [v for _d, r, v in rules if r == rule and v > 0]     # 0: no limit
        if not limits:
            assert rule not in got
        else:
            assert got[rule]["value"] == min(limits)
            assert got[rule]["device"] == "loop3"
            # it names the group that set it, which is one of those with that value
            assert any(v == min(limits) and ("/" + "/".join("g%d" % i for i in range(1, d + 1)) if d else "/")
                       == got[rule]["from"] for d, r, v in rules if r == rule)
    # another device's rules are never inherited
    assert cgroups.strictest_rules(str(tmp), rel, {"8:0": "sda"}) == []


def test_io_max_of_the_group_and_its_ancestors_is_what_holds_a_v2_child(tmp_path):
    """cgroup v2 nests: the child is held by every ancestor's io.max; the record names the
    strictest of each limit and the group that set it ("max" is no limit)."""
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "db.slice", "job.scope"))
    with open(os.path.join(root, "db.slice", "io.max"), "w") as fh:
        fh.write("7:3 rbps=max wbps=1048576 riops=400 wiops=max\n8:0 riops=10\n")
    with open(os.path.join(root, "db.slice", "job.scope", "io.max"), "w") as fh:
        fh.write("7:3 rbps=max wbps=max riops=900 wiops=250\n")
    got = cgroups.io_max_rules(root, "/db.slice/job.scope", {"7:3": "loop3"})
    assert [(r["rule"], r["value"], r["from"]) for r in got] == [
        ("read_iops_device", 400, "/db.slice"), ("write_bps_device", 1048576, "/db.slice"),
        ("write_iops_device", 250, "/db.slice/job.scope")]


# --------------------------------------------------------------------------- on this machine

def _blkio():
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    if not os.path.isfile(os.path.join(cgroups.BLKIO_V1, "blkio.throttle.io_serviced")):
        pytest.skip("needs the cgroup v1 blkio controller")


def _remove_group(path):
    """Move every process out to the hierarchy's root, then remove the group."""
    for _i in range(100):
        if not os.path.isdir(path):
            return
        for child in os.listdir(path):
            if os.path.isdir(os.path.join(path, child)):
                _remove_group(os.path.join(path, child))
        try:
            with open(os.path.join(path, "cgroup.procs")) as fh:
                pids = fh.read().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                with open(os.path.join(cgroups.BLKIO_V1, "cgroup.procs"), "w") as fh:
                    fh.write(pid)
            except OSError:
                pass
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.1)


@pytest.fixture
def loop():
    _blkio()
    with loopdev.loop_ext4(256, prefix="fq-limits-", where="/dev/shm") as lp:
        d = os.path.join(lp["mnt"], "fq")
        os.mkdir(d, 0o700)
        yield dict(lp, dir=d)


@pytest.fixture
def session_group():
    """A blkio group of the test's own at the root (the 'session' a job could be started in)."""
    _blkio()
    path = os.path.join(cgroups.BLKIO_V1, "fq-test-session-%d" % os.getpid())
    os.mkdir(path)
    try:
        yield path
    finally:
        _remove_group(path)


def _limit(group, dev, value):
    with open("/sys/block/%s/dev" % dev) as fh:
        num = fh.read().strip()
    with open(os.path.join(group, "blkio.throttle.read_iops_device"), "w") as fh:
        fh.write("%s %d" % (num, value))


def _run_in(group, loop, binary, tmp_path):
    """The workload runner, started in ``group`` (its own PID written into cgroup.procs
    before it executes Python), with foreign_io on: its result."""
    p = {"dir": os.path.join(loop["dir"], "ds"), "mode": "rndrd", "threads": 4, "file_num": 2, "total_size": "64M",
         "block_size": "16K", "direct": True, "time": 4, "warmup": 1, "prepare": True, "cleanup": True,
         "binary": binary, "collect": "procfs", "foreign_io": {"sample_s": 0.2, "quiet_util_pct": 100}}
    os.makedirs(p["dir"], exist_ok=True)
    out = str(tmp_path / "result.json")
    procs = os.path.join(group, "cgroup.procs")

    def join():
        fd = os.open(procs, os.O_WRONLY)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)

    proc = subprocess.Popen([sys.executable, "-c", RUNNER, os.path.join(ROOT, "build", "collections"), json.dumps(p), out],
                            preexec_fn=join)
    try:
        proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(out) as fh:
        doc = json.load(fh)
    assert not doc["failed"], doc["msg"]
    return doc["result"]


def _device_read_iops(result, dev):
    """Reads per second of the device over the measured window, from its own counters at
    the window's edges (iobench's devstat)."""
    bench = result["bench"]
    ds = bench["window"]["devstat"][dev]
    secs = bench["window"]["end_epoch"] - bench["window"]["start_epoch"]
    return (ds["end"][0] - ds["start"][0]) / secs


@pytest.mark.slow
def test_a_limited_session_keeps_its_read_iops_limit_with_attribution_on(iobench_binary, loop, session_group, tmp_path):
    _limit(session_group, loop["name"], LIMIT)
    res = _run_in(session_group, loop, iobench_binary, tmp_path)
    f = res["foreign"]
    assert f["source"] == "cgroup-v1", f.get("cgroup_error")
    cg = f["cgroup"]
    assert cg["parent"] == session_group
    assert [(r["rule"], r["device"], r["value"], r["from"], r["applies"]) for r in cg["inherited"]] == [
        ("read_iops_device", loop["name"], LIMIT, "/" + os.path.basename(session_group), "copied")]
    assert f["impact"]["in_cgroup"] is True
    iops = _device_read_iops(res, loop["name"])
    # the device's own counters: never above the session's limit (blk-throttle's slices
    # round, so a few requests of slack)
    assert 0 < iops <= LIMIT * 1.05, iops
    # and the attribution group it ran in was removed
    assert not os.path.exists(cg["path"])
    assert os.listdir(session_group) and not [n for n in os.listdir(session_group) if n.startswith("fleetqual-")]


@pytest.mark.slow
def test_without_the_limit_the_same_run_measures_well_above_it(iobench_binary, loop, session_group, tmp_path):
    res = _run_in(session_group, loop, iobench_binary, tmp_path)
    assert res["foreign"]["source"] == "cgroup-v1"
    assert res["foreign"]["cgroup"]["inherited"] == []
    assert _device_read_iops(res, loop["name"]) > 3 * LIMIT


@pytest.mark.slow
def test_a_group_that_cannot_be_made_leaves_no_group_and_says_why(loop):
    cg = cgroups.Cgroup([loop["name"]], proc_cgroup="7:blkio:/fq-no-such-group-%d\n" % os.getpid())
    err = cg.create()
    # no group anywhere (not at the root either): foreign.Run then attributes by iobench's own counts
    assert err and "fq-no-such-group" in err and cg.path is None and cg.describe() is None
    assert not [n for n in os.listdir(cgroups.BLKIO_V1) if n.startswith("fq-no-such-group")]


@pytest.mark.slow
def test_remove_moves_the_processes_out_first(loop, session_group):
    cg = cgroups.Cgroup([loop["name"]], proc_cgroup="7:blkio:/%s\n" % os.path.basename(session_group))
    assert cg.create() is None
    path = cg.path
    assert os.path.dirname(path) == session_group
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with open(cg.procs, "w") as fh:
            fh.write(str(sleeper.pid))
        cg.remove()
        assert not os.path.exists(path)
        with open(os.path.join(session_group, "cgroup.procs")) as fh:
            assert str(sleeper.pid) in fh.read().split()       # moved to the job's own group
    finally:
        sleeper.kill()
        sleeper.wait()
