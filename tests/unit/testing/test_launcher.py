"""The test harness's process launcher (tests/fleet/fleetlib.py ``Launcher``): a child that dies
with the test process (PR_SET_PDEATHSIG) outlives the short-lived thread that asked for it. The
kernel binds that signal to the thread that forked the child (prctl(2)), so a loopback host's
sshd restarted by a helper thread mid-run was killed the moment the helper returned."""
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fleet"))

import fleetlib  # noqa: E402


# a child that says so when it lived its 3 s; killed by its parent's death signal, it says nothing
CHILD = ["sh", "-c", "sleep 3; echo survived"]


def _after_thread(start):
    """Start a child from a thread that then ends: (its exit status, what it printed)."""
    box = []
    t = threading.Thread(target=lambda: box.append(start()))
    t.start()
    t.join()
    out = box[0].communicate(timeout=60)[0]
    return box[0].returncode, out


def test_a_child_of_the_launcher_outlives_the_thread_that_asked_for_it():
    assert _after_thread(lambda: fleetlib.LAUNCHER.popen(CHILD, stdout=subprocess.PIPE, text=True,
                                                         preexec_fn=fleetlib._pdeathsig)) == (0, "survived\n")


def test_forked_by_a_thread_that_ends_it_dies_with_that_thread():
    # what the launcher is for: the same child forked by the short-lived thread itself
    assert _after_thread(lambda: subprocess.Popen(CHILD, stdout=subprocess.PIPE, text=True,
                                                  preexec_fn=fleetlib._pdeathsig)) == (-signal.SIGKILL, "")


def test_a_launch_that_fails_raises_in_the_caller():
    try:
        fleetlib.LAUNCHER.popen(["/nonexistent/fleetqual-no-such-program"])
    except FileNotFoundError:
        return
    raise AssertionError("no error raised for a program that does not exist")
