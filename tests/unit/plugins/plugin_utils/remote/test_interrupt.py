"""plugins/plugin_utils/remote/interrupt.py: once the measuring play runs, the first SIGINT or
SIGTERM leaves the run's interrupt file (which every wait and start reads) and lets the run go
on to collect and report; a second signal, or one outside the measuring play, goes to the
handler it wrapped; the file lives in a private directory named by the environment."""
import os
import signal
import subprocess
import tempfile

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import interrupt
from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.job_wait import JobAction, not_started


@pytest.fixture
def handled():
    """SIGUSR1's handler recording the signals handed to it, restored afterwards."""
    got = []
    previous = signal.getsignal(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    try:
        yield got
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _wrapping(stop):
    stop.wrapped[signal.SIGUSR1] = signal.getsignal(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, stop._on_signal)


def test_no_file_no_interrupt(tmp_path):
    assert interrupt.interrupted({}) is None
    assert interrupt.interrupted({interrupt.INTERRUPT_ENV: str(tmp_path / "none")}) is None


def test_the_first_signal_in_the_measuring_play_stops_the_jobs_and_the_second_ends_the_run(handled, capfd):
    env = {}
    stop = interrupt.SignalStop(env)
    stop.install()
    try:
        _wrapping(stop)
        path = env[interrupt.INTERRUPT_ENV]
        assert os.path.dirname(path) == stop.directory and os.stat(stop.directory).st_mode & 0o077 == 0
        stop.started("h1", "r1")
        stop.started("h2", "r1")
        stop.started("h3", "r1")
        stop.ended("h3")                    # collected: not named
        os.kill(os.getpid(), signal.SIGUSR1)
        # not armed (outside the measuring play): Ansible's handling, no interrupt file
        assert handled == [signal.SIGUSR1] and interrupt.interrupted(env) is None
        handled.clear()
        stop.armed = True
        os.kill(os.getpid(), signal.SIGUSR1)
        assert handled == []                                              # the run goes on
        assert interrupt.interrupted(env) == "ansible-playbook interrupted by SIGUSR1"
        err = capfd.readouterr().err
        assert "stopping the measurement jobs of 2 host(s) (h1, h2)" in err, err
        os.kill(os.getpid(), signal.SIGUSR1)
        assert handled == [signal.SIGUSR1]                               # the second ends it
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop.wrapped[sig])
        os.remove(path) if os.path.exists(path) else None
        os.rmdir(stop.directory)


def test_an_unarmed_handler_hands_every_signal_on(handled):
    stop = interrupt.SignalStop({})
    stop.directory = "/nonexistent-fleetqual"
    _wrapping(stop)
    os.kill(os.getpid(), signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGUSR1)
    assert handled == [signal.SIGUSR1, signal.SIGUSR1] and stop.reason is None


def test_a_host_not_started_says_who_stopped_the_run():
    res = not_started("ansible-playbook interrupted by SIGTERM")
    assert res["failed"] and "stopped by the operator (ansible-playbook interrupted by SIGTERM)" in res["msg"]
    assert "not started" in res["msg"]


class _Waiting(JobAction):
    """The wait of one host without Ansible around it: its polls answer from ``states``, the
    stop it sends is recorded (the module's ``state=stopped``)."""

    def __init__(self, states):  # pylint: disable=super-init-not-called
        self.states, self.stops, self.slept = list(states), [], 0

    def _poll(self, path, task_vars):
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return {"status": {"state": state, "run_id": "r7", "pid": 42, "index": 2, "of": 3, "current": "w1",
                           "results": [], "deadline_epoch": 4e9}}

    def _execute_module(self, module_name=None, module_args=None, task_vars=None, **_kw):
        self.stops.append((module_name, module_args))
        self.states = ["stopped"]
        return {"changed": True, "stopped": True}

    def _sleep(self, delay, controller):
        self.slept += 1


def test_an_interrupted_wait_stops_its_hosts_job_once_and_collects_it(tmp_path, monkeypatch):
    marker = tmp_path / "interrupted"
    monkeypatch.setenv(interrupt.INTERRUPT_ENV, str(marker))
    quiet = _Waiting(["running", "running", "done"])
    quiet._wait({"path": "/srv/t"}, "h1", None, {})
    assert quiet.stops == [] and quiet.slept == 2          # not interrupted: polled to the end
    marker.write_text("ansible-playbook interrupted by SIGTERM\n")
    waiting = _Waiting(["running"])
    out = waiting._wait({"path": "/srv/t", "workloads": [{"id": "w0"}, {"id": "w1"}, {"id": "w2"}]}, "h1", None, {})
    assert waiting.stops == [("fleetqual.storage.job", {
        "path": "/srv/t", "state": "stopped", "grace": interrupt.STOP_GRACE_S, "run_id": "r7",
        "stopped_by": "ansible-playbook interrupted by SIGTERM"})]
    assert waiting.slept == 0 and out["error"]["task"] == "Workload 2/3: w1", out


class _Play:
    hosts = "all"

    def __init__(self, role=None):
        self.vars = {"_fleetqual_report_play": role} if role else {}

    def get_variable_manager(self):
        raise RuntimeError("no inventory in this test")


class _Task:
    def __init__(self, action):
        self.action = action


@pytest.mark.parametrize("role,actions,armed", [
    (None, ["ansible.builtin.debug", "fleetqual.storage.iobench_build"], False),   # nothing on a host yet
    (None, ["ansible.builtin.debug", "fleetqual.storage.qualify_host"], True),
    (None, ["fleetqual.storage.lockstep"], True),
    ("stop", ["fleetqual.storage.job"], False),           # the stop playbook measures nothing
    ("gate", ["fleetqual.storage.qualify_host"], False),
    (None, ["community.example.job"], False),             # another collection's module of that name
])
def test_the_first_job_task_of_the_measuring_play_arms_the_stop(role, actions, armed):
    from ansible_collections.fleetqual.storage.plugins.callback.qualify_report import CallbackModule
    cb = CallbackModule()
    cb._signal_stop = interrupt.SignalStop({})
    cb._signal_stop.armed = True                           # a previous play's
    cb.v2_playbook_on_play_start(_Play(role))
    assert cb._signal_stop.armed is False
    for action in actions:
        cb.v2_playbook_on_task_start(_Task(action), False)
    assert cb._signal_stop.armed is armed


class _Result:
    def __init__(self, action, args, result, host="fq1"):
        self.task = _Task(action)
        self.task.args = args
        self.result = result
        self._host = _Host(host)


class _Host:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


@pytest.mark.parametrize("action,followed", [
    ("fleetqual.storage.qualify_host", True), ("qualify_host", True),
    ("community.example.qualify_host", False),      # another collection's module of that name
    ("fleetqual.storage.lockstep", False),          # hands over a job, starts none
])
def test_the_jobs_a_run_started_are_followed_from_its_own_start_task_only(action, followed):
    from ansible_collections.fleetqual.storage.plugins.callback.qualify_report import CallbackModule
    cb = CallbackModule()
    cb._signal_stop = interrupt.SignalStop({})
    cb._job_event(_Result(action, {"state": "started"}, {"status": {"pid": 4242, "run_id": "r1"}}), True)
    assert cb._signal_stop.running == ({"fq1": "r1"} if followed else {})
    if followed:
        cb._job_event(_Result(action, {"state": "finished"}, {}), True)
        assert cb._signal_stop.running == {}


def _dead_pid():
    """A PID no process has: that of a child started and reaped here."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("case", ["dead", "dead-with-file", "alive", "other-owner", "extra-file", "link",
                                  "subdirectory", "not-a-run"])
def test_a_dead_runs_interrupt_directory_is_swept_and_nothing_else(tmp_path, case):
    """The directory of a run whose process has gone (its exit handler never ran: SIGKILL) is
    removed; one whose PID lives, another user's, one holding anything but the interrupt
    file, a link and a name of another pattern are left as they are."""
    pid = os.getpid() if case == "alive" else _dead_pid()
    name = ("fleetqual-run-x%d-abc" if case == "not-a-run" else "fleetqual-run-%d-ab_c9") % pid
    path = tmp_path / name
    if case == "link":
        (tmp_path / "target").mkdir()
        path.symlink_to(tmp_path / "target")
    else:
        path.mkdir(mode=0o700)
    if case in ("dead-with-file", "extra-file"):
        (path / "interrupted").write_text("ansible-playbook interrupted by SIGINT\n")
    if case == "extra-file":
        (path / "notes.txt").write_text("a user's\n")
    if case == "subdirectory":
        (path / "interrupted").mkdir()
    if case == "other-owner":
        os.chown(path, 65534, 65534)
    removed = interrupt.sweep_stale(str(tmp_path))
    swept = case in ("dead", "dead-with-file")
    assert removed == ([str(path)] if swept else []), (case, removed)
    assert os.path.lexists(path) is not swept
    if case == "extra-file":
        assert (path / "notes.txt").read_text() == "a user's\n" and (path / "interrupted").exists()


def test_install_names_its_directory_by_pid_and_sweeps_a_killed_runs(tmp_path, monkeypatch):
    """install() makes its directory named by this process's PID in the temporary directory,
    after removing the directory a killed run left there."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    left = tmp_path / ("fleetqual-run-%d-zz9" % _dead_pid())
    left.mkdir()
    env = {}
    stop = interrupt.SignalStop(env)
    stop.install()
    try:
        assert not left.exists()
        assert os.path.dirname(stop.directory) == str(tmp_path)
        assert os.path.basename(stop.directory).startswith("fleetqual-run-%d-" % os.getpid())
        assert interrupt.sweep_stale(str(tmp_path)) == [] and os.path.isdir(stop.directory)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop.wrapped[sig])
        os.rmdir(stop.directory)
