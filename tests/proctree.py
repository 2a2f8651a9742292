"""Processes of the tests, read from /proc: a process's children and descendants, whether it
still runs, a bounded wait for it to end or to be stopped, and the bounded poll a test uses to
wait for its premise. One copy for the unit tests, the fleet tests (tests/fleet/fleetlib.py)
and bench/ (through fleetlib)."""
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


def cmdline(pid):
    """A process's argv (``/proc/<pid>/cmdline``), decoded, or None when it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return None


def state(stat_path):
    """The state letter (R, S, D, T, Z, ...) in a /proc stat file (proc(5): after the command's
    closing parenthesis), or None when it cannot be read (the process or thread is gone)."""
    try:
        with open(stat_path) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid):
    """pid runs (a zombie counts as gone: it has exited, only its parent has not reaped it)."""
    st = state("/proc/%d/stat" % pid)
    return st is not None and st != "Z"


def wait_gone(pid, timeout=10):
    """Wait, at most timeout seconds, for pid to end; True once it has. A SIGKILLed process
    in uninterruptible I/O (O_DIRECT on a loop device) ends only when that I/O completes,
    which on a loaded machine is not at once."""
    return poll_until(lambda: not alive(pid), timeout, every=0.05)


def all_threads_stopped(pid):
    """Every thread of ``pid`` in the stopped state (``T``/``t`` in /proc/<pid>/task/<tid>/stat)."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    states = [state("/proc/%d/task/%s/stat" % (pid, tid)) for tid in tids]
    return bool(states) and all(st is not None and st in "Tt" for st in states)


def poll_until(when, timeout, proc=None, every=0.02):
    """Poll ``when()`` every ``every`` s until it is true, ``timeout`` s have passed or ``proc`` (a
    Popen) has exited; the last ``when()``. A hold, a signal or a stop that waits for its premise
    (a child exited, a report read, a thread started, a window measured) rather than for a fixed
    delay or a planned instant, which a loaded machine need not keep."""
    limit = time.monotonic() + timeout
    ok = when()
    while not ok and (proc is None or proc.poll() is None) and time.monotonic() < limit:
        time.sleep(every)
        ok = when()
    return ok


def wait_stopped(pid, timeout=30):
    """After a SIGSTOP to ``pid``: wait, at most ``timeout`` seconds, until every thread of it is
    stopped; True once they are. A process-directed SIGSTOP wakes one thread, and the group stop
    begins when that thread runs: a loaded machine ran one 140 ms late, the other threads working
    on meanwhile, so a hold timed from the kill held less than it said."""
    return poll_until(lambda: all_threads_stopped(pid), timeout, every=0.005)
