"""Whether a process still runs, as the durability writer's stop and the power-cut test judge
it: a killed multi-threaded process's first thread is a zombie at once, while its other
threads may still finish an I/O and hold the files it opened. A real process whose first
thread has exited (the raw exit(2) system call, not exit_group) while a second thread holds an
exclusive open of a loop device of the test's own."""
import errno
import os
import platform
import subprocess
import sys
import time

import pytest

import loopdev
import unitpaths

unitpaths.on_path()

from ansible_collections.fleetqual.storage.plugins.module_utils.job import status  # noqa: E402

# exit(2) of one thread, by architecture (asm/unistd.h)
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())

# the first thread says it runs and waits for a line, then exits alone; the second holds the
# device open until its pipe is closed
CHILD = r"""
import ctypes, os, sys, threading
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL)
hold = int(sys.argv[2])
threading.Thread(target=lambda: os.read(hold, 1)).start()
print("ready", flush=True)
sys.stdin.readline()
ctypes.CDLL(None).syscall(int(sys.argv[3]), 0)
"""


def _state(pid):
    line = status.read_proc_stat(pid)
    return line.rsplit(")", 1)[1].split()[0] if line else None


def _busy(dev):
    try:
        os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
        return False
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return True
        raise


@pytest.mark.skipif(SYS_EXIT is None, reason="exit(2)'s number is known here for x86_64 and aarch64 only")
def test_a_process_whose_first_thread_exited_holds_on_until_its_last_thread_has(tmp_path):
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    image = str(tmp_path / "disk.img")
    with open(image, "wb") as fh:
        fh.truncate(1 << 20)
    dev = loopdev.attach_or_skip(image)
    try:
        rfd, wfd = os.pipe()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, dev, str(rfd), str(SYS_EXIT)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, pass_fds=(rfd,))
        os.close(rfd)
        try:
            assert proc.stdout.readline() == "ready\n"
            start = status.pid_start(proc.pid)
            assert start is not None and status.process_holds_on(proc.pid, start)
            assert not status.process_holds_on(proc.pid, start + 1)          # another process's start
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 60
            while _state(proc.pid) != "Z" and time.monotonic() < deadline:
                time.sleep(0.01)
            # the first thread is a zombie: the start time alone says the process is gone, but
            # its second thread still holds the device
            assert _state(proc.pid) == "Z" and status.pid_start(proc.pid) is None
            assert status.process_holds_on(proc.pid, start)
            assert _busy(dev)
        finally:
            os.close(wfd)                      # the second thread returns: the process ends
            proc.wait(timeout=60)
        assert not status.process_holds_on(proc.pid, start)
        assert not _busy(dev)
    finally:
        loopdev.detach(dev, image)
