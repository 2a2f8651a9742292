"""Fault injection on a real SSH fleet: one playbook run over ten hosts, eight of them broken
in a different way each, while two healthy hosts run the full quick profile.

All faults go into ONE run (module fixture ``chaos``) to keep the suite inside CI's budget
on two cores; every fault has its own host, so they do not interfere, and every test below
checks its host's verdict, that the healthy hosts' results are complete, the report counts
(the ``fleet:`` line and fleet.json summary) and the exit code.

| host | fault | how it is made |
|---|---|---|
| fq11, fq12 | none (group db, quick profile) | - |
| fq15 | unreachable from the start | inventory address with no sshd |
| fq16 | sshd killed mid-run | once its data set files appear and its start is back on the controller, SIGKILL its sshd and the PID tree below it |
| fq17 | test dir on a filesystem too small | 16 MiB loop-mounted ext4, quick profile (~100 MiB) |
| fq18 | filesystem fills up during the run | 128 MiB loop ext4 (-m 0); after prepare the test fills it, |
|      |                                    | freezes that host's iobench (SIGSTOP, its PID only), punches  |
|      |                                    | holes into its data set files, takes the freed blocks,        |
|      |                                    | resumes it: the seqwr run hits ENOSPC                         |
| fq19 | O_DIRECT refused | test dir on tmpfs when this kernel's tmpfs refuses O_DIRECT (< 6.6), else ramfs |
| fq20 | iobench SIGTERMed mid-run | the iobench PID whose argv names fq20's test dir, 1.5 s into the run |
| fq21 | sysstat absent | its sshd puts environment="PATH=<dir without iostat>" on the key (PermitUserEnvironment) |
| fq22 | test dir holds someone's files | files created by the test before the run |
| fq23 | away at the start, back at the gate | its sshd stopped before the run, started again (same port) once the wait polls |

Expected: ``fleet: 3/11 hosts passed (PASS 3, FAIL 0, UNREACHABLE 3, ERROR 5)``.
"""
import glob
import hashlib
import json
import mmap
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

import fleetlib
from fleetrun import run_playbook, tree_snapshot
from proctree import wait_stopped

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HEALTHY = ["fq11", "fq12"]
EXPECTED = {"fq11": "PASS", "fq12": "PASS", "fq21": "PASS",
            "fq15": "UNREACHABLE", "fq16": "UNREACHABLE", "fq23": "UNREACHABLE",
            "fq17": "ERROR", "fq18": "ERROR", "fq19": "ERROR", "fq20": "ERROR", "fq22": "ERROR"}
WAIT = 240          # bound of every watcher, seconds


def short(mode, label, time_s, **kw):
    wl = {"workload": label, "mode": mode, "threads": 1, "file_num": 2, "total_size": "8M",
          "block_size": "16K", "direct": True, "time": time_s, "warmup": 1}
    wl.update(kw)
    return wl


def tmpfs_refuses_odirect(where):
    os.makedirs(where, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", where], check=True)
    try:
        buf = mmap.mmap(-1, 4096)
        try:
            fd = os.open(os.path.join(where, "probe"), os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
        except OSError:
            return True
        os.write(fd, buf)
        os.close(fd)
        return False
    finally:
        subprocess.run(["umount", where], check=True)


class Mounts:
    def __init__(self):
        self.points = []

    def loop_ext4(self, image, where, size_mb):
        with open(image, "wb") as fh:
            fh.truncate(size_mb << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", image], check=True)
        return self._mount(["-o", "loop", image], where)

    def mount(self, fstype, where, options=None):
        return self._mount(["-t", fstype] + (["-o", options] if options else []) + [fstype], where)

    def _mount(self, args, where):
        os.makedirs(where, exist_ok=True)
        subprocess.run(["mount"] + args + [where], check=True)
        self.points.append(where)
        return where

    def close(self):
        for where in reversed(self.points):
            if subprocess.run(["umount", where], check=False).returncode != 0:
                subprocess.run(["umount", "-l", where], check=False)


def find_iobench(test_dir):
    """PIDs of iobench processes whose argv names a path under test_dir (and nothing else)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as fh:
                argv = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv and argv[0].endswith("/iobench") and len(argv) > 1 and argv[1] == "run" \
                and any(a.startswith(test_dir + "/") for a in argv):
            found.append(int(name))
    return found


def data_files(test_dir):
    return sorted(glob.glob(os.path.join(test_dir, "*", "test_file.*")))


def prepared(test_dir, n, size):
    files = data_files(test_dir)
    try:
        return len(files) >= n and all(os.stat(f).st_size >= size for f in files)
    except OSError:
        return False


class Watcher(threading.Thread):
    """Run action() once condition() holds, polling every 20 ms for at most WAIT seconds."""

    def __init__(self, condition, action):
        super().__init__(daemon=True)
        self.condition, self.action = condition, action
        self.done = None
        self.error = None
        self.stop = threading.Event()

    def run(self):
        deadline = time.monotonic() + WAIT
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                if self.condition():
                    self.done = self.action()
                    return
                time.sleep(0.02)
        except Exception as exc:  # noqa: BLE001 - reported by the tests
            self.error = repr(exc)


def fill(path):
    """Fill the filesystem holding path completely (1 MiB, then 4 KiB writes, fsync)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    written = 0
    try:
        for chunk in (1 << 20, 4096):
            data = b"\xa5" * chunk
            while True:
                try:
                    written += os.write(fd, data)
                except OSError:
                    break
        try:
            os.fsync(fd)
        except OSError:
            pass
    finally:
        os.close(fd)
    return written


def sha_mtime(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            full = os.path.join(dirpath, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root)] = (hashlib.sha256(fh.read()).hexdigest(), os.stat(full).st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def chaos(fleet, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("chaos"))
    hostdirs = fleet.default_dirs_root(os.path.join(base, "inventory"))
    mounts = Mounts()
    ctx = {"base": base}
    try:
        # fq21: an sshd whose sessions get a PATH without iostat
        shadow = os.path.join(base, "path-without-sysstat")
        os.makedirs(shadow)
        for name in os.listdir("/usr/bin"):
            if name not in ("iostat", "sar", "sadf", "mpstat", "pidstat", "cifsiostat", "tapestat"):
                os.symlink(os.path.join("/usr/bin", name), os.path.join(shadow, name))
        ctx["shadow"] = shadow
        inst = {n: fleet.host(n) for n in (11, 12, 16, 17, 18, 19, 20, 22, 23)}
        inst[21] = fleet.host(21, key_options='environment="PATH=%s:/usr/sbin"' % shadow)
        dead_addr, dead_port = fleet.dead_address()

        # fq17: a 16 MiB ext4 cannot hold the quick profile
        small = mounts.loop_ext4(os.path.join(base, "small.img"), os.path.join(base, "mnt-small"), 16)
        ctx["small_before"] = tree_snapshot(small)
        # fq18: 128 MiB ext4, filled from outside while the run goes on
        fillmnt = mounts.loop_ext4(os.path.join(base, "fill.img"), os.path.join(base, "mnt-fill"), 128)
        # fq19: a filesystem that refuses O_DIRECT
        ctx["odirect_fs"] = "tmpfs" if tmpfs_refuses_odirect(os.path.join(base, "probe-tmpfs")) else "ramfs"
        nodirect = mounts.mount(ctx["odirect_fs"], os.path.join(base, "mnt-nodirect"),
                                "size=64m" if ctx["odirect_fs"] == "tmpfs" else None)
        # fq22: someone's files in the test directory
        foreign = os.path.join(base, "foreign")
        os.makedirs(os.path.join(foreign, "sub"))
        for rel, data in (("notes.txt", b"do not touch\n"), ("sub/data.bin", os.urandom(70000))):
            with open(os.path.join(foreign, rel), "wb") as fh:
                fh.write(data)
        os.utime(os.path.join(foreign, "notes.txt"), ns=(1_600_000_000_000_000_000,) * 2)
        ctx["foreign"] = foreign
        ctx["foreign_before"] = sha_mtime(foreign)

        tdir = {n: os.path.join(hostdirs, n, "test") for n in EXPECTED}
        tdir.update(fq17=os.path.join(small, "fq"), fq18=os.path.join(fillmnt, "fq"),
                    fq19=os.path.join(nodirect, "fq"), fq22=foreign)
        ctx["test_dir"] = tdir

        def host(name, group="faults", **vars_):
            n = int(name[2:])
            h = {"name": name, "group": group, "vars": dict(vars_)}
            if name == "fq15":
                h.update(addr=dead_addr, port=dead_port)
            else:
                h["inst"] = inst[n]
            if name in ("fq17", "fq18", "fq19", "fq22"):
                h["vars"]["fleetqual_test_dir"] = tdir[name]
            return h

        hosts = [
            host("fq11", group="db"), host("fq12", group="db"),
            host("fq15"),
            # the wait polls a host that stopped answering until its job's deadline and the
            # wait's margin (docs/operations.md, "A host away for a while"): a slack of 15 s
            # puts that deadline 36 s after its start, not the default 5 minutes
            host("fq16", fleetqual_matrix=[short("rndrd", "lost", 20)], fleetqual_workload_timeout_slack=15),
            host("fq17"),
            host("fq18", fleetqual_matrix=[short("seqwr", "fill", 15, total_size="8M")]),
            host("fq19", fleetqual_matrix=[short("rndrd", "nodirect", 2)]),
            # no warmup: the window opens as soon as iobench's setup is done, so the SIGTERM
            # 1.5 s after the process appeared lands in it (after a 1 s warmup, a loaded
            # machine's slow setup once put it in the warmup: an empty window, nothing partial)
            host("fq20", fleetqual_matrix=[short("rndrd", "sigterm", 20, threads=2, warmup=0)]),
            host("fq21", fleetqual_matrix=[short("rndrd", "nosysstat", 2)]),
            host("fq22", fleetqual_matrix=[short("rndrd", "foreign", 2)]),
            host("fq23"),
        ]
        # the healthy hosts' quick profile paced (fleetlib.PACE): their subject is a complete
        # result beside the broken hosts, not their loop devices' speed
        inv = fleet.inventory(os.path.join(base, "inventory"), hosts,
                              group_vars={"all": {"fleetqual_profile": "quick",
                                                  "fleetqual_thresholds": [fleetlib.SHARED_DISK_STALL_RULE]},
                                          "db": {"fleetqual_workload_overrides": fleetlib.PACE}})

        # during-run actions, each bound to its own host
        def kill_fq16():
            return inst[16].kill()

        def polling(name):
            """The wait polls ``name``'s job: the start, one task of the linear strategy, is
            over on every host."""
            try:
                with open(os.path.join(base, "results", "chaos", ".progress", name + ".json")) as fh:
                    return bool(json.load(fh).get("polls"))
            except (OSError, ValueError):
                return False

        def back_fq23():
            inst[23].start(port=inst[23].port)
            return True

        inst[23].kill()           # away when the start runs; back before the gate pings it
        ctx["fq23_addr"] = inst[23].addr

        def sigterm_fq20():
            time.sleep(1.5)
            pids = find_iobench(tdir["fq20"])
            assert len(pids) == 1, pids
            os.kill(pids[0], 15)
            return pids[0]

        def fill_fq18():
            # 1. fill the filesystem: the run still writes fine (its blocks are allocated);
            # 2. freeze only fq18's iobench, punch holes in its files and take the freed
            #    blocks with a second filler, resume it: its next write into a hole gets ENOSPC.
            #    (Without the freeze, a 16K O_DIRECT seqwr re-allocates 8 MiB in ~30 ms and
            #    wins the race against the filler.)
            (pid,) = find_iobench(tdir["fq18"])
            written = fill(os.path.join(fillmnt, "filler"))
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_stopped(pid)      # frozen once every thread is, not at the kill
                for f in data_files(tdir["fq18"]):
                    subprocess.run(["fallocate", "--punch-hole", "--offset", "0", "--length", str(4 << 20), f],
                                   check=True)
                written += fill(os.path.join(fillmnt, "filler2"))
            finally:
                os.kill(pid, signal.SIGCONT)
            return written

        watchers = {
            # mid-run: the job writes its data set AND the controller has its start (the start's
            # module run returned: its progress record is written), so the loss hits the wait
            "fq16": Watcher(lambda: bool(data_files(tdir["fq16"])) and os.path.exists(
                os.path.join(base, "results", "chaos", ".progress", "fq16.json")), kill_fq16),
            "fq20": Watcher(lambda: prepared(tdir["fq20"], 2, 4 << 20) and find_iobench(tdir["fq20"]), sigterm_fq20),
            "fq18": Watcher(lambda: prepared(tdir["fq18"], 2, 4 << 20) and find_iobench(tdir["fq18"]), fill_fq18),
            "fq23": Watcher(lambda: polling("fq11"), back_fq23),
        }
        for w in watchers.values():
            w.start()
        t_run = time.time()
        try:
            run = run_playbook(fleet, inv, base, "chaos", timeout=500)
        finally:
            for w in watchers.values():
                w.stop.set()
                w.join()
        ctx.update(run=run, watchers=watchers)
        ctx["small_after"] = tree_snapshot(small)
        ctx["fill_left"] = sorted(os.listdir(fillmnt))
        ctx["fill_testdir_exists"] = os.path.exists(tdir["fq18"])
        ctx["nodirect_left"] = sorted(os.listdir(nodirect))
        # fq16's measurement job runs on, detached from the lost SSH session, until it ends by
        # itself (its plan, or its deadline): then it has removed its files
        status16 = os.path.join(tdir["fq16"], ".fleetqual-job", "status.json")
        limit = time.monotonic() + WAIT
        while time.monotonic() < limit:
            try:
                with open(status16) as fh:
                    ctx["fq16_job"] = json.load(fh)
            except (OSError, ValueError):
                ctx["fq16_job"] = None
            if ctx["fq16_job"] and ctx["fq16_job"].get("finished_epoch"):
                break
            time.sleep(0.5)
        ctx["fq16_left"] = data_files(tdir["fq16"])
        ctx["fq16_iobench"] = find_iobench(tdir["fq16"])
        # the hosts' /tmp (shared): no AnsiballZ payload of this run's module runs is left behind
        ctx["payloads_left"] = fleetlib.leaked_payloads(t_run)
        ctx["fq20_exists"] = os.path.exists(tdir["fq20"])
        yield ctx
    finally:
        mounts.close()
        shutil.rmtree(os.path.join(hostdirs, "fq16"), ignore_errors=True)


def check_common(ctx):
    """Exit code, report counts and the healthy hosts' complete results."""
    run = ctx["run"]
    assert run.rc != 0, run.out[-3000:]
    assert run.summary() == (3, 11, 3, 0, 3, 5), run.out[-3000:]
    fj = run.fleet()
    assert fj["summary"]["hosts"] == 11 and fj["summary"]["passed"] == 3
    assert fj["summary"]["by_verdict"] == {"PASS": 3, "FAIL": 0, "UNREACHABLE": 3, "ERROR": 5, "INCONCLUSIVE": 0}
    got = {h["host"]: h["verdict"] for h in fj["hosts"]}
    assert got == EXPECTED, got
    for name in HEALTHY:
        rec = run.record(name)
        # PASS implies no planned workload is missing (the judge checks the plan's ids)
        assert rec["verdict"] == "PASS" and len(rec["workloads"]) >= 4, (name, rec["reasons"])
        assert [w["id"] for w in rec["workloads"]] == [w["id"] for w in run.record(HEALTHY[0])["workloads"]]
        assert all(w["metrics"]["iops"] > 0 and w["metrics"]["errors"] == 0 for w in rec["workloads"])
        assert not os.path.exists(ctx["test_dir"][name])
    return run, fj


def host_report(fj, name):
    return next(h for h in fj["hosts"] if h["host"] == name)


def test_exit_code_and_counts(chaos):
    run = check_common(chaos)[0]
    # unreachable hosts make ansible-playbook exit 4 (the verdict gate alone would give 2)
    assert run.rc == 4, run.rc
    assert "fleet: 3/11 hosts passed (PASS 3, FAIL 0, UNREACHABLE 3, ERROR 5)" in run.out


def test_unreachable_from_the_start(chaos):
    run, fj = check_common(chaos)
    h = host_report(fj, "fq15")
    assert h["record_verdict"] is None and not run.has_record("fq15")
    # seen at the start (ignored there so later serial batches still run), then pinged again
    # by the gate play's one task (fleetqual.storage.gate), which makes it count as unreachable
    assert h["play"]["unreachable_task"]["task"].startswith("Gate on the verdict"), h["play"]
    assert h["play"]["counts"]["unreachable"] >= 1
    assert any("unreachable" in r for r in h["reasons"]), h["reasons"]


def test_a_host_away_at_the_start_and_back_at_the_gate_is_unreachable_saying_why(chaos):
    run, fj = check_common(chaos)
    w = chaos["watchers"]["fq23"]
    assert w.error is None and w.done, "the watcher did not start fq23's sshd again: %s" % w.error
    h = host_report(fj, "fq23")
    assert h["record_verdict"] is None and not run.has_record("fq23")
    # the start's unreachable (ignored so that the batch goes on) is why it was not measured,
    # though the gate's ping found it back: nothing counts it unreachable
    assert h["play"]["counts"]["unreachable"] == 0, h["play"]
    # ssh's own words, which depend on when it found nothing listening ("Connection refused",
    # or a broken pipe under pipelining): the same in the report and at the gate
    prefix = "unreachable at task 'Check, deploy, plan, preflight and start the measurement job (one module run)': "
    assert h["reasons"][0].startswith(prefix) and chaos["fq23_addr"] in h["reasons"][0], h["reasons"]
    said = h["reasons"][0][len(prefix):][:100]
    # the gate's failure, as ansible-core's [ERROR] line prints its message (the fatal: line
    # holds it JSON-quoted)
    gate = [ln for ln in run.out.splitlines() if "fq23: UNREACHABLE unreachable at the start: " in ln
            and not ln.startswith("fatal:")]
    assert gate and "fq23: UNREACHABLE unreachable at the start: " + said in gate[-1], (said, gate)
    assert "(it answers now: qualify it again)" in gate[-1], gate
    with open(os.path.join(run.results_dir(), "not-passed.limit")) as fh:
        assert "fq23" in fh.read().split()


def test_sshd_killed_while_workloads_run(chaos):
    run, fj = check_common(chaos)
    w = chaos["watchers"]["fq16"]
    assert w.error is None and w.done, "the watcher did not kill fq16's sshd: %s" % w.error
    h = host_report(fj, "fq16")
    assert h["verdict"] == "UNREACHABLE"
    # polled again until its job's deadline, each round saying so, before it was given up
    assert re.search(r"fleetqual: fq16: not answering for \d+s, its job's deadline in ", run.out), run.out[-3000:]
    # lost while its measurement job ran (the job is detached from the SSH session)
    assert "measurement job" in h["play"]["unreachable_task"]["task"], h["play"]
    # the host was lost mid-run, so the controller could not clean up there: the job did it
    # itself when it ended (the fixture waited for its final status); the other hosts were
    # not disturbed (check_common)
    job = chaos["fq16_job"]
    assert job and job["state"] == "done" and job["finished_epoch"] <= job["deadline_epoch"], job
    assert chaos["fq16_left"] == [] and chaos["fq16_iobench"] == []
    # nor the payload of a module run lost with the connection (docs/privileges.md)
    assert chaos["payloads_left"] == [], chaos["payloads_left"]


def test_test_dir_on_a_filesystem_too_small(chaos):
    run, fj = check_common(chaos)
    rec = run.record("fq17")
    assert rec["verdict"] == "ERROR" and rec["workloads"] == []
    text = " ".join(rec["reasons"])
    assert "not enough space" in text and "needs" in text and "free" in text and "ext4" in text, text
    assert "MiB" in text
    assert chaos["small_after"] == chaos["small_before"], "preflight wrote to the small filesystem"


def test_filesystem_fills_up_during_the_run(chaos):
    run, fj = check_common(chaos)
    w = chaos["watchers"]["fq18"]
    assert w.error is None and w.done, "the filler never ran: %s" % w.error
    rec = run.record("fq18")
    assert rec["verdict"] == "ERROR", rec["reasons"]
    (wl,) = rec["workloads"]
    bench = wl["result"]["bench"]
    assert bench["exit_code"] == 4 and bench["errors"]["by_kind"].get("ENOSPC", 0) >= 1, bench["errors"]
    assert wl["metrics"]["errors"] >= 1
    assert any("ENOSPC" in r or "I/O error" in r for r in rec["reasons"]), rec["reasons"]
    # the test files are gone; only the test's own filler (and lost+found) remain
    assert not chaos["fill_testdir_exists"]
    assert chaos["fill_left"] == ["filler", "filler2", "lost+found"]


def test_odirect_refused_names_the_filesystem(chaos):
    run, fj = check_common(chaos)
    rec = run.record("fq19")
    fs = chaos["odirect_fs"]
    assert rec["verdict"] == "ERROR" and rec["workloads"] == []
    assert rec["device"]["filesystem"] == fs
    assert any(fs in r for r in rec["reasons"]), rec["reasons"]
    assert chaos["nodirect_left"] == []


def test_odirect_refusal_is_the_reason_given(chaos):
    # (ramfs reports no capacity, f_blocks == 0: preflight must not take it for a full disk)
    run = check_common(chaos)[0]
    reasons = " ".join(run.record("fq19")["reasons"])
    assert "not enough space" not in reasons, reasons
    assert "O_DIRECT is refused by the %s filesystem" % chaos["odirect_fs"] in reasons, reasons
    assert "direct: false" in reasons          # and it says what to do


def test_benchmark_killed_with_sigterm(chaos):
    run, fj = check_common(chaos)
    w = chaos["watchers"]["fq20"]
    assert w.error is None and w.done, "SIGTERM was not sent: %s" % w.error
    rec = run.record("fq20")
    assert rec["verdict"] == "ERROR"
    (wl,) = rec["workloads"]
    bench = wl["result"]["bench"]
    assert bench["interrupted"] is True and bench["signal"] == "SIGTERM" and bench["exit_code"] == 5
    assert wl["metrics"]["interrupted"] is True
    assert bench["elapsed_s"] < 15 and bench["total"]["count"] > 0      # partial results kept
    assert any("interrupt" in r for r in rec["reasons"]), rec["reasons"]
    assert not chaos["fq20_exists"], "fq20's test files were not cleaned up"


def test_sysstat_absent_uses_procfs_and_says_so(chaos):
    run, fj = check_common(chaos)
    rec = run.record("fq21")
    assert rec["verdict"] == "PASS", rec["reasons"]
    for wl in rec["workloads"]:
        col = wl["result"]["collector"]
        assert col["source"] == "procfs"
        assert "iostat not found" in col["reason"]
        assert wl["result"]["iostat"]["samples"], "procfs fallback produced no samples"
    # the report names where the device figures come from: the kernel counters iobench read
    # at the window's edges (--devstat) when the binary has them, else the procfs samples
    row = host_report(fj, "fq21")["workloads"][0]
    assert row["collector"] == rec["workloads"][0]["metrics"]["dev_source"]
    assert row["collector"] == ("devstat" if "--devstat" in rec["workloads"][0]["result"]["argv"] else "procfs")
    # the healthy hosts, with iostat on PATH, used sysstat
    assert all(w["result"]["collector"]["source"] == "sysstat" for w in run.record("fq11")["workloads"])


def test_foreign_files_refused_and_untouched(chaos):
    run, fj = check_common(chaos)
    rec = run.record("fq22")
    assert rec["verdict"] == "ERROR" and rec["workloads"] == []
    text = " ".join(rec["reasons"])
    assert "not created by fleetqual.storage" in text and "refusing" in text, text
    assert sha_mtime(chaos["foreign"]) == chaos["foreign_before"]
    assert sorted(os.listdir(chaos["foreign"])) == ["notes.txt", "sub"]
