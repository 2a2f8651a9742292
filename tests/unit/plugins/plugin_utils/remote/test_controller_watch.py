# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/remote/progress.py ``watch_controller``: a worker whose ansible-playbook is
killed ends by itself even while it is blocked handing a large result to the dead parent's
queue (a pipe a sibling still holds open, full), the window no check before the hand-over
can close. Real processes: a parent, a sibling that keeps the pipe's read end, and a worker
that fills the pipe; the parent is SIGKILLed and every process is ended by its PID."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from proctree import alive, wait_gone
import unitpaths

COLLECTIONS = os.path.join(unitpaths.ROOT, "build", "collections")

PARENT = textwrap.dedent("""
    import os, sys, time
    watch = sys.argv[2] == "watch"
    r, w = os.pipe()
    keeper = os.fork()
    if keeper == 0:                 # another worker of the parent: it keeps the read end open
        os.close(w)
        time.sleep(120)
        os._exit(0)
    worker = os.fork()
    if worker == 0:
        sys.path.insert(0, sys.argv[1])
        from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.progress import watch_controller
        if watch:
            watch_controller(os.getppid(), poll_s=0.2)
        os.close(r)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            os.write(w, b"x" * 65536)   # the result: blocks once the pipe is full
        os._exit(0)
    print(worker, keeper, flush=True)
    time.sleep(120)                 # never reads: the parent is killed here
""")


def _family(watch):
    proc = subprocess.Popen([sys.executable, "-c", PARENT, COLLECTIONS, "watch" if watch else "none"],
                            stdout=subprocess.PIPE, text=True)
    worker, keeper = (int(x) for x in proc.stdout.readline().split())
    return proc, worker, keeper


def _blocked_writing(pid, timeout=30):
    """Wait until ``pid`` sleeps in a pipe write (the watch, if any, was started before)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open("/proc/%d/wchan" % pid) as fh:
            if "pipe_write" in fh.read():
                return True
        time.sleep(0.05)
    return False


def _end(*pids):
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 30)


@pytest.mark.parametrize("watch", [True, False])
def test_a_worker_blocked_on_its_dead_parents_pipe_ends_only_with_the_watch(watch):
    proc, worker, keeper = _family(watch)
    try:
        assert _blocked_writing(worker)
        proc.kill()                     # the controller is SIGKILLed
        proc.wait(timeout=30)
        if watch:
            assert wait_gone(worker, 30), "the watched worker outlived its parent"
        else:
            # the check proves itself: without the watch the same worker stays blocked
            assert not wait_gone(worker, 3) and alive(worker)
    finally:
        _end(worker, keeper)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# A controller that forks a worker (multiprocessing's fork context, as Ansible does) and dies
# before the worker has asked who its parent is: the worker prints the PID controller_pid()
# gives, and whether exit_if_orphaned() ended it.
LATE = textwrap.dedent("""
    import multiprocessing, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress

    def work(w, how):
        time.sleep(0.5)             # the controller is gone by now
        controller = progress.controller_pid() if how == "controller_pid" else os.getppid()
        os.write(w, b"%d " % controller)
        progress.exit_if_orphaned(controller)
        os.write(w, b"alive\\n")
        os._exit(0)

    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:                 # the controller: forks its worker and dies at once
        p = multiprocessing.get_context("fork").Process(target=work, args=(w, sys.argv[2]))
        p.start()
        os.write(w, b"%d\\n" % os.getpid())
        os._exit(0)
    os.close(w)
    os.waitpid(middle, 0)
    out = b""
    while True:
        chunk = os.read(r, 100)
        if not chunk:
            break
        out += chunk
    print(out.decode())
""")


@pytest.mark.parametrize("how", ["controller_pid", "getppid"])
def test_a_worker_forked_just_before_its_controller_died_knows_it_is_orphaned(how):
    out = subprocess.run([sys.executable, "-c", LATE, COLLECTIONS, how], capture_output=True, text=True, timeout=60,
                         check=True).stdout.split()
    controller, seen = int(out[0]), int(out[1])
    if how == "controller_pid":
        # the PID the worker was forked by, and the worker ended without a word more
        assert seen == controller and out[2:] == []
    else:
        # the check proves itself: os.getppid() is already the reaper's, so the worker lives on
        assert seen != controller and out[2:] == ["alive"]
