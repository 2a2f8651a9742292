# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A child that does not end: how the job stops a process whose I/O the device never
completes, without hanging with it.

A thread waiting for a block request sleeps uninterruptibly (state ``D`` in
``/proc/<pid>/task/<tid>/stat``, proc(5)): no signal, not even SIGKILL, ends it before the
request completes or the kernel aborts it (the NVMe driver's I/O timeout, then a controller
reset, again and again while the drive keeps silent). Waiting for such a process to exit
would hold the job, its cleanup and its final status for as long as the drive hangs, so the
job waits a bounded time after SIGKILL (``HUNG_GRACE_S``), then leaves the process to the
kernel, says which threads sleep where (``wchan``), and goes on: the host's verdict arrives
by the job's deadline, the region the process was writing is left to the next run's
preflight (docs/integrity.md, "A drive that hangs")."""

import os
import signal
import subprocess

HUNG_GRACE_S = 10


def thread_states(pid):
    """``[(tid, state, wchan)]`` of every thread of ``pid`` (empty when it is gone):
    ``state`` the one-letter state of ``/proc/<pid>/task/<tid>/stat`` (proc(5)), ``wchan``
    the kernel function it waits in, or "" (unreadable, or not waiting)."""
    base = "/proc/%d/task" % int(pid)
    try:
        tids = sorted(int(t) for t in os.listdir(base) if t.isdigit())
    except OSError:
        return []
    out = []
    for tid in tids:
        try:
            with open("%s/%d/stat" % (base, tid)) as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        try:
            with open("%s/%d/wchan" % (base, tid)) as fh:
                wchan = fh.read().strip()
        except OSError:
            wchan = ""
        out.append((tid, state, "" if wchan == "0" else wchan))
    return out


def describe(states, name, pid, grace_s):
    """The message for a process ``name`` (``pid``) still there ``grace_s`` s after SIGKILL,
    from its :func:`thread_states` (pure)."""
    asleep = [s for s in states if s[1] == "D"]
    where = sorted(set(s[2] for s in asleep if s[2]))
    if asleep:
        return ("%s (pid %d) did not end %d s after SIGKILL: %d of %d threads in uninterruptible sleep (D)%s: "
                "the device does not complete its requests; the process is left to the kernel"
                % (name, pid, grace_s, len(asleep), len(states), " in " + ", ".join(where) if where else ""))
    return ("%s (pid %d) did not end %d s after SIGKILL (threads in states %s); the process is left to the kernel"
            % (name, pid, grace_s, "".join(sorted(set(s[1] for s in states))) or "unknown"))


def kill_bounded(proc, name, grace_s=None):
    """SIGKILL ``proc`` (a ``subprocess.Popen``) and wait up to ``grace_s`` s (default
    ``HUNG_GRACE_S``) for it:
    ``(stdout, stderr, None)`` once it ended (its remaining output), or
    ``("", "", message)`` (:func:`describe`) when it is still there: then it is left running."""
    grace_s = HUNG_GRACE_S if grace_s is None else grace_s
    try:
        proc.send_signal(signal.SIGKILL)
    except OSError:
        pass
    try:
        out, err = proc.communicate(timeout=grace_s)
        return out, err, None
    except subprocess.TimeoutExpired:
        return "", "", describe(thread_states(proc.pid), name, proc.pid, grace_s)


def run_bounded(argv, timeout, name, **popen_kw):
    """``subprocess.run`` for a command on a device that may hang: ``(rc, stdout, stderr,
    hung)``; after ``timeout`` s SIGTERM, after ``HUNG_GRACE_S`` more :func:`kill_bounded`; ``hung`` is
    its message when the process would not end (``rc`` None), else None. ``timeout`` None:
    no limit."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            **popen_kw)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, None
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=HUNG_GRACE_S)
        return proc.returncode, out, err, None
    except subprocess.TimeoutExpired:
        out, err, hung = kill_bounded(proc, name)
        return proc.returncode, out, err, hung
