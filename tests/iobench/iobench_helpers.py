"""Helpers for the iobench tests (imported by conftest.py and the test modules): build the real binary once, run it, snapshot trees,
mount small filesystems (root only; skipped otherwise)."""
import contextlib
import errno
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "roles", "iobench", "files", "src")
if os.path.join(ROOT, "tests", "unit") not in sys.path:
    sys.path.append(os.path.join(ROOT, "tests", "unit"))
import loopdev  # noqa: E402  (tests/unit/loopdev.py: loop devices of this process's own)
from proctree import poll_until, wait_stopped  # noqa: E402  (tests/proctree.py)
BIN = os.path.join(SRC, "iobench")

SMALL = ["--file-num", "4", "--total-size", "16M"]


def make(target):
    r = subprocess.run(["make", "-C", SRC, target], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self._json = None

    @property
    def json(self):
        if self._json is None:
            self._json = json.loads(self.out)
        return self._json

    def __repr__(self):
        return "rc=%s\nstdout=%s\nstderr=%s" % (self.rc, self.out[:2000], self.err[:2000])


def run(binary, *args, env=None, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, env=e, check=False)
    return Result(p)


def snapshot(path):
    """names -> (kind, sha256, mtime_ns, size) of a whole tree, without following symlinks."""
    snap = {}
    for base, dirs, files in os.walk(path, followlinks=False):
        for n in dirs + files:
            p = os.path.join(base, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, path)
            if os.path.islink(p):
                snap[rel] = ("link", os.readlink(p), st.st_mtime_ns, 0)
            elif os.path.isdir(p):
                snap[rel] = ("dir", None, st.st_mtime_ns, 0)
            else:
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                snap[rel] = ("file", digest, st.st_mtime_ns, st.st_size)
    return snap


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a test filesystem")


@contextlib.contextmanager
def mounted(fstype, options=None):
    """Mount a fresh fstype (tmpfs, ramfs) on a temporary directory; always unmounted."""
    need_root()
    mnt = tempfile.mkdtemp(prefix="iobench-%s-" % fstype)
    cmd = ["mount", "-t", fstype]
    if options:
        cmd += ["-o", options]
    cmd += [fstype, mnt]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        os.rmdir(mnt)
        pytest.skip("cannot mount %s: %s" % (fstype, r.stderr.strip()))
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True, check=False)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True, check=False)
        try:
            os.rmdir(mnt)
        except OSError:
            pass


def seed_parent(parent):
    """Populate a parent directory with other people's data the tool must not touch."""
    os.makedirs(os.path.join(parent, "keep", "sub"), exist_ok=True)
    with open(os.path.join(parent, "keep", "data.bin"), "wb") as f:
        f.write(os.urandom(4096))
    with open(os.path.join(parent, "keep", "sub", "notes.txt"), "w") as f:
        f.write("precious\n")
    with open(os.path.join(parent, "test_file.0"), "w") as f:
        f.write("not iobench's\n")


def signal_mid_run(args, sig, delay=1.2, timeout=20, when=None):
    """Start iobench, send sig after delay seconds (or once ``when()`` is true: ``proctree.poll_until``
    for at most ``timeout`` s), return (returncode, stdout, stderr). The process never
    outlives the call."""
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if when is None:
            time.sleep(delay)
        else:
            poll_until(when, timeout, p)
        p.send_signal(sig)
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err


def measured_for(live_log, seconds):
    """A ``when`` for :func:`signal_mid_run`: true once iobench's live log (``--live-log``,
    a line per ``--report-interval``) shows its measured window ``seconds`` long. A fixed delay
    after the start is no premise on a loaded machine: one took 1.2 s to start measuring, and
    the signal found a run that had done nothing yet."""
    def when():
        try:
            with open(live_log) as fh:
                lines = [json.loads(x) for x in fh.read().splitlines() if x.strip()]
        except (OSError, ValueError):
            return False
        return any(x.get("window") and x.get("elapsed_s", 0) >= seconds for x in lines)
    return when


def held_mid_run(args, at, hold, seconds, timeout=120):
    """Start iobench; at the epoch ``at`` enter ``hold(pid)`` (a context manager that stops
    the whole process or one of its threads) for ``seconds``; return (returncode, stdout,
    stderr, the epoch the release began). The process never outlives the call.

    The epoch is read inside the hold, before its release: nothing held can run before it, so it
    is a lower bound however long a loaded machine takes to carry the release out (thawing a
    freezer group and moving its threads back took over 50 ms in a fresh-clone run)."""
    p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(max(0.0, at - time.time()))
        with hold(p.pid):
            time.sleep(seconds)
            released = time.time()
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out, err, released


FREEZER = "/sys/fs/cgroup/freezer"
_FREEZER_GROUPS = itertools.count()


def _leave_freezer_group(grp, timeout=30.0):
    """Every task of ``grp`` moved back to the root group and ``grp`` removed. A thread that has
    begun to exit (PF_EXITING: a thawed main thread that only had to print and return) is not
    moved by a write to ``tasks`` and keeps the group busy (EBUSY) until its exit is through, so
    the move and the removal are retried until then; a task gone meanwhile has nothing to move."""
    def removed():
        for t in open(os.path.join(grp, "tasks")).read().split():
            try:
                with open(os.path.join(FREEZER, "tasks"), "w") as f:
                    f.write(t)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(grp)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            return False
        return True
    if not poll_until(removed, timeout):
        raise OSError(errno.EBUSY, "freezer group still busy %.0f s after its thaw" % timeout, grp)


@contextlib.contextmanager
def frozen_thread(tid):
    """The one thread ``tid`` frozen (a cgroup v1 freezer group of that thread alone: its
    ``tasks`` file moves a thread, not its process), thawed and put back on leaving."""
    if not os.path.isfile(os.path.join(FREEZER, "freezer.state")) and not os.path.isdir(FREEZER):
        pytest.skip("no cgroup v1 freezer hierarchy to freeze one thread with")
    grp = os.path.join(FREEZER, "fleetqual-iobench-test-%d-%d" % (os.getpid(), next(_FREEZER_GROUPS)))
    os.mkdir(grp)
    try:
        with open(os.path.join(grp, "tasks"), "w") as f:
            f.write(str(tid))
        with open(os.path.join(grp, "freezer.state"), "w") as f:
            f.write("FROZEN")
        yield
    finally:
        with open(os.path.join(grp, "freezer.state"), "w") as f:
            f.write("THAWED")
        _leave_freezer_group(grp)


@contextlib.contextmanager
def stopped(pid):
    """The whole process stopped (SIGSTOP) until the block ends (SIGCONT); the block begins once
    every thread is stopped (proctree.wait_stopped), not at the kill (a 0.5 s hold timed from
    the kill held 0.36 s on a loaded machine)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_stopped(pid)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def fill_filesystem(mnt):
    """Write a filler file in mnt until the filesystem is full (ENOSPC)."""
    fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\xa5" * (1 << 20)) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def assert_usage_error(r, flag, never_created):
    """Exit 2, nothing on stdout, one `iobench: error:` line naming the flag, and the
    directory the run would have used was not created."""
    assert r.rc == 2, r
    assert r.out == "" and flag in r.err and r.err.startswith("iobench: error:"), r.err
    assert not never_created.exists()


@contextlib.contextmanager
def loop_device(size_mb, fs=None):
    """A loop device on a sparse file in a temporary directory under /var/tmp (a real disk, not
    tmpfs); yields (device path, kernel name, backing file, mount point or None). Optionally
    with a fresh filesystem fs mounted. Always unmounted, detached and removed."""
    need_root()
    work = tempfile.mkdtemp(prefix="iobench-loop-", dir="/var/tmp")
    backing = os.path.join(work, "disk.img")
    with open(backing, "wb") as f:
        f.truncate(size_mb << 20)
    dev = mnt = None
    try:
        dev = loopdev.attach_or_skip(backing)
        if fs:
            # ext4: initialise inode tables and journal now, not by ext4lazyinit in the background,
            # whose writes would land in a measured window (test_devstat's "a read writes nothing")
            extra = ["-E", "lazy_itable_init=0,lazy_journal_init=0"] if fs.startswith("ext") else []
            mk = subprocess.run(["mkfs." + fs, "-q"] + extra + [dev], capture_output=True, text=True, check=False)
            assert mk.returncode == 0, mk.stderr
            mnt = os.path.join(work, "mnt")
            os.mkdir(mnt)
            m = subprocess.run(["mount", dev, mnt], capture_output=True, text=True, check=False)
            assert m.returncode == 0, m.stderr
        yield dev, os.path.basename(dev), backing, mnt
    finally:
        if mnt:
            subprocess.run(["umount", mnt], capture_output=True, check=False)
            if os.path.ismount(mnt):
                subprocess.run(["umount", "-l", mnt], capture_output=True, check=False)
            os.rmdir(mnt)
        if dev:
            loopdev.detach(dev, backing)
        os.unlink(backing)
        os.rmdir(work)
