"""Detached measurement on the SSH fleet: more hosts than forks.

* 8 hosts at ``forks = 2`` complete with every host's full results, and the controller
  printed at most one progress line per round for the whole fleet (never one per host per
  poll, no ``FAILED - RETRYING``).
* ``ansible-playbook`` killed (SIGKILL, and SIGHUP as a closed terminal sends it, to the PIDs
  we started, two runs at once on 4 hosts each at ``forks = 2``) while the jobs run: after
  the jobs' deadline no iobench process and no test file is left on any host; each job's
  final status waits in its test directory for the next run of the same plan, which collects
  a finished job's results as its own (``fleetqual_previous: attach``) and reports and clears
  a job its deadline stopped.
* a host away 60 s mid-wait is polled again and collected; a killed controller's finished
  jobs are collected by the next run, never measured twice.
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import fleetlib
import fleetrun
from fleetrun import run_playbook
from test_fleet_faults import find_iobench

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOSTS = ["fq%d" % n for n in range(31, 39)]
LINE_RE = re.compile(r"^fleetqual: workload (\d+)/(\d+) \| (\d+) hosts: (\d+) running, (\d+) done, (\d+) failed \| ",
                     re.M)


# paced (rate_iops): what these tests prove is the orchestration, and 8 hosts reading as fast
# as they can would only load the machine's one disk and 2 cores for the other test streams
RATE_IOPS = 300


def matrix(time_s, n=3):
    return [{"workload": "w%d" % i, "mode": "rndrd", "threads": 1, "file_num": 2, "total_size": "8M",
             "block_size": "16K", "direct": True, "time": time_s, "warmup": 1, "rate_iops": RATE_IOPS}
            for i in range(n)]


def inventory(fleet, base, time_s, extra=None, names=HOSTS, dirs_root=None, host_vars=None):
    hosts = [{"name": name, "inst": fleet.host(int(name[2:])), "vars": (host_vars or {}).get(name)} for name in names]
    gv = {"fleetqual_matrix": matrix(time_s), "fleetqual_progress_interval": 3,
          "fleetqual_thresholds": [fleetlib.SHARED_DISK_STALL_RULE]}
    gv.update(extra or {})
    return fleet.inventory(os.path.join(base, "inventory"), hosts, group_vars={"all": gv}, dirs_root=dirs_root)


def test_eight_hosts_at_two_forks_complete_with_one_line_per_round(fleet, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("forks2"))
    inv = inventory(fleet, base, 4)
    run = run_playbook(fleet, inv, base, "forks2", env_extra={"ANSIBLE_FORKS": "2"})
    assert run.rc == 0, run.out[-5000:]
    assert run.summary() == (8, 8, 8, 0, 0, 0)
    ids = None
    for host in HOSTS:
        rec = run.record(host)
        assert rec["verdict"] == "PASS", (host, rec["reasons"])
        got = [w["id"] for w in rec["workloads"]]
        assert len(got) == 3 and (ids is None or got == ids), got
        ids = got
        for wl in rec["workloads"]:
            assert wl["metrics"]["iops"] > 0 and wl["metrics"]["errors"] == 0, (host, wl["id"])
            assert wl["result"]["rc"] == 0, (host, wl["id"])
            # iostat ran beside each workload: reports in its 4 s window, or the record says none fell there
            assert fleetrun.iostat_sampled_or_warned(wl["result"]), (host, wl["id"])
        assert sum(len(wl["result"]["iostat"]["samples"]) for wl in rec["workloads"]), host
    # the progress: whole-fleet lines only, one per round marker, never a retry line per host
    lines = LINE_RE.findall(run.out)
    assert lines, run.out[-3000:]
    assert all(int(n) == 8 and int(r) + int(d) + int(f) == 8 for _host, _count, n, r, d, f in lines), lines
    progress = os.path.join(run.results_dir(), ".progress")
    rounds = glob.glob(os.path.join(progress, "round-*"))
    assert len(lines) == len(rounds), (len(lines), rounds)
    assert "FAILED - RETRYING" not in run.out
    assert sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(progress, "*.json"))) == HOSTS
    # the plan is shown once for the fleet, not once per host
    assert run.out.count("Workload 1/3: %s" % ids[0]) == 1, run.out[-3000:]
    # nothing is left on the hosts
    for host in HOSTS:
        assert not os.path.exists(fleet.host_dirs(host, fleet.default_dirs_root(os.path.join(base, "inventory")))["fleetqual_test_dir"])


def _processes_naming(text):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as fh:
                    if text.encode() in fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


_status = fleetlib.job_status


def _read_json(path):
    """A JSON file written atomically, or None while it does not exist."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


KILLED = {"fleetqual_workload_timeout_slack": 15}
AFTER_KILL = {"fleetqual_workload_timeout_slack": 120}


def _start_killable(fleet, base, names, dirs_root):
    """An ansible-playbook over ``names`` (2 forks, slack 15 s: each job's deadline is the
    planned 3 x 7 s + 15 s after its start): ``(proc, inventory, test dirs, log)``."""
    inv = inventory(fleet, base, 6, KILLED, names=names, dirs_root=dirs_root)
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in names}
    proc, log = _start_playbook(fleet, base, inv, "killed", forks=2)
    return proc, inv, tdirs, log


def wait_for_workload(proc, tdirs, index):
    """Until every job in ``tdirs`` (host -> test directory) runs its workload ``index`` (1-based)
    or a later one, while ``proc`` (their ansible-playbook) runs; 600 s for a start on a machine
    as loaded as 2 cores get."""
    limit = time.monotonic() + 600
    while not all((_status(d) or {}).get("index", 0) >= index for d in tdirs.values()):
        assert proc.poll() is None and time.monotonic() < limit, "the jobs never reached workload %d" % index
        time.sleep(0.5)


def _ended_run(proc, log, base, run_id):
    """The run of a :func:`_start_playbook` (``log`` opened ``w+``), killed if it still runs:
    ``(FleetRun, its output)``."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.seek(0)
    out = log.read()
    return fleetrun.FleetRun(subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), base, run_id, 0.0), out


def _start_playbook(fleet, base, inv, run_id, forks=None, mode="w", extra_vars=None):
    """``ansible-playbook playbooks/qualify.yml`` over ``inv`` in the background, its output in
    ``<base>/out.log`` (opened with ``mode``): ``(proc, log)``; the caller ends both."""
    return fleetrun.start_playbook(fleet, inv, base, run_id, extra_vars=extra_vars, mode=mode,
                                   env_extra={"ANSIBLE_FORKS": str(forks)} if forks else None)


def test_killed_controllers_leave_nothing_running_after_the_deadline(fleet, tmp_path_factory):
    """Two runs at once on 4 hosts each (still more hosts than forks), one killed with SIGKILL
    and one with SIGHUP (a closed terminal; SIGINT and SIGTERM stop the jobs instead:
    test_fleet_interrupt.py) once its jobs measure: they wait for their deadlines side by side."""
    runs = {}
    # one root of the host directories for both runs and the one after them
    dirs_root = str(tmp_path_factory.mktemp("killed-hostdirs"))
    try:
        for sig, names in ((signal.SIGKILL, HOSTS[:4]), (signal.SIGHUP, HOSTS[4:])):
            base = str(tmp_path_factory.mktemp("killed-%s" % sig.name))
            runs[sig] = (base,) + _start_killable(fleet, base, names, dirs_root)
        limit = time.monotonic() + 300
        pending = dict(runs)
        while pending:
            for sig, (base, proc, _inv, tdirs, _log) in list(pending.items()):
                # every host's job of this run has started and one measures: kill its controller
                # (a job between workloads, preparing its files, runs no iobench: all four can be
                # between at once on a loaded machine, so the wait is for both, not an assertion)
                assert proc.poll() is None, open(os.path.join(base, "out.log")).read()[-3000:]
                if all((_status(t) or {}).get("index", 0) >= 1 for t in tdirs.values()) \
                        and any(find_iobench(t) for t in tdirs.values()):
                    proc.send_signal(sig)
                    proc.wait(timeout=60)
                    del pending[sig]
            assert time.monotonic() < limit, "the jobs did not all start: %s" % [s.name for s in pending]
            time.sleep(0.2)
    finally:
        for _base, proc, _inv, _tdirs, log in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    tdirs = {h: t for _b, _p, _i, td, _l in runs.values() for h, t in td.items()}
    deadline = max(_status(t)["deadline_epoch"] for t in tdirs.values())
    # after the deadline (and iobench's SIGTERM grace), every job has ended by itself
    limit = time.time() + (deadline - time.time()) + 60
    while time.time() < limit and not all((_status(t) or {}).get("finished_epoch") for t in tdirs.values()):
        time.sleep(0.5)
    for host, t in tdirs.items():
        st = _status(t)
        assert st and st["finished_epoch"] and st["state"] in ("done", "expired"), (host, st and st["state"])
        assert st["finished_epoch"] <= st["deadline_epoch"] + 35, host
        assert find_iobench(t) == [], host
        assert glob.glob(os.path.join(t, "**", "test_file.*"), recursive=True) == [], host
    # no process of the killed runs is left on the controller either (a fork of
    # ansible-playbook waiting on a job notices that its parent is gone at its next poll,
    # at most fleetqual_progress_interval (30 s) after the jobs ended, and exits)
    invs = [inv for _b, _p, inv, _t, _l in runs.values()]
    limit = time.monotonic() + 90
    while any(_processes_naming(inv) for inv in invs) and time.monotonic() < limit:
        time.sleep(0.5)
    assert [p for inv in invs for p in _processes_naming(inv)] == []
    # the next run of the same plan (one run for the 8 hosts, over the same host directories)
    # attaches to each job that finished it and collects its results as its own (never
    # measured twice); a job its deadline stopped is reported by the preflight and cleared
    states = {h: _status(t)["state"] for h, t in tdirs.items()}
    base = str(tmp_path_factory.mktemp("after-kill"))
    # the same plan (the slack is not part of it: a finished job is still attached), with a slack
    # no loaded machine uses up: the jobs measured anew must end by themselves, not by their
    # deadline (at 15 s, one of them was stopped in its last workload after the disk of a
    # fresh-clone run stalled it)
    inv = inventory(fleet, base, 6, AFTER_KILL, names=HOSTS, dirs_root=dirs_root)
    run = run_playbook(fleet, inv, base, "after-kill", env_extra={"ANSIBLE_FORKS": "2"})
    assert run.rc == 0, run.out[-4000:]
    for host, state in states.items():
        got = run.record(host)["collected_from"]
        assert (got or {}).get("run_id") == ("killed" if state == "done" else None), (host, state, got)
    if "expired" in states.values():
        assert "a measurement job of run killed was left in" in run.out, run.out[-4000:]
    for t in tdirs.values():
        assert not os.path.exists(t)


def test_a_running_job_makes_preflight_refuse(fleet, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("busy"))
    inv = inventory(fleet, base, 30)
    name = HOSTS[0]
    tdir = fleet.host_dirs(name, fleet.default_dirs_root(os.path.join(base, "inventory")))["fleetqual_test_dir"]
    # a live process stands in for another run's job: the status names it
    os.makedirs(os.path.join(tdir, ".fleetqual-job"), mode=0o700)
    with open(os.path.join(tdir, ".fleetqual-storage"), "w") as fh:
        fh.write("marker\n")
    # it outlives the run however slowly the run reaches its start (a cold build on a loaded
    # machine took over 2 minutes: a shorter sleeper had ended and its job was "died")
    sleeper = subprocess.Popen(["sleep", "3600"])
    try:
        with open("/proc/%d/stat" % sleeper.pid) as fh:
            start = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open(os.path.join(tdir, ".fleetqual-job", "status.json"), "w") as fh:
            json.dump({"run_id": "other", "pid": sleeper.pid, "pid_start": start, "state": "running",
                       "deadline_epoch": time.time() + 600, "results": []}, fh)
        run = run_playbook(fleet, inv, base, "busy", extra_vars={"fleetqual_hosts": name})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run.rc != 0
    rec = run.record(name)
    assert rec["verdict"] == "ERROR"
    text = " ".join(rec["reasons"])
    assert "measurement job of run other" in text and "pid %d" % sleeper.pid in text and "deadline" in text, text
    # its directory was not touched
    assert os.path.exists(os.path.join(tdir, ".fleetqual-job", "status.json"))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


AWAY_HOSTS = ["fq46", "fq47"]
AWAY_S = 60     # the case: one host's sshd down for 60 s mid-wait
AWAY_JOB_S = 40


def test_a_host_away_mid_wait_is_waited_for_and_collected(fleet, tmp_path_factory):
    """fq47's sshd, and every session below it, killed once its job measures and started again
    on the same port 60 s later (a switch reload, sshd restarted by configuration management):
    its job goes on without the controller, the wait polls the host again until its job's
    deadline, prints that it is not answering, and collects it when it is back: both hosts
    PASS with all their workloads, fq47's record says how long it was away."""
    base = str(tmp_path_factory.mktemp("away"))
    dirs_root = str(tmp_path_factory.mktemp("away-hostdirs"))
    # a job of 3 x 41 s (paced: little CPU) outlasts the wait's late first poll on a loaded
    # machine (a CI run's wait first polled 2 minutes after the start)
    inv = inventory(fleet, base, AWAY_JOB_S, names=AWAY_HOSTS, dirs_root=dirs_root)
    host = fleet.host(int(AWAY_HOSTS[1][2:]))
    proc, log = _start_playbook(fleet, base, inv, "away", mode="w+")
    with log:
        try:
            # the wait has polled fq47 and found its job running (the wait's progress record):
            # the host goes away during the wait, never before it (a host gone before the wait
            # first polls it was back before a late first poll: never seen away)
            progress = os.path.join(base, "results", "away", ".progress", AWAY_HOSTS[1] + ".json")
            limit = time.monotonic() + 600      # a start on a machine as loaded as 2 cores get
            while True:
                doc = _read_json(progress) or {}
                if doc.get("polls") and doc.get("state") == "running":
                    break
                assert doc.get("state") in (None, "running"), ("fq47's job ended before the wait polled it", doc)
                assert proc.poll() is None and time.monotonic() < limit, "fq47's job was never polled running"
                time.sleep(0.5)
            host.kill()
            gone = time.monotonic()
            time.sleep(AWAY_S)
            host.start(port=host.port)
            away_s = time.monotonic() - gone
            proc.wait(timeout=600)
        finally:
            run, out = _ended_run(proc, log, base, "away")
    assert run.rc == 0, out[-5000:]
    assert run.summary() == (2, 2, 2, 0, 0, 0), out[-5000:]
    for name in AWAY_HOSTS:
        rec = run.record(name)
        assert rec["verdict"] == "PASS" and len(rec["workloads"]) == 3, (name, rec["reasons"])
    rec = run.record(AWAY_HOSTS[1])
    away = rec["away"]
    # from its first unanswered poll to its first answered one: the most of the 60 s it was gone
    assert away["episodes"] == 1 and away["seconds"] >= AWAY_S * 0.5 and away["longest_s"] == away["seconds"], \
        (away, away_s)
    assert any(w.startswith("not answering for ") for w in rec["warnings"]), rec["warnings"]
    assert run.record(AWAY_HOSTS[0])["away"] is None
    assert re.search(r"fleetqual: fq47: not answering for \d+s, its job's deadline in ", out), out[-5000:]
    assert "UNREACHABLE!" not in out


ATTACH_HOSTS = ["fq48", "fq49"]
# fq49 measures one 2 s workload; fq48 a burn-in of one round (a write pass over its 32M read
# back and a verify pass, each as long as its data takes, then a 16 s mix): fq49 is judged,
# stored and cleaned up while fq48 measures
DONE_FIRST = "fq49"
BURNIN_HOST = {"fleetqual_profile": "burnin", "fleetqual_matrix": [], "fleetqual_cache_size": "8M",
               "fleetqual_workload_overrides": {"time": 16, "rate_iops": RATE_IOPS}}
# 0.014 h = 50.4 s: one round of 48 s planned. An extra variable: the validation play reads the
# burnin profile's hours with the controller's own fleetqual_burnin_time, not a host's
BURNIN_TIME = {"fleetqual_burnin_time": 0.014}


def test_a_killed_controllers_finished_jobs_are_collected_by_the_next_run(fleet, tmp_path_factory):
    """The controller SIGKILLed (an OOM kill, an evicted AWX pod) once fq49 is judged, stored and
    cleaned up and while fq48's burn-in still runs: fq48's job finishes on its own. The same command
    again (fleetqual_previous: attach, the default; the same results directory): fq48 from its
    job, which the run attaches to, and fq49 from the record the killed run stored (its job is
    gone from the host), each reported once, marked as collected from the killed run, and no
    host measured again; the second run's cleanup leaves nothing."""
    dirs_root = str(tmp_path_factory.mktemp("attach-hostdirs"))
    base = str(tmp_path_factory.mktemp("attach"))
    inv = inventory(fleet, base, 6, names=ATTACH_HOSTS, dirs_root=dirs_root,
                    host_vars={DONE_FIRST: {"fleetqual_matrix": matrix(2, n=1)}, "fq48": BURNIN_HOST})
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in ATTACH_HOSTS}
    stored = os.path.join(base, "results", "first", DONE_FIRST + ".json")
    proc, log = _start_playbook(fleet, base, inv, "first", extra_vars=BURNIN_TIME)
    with log:
        try:
            limit = time.monotonic() + 600      # a start on a machine as loaded as 2 cores get
            while not (os.path.exists(stored) and not os.path.exists(tdirs[DONE_FIRST])):
                assert proc.poll() is None and time.monotonic() < limit, "fq49 was never stored and cleaned up"
                time.sleep(0.2)
            assert (_status(tdirs["fq48"]) or {}).get("state") == "running", "fq48's job ended before fq49's cleanup"
        finally:
            proc.kill()
            proc.wait()
    limit = time.monotonic() + 300
    while (_status(tdirs["fq48"]) or {}).get("state") != "done":
        assert time.monotonic() < limit, _status(tdirs["fq48"])
        time.sleep(1)
    with open(stored) as fh:
        killed = json.load(fh)
    pids = {"fq48": _status(tdirs["fq48"])["pid"], DONE_FIRST: killed["job"]["pid"]}
    again = time.time()
    run = run_playbook(fleet, inv, base, "second", extra_vars=BURNIN_TIME)
    assert run.rc == 0 and run.summary() == (2, 2, 2, 0, 0, 0), run.out[-5000:]
    # the burn-in's round, each pass of it, collected from the job the killed run left
    assert sorted(w["burnin"]["pass"] for w in run.record("fq48")["workloads"]) == ["mix", "verify", "write"]
    for h, n in (("fq48", 3), (DONE_FIRST, 1)):
        rec = run.record(h)
        assert rec["verdict"] == "PASS" and len(rec["workloads"]) == n, (h, rec["reasons"])
        got = rec["collected_from"]
        assert (got["run_id"], got["pid"], got["state"]) == ("first", pids[h], "done"), got
        assert any(w.startswith("collected from run first, measured ") for w in rec["warnings"]), rec["warnings"]
        # measured by the killed run's job, before this run began: never twice
        for w in rec["workloads"]:
            assert w["result"]["bench"]["window"]["end_epoch"] < again, (h, w["id"])
        # the second run's cleanup removed the job and its files (fq49's start made none): the
        # next run measures anew
        assert _status(tdirs[h]) is None and not os.path.exists(tdirs[h]), os.listdir(tdirs[h])
    # fq49 came from the killed run's record, which says the second run took it
    assert run.record(DONE_FIRST)["workloads"] == killed["workloads"]
    with open(stored + ".collected") as fh:
        assert json.load(fh)["run_id"] == "second"
    assert "attached to the measurement job of run first" not in run.out


START_HOSTS = ["fq61", "fq62", "fq63"]


def test_a_controller_killed_during_the_start_is_attached_or_started_anew_by_the_next_run(fleet, tmp_path_factory):
    """The controller SIGKILLed during the start (one fork for three hosts) as soon as the first
    host's job exists: the second host's start had not begun or was under way, the third's had
    not begun. The same command again: every host reported once, PASS; a host whose job the
    killed run started is collected from that job (never measured again), a host without one is
    measured by this run; nothing is left on any host."""
    dirs_root = str(tmp_path_factory.mktemp("startkill-hostdirs"))
    base = str(tmp_path_factory.mktemp("startkill"))
    inv = inventory(fleet, base, 3, names=START_HOSTS, dirs_root=dirs_root)
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in START_HOSTS}
    proc, log = _start_playbook(fleet, base, inv, "first", forks=1)
    with log:
        try:
            limit = time.monotonic() + 600
            while _status(tdirs[START_HOSTS[0]]) is None:
                assert proc.poll() is None and time.monotonic() < limit, "the first host's job never started"
                time.sleep(0.1)
        finally:
            proc.kill()
            proc.wait()
    # a start under way goes on over its own SSH session, or never began: wait until every job
    # that exists has ended and none has appeared for 10 s
    limit, quiet_since, seen = time.monotonic() + 300, time.monotonic(), None
    while True:
        states = {h: (_status(t) or {}).get("state") for h, t in tdirs.items()}
        if states != seen:
            seen, quiet_since = states, time.monotonic()
        settled = all(s in (None, "done") for s in states.values())
        if settled and time.monotonic() - quiet_since >= 10:
            break
        assert time.monotonic() < limit, states
        time.sleep(0.5)
    started = {h: (_status(t) or {}).get("pid") for h, t in tdirs.items() if states[h] == "done"}
    assert START_HOSTS[0] in started and START_HOSTS[2] not in started, states
    again = time.time()
    run = run_playbook(fleet, inv, base, "second")
    assert run.rc == 0 and run.summary() == (3, 3, 3, 0, 0, 0), run.out[-5000:]
    for h in START_HOSTS:
        rec = run.record(h)
        assert rec["verdict"] == "PASS" and len(rec["workloads"]) == 3, (h, rec["reasons"])
        got = rec["collected_from"]
        if h in started:
            assert (got or {}).get("run_id") == "first" and got["pid"] == started[h], (h, got)
            assert all(w["result"]["bench"]["window"]["end_epoch"] < again for w in rec["workloads"]), h
        else:
            assert got is None and all(w["result"]["bench"]["window"]["start_epoch"] > again
                                       for w in rec["workloads"]), (h, got)
        assert not os.path.exists(tdirs[h]), os.listdir(tdirs[h])


STOP_HOSTS = ["fq52", "fq53"]


def test_the_stop_playbook_ends_every_hosts_job_and_the_waiting_run_reports_what_they_measured(
        fleet, tmp_path_factory):
    """playbooks/stop.yml on the run's inventory while both hosts measure their second of three
    30 s workloads: within its 10 s grace no iobench is left and no test file; the waiting run
    reports each host ERROR "stopped by the operator" with the workloads measured until then,
    and a stop naming another run leaves the jobs alone."""
    base = str(tmp_path_factory.mktemp("stop"))
    dirs_root = str(tmp_path_factory.mktemp("stop-hostdirs"))
    inv = inventory(fleet, base, 30, names=STOP_HOSTS, dirs_root=dirs_root)
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in STOP_HOSTS}
    env = fleetrun.playbook_run.ansible_env(fleet.ansible_env())
    stop_argv = [os.path.join(fleetrun.BIN, "ansible-playbook"), os.path.join(fleetrun.ROOT, "playbooks", "stop.yml"),
                 "-i", inv]
    proc, log = _start_playbook(fleet, base, inv, "stopped", mode="w+")
    with log:
        try:
            wait_for_workload(proc, tdirs, 2)
            other = subprocess.run(stop_argv + ["-e", "fleetqual_stop_run_id=another"], capture_output=True,
                                   text=True, env=env, cwd=fleetrun.ROOT, timeout=300, check=False)
            assert other.returncode == 0, other.stdout[-3000:]
            assert all((_status(d) or {}).get("state") == "running" for d in tdirs.values()), other.stdout[-3000:]
            stop = subprocess.run(stop_argv + ["-e", "fleetqual_stop_run_id=stopped"], capture_output=True,
                                  text=True, env=env, cwd=fleetrun.ROOT, timeout=300, check=False)
            assert stop.returncode == 0, stop.stdout[-3000:]
            # the playbook returned once each host's job had written its final status; the
            # waiting run may have collected it already (its poll came between the status and
            # this read: the job's directory is gone then, and its record is checked below)
            for h, d in tdirs.items():
                st = _status(d)
                if st is not None:
                    assert st["state"] == "stopped", (h, st["state"])
                    assert st["stop_reason"] == "stopped by the operator (fleetqual.storage.stop)", st["stop_reason"]
                assert find_iobench(d) == [], (h, find_iobench(d))
                assert glob.glob(os.path.join(d, "**", "test_file.*"), recursive=True) == [], h
            # each job stopped in its second workload, or its third when the first stop playbook
            # (another run's) took longer than the rest of the second on a loaded machine
            at = {h: int(n) for h, n in re.findall(
                r'ok: \[(fq\d+)\] => \{\s*"msg": "[^"]*stopped: (\d) of 3 workloads measured"', stop.stdout)}
            assert sorted(at) == STOP_HOSTS and set(at.values()) <= {2, 3}, stop.stdout[-3000:]
            proc.wait(timeout=600)
        finally:
            run, out = _ended_run(proc, log, base, "stopped")
    assert run.rc != 0 and run.summary()[:2] == (0, 2), out[-5000:]
    for h in STOP_HOSTS:
        rec = run.record(h)
        assert rec["verdict"] == "ERROR", (h, rec["verdict"])
        text = " ".join(rec["reasons"])
        assert "stopped by the operator (fleetqual.storage.stop) at workload %d/3" % at[h] in text, text
        # the workloads before measured whole, the one stopped until its stop: all reported
        assert [w["id"] for w in rec["workloads"]][:at[h]] == ["w%d-rndrd-t1" % i for i in range(at[h])], \
            rec["workloads"]
        assert all(w["metrics"]["iops"] > 0 for w in rec["workloads"][:at[h] - 1])
        m = rec["workloads"][at[h] - 1]["metrics"]
        assert (m["interrupted"], m["timed_out"], m["stopped_by"]) == (
            True, False, "stopped by the operator (fleetqual.storage.stop)"), m


ARRAY_HOSTS = ["fq64", "fq65", "fq66"]
# two lock-step steps (1 and 3 initiators) of 4 s, then each member's own 2 s workload
ARRAY_D = {"initiators": [1, 3], "threads": [2], "modes": ["rndrd"], "time": 4, "warmup": 1, "block_size": "16K",
           "total_size": "16M", "file_num": 1, "step_gap_s": 4}
ARRAY_VARS = {"fleetqual_array": "det1", "fleetqual_arrays": {"det1": ARRAY_D}, "fleetqual_matrix": matrix(2, n=1),
              "fleetqual_progress_interval": 2}


def test_a_killed_controllers_array_is_attached_whole_by_the_next_run(fleet, tmp_path_factory):
    """An array of three (two lock-step steps, then each member's own workload): the controller
    SIGKILLed once every member's job has the array's common start. The jobs run their steps on
    that schedule without it and finish. The same command again: every member's job is
    attached (its probe before the start found a job of the killed run that ran this very
    array on every member), none of the lock-step start runs again, each member is reported
    once with the killed run's steps, and the array's steps in fleet.json are complete."""
    dirs_root = str(tmp_path_factory.mktemp("arraykill-hostdirs"))
    base = str(tmp_path_factory.mktemp("arraykill"))
    inv = inventory(fleet, base, 2, ARRAY_VARS, names=ARRAY_HOSTS, dirs_root=dirs_root)
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in ARRAY_HOSTS}
    proc, log = _start_playbook(fleet, base, inv, "first", forks=2)
    with log:
        try:
            limit = time.monotonic() + 600
            while not all(((_status(t) or {}).get("array") or {}).get("start") for t in tdirs.values()):
                assert proc.poll() is None and time.monotonic() < limit, "the array never got its common start"
                time.sleep(0.2)
        finally:
            proc.kill()
            proc.wait()
    limit = time.monotonic() + 300
    while not all((_status(t) or {}).get("state") == "done" for t in tdirs.values()):
        assert time.monotonic() < limit, {h: (_status(t) or {}).get("state") for h, t in tdirs.items()}
        time.sleep(1)
    pids = {h: _status(t)["pid"] for h, t in tdirs.items()}
    again = time.time()
    run = run_playbook(fleet, inv, base, "second", args=["--forks", "2"])
    assert run.rc == 0 and run.summary() == (3, 3, 3, 0, 0, 0), run.out[-5000:]
    for h in ARRAY_HOSTS:
        rec = run.record(h)
        assert rec["verdict"] == "PASS", (h, rec["reasons"])
        got = rec["collected_from"]
        assert (got["run_id"], got["pid"], got["state"]) == ("first", pids[h], "done"), (h, got)
        steps = rec["array_run"]["steps"]
        assert [(s["index"], s["complete"]) for s in steps] == [(1, True), (2, True)], (h, steps)
        # measured by the killed run's jobs, before this run began: never twice
        windows = [w["result"]["bench"]["window"] for w in rec["workloads"]]
        windows += [s["result"]["bench"]["window"] for s in steps if s.get("result")]
        assert windows and all(w["end_epoch"] < again for w in windows), h
        assert not os.path.exists(tdirs[h]), os.listdir(tdirs[h])
    (reported,) = [a for a in run.fleet().get("arrays") or [] if a["name"] == "det1"]
    assert [(s["index"], s["complete"]) for s in reported["steps"]] == [(1, True), (2, True)], reported["steps"]
    # the lock-step start never ran again: no member's readiness, no new common start
    adir = glob.glob(os.path.join(run.results_dir(), ".progress", "array-det1"))
    assert adir and not os.path.exists(os.path.join(adir[0], "t0.json")), adir
