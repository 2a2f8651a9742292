"""Processes of the tests, read from /proc: a process's children and descendants, whether it
still runs, a bounded wait for it to end. One copy for the unit tests, the fleet tests
(tests/fleet/fleetlib.py) and bench/ (through fleetlib)."""
import os
import time


def children_of(pid):
    """Direct children of pid (from /proc/<pid>/task/*/children, else a /proc scan)."""
    kids = set()
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as fh:
                kids.update(int(x) for x in fh.read().split())
        return kids
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as fh:
                    stat = fh.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    kids.add(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def descendants(pid):
    """Every process below pid (children, their children, ...)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children_of(p):
            if c not in seen:
                seen.append(c)
                todo.append(c)
    return seen


def alive(pid):
    """pid runs (a zombie counts as gone: it has exited, only its parent has not reaped it)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, timeout=10):
    """Wait, at most timeout seconds, for pid to end; True once it has. A SIGKILLed process
    in uninterruptible I/O (O_DIRECT on a loop device) ends only when that I/O completes,
    which on a loaded machine is not at once."""
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)
