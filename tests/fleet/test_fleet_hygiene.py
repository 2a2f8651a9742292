"""The fleet cleans up after itself: killing an sshd takes its sessions along and nothing
else, and an sshd does not outlive the process that started it, even one killed by SIGKILL."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import fleetlib
import pytest
from proctree import alive, wait_gone

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

HERE = os.path.dirname(os.path.abspath(__file__))


def test_kill_takes_the_sessions_and_nothing_else(fleet):
    inst = fleet.host(60)
    unrelated = subprocess.Popen(["sleep", "300"])
    ssh = subprocess.Popen(["ssh", "-i", fleet.client_key, "-p", str(inst.port)] + fleetlib.SSH_ARGS.split()
                           + ["root@" + inst.addr, "exec sleep 301"])
    try:
        deadline = time.monotonic() + 15
        while not any("sleep" in open("/proc/%d/comm" % p).read() for p in fleetlib.descendants(inst.pid)
                      if os.path.exists("/proc/%d/comm" % p)):
            assert time.monotonic() < deadline, "the SSH session never started"
            time.sleep(0.05)
        session = fleetlib.descendants(inst.pid)
        killed = inst.kill()
        assert set(session) <= set(killed)
        assert all(wait_gone(p) for p in killed)
        assert alive(unrelated.pid), "kill() must only touch the sshd's own tree"
        assert ssh.wait(timeout=10) != 0
    finally:
        unrelated.kill()
        unrelated.wait()
        if ssh.poll() is None:
            ssh.kill()


def test_sshd_dies_with_the_process_that_started_it(tmp_path):
    code = ("import sys; sys.path.insert(0, %r); import fleetlib, time; "
            "f = fleetlib.Fleet(%r); i = f.host(61); print(i.pid, flush=True); time.sleep(120)"
            % (HERE, str(tmp_path / "orphan")))
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(starter.stdout.readline())
        assert alive(pid)
        starter.send_signal(signal.SIGKILL)          # no finalizer, no atexit can run
        starter.wait()
        assert wait_gone(pid), "sshd %d outlived its starter (PR_SET_PDEATHSIG)" % pid
    finally:
        if starter.poll() is None:
            starter.kill()
        for left in glob.glob("/tmp/fqcp-%d-*" % starter.pid):     # its SSH control dir
            shutil.rmtree(left, ignore_errors=True)
