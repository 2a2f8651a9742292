"""Ctrl-C and an AWX cancel stop the fleet's jobs and the run reports what they measured
(docs/operations.md, "The controller stopped or killed"): ``ansible-playbook`` sent SIGINT (a
terminal's Ctrl-C) or SIGTERM (an AWX cancel) while its hosts measure the second of three 30 s
workloads. Its handler (plugins/plugin_utils/remote/interrupt.py) lets the run go on: each
host's wait stops its job over its own connection, collects it and the run writes its report.
SIGINT goes to three hosts at two forks: the third host's wait begins only after the first two
ended, and stops its job then. After the run: no job and no iobench is left on any host, no
test file; each job's final status says who stopped it; each host is an ERROR "stopped by the
operator" whose first workload was measured whole, in the run's fleet report."""
import glob
import os
import signal
import time

import pytest

from test_fleet_detached import _ended_run, _start_playbook, _status, inventory, wait_for_workload
from test_fleet_faults import find_iobench
from proctree import alive

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOSTS = {"SIGINT": ["fq57", "fq58", "fq59"], "SIGTERM": ["fq60"]}
FORKS = {"SIGINT": 2, "SIGTERM": None}


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signalled_controller_stops_every_hosts_job_and_reports_what_they_measured(fleet, tmp_path_factory, sig):
    names = HOSTS[sig]
    run_id = "interrupted-" + sig
    base = str(tmp_path_factory.mktemp("interrupt-" + sig))
    dirs_root = str(tmp_path_factory.mktemp("interrupt-hostdirs-" + sig))
    inv = inventory(fleet, base, 30, names=names, dirs_root=dirs_root)
    tdirs = {h: fleet.host_dirs(h, dirs_root)["fleetqual_test_dir"] for h in names}
    proc, log = _start_playbook(fleet, base, inv, run_id, forks=FORKS[sig], mode="w+")
    with log:
        try:
            wait_for_workload(proc, tdirs, 2)
            pids = {h: _status(d)["pid"] for h, d in tdirs.items()}
            signalled = time.monotonic()
            proc.send_signal(getattr(signal, sig))
            # how long the hosts' iobench ran on after the signal (printed, not judged: a
            # figure for docs/operations.md)
            while any(find_iobench(d) for d in tdirs.values()) and proc.poll() is None:
                time.sleep(0.2)
            print("%s: no iobench on the %d host(s) %.1f s after the signal"
                  % (sig, len(names), time.monotonic() - signalled))
            # the run goes on by itself: it stops, collects and reports (a planned 3 x 30 s
            # would still have a minute to run; the jobs' deadlines are further still)
            proc.wait(timeout=300)
        finally:
            run, out = _ended_run(proc, log, base, run_id)
    assert "fleetqual: %s: stopping the measurement jobs of %d host(s)" % (sig, len(names)) in out, out[-3000:]
    reason = "stopped by the operator (ansible-playbook interrupted by %s)" % sig
    for h, d in tdirs.items():
        assert not alive(pids[h]), (h, "its job still runs", out[-3000:])
        assert find_iobench(d) == [], (h, find_iobench(d))
        assert glob.glob(os.path.join(d, "**", "test_file.*"), recursive=True) == [], h
    # the report of the interrupted run: every host, each an ERROR naming the signal, with the
    # workload measured before it
    assert run.rc != 0 and run.summary()[:2] == (0, len(names)), out[-5000:]
    assert sorted(h["host"] for h in run.fleet()["hosts"]) == sorted(names)
    for h in names:
        rec = run.record(h)
        assert rec["verdict"] == "ERROR", (h, rec["verdict"], rec["reasons"])
        text = " ".join(rec["reasons"])
        assert reason + " at workload 2/3" in text, text
        assert [w["id"] for w in rec["workloads"]][:1] == ["w0-rndrd-t1"], rec["workloads"]
        assert rec["workloads"][0]["metrics"]["iops"] > 0
        # the workload it stopped is interrupted by the operator, not timed out
        m = rec["workloads"][1]["metrics"]
        assert (m["interrupted"], m["timed_out"], m["stopped_by"]) == (True, False, reason), m
