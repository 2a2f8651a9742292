"""A job that writes its final status and exits between the status read and the /proc check
is done, not died (job_runner.settled). Found by the fleet bench: with 32 loopback hosts one
host's job, all three workloads measured, was reported "died without a final status": the
raw poll read the status (still "running"), the job then wrote "done" and exited, and the
poll's /proc read found no process.

The moment is made exact: the job's process has already exited, its status file says
"running", and the job's final status is renamed over it (as the job writes it: write, then
rename) at the instant the reader looks at /proc -- for the controller's raw poll
(job_runner.poll_command run by the real /bin/sh, then parse_poll) by a ``cat`` on the
command's PATH that renames before it runs the real one; for the module's job_status by the
same rename inside its /proc read."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as jr

CAT = shutil.which("cat")


def exited_pid():
    """The PID of a process that has run and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def is_zombie(pid):
    line = jr.read_proc_stat(pid)
    return bool(line) and line.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture(params=["reaped", "zombie"])
def ended(request):
    """The PID of an ended job: reaped, or a zombie not yet reaped (a job is an orphan, and
    some inits reap their orphans a second or more after they exit)."""
    if request.param == "reaped":
        yield exited_pid()
        return
    p = subprocess.Popen(["true"])
    for _attempt in range(500):
        if is_zombie(p.pid):
            break
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    assert is_zombie(p.pid)
    try:
        yield p.pid
    finally:
        p.wait()


def doc(pid, state, done):
    return {"run_id": "race", "pid": pid, "pid_start": 1, "state": state, "of": 2, "index": 2, "current": "w2",
            "results": [{"id": "w%d" % (i + 1), "result": {}} for i in range(done)]}


@pytest.fixture
def job(ended):
    """(test directory, pid of an exited process, set(first, final)): the status file holds
    ``first``; ``final``, when given, is renamed over it when the reader reads /proc."""
    work = tempfile.mkdtemp(prefix="fq-race-", dir="/var/tmp")
    directory = jr.job_dir(work)
    os.makedirs(directory)
    status = os.path.join(directory, jr.STATUS)
    final = os.path.join(work, "final.json")

    def put(first, last=None):
        with open(status, "w") as fh:
            json.dump(first, fh)
        if last is not None:
            with open(final, "w") as fh:
                json.dump(last, fh)

    try:
        yield work, ended, put, (status, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def finish_now(paths):
    status, final = paths
    if os.path.exists(final):
        os.replace(final, status)


def polled(work, paths):
    """The raw poll through /bin/sh with a ``cat`` that lets the job finish as /proc is read."""
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    wrapper = os.path.join(bindir, "cat")
    with open(wrapper, "w") as fh:
        fh.write('#!/bin/sh\ncase "$1" in /proc/*/stat) [ -f "%s" ] && mv -f "%s" "%s";; esac\nexec %s "$@"\n'
                 % (paths[1], paths[1], paths[0], CAT))
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    p = subprocess.run(["/bin/sh", "-c", jr.poll_command(work)], capture_output=True, text=True, timeout=30,
                       env=env, check=False)
    assert p.returncode == 0, p.stderr
    return jr.parse_poll(p.stdout)


def job_status(work, paths, monkeypatch):
    """The module's job_status, the job finishing as its /proc read happens."""
    real = jr.read_proc_stat

    def racing(pid):
        finish_now(paths)
        return real(pid)

    monkeypatch.setattr(jr, "read_proc_stat", racing)
    return jr.job_status(work)


def read(reader, work, paths, monkeypatch):
    return polled(work, paths) if reader == "poll" else job_status(work, paths, monkeypatch)


@pytest.mark.parametrize("reader", ["poll", "job_status"])
def test_a_job_that_finished_between_the_reads_is_done_not_died(job, reader, monkeypatch):
    work, pid, put, paths = job
    put(doc(pid, "running", 1), doc(pid, "done", 2))
    status = read(reader, work, paths, monkeypatch)
    assert status["state"] == "done", status
    assert status["done"] == 2 and len(status["results"]) == 2


@pytest.mark.parametrize("reader", ["poll", "job_status"])
def test_a_job_gone_while_its_status_still_says_running_died(job, reader, monkeypatch):
    work, pid, put, paths = job
    put(doc(pid, "running", 1))              # it never wrote a final status
    status = read(reader, work, paths, monkeypatch)
    assert status["state"] == "died", status
    assert status["done"] == 1


@pytest.mark.parametrize("reader", ["poll", "job_status"])
def test_the_second_read_of_another_job_is_not_taken(job, reader, monkeypatch):
    work, pid, put, paths = job
    put(doc(pid, "running", 1), doc(pid + 1, "done", 2))   # another job's status by then
    status = read(reader, work, paths, monkeypatch)
    assert status["state"] == "died" and status["pid"] == pid, status


def test_settled_takes_the_second_read_only_of_the_same_job():
    first = doc(7, "running", 1)
    assert jr.settled(first, doc(7, "done", 2))["state"] == "done"
    assert jr.settled(first, doc(8, "done", 2)) is first
    assert jr.settled(first, None) is first
    assert jr.settled(None, doc(7, "done", 2)) is None


def test_a_job_stopped_that_exits_between_the_reads_is_stopped_not_died(job, monkeypatch):
    """The controller's cleanup stops a live job (SIGTERM, then it waits for the final
    status): the job writes "stopped" and exits right after the wait's status read, so the
    wait finds it gone holding a "running" document. Judged on the read after that finding,
    it stopped (a CI run under load reported it "died")."""
    work, pid, put, paths = job
    put(doc(pid, "running", 1), doc(pid, "stopped", 1))
    checks = {"n": 0}

    def alive(_status):
        checks["n"] += 1
        if checks["n"] == 1:
            return True             # live when the cleanup finds it
        finish_now(paths)           # it writes its final status and exits as it is checked
        return False

    monkeypatch.setattr(jr, "is_alive", alive)
    monkeypatch.setattr(jr.os, "kill", lambda _pid, _sig: None)
    got = jr.stop_job(doc(pid, "running", 1), jr.job_dir(work), grace=5)
    assert got["state"] == "stopped" and jr.summary(got)["state"] == "stopped", got
    # and a job that never wrote one is still said to have died
    put(doc(pid, "running", 1))
    checks["n"] = 0
    got = jr.stop_job(doc(pid, "running", 1), jr.job_dir(work), grace=5)
    assert got["state"] == "running" and jr.summary(got)["state"] == "died", got
