"""The fault-injecting drive of the tests (docs/testing.md, "The fault-injecting drive").

Without device-mapper (no dm-flakey, dm-dust, dm-delay), a small FUSE program
(``faultdrive.c`` beside this file, on libfuse3) serves ONE file over a real backing file;
the file is put under a loop device with ``losetup --direct-io=on``, so the kernel, the
filesystems and iobench (O_DIRECT) see a real block device whose faults the test sets per
byte region and over time through the mount's ``control`` file::

    with FaultDrive(size=64 << 20, workdir=tmp_path, name="fd1") as fd:
        fd.set([{"kind": "eio", "start": 0, "length": 1 << 20, "ops": "read"}])
        ...  # /dev/loopN (fd.device) fails reads in its first MiB with EIO

Everything a drive starts (daemon, mount, loop device, files) is undone by ``stop()``, by
the ``with`` exit whatever the body did, and by an atexit safety net for drives still alive.
"""
import atexit
import difflib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "faultdrive.c")
MAKEFILE = os.path.join(HERE, "Makefile")
ROOT = os.path.dirname(os.path.dirname(HERE))
if os.path.join(ROOT, "tests", "unit") not in sys.path:
    sys.path.append(os.path.join(ROOT, "tests", "unit"))
import loopdev  # noqa: E402  (tests/unit/loopdev.py: loop devices of this process's own)
CACHE = os.path.join(ROOT, "build", "faultdrive")
SECTOR = 512  # the loop device's logical block size and the drop bitmap's unit

# kind -> (default ops, allowed ops, its own keys); COMMON keys apply to every kind.
COMMON = ("kind", "start", "length", "ops", "at_s", "max_hits")
KINDS = {
    "eio": ("both", ("read", "write", "both"), ()),
    "flip": ("read", ("read",), ("every", "seed")),
    "misplace": ("read", ("read",), ("shift", "from_offset")),
    "drop": ("write", ("write",), ("rewrites_only", "since")),
    "delay": ("both", ("read", "write", "both"), ("ms",)),
    "stall": ("both", ("read", "write", "both"), ("every_s", "for_s")),
    "vanish": ("both", ("read", "write", "both"), ()),
}
SANITIZERS = ("", "asan", "tsan")
_SANITIZER_MARKS = ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer", "runtime error:", "ERROR: LeakSanitizer")


class FaultDriveError(RuntimeError):
    """The drive could not be started, controlled or stopped cleanly."""


class FaultRuleError(ValueError):
    """A fault rule is invalid (the message names the field and the closest valid value)."""


def _closest(word, choices):
    near = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.4)
    return near[0] if near else sorted(choices)[0]


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_rule(rule, size):
    """Validate one rule dict for a drive of `size` bytes; return a copy with the kind's
    default ops filled in, or raise FaultRuleError naming the field and the closest valid
    value. The daemon checks the same (its refusal comes back as FaultRuleError too)."""
    if not isinstance(rule, dict):
        raise FaultRuleError("fault rule: expected a dict such as {'kind': 'eio', 'start': 0, 'length': 4096}, got %r" % (rule,))
    kind = rule.get("kind")
    if kind not in KINDS:
        raise FaultRuleError("fault rule 'kind': %r is not a kind; closest valid value: %r (kinds: %s)"
                             % (kind, _closest(kind, KINDS), ", ".join(KINDS)))
    default_ops, allowed_ops, own = KINDS[kind]
    keys = COMMON + own
    for key in rule:
        if key not in keys:
            raise FaultRuleError("fault rule %s: unknown key %r; closest valid key: %r (keys: %s)"
                                 % (kind, key, _closest(key, keys), ", ".join(keys)))
    out = dict(rule)
    out.setdefault("ops", default_ops)
    if out["ops"] not in allowed_ops:
        raise FaultRuleError("fault rule %s 'ops': %r; closest valid value: %r (%s acts on: %s)"
                             % (kind, out["ops"], _closest(out["ops"], allowed_ops), kind, ", ".join(allowed_ops)))
    for key in ("start", "length", "max_hits", "seed", "every", "from_offset"):
        if key in out and (not _is_int(out[key]) or out[key] < 0):
            raise FaultRuleError("fault rule %s %r: %r must be an integer >= 0; closest valid value: %r"
                                 % (kind, key, out[key], max(0, int(out[key])) if _is_num(out[key]) else 0))
    for key in ("at_s", "ms", "every_s", "for_s"):
        if key in out and (not _is_num(out[key]) or out[key] < 0):
            raise FaultRuleError("fault rule %s %r: %r must be a number >= 0; closest valid value: 0" % (kind, key, out[key]))
    start, length = out.get("start", 0), out.get("length", 0)
    end = start + length if length else size
    if end > size or start >= size:
        raise FaultRuleError("fault rule %s region [%d, %d) is beyond the drive's %d bytes; closest valid 'start': %d"
                             % (kind, start, end, size, min(start, size - SECTOR)))
    if kind == "flip" and not 1 <= out.get("every", SECTOR) <= 1 << 20:
        raise FaultRuleError("fault rule flip 'every': %r must be 1 .. 1048576 bytes; closest valid value: %d"
                             % (out["every"], min(max(out["every"], 1), 1 << 20)))
    if kind == "misplace":
        if ("shift" in out) == ("from_offset" in out):
            raise FaultRuleError("fault rule misplace: needs exactly one of 'shift' or 'from_offset'")
        if "shift" in out and not _is_int(out["shift"]):
            raise FaultRuleError("fault rule misplace 'shift': %r must be an integer (bytes, may be negative)" % (out["shift"],))
        shift = out["shift"] if "shift" in out else out["from_offset"] - start
        if shift == 0 or start + shift < 0 or end + shift > size:
            raise FaultRuleError("fault rule misplace source [%d, %d) must be another region inside the drive's %d bytes"
                                 % (start + shift, end + shift, size))
    if kind == "drop":
        if start % SECTOR or end % SECTOR:
            raise FaultRuleError("fault rule drop region [%d, %d) must be whole %d-byte sectors; closest valid 'start': %d"
                                 % (start, end, SECTOR, start - start % SECTOR))
        if "rewrites_only" in out and not isinstance(out["rewrites_only"], bool):
            raise FaultRuleError("fault rule drop 'rewrites_only': %r must be true or false" % (out["rewrites_only"],))
        if "since" in out and out["since"] not in ("rule", "start"):
            raise FaultRuleError("fault rule drop 'since': %r; closest valid value: %r" % (out["since"], _closest(out["since"], ("rule", "start"))))
        if "since" in out and not out.get("rewrites_only"):
            raise FaultRuleError("fault rule drop 'since' needs 'rewrites_only': True")
    if kind == "delay" and not out.get("ms", 0) > 0:
        raise FaultRuleError("fault rule delay 'ms': %r must be > 0; e.g. 5" % (out.get("ms"),))
    if kind == "stall":
        if not out.get("for_s", 0) > 0:
            raise FaultRuleError("fault rule stall 'for_s': %r must be > 0; e.g. 1" % (out.get("for_s"),))
        every_s = out.get("every_s", 0)
        if every_s > 0 and out["for_s"] >= every_s:
            raise FaultRuleError("fault rule stall 'for_s' %r must be < 'every_s' %r (or every_s 0: one stall)"
                                 % (out["for_s"], every_s))
    return out


def _mix64(c, seed):
    """The daemon's SplitMix64 finaliser (faultdrive.c mix64): which bit of chunk c flips."""
    m = (1 << 64) - 1
    z = (c + (seed + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def flip_positions(start, length, every=SECTOR, seed=0):
    """[(absolute byte offset, xor mask)] a flip rule over [start, start+length) applies to
    what reads return: one bit per `every`-byte chunk of the drive (the chunk's bit chosen
    by its index and the seed), counted only where that byte lies inside the region."""
    out = []
    if length <= 0:
        return out
    end = start + length
    for c in range(start // every, (end - 1) // every + 1):
        bit = _mix64(c, seed) % (every * 8)
        at = c * every + bit // 8
        if start <= at < end:
            out.append((at, 1 << (bit % 8)))
    return out


def _run(argv, timeout=60, check=True):
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    if check and res.returncode:
        raise FaultDriveError("%s failed (rc %d): %s" % (" ".join(argv), res.returncode, res.stderr.strip() or res.stdout.strip()))
    return res


_AVAILABLE = None


def faultdrive_available():
    """(True, "") when a fault drive can be made here, else (False, why): root, /dev/fuse,
    fusermount3, losetup, make, gcc and libfuse3's development files (pkg-config fuse3)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = _probe()
    return _AVAILABLE


def _probe():
    if os.geteuid() != 0:
        return False, "the fault drive needs root (FUSE mount and losetup)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return False, "the fault drive needs /dev/fuse (%s)" % exc.strerror
    for tool, pkg in (("fusermount3", "fuse3"), ("losetup", "util-linux"), ("make", "make"), ("gcc", "gcc"), ("pkg-config", "pkg-config")):
        if not shutil.which(tool):
            return False, "the fault drive needs %s (Debian package %s)" % (tool, pkg)
    if subprocess.run(["pkg-config", "--exists", "fuse3"], check=False).returncode:
        return False, "the fault drive needs libfuse3's development files (Debian package libfuse3-dev)"
    return True, ""


_BUILT = {}


def build(sanitize=None):
    """Path of the daemon built from faultdrive.c (once per session and per source: the
    binary is cached under build/faultdrive/ by the sha256 of the source and Makefile).
    `sanitize`: "" (default, from $FAULTDRIVE_SANITIZE), "asan" (ASan+UBSan) or "tsan"."""
    flavour = os.environ.get("FAULTDRIVE_SANITIZE", "") if sanitize is None else sanitize
    if flavour not in SANITIZERS:
        raise FaultDriveError("sanitize / FAULTDRIVE_SANITIZE=%r; closest valid value: %r (one of %s)"
                              % (flavour, _closest(flavour, SANITIZERS[1:]), ", ".join(repr(s) for s in SANITIZERS)))
    if flavour in _BUILT and os.path.exists(_BUILT[flavour]):
        return _BUILT[flavour]
    digest = hashlib.sha256()
    for path in (SOURCE, MAKEFILE):
        with open(path, "rb") as fh:
            digest.update(fh.read())
    digest.update(_run(["pkg-config", "--modversion", "fuse3"]).stdout.encode())
    os.makedirs(CACHE, exist_ok=True)
    out = os.path.join(CACHE, "faultdrive%s-%s" % ("-" + flavour if flavour else "", digest.hexdigest()[:16]))
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent sessions build once
        if not os.path.exists(out):
            tmp = "%s.tmp%d" % (out, os.getpid())
            _run(["make", "-s", "-B", "-C", HERE, "OUT=" + tmp] + ([flavour] if flavour else []), timeout=300)
            os.rename(tmp, out)
    _BUILT[flavour] = out
    return out


def mount_type(path):
    """The type of the filesystem mounted at path (/proc/self/mountinfo), or None."""
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            parts = line.split()
            sep = parts.index("-")
            if parts[4].replace("\\040", " ") == path:
                return parts[sep + 1]
    return None


# the backing file of a loop device (sysfs), or None when it is detached
loop_backing = loopdev.backing_file


_LIVE = []
_LIVE_LOCK = threading.Lock()


class FaultDrive:
    """One fault-injecting drive: a FUSE daemon serving `workdir/<name>.mnt/<file>` over
    the backing file `workdir/<name>.img` (`size` bytes, zeroes), attached to a loop device
    with direct I/O (logical block size 512). Use as a context manager, or start()/stop().
    ``stop_timeout``: how long stop() waits for the daemon to honour SIGTERM (on a machine
    loaded by three test streams and four guests, one took over 10 s)."""

    def __init__(self, size=64 << 20, workdir=None, name="fd", file="disk", sanitize=None,
                 keep_backing=False, stop_timeout=30.0):
        if not _is_int(size) or size < SECTOR or size % SECTOR:
            raise FaultRuleError("FaultDrive size=%r: must be a positive multiple of %d bytes; closest valid value: %d"
                                 % (size, SECTOR, max(SECTOR, (int(size) if _is_num(size) else 0) // SECTOR * SECTOR)))
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", name):
            raise FaultRuleError("FaultDrive name=%r: letters, digits, '_', '.', '-' (at most 64); e.g. 'fd1'" % (name,))
        if file == "control" or not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", file):
            raise FaultRuleError("FaultDrive file=%r: a plain name other than 'control'; closest valid value: 'disk'" % (file,))
        self.size, self.name, self.file = size, name, file
        self.workdir = os.path.abspath(str(workdir) if workdir is not None else os.path.join(CACHE, "drives"))
        self.sanitize = sanitize
        self.keep_backing = keep_backing
        self.stop_timeout = stop_timeout
        self.backing = os.path.join(self.workdir, name + ".img")
        self.mountpoint = os.path.join(self.workdir, name + ".mnt")
        self.path = os.path.join(self.mountpoint, file)
        self.control = os.path.join(self.mountpoint, "control")
        self.log = os.path.join(self.workdir, name + ".log")
        self.device = None
        self.proc = None
        self._made_backing = self._made_mnt = False

    # ----- life cycle -----

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        self.stop(raise_errors=exc_type is None)
        return False

    def __repr__(self):
        return "FaultDrive(name=%r, device=%r, pid=%r)" % (self.name, self.device, self.pid)

    def start(self):
        """Build (cached), make the backing file, mount, attach the loop device; return self.
        On any failure, what was made is undone before the error is raised."""
        if self.proc is not None:
            raise FaultDriveError("fault drive %s already started (pid %s)" % (self.name, self.pid))
        binary = build(self.sanitize)
        os.makedirs(self.workdir, exist_ok=True)
        if mount_type(self.mountpoint):
            raise FaultDriveError("fault drive %s: %s is already a mount point (another drive with this name?)"
                                  % (self.name, self.mountpoint))
        with _LIVE_LOCK:
            _LIVE.append(self)
        try:
            with open(self.backing, "wb") as fh:
                fh.truncate(self.size)
            self._made_backing = True
            if not os.path.isdir(self.mountpoint):
                os.mkdir(self.mountpoint)
                self._made_mnt = True
            argv = [binary, "--backing=" + self.backing, "--file=" + self.file, self.mountpoint, "-f",
                    "-o", "fsname=faultdrive-%s,subtype=faultdrive" % self.name]
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            deadline = time.monotonic() + 15
            while mount_type(self.mountpoint) != "fuse.faultdrive":
                if self.proc.poll() is not None:
                    raise FaultDriveError("fault drive %s: the daemon exited (rc %s) before mounting: %s"
                                          % (self.name, self.proc.returncode, self._log_tail()))
                if time.monotonic() > deadline:
                    raise FaultDriveError("fault drive %s: not mounted at %s after 15 s: %s"
                                          % (self.name, self.mountpoint, self._log_tail()))
                time.sleep(0.02)
            try:
                self.device = loopdev.attach(self.path, direct_io=True)
            except loopdev.LoopError as exc:
                raise FaultDriveError("fault drive %s: %s" % (self.name, exc)) from exc
            dio = _run(["losetup", "-l", "-n", "-O", "DIO", self.device]).stdout.strip()
            if dio != "1":
                raise FaultDriveError("fault drive %s: %s attached without direct I/O (DIO=%s)" % (self.name, self.device, dio))
        except BaseException:
            self.stop(raise_errors=False)
            raise
        return self

    def _log_tail(self, limit=2000):
        try:
            with open(self.log, "rb") as fh:
                return fh.read().decode(errors="replace")[-limit:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def stop(self, raise_errors=True):
        """Undo everything start() made, in order, each step whatever the others did: clear
        the rules (so nothing stalls), detach the loop device, SIGTERM the daemon by PID
        (SIGKILL after stop_timeout), unmount, remove the mount point and backing file.
        Idempotent. Raises FaultDriveError for what could not be undone, or for a sanitizer
        report in the daemon's log (with raise_errors)."""
        errors = []
        if self.proc is not None and self.proc.poll() is None and mount_type(self.mountpoint):
            self._write_with_timeout('{"op": "clear"}\n', 5)
        if self.device:
            # only while it is still ours: this process bound it and our file backs it
            # (a device the kernel cleared may be another's by now)
            try:
                loopdev.detach(self.device, self.path)
                why = "held open?"
            except loopdev.LoopError as exc:
                why = str(exc)
            if loop_backing(self.device) == self.path:
                errors.append("%s is still attached (%s)" % (self.device, why))
            self.device = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    errors.append("daemon pid %d ignored SIGTERM for %.0f s; killed" % (self.proc.pid, self.stop_timeout))
                    self.proc.kill()
                    self.proc.wait(30)
            elif self.proc.returncode not in (0, -signal.SIGTERM):
                errors.append("daemon pid %d had exited with rc %s" % (self.proc.pid, self.proc.returncode))
        if mount_type(self.mountpoint):
            self._abort_connection()
            for argv in (["fusermount3", "-u", "-z", self.mountpoint], ["umount", "-l", self.mountpoint]):
                if subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode == 0:
                    break
            if mount_type(self.mountpoint):
                errors.append("%s is still mounted" % self.mountpoint)
        if self._made_mnt and not mount_type(self.mountpoint):
            try:
                os.rmdir(self.mountpoint)
                self._made_mnt = False
            except OSError as exc:
                errors.append("rmdir %s: %s" % (self.mountpoint, exc.strerror))
        if self._made_backing and not self.keep_backing:
            try:
                os.unlink(self.backing)
            except FileNotFoundError:
                pass
            self._made_backing = False
        if self.proc is not None:
            log = self._log_tail(20000)
            if any(mark in log for mark in _SANITIZER_MARKS):
                errors.append("sanitizer report in %s: %s" % (self.log, log[-3000:]))
        self.proc = None if self.proc is None or self.proc.poll() is not None else self.proc
        with _LIVE_LOCK:
            if self in _LIVE and self.proc is None:
                _LIVE.remove(self)
        if errors and raise_errors:
            raise FaultDriveError("fault drive %s: %s" % (self.name, "; ".join(errors)))
        return errors

    def _abort_connection(self):
        """Abort the FUSE connection of the mount (its requests then fail at once)."""
        try:
            dev = os.stat(self.mountpoint).st_dev
        except OSError:
            return
        try:
            with open("/sys/fs/fuse/connections/%d/abort" % os.minor(dev), "w") as fh:
                fh.write("1")
        except OSError:
            pass

    def _write_with_timeout(self, text, timeout):
        """Write to control from a thread, so a stopped or hung daemon cannot hang stop()."""
        done = threading.Event()

        def write():
            try:
                fd = os.open(self.control, os.O_WRONLY)
                try:
                    os.write(fd, text.encode())
                finally:
                    os.close(fd)
            except OSError:
                pass
            done.set()

        threading.Thread(target=write, daemon=True).start()
        return done.wait(timeout)

    # ----- control -----

    def _need_running(self):
        if self.proc is None or self.proc.poll() is not None:
            raise FaultDriveError("fault drive %s is not running" % self.name)

    def control_write(self, text):
        """Send a raw batch of control lines (flat JSON objects); the daemon applies all
        or none. Raises FaultRuleError with the daemon's reason when it refuses."""
        self._need_running()
        fd = os.open(self.control, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        except OSError as exc:
            reason = self.status().get("last_error") or exc.strerror
            raise FaultRuleError("fault drive %s refused the rules: %s" % (self.name, reason)) from None
        finally:
            os.close(fd)

    def _lines(self, rules):
        if isinstance(rules, dict):
            rules = [rules]
        return [json.dumps(check_rule(r, self.size), sort_keys=True) for r in rules]

    def set(self, rules):
        """Replace the rules with `rules` (a list of dicts, or one dict), atomically."""
        self.control_write("\n".join(['{"op": "clear"}'] + self._lines(rules)) + "\n")

    def add(self, rules):
        """Add one rule (dict) or several (list) to the active ones."""
        self.control_write("\n".join(self._lines(rules)) + "\n")

    def remove(self, rule_id):
        """Remove the rule with this id (from stats())."""
        self.control_write(json.dumps({"op": "remove", "id": rule_id}) + "\n")

    def clear(self):
        """Remove every rule."""
        self.control_write('{"op": "clear"}\n')

    def status(self):
        """The daemon's whole report: drive counters (reads, writes, read_bytes, write_bytes,
        errors, syncs, uptime_s, generation, last_error) and its rules."""
        self._need_running()
        with open(self.control) as fh:
            return json.loads(fh.read())

    def stats(self):
        """The active rules, each with its id, fields, age_s, active, hits (requests it
        affected) and bytes (bytes of those requests inside its region)."""
        return self.status()["rules"]


def _cleanup_all():
    """atexit: stop every drive this process started and did not stop."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for drive in reversed(live):
        try:
            drive.stop(raise_errors=False)
        except Exception:  # a safety net must try every drive
            pass


atexit.register(_cleanup_all)


class KernelLog:
    """Kernel messages from now on, read from /dev/kmsg (``pri,seq,usec,flags;text``)."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def read(self):
        """Texts of the messages logged since the last read."""
        out = []
        while True:
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before we read them: go on
                    continue
                return out
            text = rec.decode(errors="replace").partition(";")[2]
            out.append(text.split("\n", 1)[0])

    def wait_for(self, pattern, timeout=5.0):
        """The first message (since the last read) matching the regex, or None after timeout."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for text in self.read():
                if rx.search(text):
                    return text
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def close(self):
        os.close(self.fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
