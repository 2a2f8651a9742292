"""Module fleetqual.storage.iobench, run as Ansible runs it (a JSON args file), against the
real iobench binary built from roles/iobench/files/src, and once through `ansible localhost -m`.

Tests needing the binary skip (with the make output) only when it cannot be built. A few
tests use a tiny stand-in script to produce exit codes the real binary cannot be made to
produce on demand (1: internal error, 4: I/O errors, 0 without JSON); they are marked as such.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import loopdev
import pytest
from proctree import children_of, poll_until
import unitpaths

ROOT = unitpaths.ROOT
COLLECTIONS = os.path.join(ROOT, "build", "collections")
SRC = os.path.join(ROOT, "roles", "iobench", "files", "src")
BINARY = os.path.join(SRC, "iobench")
MODULE = "ansible_collections.fleetqual.storage.plugins.modules.iobench"
VENV_BIN = os.path.dirname(sys.executable)

from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.job.runner import Job  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.modules import iobench as mod  # noqa: E402


# --------------------------------------------------------------------------- helpers

@pytest.fixture(scope="session")
def iobench_binary():
    """The real binary, built with make when missing or older than its sources."""
    if not os.path.isdir(SRC) or not os.path.exists(os.path.join(SRC, "Makefile")):
        pytest.skip("iobench sources not present at %s" % SRC)
    try:
        p = subprocess.run(["make", "-C", SRC, "iobench"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("cannot build iobench: %s" % e)
    if p.returncode != 0 or not os.access(BINARY, os.X_OK):
        pytest.skip("cannot build iobench (make -C %s): %s" % (SRC, p.stdout[-800:]))
    return BINARY


@pytest.fixture
def testdir():
    d = tempfile.mkdtemp(prefix="fq-mod-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def private_tmp(tmp_path):
    """TMPDIR for the module process, to check it removes its private temp dir."""
    d = tmp_path / "moduletmp"
    d.mkdir()
    return str(d)


def run_module(args, check_mode=False, env=None, tmpdir=None, timeout=300):
    """Run the module the way AnsiballZ does in the end: python, one JSON args file."""
    a = dict(args)
    if check_mode:
        a["_ansible_check_mode"] = True
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": a}, f)
    e = dict(os.environ)
    e["PYTHONPATH"] = COLLECTIONS
    if tmpdir:
        e["TMPDIR"] = tmpdir
    if env:
        e.update(env)
    try:
        p = subprocess.run([sys.executable, "-m", MODULE, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, env=e, timeout=timeout, check=False)
    finally:
        os.unlink(path)
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("module printed no JSON (rc %s): %s %s" % (p.returncode, p.stdout, p.stderr))
    res["_module_rc"] = p.returncode
    return res


def warnings_of(r):
    """Warning texts; ansible-core 2.19 modules emit them as WarningSummary dicts."""
    out = []
    for w in r.get("warnings", []):
        if isinstance(w, dict):
            w = (w.get("event") or {}).get("msg") or w.get("msg") or json.dumps(w)
        out.append(w)
    return out


def small(binary, d, **kw):
    a = dict(binary=binary, dir=d, mode="rndrd", file_num=4, total_size="16M", block_size="16K",
             threads=2, direct=True, time=3, warmup=1, seed=42)
    a.update(kw)
    return a


def _path_without(tool, tmp_path):
    """A PATH holding only vmstat (and the usual tools minus `tool`), via symlinks."""
    d = tmp_path / ("path-no-" + tool)
    d.mkdir()
    for t in ("vmstat", "iostat", "dd", "false"):
        w = shutil.which(t)
        if w and t != tool:
            os.symlink(w, str(d / t))
    return str(d)


# --------------------------------------------------------------------------- pure functions

def test_build_argv_full():
    p = dict((k, v.get("default")) for k, v in mod.ARGUMENT_SPEC.items())
    p.update(binary="/opt/b", dir="/d", mode="rndrw", total_size="1G", threads=8, engine="io_uring",
             iodepth=16, direct=True, open_flags=["dsync", "sync", "dsync"], fsync_freq=0, fsync_all=True,
             fsync_end=False, fsync_mode="fdatasync", time=60, requests=1000, warmup=5, seed=7, rw_ratio=2,
             keep_cache=True, prepare=False, cleanup=True)
    errors, sizes = mod.validate(p)
    assert errors == []
    assert mod.build_argv(p, sizes, "/t/r.json") == [
        "/opt/b", "run", "--dir", "/d", "--mode", "rndrw", "--file-num", "128", "--total-size", "1073741824",
        "--block-size", "16384", "--threads", "8", "--engine", "io_uring", "--iodepth", "16", "--direct",
        "--open-flags", "dsync,sync", "--fsync-freq", "0", "--fsync-mode", "fdatasync", "--time", "60",
        "--requests", "1000", "--warmup", "5", "--seed", "7", "--rw-ratio", "2.0", "--fsync-all",
        "--keep-cache", "--cleanup", "--fsync-end=off", "--verify", "--format", "json", "--output", "/t/r.json"]


def test_validate_collects_every_problem():
    p = dict((k, v.get("default")) for k, v in mod.ARGUMENT_SPEC.items())
    p.update(dir="rel/dir", mode="rndrd", total_size="1Q", threads=0, iodepth=4, collect_interval=0,
             rw_ratio=0.0, time=0, direct=True, block_size="1000")
    errors, _sizes = mod.validate(p)
    text = "\n".join(errors)
    for words in ("total_size", "threads must be between 1 and 1024, got 0", "iodepth 4 needs engine io_uring",
                  "collect_interval", "rw_ratio", "time 0", "absolute", "multiple of 512"):
        assert words in text, words


def test_error_line():
    assert workload.error_line("warming up\niobench: error: --dir /x: No such file\n") == "iobench: error: --dir /x: No such file"
    assert workload.error_line("something\nlast words\n\n") == "last words"
    assert workload.error_line("") == ""


# --------------------------------------------------------------------------- module, no binary needed

def test_invalid_parameters_fail_before_running(tmp_path):
    r = run_module(dict(binary="/nonexistent", dir=str(tmp_path), mode="rndrd", total_size="16X", threads=0))
    assert r["failed"] is True
    assert "threads must be between 1 and 1024, got 0" in r["msg"]
    assert "total_size" in r["msg"] and "unknown size suffix" in r["msg"]
    assert "argv" not in r


def test_unknown_mode_is_refused(tmp_path):
    r = run_module(dict(dir=str(tmp_path), mode="randread", total_size="1M"))
    assert r["failed"] and "mode" in r["msg"]


def test_check_mode_returns_argv_and_runs_nothing(tmp_path, private_tmp):
    data = tmp_path / "data"
    data.mkdir()
    r = run_module(dict(binary="/opt/none/iobench", dir=str(data), mode="seqwr", total_size="64M",
                        block_size="4K", open_flags=["dsync"], fsync_end=False), check_mode=True, tmpdir=private_tmp)
    assert r.get("failed") is not True, r
    assert r["changed"] is False
    assert r["argv"][:2] == ["/opt/none/iobench", "run"]
    assert r["argv"][r["argv"].index("--total-size") + 1] == str(64 << 20)
    assert "--open-flags" in r["argv"] and "--fsync-end=off" in r["argv"]
    assert any("not there" in w for w in warnings_of(r))
    assert r["collector"]["devices"] or r["collector"]["reason"]
    assert os.listdir(private_tmp) == [] and os.listdir(str(data)) == []


def test_sizes_as_integers_like_the_plan_passes_them(tmp_path):
    r = run_module(dict(binary="/opt/none/iobench", dir=str(tmp_path), mode="rndrd", total_size=2147483648,
                        block_size=16384), check_mode=True)
    assert r.get("failed") is not True, r
    assert r["argv"][r["argv"].index("--total-size") + 1] == "2147483648"
    assert r["argv"][r["argv"].index("--block-size") + 1] == "16384"
    assert not any("converted" in w for w in warnings_of(r))


def test_missing_binary_fails(tmp_path):
    r = run_module(dict(binary="/nonexistent/iobench", dir=str(tmp_path), mode="rndrd", total_size="1M", file_num=1))
    assert r["failed"] and "/nonexistent/iobench" in r["msg"]


def test_collect_sysstat_without_iostat_fails_before_running(tmp_path):
    r = run_module(dict(binary="/nonexistent", dir=str(tmp_path), mode="rndrd", total_size="1M", file_num=1,
                        collect="sysstat"), env={"PATH": _path_without("iostat", tmp_path)})
    assert r["failed"] and "iostat" in r["msg"] and "sysstat" in r["msg"]


# --------------------------------------------------------------------------- stand-in binary (exit codes 1, 4)

STUB = """#!/bin/sh
# stand-in for iobench: exit code and JSON chosen by the test
out=""
while [ $# -gt 0 ]; do [ "$1" = "--output" ] && out="$2"; shift; done
now=$(date +%s)
if [ -n "$JSON" ]; then
  printf '%s' "$JSON" | sed "s/NOW0/$((now - 2))/; s/NOW1/$now/" > "$out"
fi
[ -n "$ERR" ] && echo "$ERR" >&2
sleep "${SLEEP:-0}"
exit "$CODE"
"""


@pytest.fixture
def stub(tmp_path):
    p = tmp_path / "iobench-stub"
    p.write_text(STUB)
    p.chmod(0o755)
    return str(p)


def test_stub_exit_1_fails_with_error_line(stub, testdir):
    r = run_module(small(stub, testdir), env={"CODE": "1", "ERR": "iobench: error: out of memory allocating histograms"})
    assert r["failed"] is True and r["rc"] == 1
    assert r["msg"] == "iobench: error: out of memory allocating histograms"


@pytest.mark.slow
def test_stub_exit_4_returns_partial_result(stub, testdir, private_tmp):
    doc = json.dumps({"schema_version": 1, "window": {"start_epoch": "NOW0", "end_epoch": "NOW1"},
                      "errors": {"total": 3, "by_kind": {"EIO": 3}}, "exit_code": 4}).replace('"NOW0"', "NOW0").replace('"NOW1"', "NOW1")
    r = run_module(small(stub, testdir), tmpdir=private_tmp,
                   env={"CODE": "4", "JSON": doc, "SLEEP": "3", "ERR": "iobench: error: 3 I/O errors (EIO)"})
    assert r["failed"] is False, r   # explicit, or Ansible would fail it for rc 4
    assert r["rc"] == 4 and r["changed"] is True
    assert r["bench"]["errors"]["total"] == 3
    assert any("I/O errors" in w for w in warnings_of(r))
    assert os.listdir(private_tmp) == []


def test_stub_exit_0_with_errors_in_json_warns(stub, testdir):
    doc = '{"schema_version": 1, "window": {"start_epoch": 1, "end_epoch": 2}, "errors": {"total": 2}, "exit_code": 4}'
    r = run_module(small(stub, testdir, collect="none"), env={"CODE": "0", "JSON": doc})
    assert r.get("failed") is not True and r["rc"] == 0
    assert any("exited 0 but its JSON reports errors 2" in w for w in warnings_of(r))


def test_stub_exit_0_without_json_fails(stub, testdir):
    r = run_module(small(stub, testdir), env={"CODE": "0"})
    assert r["failed"] is True and "wrote no JSON" in r["msg"]


def test_stub_exit_0_with_broken_json_fails(stub, testdir):
    r = run_module(small(stub, testdir), env={"CODE": "0", "JSON": '{"schema_version": 1, "win'})
    assert r["failed"] is True and "unparsable JSON" in r["msg"]


# --------------------------------------------------------------------------- the real binary

def _assert_in_window(r):
    w = r["bench"]["window"]
    iv = r["collector"]["interval_s"]
    for s in r["iostat"]["samples"] + r["vmstat"]["samples"]:
        assert w["start_epoch"] <= s["epoch"] - iv / 2.0 <= w["end_epoch"]


@pytest.fixture
def own_fs():
    """A directory on an ext4 of its own (a loop device no other work reads): the device's
    counters are the benchmark's alone, whatever else runs on this machine."""
    why = loopdev.missing_tools()
    if why:
        pytest.skip(why)
    with loopdev.loop_ext4(160, prefix="fq-mod-own-") as loop:
        d = os.path.join(loop["mnt"], "bench")
        os.mkdir(d)
        yield d


@pytest.mark.slow
def test_real_run_sysstat(iobench_binary, own_fs, private_tmp):
    if shutil.which("iostat") is None:
        pytest.skip("sysstat not installed")
    testdir = own_fs
    r = run_module(small(iobench_binary, testdir, time=4), tmpdir=private_tmp)
    assert r.get("failed") is not True, r.get("msg")
    assert r["rc"] == 0 and r["changed"] is True and r["timed_out"] is False
    b = r["bench"]
    assert b["schema_version"] == 1 and b["exit_code"] == 0 and b["interrupted"] is False
    assert b["config"]["mode"] == "rndrd" and b["config"]["block_size"] == 16384
    c = r["collector"]
    assert c["source"] == "sysstat" and c["errors"] == []
    assert c["devices"] and c["chain"]
    _assert_in_window(r)
    # how many of iostat's 1 s reports fall inside the 4 s window depends on when this machine
    # let iostat run (a starved stream once ran none for 6 s): none only with the warning that
    # says so. vmstat the same (the record keeps what there is)
    io = r["iostat"]["samples"]
    assert io or any(x.startswith(workload.NO_IOSTAT_SAMPLE) for x in r.get("warnings", [])), r
    if io:
        avg = r["iostat"]["avg"]
        for k in ("r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "aqu-sz", "%util", "rareq-sz", "wareq-sz"):
            assert k in avg
        # O_DIRECT random reads of 16 KiB: the device's reads are of the block size (a ratio
        # within each report: it holds however late a report came)
        assert avg["r/s"] > 0 and 15.0 <= avg["rareq-sz"] <= 17.0, avg
    if r["vmstat"]["samples"]:
        assert set(r["vmstat"]["avg"]) >= set(["r", "b", "us", "sy", "id", "wa", "bi", "bo", "si", "so"])
    # the device served every read (no page cache): its own counters over the measured window
    # (bench.window.devstat, read at the window's edges) count the benchmark's reads, give or
    # take the requests in flight at each edge (the loop device is read by nobody else: its
    # counters are the benchmark's alone). Exact at any load, where iostat's 1 s reports around
    # a 4 s window are not: under load its average once read 5,376 r/s for iobench's 3,171
    ds = b["window"]["devstat"]
    assert sorted(ds) == sorted(c["devices"]), (ds, c["devices"])
    dev_reads = sum(d["end"][0] - d["start"][0] for d in ds.values())
    bench_reads = b["ops"]["read"]["count"]
    slack = 2 * b["config"]["threads"] * len(ds)
    assert bench_reads > 0 and bench_reads - slack <= dev_reads <= bench_reads + slack + 8, (dev_reads, bench_reads)
    assert os.listdir(private_tmp) == []                       # private temp dir removed
    assert [f for f in os.listdir(testdir) if not f.startswith(".")] == []   # cleanup: true


@pytest.mark.slow
def test_real_run_procfs_seqwr(iobench_binary, testdir):
    r = run_module(small(iobench_binary, testdir, mode="seqwr", time=4, fsync_end=False, collect="procfs"))
    assert r.get("failed") is not True, r.get("msg")
    assert r["collector"]["source"] == "procfs" and "procfs" in r["collector"]["reason"]
    assert r["collector"]["commands"] == []
    assert len(r["iostat"]["samples"]) >= 3 and len(r["vmstat"]["samples"]) >= 3
    _assert_in_window(r)
    # direct sequential writes reach the device: it wrote at least what the benchmark wrote
    # (no upper bound: other work on the same disk adds to the device's count)
    dev_kbs = r["iostat"]["avg"]["wkB/s"]
    bench_kbs = r["bench"]["ops"]["write"]["mib_per_sec"] * 1024
    assert dev_kbs >= 0.7 * bench_kbs, (dev_kbs, bench_kbs)


@pytest.mark.slow
def test_real_run_auto_falls_back_to_procfs(iobench_binary, testdir, tmp_path):
    r = run_module(small(iobench_binary, testdir, time=2, warmup=0), env={"PATH": _path_without("iostat", tmp_path)})
    assert r.get("failed") is not True, r.get("msg")
    assert r["collector"]["source"] == "procfs"
    assert "iostat not found" in r["collector"]["reason"]
    assert r["iostat"]["samples"] and r["vmstat"]["samples"]


def test_real_exit_3_missing_dir(iobench_binary, testdir):
    r = run_module(small(iobench_binary, os.path.join(testdir, "missing")))
    assert r["failed"] is True and r["rc"] == 3
    assert r["msg"].startswith("iobench: error:"), r["msg"]
    assert r["iostat"]["samples"] == []


def test_real_exit_2_usage_error(iobench_binary, testdir):
    # A usage error that reaches the binary: the module's own validation (which knows the
    # binary's rules, iobench_options.rule_errors) is passed by preparing a valid call, then
    # asking for 64 threads over a 4-block sequential working set.
    p = workload.defaults()
    p.update(small(iobench_binary, testdir, mode="seqrd", file_num=1, total_size="64K", threads=1))
    errors, sizes, info, source, tools = workload.prepare(p)
    assert not errors
    p["threads"] = 64
    res, failed, msg, _warnings = workload.run_workload(p, sizes=sizes, collector_info=info, source=source,
                                                        tools=tools)
    assert failed is True and res["rc"] == 2
    assert msg.startswith("iobench: error:") and "--threads" in msg


@pytest.mark.slow
def test_real_timeout_sigterm_returns_partial(iobench_binary, testdir, private_tmp):
    t0 = time.time()
    r = run_module(small(iobench_binary, testdir, time=60, warmup=0, timeout=3), tmpdir=private_tmp)
    took = time.time() - t0
    assert r["failed"] is False, r.get("msg")
    assert r["timed_out"] is True and r["rc"] == 5
    assert r["bench"]["interrupted"] is True
    assert any("interrupted" in w for w in warnings_of(r))
    assert took < 20
    assert os.listdir(private_tmp) == []
    time.sleep(0.2)
    out = subprocess.run(["pgrep", "-f", testdir], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    assert out.strip() == "", "benchmark left running: %s" % out


@pytest.mark.slow
@pytest.mark.parametrize("reason", ["deadline", "stopped by the operator (alice, disk swap)"])
def test_a_job_stop_is_said_as_the_deadline_or_as_who_stopped_it(iobench_binary, testdir, reason):
    """The job's stop event set mid-run: by its deadline, a timeout of the run (``timed_out``);
    by the operator, not a timeout: ``stopped_by`` names who, the partial result is interrupted."""
    import threading
    p = workload.defaults()
    p.update(small(iobench_binary, testdir, time=60, warmup=0, timeout=120))
    errors, sizes, info, source, tools = workload.prepare(p)
    assert not errors, errors
    # the job's own reason, as its deadline timer or its signal handler set it
    job = Job({"path": testdir})
    job.reason = reason
    stop = threading.Event()
    timer = threading.Timer(1.5, stop.set)
    timer.start()
    try:
        res, failed, _msg, warnings = workload.run_workload(p, stop=stop, sizes=sizes, collector_info=info,
                                                            source=source, tools=tools, stopped_by=job.stopped_by)
    finally:
        timer.cancel()
    assert failed is False and res["bench"]["interrupted"] is True and res["rc"] == 5, res.get("stderr")
    said = " ".join(warnings)
    if reason == "deadline":
        assert res["timed_out"] is True and "stopped_by" not in res
        assert "when the job's deadline passed" in said, said
    else:
        assert res["timed_out"] is False and res["stopped_by"] == reason
        assert "interrupted (%s)" % reason in said, said


@pytest.mark.slow
def test_real_module_killed_stops_benchmark_and_collectors(iobench_binary, testdir, private_tmp, tmp_path):
    """SIGTERM to the module process (a task timeout): no iobench/iostat/vmstat is left behind."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": small(iobench_binary, testdir, time=60, warmup=0)}))
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, TMPDIR=private_tmp)
    p = subprocess.Popen([sys.executable, "-m", MODULE, str(args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, env=env)
    try:
        # until the module has started all three (bounded): a fixed 2.5 s is a premise a loaded
        # machine need not keep
        poll_until(lambda: len(children_of(p.pid)) >= 3, 60, p, every=0.1)
        children = sorted(children_of(p.pid))
        assert len(children) == 3, children      # iobench, iostat, vmstat
        p.terminate()
        out, err = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = json.loads(out)
    assert r["failed"] is True and "stopped by signal 15" in r["msg"]
    for pid in children:
        with pytest.raises(OSError):
            os.kill(int(pid), 0)
    assert os.listdir(private_tmp) == []


@pytest.mark.slow
def test_real_run_on_tmpfs_has_no_device(iobench_binary, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting tmpfs needs root")
    mnt = str(tmp_path / "tmpfs")
    os.mkdir(mnt)
    if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", mnt]) != 0:
        pytest.skip("cannot mount tmpfs")
    try:
        r = run_module(small(iobench_binary, mnt, direct=False, time=2, warmup=0))
        assert r.get("failed") is not True, r.get("msg")
        c = r["collector"]
        assert c["devices"] == [] and c["fstype"] == "tmpfs"
        assert "without a block device" in c["reason"]
        assert r["iostat"]["samples"] == [] and r["iostat"]["avg"] == {}
        assert r["vmstat"]["samples"]
    finally:
        subprocess.call(["umount", mnt])


def ansible_module(args):
    """`ansible localhost -m fleetqual.storage.iobench -a ARGS` -> (process, status word, result).
    The default callback prints "localhost | CHANGED => {json}"."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    p = subprocess.run([os.path.join(VENV_BIN, "ansible"), "localhost", "-m", "fleetqual.storage.iobench", "-a", args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=120, check=False)
    head, _sep, body = p.stdout.partition(" => ")
    return p, head.strip().rsplit(" ", 1)[-1], json.loads(body) if body else None


@pytest.mark.slow
def test_through_ansible_cli(iobench_binary, testdir):
    """`ansible localhost -m fleetqual.storage.iobench` (AnsiballZ, collection loader)."""
    p, status, res = ansible_module(
        "binary=%s dir=%s mode=rndwr file_num=2 total_size=8M block_size=4K direct=true time=2 warmup=0"
        % (iobench_binary, testdir))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert status == "CHANGED", p.stdout[:500]
    assert res["rc"] == 0 and res["changed"] is True
    assert res["bench"]["config"]["mode"] == "rndwr"
    assert res["vmstat"]["samples"]


@pytest.mark.slow
def test_interrupted_run_is_kept_not_failed_through_ansible(iobench_binary, testdir):
    """Exit 5 (interrupted, here by the module's timeout) through the real executor: the
    partial result must come back as data, not as an 'Unknown error' failure."""
    p, status, res = ansible_module(
        "binary=%s dir=%s mode=rndrd file_num=2 total_size=8M block_size=4K time=60 warmup=0 timeout=2"
        % (iobench_binary, testdir))
    assert p.returncode == 0 and status == "CHANGED", p.stdout[:800] + p.stderr[-800:]
    assert res["rc"] == 5 and res["bench"]["interrupted"] is True and res["timed_out"] is True


def test_ansible_doc_renders():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    p = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "module", "fleetqual.storage.iobench"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert "collect_interval" in p.stdout and "RETURN VALUES" in p.stdout
    assert "ERROR" not in p.stderr and "WARNING" not in p.stderr, p.stderr


# --------------------------------------------------------------------------- search and dbpattern

def _params(**kw):
    p = dict((k, v.get("default")) for k, v in mod.ARGUMENT_SPEC.items())
    p.update(binary="/opt/b", dir="/d", total_size="1G")
    p.update(kw)
    return p


def test_build_argv_search_threads_omits_the_knob():
    p = _params(mode="rndrd", direct=True, search="threads", search_bound_ms=20, search_max=32,
                search_step_time=3, search_percentile="p99.9", warmup=2)
    errors, sizes = mod.validate(p)
    assert errors == []
    argv = mod.build_argv(p, sizes, "/t/r.json")
    assert "--threads" not in argv and "--time" not in argv
    assert argv[argv.index("--iodepth") + 1] == "1"
    i = argv.index("--search")
    assert argv[i:i + 10] == ["--search", "threads", "--search-bound-ms", "20.0", "--search-max", "32",
                              "--search-step-time", "3", "--search-percentile", "p99.9"]


def test_build_argv_search_iodepth():
    p = _params(mode="rndrw", engine="io_uring", threads=4, search="iodepth")
    errors, sizes = mod.validate(p)
    assert errors == []
    argv = mod.build_argv(p, sizes, "/t/r.json")
    assert "--iodepth" not in argv and argv[argv.index("--threads") + 1] == "4"
    assert argv[argv.index("--search") + 1] == "iodepth" and "--search-max" not in argv


def test_build_argv_dbpattern():
    p = _params(mode="dbpattern", threads=16, direct=True, time=60, db_reads_per_txn=8, db_log_block="8K",
                db_log_size="128M", db_flushers=2, db_flush_rate=500, db_group_commit_max=4)
    errors, sizes = mod.validate(p)
    assert errors == []
    argv = mod.build_argv(p, sizes, "/t/r.json")
    i = argv.index("--db-reads-per-txn")
    assert argv[i:i + 12] == ["--db-reads-per-txn", "8", "--db-log-block", "8192", "--db-log-size", str(128 << 20),
                              "--db-flushers", "2", "--db-flush-rate", "500.0", "--db-group-commit-max", "4"]
    assert argv[argv.index("--threads") + 1] == "16" and argv[argv.index("--mode") + 1] == "dbpattern"


def test_validate_search_and_db_problems():
    text = "\n".join(mod.validate(_params(mode="seqrd", search="iodepth", threads=1, time=10, requests=5,
                                          search_bound_ms=0, search_max=5000, search_step_time=0))[0])
    for words in ("search needs mode rndrd", "search iodepth needs engine io_uring", "time cannot be combined",
                  "requests cannot be combined", "search_bound_ms must be greater than 0", "search_max must be between",
                  "search_step_time"):
        assert words in text, words
    text = "\n".join(mod.validate(_params(mode="rndrd", search="threads", threads=8))[0])
    assert "threads 8 cannot be combined with search threads" in text
    text = "\n".join(mod.validate(_params(mode="rndrd", search_max=8, db_flushers=2))[0])
    assert "search_max need search" in text and "db_flushers need mode dbpattern" in text
    text = "\n".join(mod.validate(_params(mode="dbpattern", engine="io_uring", requests=10, db_log_block="1000",
                                          db_log_size="1K", db_reads_per_txn=0, db_flushers=65, db_flush_rate=-1,
                                          db_group_commit_max=-2))[0])
    for words in ("engine sync only", "requests cannot be combined with mode dbpattern", "db_log_block must be",
                  "db_log_size must be", "db_reads_per_txn", "db_flushers must be", "db_flush_rate", "db_group_commit_max"):
        assert words in text, words
    text = "\n".join(mod.validate(_params(mode="dbpattern", db_log_block="32K"))[0])
    assert "db_log_block 32K must not be larger than block_size 16K" in text


def test_real_run_search(iobench_binary, testdir, private_tmp):
    r = run_module(dict(binary=iobench_binary, dir=testdir, mode="rndrd", file_num=4, total_size="16M", direct=True,
                        search="threads", search_max=2, search_step_time=1, search_bound_ms=100000.0, collect="procfs",
                        seed=5), tmpdir=private_tmp)
    assert r.get("failed") is not True, r.get("msg")
    assert r["rc"] == 0 and "--threads" not in r["argv"]
    s = r["bench"]["search"]
    assert s["knob"] == "threads" and s["bound_ms"] == 100000.0
    assert [st["threads"] for st in s["steps"]] == [1, 2] or s["stopped"] == "no_gain"
    assert s["stopped"] in ("max_reached", "no_gain") and s["best"] is not None
    assert r["bench"]["threads"]["count"] == s["best"]["threads"]
    assert r["vmstat"]["samples"]            # samples of the reported (best) step's window
    _assert_in_window(r)
    assert [f for f in os.listdir(testdir) if not f.startswith(".")] == []
    assert os.listdir(private_tmp) == []


def test_real_run_dbpattern(iobench_binary, testdir, private_tmp):
    r = run_module(dict(binary=iobench_binary, dir=testdir, mode="dbpattern", file_num=4, total_size="16M",
                        direct=True, threads=4, time=2, db_log_size="4M", db_flush_rate=100, collect="procfs"),
                   tmpdir=private_tmp)
    assert r.get("failed") is not True, r.get("msg")
    assert r["rc"] == 0
    db = r["bench"]["db"]
    assert db["config"]["readers"] == 4 and db["config"]["log_block_size"] == 4096
    assert db["commits"]["count"] > 0 and db["commits"]["txn_per_commit"] >= 1
    assert db["page_reads"]["count"] == r["bench"]["ops"]["read"]["count"] > 0
    # cleanup: true removed the test files and the log
    assert os.listdir(testdir) == []
    assert os.listdir(private_tmp) == []


def test_db_log_block_larger_than_page_fails_before_running(iobench_binary, testdir):
    r = run_module(small(iobench_binary, testdir, mode="dbpattern", block_size="4K", db_log_block="8K"))
    assert r["failed"] is True and "argv" not in r
    assert "db_log_block 8K must not be larger than block_size 4K" in r["msg"]
    assert os.listdir(testdir) == []


# --------------------------------------------------------------------------- raw device target

def _device_params(**kw):
    p = _params(dir=None, total_size=None, file_num=None, device="/dev/loop7", mode="rndrd")
    p.update(kw)
    return p


def test_build_argv_device_passes_device_and_size_not_the_file_options():
    p = _device_params(size="64M", file_num=128, total_size="1G")   # a module call leaves file_num at 128
    errors, sizes = mod.validate(p)
    assert errors == [] and sizes["size"] == 64 << 20
    argv = mod.build_argv(p, sizes, "/t/r.json")
    assert argv[argv.index("--device") + 1] == "/dev/loop7" and argv[argv.index("--size") + 1] == str(64 << 20)
    for flag in ("--dir", "--total-size", "--file-num"):
        assert flag not in argv, flag
    for size in (0, None):                   # 0 / unset: the whole device, the binary's default
        p = _device_params(size=size)
        errors, sizes = mod.validate(p)
        assert errors == []
        argv = mod.build_argv(p, sizes, "/t/r.json")
        assert "--size" not in argv and argv[argv.index("--device") + 1] == "/dev/loop7"
    # a directory workload passes no device option
    errors, sizes = mod.validate(_params(mode="rndrd"))
    argv = mod.build_argv(_params(mode="rndrd"), sizes, "/t/r.json")
    assert errors == [] and "--device" not in argv and "--size" not in argv and "--total-size" in argv


def test_validate_device_target_problems():
    def errs(**kw):
        return "\n".join(mod.validate(_device_params(**kw))[0])
    assert "exactly one of dir and device must be set, got dir and device" in errs(dir="/d")
    assert "exactly one of dir and device must be set, got neither" in errs(device=None)
    assert "device must be an absolute path, got 'loop7'" in errs(device="loop7")
    assert "size 1000 is not a multiple of 512, which a device target needs (closest: 512)" in errs(size=1000)
    assert "mode dbpattern needs a directory" in errs(mode="dbpattern")
    assert "size" in errs(size="12Q")
    # the file checks do not apply to a device (no files): file_num and total_size unset is fine
    assert mod.validate(_device_params())[0] == []
    # and a directory workload still needs total_size
    assert "total_size is required with dir" in "\n".join(mod.validate(_params(mode="rndrd", total_size=None))[0])


@pytest.fixture
def blank_loop(tmp_path):
    """A 64 MiB all-zero file on a loop device: (device, backing file); detached in the end."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup (a loop device)")
    img = str(tmp_path / "raw.img")
    with open(img, "wb") as fh:
        fh.truncate(64 << 20)
    with loopdev.attached(img) as dev:
        yield dev, img


def test_real_run_on_a_raw_loop_device(iobench_binary, blank_loop, private_tmp):
    dev, img = blank_loop
    r = run_module(dict(binary=iobench_binary, device=dev, size="16M", mode="rndwr", block_size="4K", threads=1,
                        time=2, warmup=0, seed=3, collect="procfs"), tmpdir=private_tmp)
    assert r.get("failed") is not True, r.get("msg")
    argv = r["argv"]
    assert argv[argv.index("--device") + 1] == dev and argv[argv.index("--size") + 1] == str(16 << 20)
    assert "--dir" not in argv and "--total-size" not in argv and "--file-num" not in argv
    assert r["bench"]["ops"]["write"]["count"] > 0
    # the collectors and --devstat watch the loop device itself, not devtmpfs
    name = os.path.basename(dev)
    assert r["collector"]["devices"] == [name], r["collector"]
    assert argv[argv.index("--devstat") + 1] == name
    # cleanup (the default) left the blank device blank: no signature, not one byte written
    with open(img, "rb") as fh:   # the loop driver writes through the backing file's page cache
        assert not fh.read().strip(b"\0"), "bytes left on the device by the run"
