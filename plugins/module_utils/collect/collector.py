# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Background iostat / vmstat capture while a benchmark runs.

``Collector(devices, interval, source)``; ``start()``; run the benchmark;
``stop()`` -> dict with ``source``, ``reason``, ``iostat`` and ``vmstat``
sample lists, every sample stamped with its wall-clock ``epoch`` (end of its
interval).

* ``sysstat``: ``iostat -dxy -o JSON <interval> <devices>`` and
  ``vmstat -n -w <interval>`` as child processes (argv lists, ``LC_ALL=C``),
  each read line by line by a thread that stamps samples on arrival. ``stop()``
  terminates them, waits (kills after a grace period) and joins the readers:
  no orphan survives.
* ``procfs``: one thread samples /proc/diskstats, /proc/stat and /proc/vmstat
  every interval (on a monotonic schedule) and computes the iostat -x and
  vmstat fields with sysstat's formulas (``sysstat.compute_iostat`` /
  ``compute_vmstat``).
* ``none``: nothing.

``choose_source(requested, which)`` decides ``auto``.
"""

import os
import signal
import subprocess
import threading
import time

from shutil import which as _which

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import (
    IostatStream,
    VmstatStream,
    parse_diskstats,
    parse_proc_stat,
    parse_proc_vmstat,
    compute_iostat,
    compute_vmstat,
    iostat_json_usable,
)


def probe_iostat(iostat):
    """Run ``iostat -dx -o JSON`` once (the since-boot report, immediate) and
    check we can read it: sysstat before 11.5 has no JSON output. Returns
    ``(ok, why_not)``."""
    try:
        p = subprocess.Popen([iostat, "-dx", "-o", "JSON"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=_proc_env(), close_fds=True)
        out, err = p.communicate(timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "it cannot be run (%s)" % e
    if p.returncode != 0:
        return False, "'iostat -dx -o JSON' failed (exit %d: %s); sysstat 11.5 or later is needed" % (
            p.returncode, err.decode("utf-8", "replace").strip()[:200])
    return iostat_json_usable(out.decode("utf-8", "replace"))


def sysstat_missing(requested, which=_which):
    """True when ``requested`` (auto or sysstat) would use iostat and it is not installed:
    what installing the package sysstat changes (procfs and none never use it)."""
    return requested in ("auto", "sysstat") and not which("iostat")


def choose_source(requested, which=_which, probe=probe_iostat):
    """Return ``(source, reason, tools)`` for ``requested`` in auto|sysstat|procfs|none.

    ``tools`` maps iostat/vmstat to their paths (None when not used). ``auto``
    uses iostat when it is installed and its JSON output is readable
    (``probe``), else /proc. Raises ``ValueError`` when ``sysstat`` is
    requested and iostat is missing or unusable.
    """
    if requested == "none":
        return "none", "collection disabled (collect: none)", {"iostat": None, "vmstat": None}
    if requested == "procfs":
        return "procfs", "collect: procfs requested; sampled /proc/diskstats, /proc/stat and /proc/vmstat", \
            {"iostat": None, "vmstat": None}
    iostat = which("iostat")
    vmstat = which("vmstat")
    if iostat:
        ok, why = probe(iostat)
        if ok:
            reason = None
            if not vmstat:
                reason = "vmstat not found; vmstat fields sampled from /proc/stat and /proc/vmstat"
            return "sysstat", reason, {"iostat": iostat, "vmstat": vmstat}
        missing = "iostat at %s is unusable: %s" % (iostat, why)
    else:
        missing = "iostat not found"
    if requested == "sysstat":
        raise ValueError("collect: sysstat requested but %s; install sysstat 11.5 or later, or use "
                         "collect: auto or procfs" % (missing if iostat else
                                                      "iostat (package sysstat) is not installed on this host"))
    return "procfs", "%s; sampled /proc/diskstats and /proc/vmstat" % missing, \
        {"iostat": None, "vmstat": None}


def _proc_env():
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    env.pop("S_COLORS", None)
    env.pop("S_TIME_FORMAT", None)
    return env


class _Child(object):
    """A child process whose stdout lines are fed to ``parser.feed(line, epoch)``."""

    def __init__(self, argv, parser):
        self.argv = argv
        self.parser = parser
        self.proc = None
        self.thread = None
        self.stderr = b""
        self.error = None

    def start(self):
        self.parser.started(time.time())
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL if hasattr(subprocess, "DEVNULL") else None,
                                     env=_proc_env(), close_fds=True)
        self.thread = threading.Thread(target=self._read, name="collector-%s" % os.path.basename(self.argv[0]))
        self.thread.daemon = True
        self.thread.start()

    def _read(self):
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                epoch = time.time()
                try:
                    self.parser.feed(raw.decode("utf-8", "replace"), epoch)
                except Exception as e:  # keep reading; remember the first problem
                    if self.error is None:
                        self.error = "%s: cannot parse %r: %s" % (self.argv[0], raw[:200], e)
        except (IOError, OSError, ValueError) as e:
            if self.error is None:
                self.error = "%s: read error: %s" % (self.argv[0], e)

    def stop(self, grace=5.0):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
            deadline = time.time() + grace
            while self.proc.poll() is None and time.time() < deadline:
                time.sleep(0.02)
            if self.proc.poll() is None:
                try:
                    self.proc.kill()
                except OSError:
                    pass
                self.proc.wait()
        if self.thread is not None:
            self.thread.join(grace)
        try:
            self.stderr = self.proc.stderr.read() or b""
        except (IOError, OSError, ValueError):
            pass
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (IOError, OSError):
                pass
        rc = self.proc.returncode
        # terminated by us: -SIGTERM; anything else non-zero with no output is an error
        if rc not in (0, -signal.SIGTERM, -signal.SIGKILL) and self.error is None:
            self.error = "%s exited %s: %s" % (self.argv[0], rc,
                                               self.stderr.decode("utf-8", "replace").strip()[:300])


class _ProcfsSampler(object):
    """Samples /proc every ``interval`` seconds in a thread and computes iostat/vmstat fields."""

    def __init__(self, devices, interval, proc_root="/proc", want_iostat=True, want_vmstat=True):
        self.devices = list(devices)
        self.interval = float(interval)
        self.proc_root = proc_root
        self.want_iostat = want_iostat and bool(self.devices)
        self.want_vmstat = want_vmstat
        self.iostat = []
        self.vmstat = []
        self.error = None
        self._stop = threading.Event()
        self.thread = None
        try:
            self.pagesize = os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            self.pagesize = 4096

    def _readf(self, name):
        with open(os.path.join(self.proc_root, name)) as f:
            return f.read()

    def snapshot(self):
        snap = {"mono": time.monotonic(), "epoch": time.time()}
        if self.want_iostat:
            snap["disk"] = parse_diskstats(self._readf("diskstats"))
        if self.want_vmstat:
            snap["stat"] = parse_proc_stat(self._readf("stat"))
            snap["vmstat"] = parse_proc_vmstat(self._readf("vmstat"))
        return snap

    def start(self):
        self.thread = threading.Thread(target=self._run, name="collector-procfs")
        self.thread.daemon = True
        self.thread.start()

    def _run(self):
        try:
            prev = self.snapshot()
            t0 = prev["mono"]
            i = 0
            while True:
                i += 1
                delay = t0 + i * self.interval - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
                if self._stop.is_set():
                    return
                cur = self.snapshot()
                self.add(prev, cur, i - 1)
                prev = cur
        except Exception as e:  # report instead of dying silently
            self.error = "procfs sampling failed: %s" % e

    def add(self, prev, cur, index):
        dt = cur["mono"] - prev["mono"]
        if dt <= 0:
            return
        epoch = round(cur["epoch"], 3)
        start = round(prev["epoch"], 3)
        if self.want_iostat:
            for dev in self.devices:
                if dev in prev["disk"] and dev in cur["disk"]:
                    rec = compute_iostat(prev["disk"][dev], cur["disk"][dev], dt)
                    rec["device"] = dev
                    rec["index"] = index
                    rec["epoch"] = epoch
                    rec["start_epoch"] = start
                    self.iostat.append(rec)
        if self.want_vmstat:
            rec = compute_vmstat(prev, cur, dt, self.pagesize)
            rec["index"] = index
            rec["epoch"] = epoch
            rec["start_epoch"] = start
            self.vmstat.append(rec)

    def stop(self):
        self._stop.set()
        if self.thread is not None:
            self.thread.join(max(5.0, self.interval * 2))


class Collector(object):
    """Run the collectors for ``devices`` (iostat names) every ``interval`` s.

    ``source`` is sysstat, procfs or none (see ``choose_source``); ``tools``
    the iostat/vmstat paths for sysstat.
    """

    def __init__(self, devices, interval=1, source="procfs", tools=None, proc_root="/proc"):
        self.devices = list(devices or [])
        self.interval = int(interval)
        self.source = source
        self.tools = tools or {}
        self.proc_root = proc_root
        self.children = []
        self.sampler = None
        self.iostat_parser = None
        self.vmstat_parser = None
        self.started_epoch = None
        self.stopped_epoch = None
        self.argvs = []

    def start(self):
        self.started_epoch = time.time()
        if self.source == "none":
            return
        if self.source == "sysstat":
            if self.devices and self.tools.get("iostat"):
                self.iostat_parser = IostatStream()
                argv = [self.tools["iostat"], "-dxy", "-o", "JSON", str(self.interval)] + self.devices
                self.children.append(_Child(argv, self.iostat_parser))
            if self.tools.get("vmstat"):
                self.vmstat_parser = VmstatStream(skip_first=True)
                argv = [self.tools["vmstat"], "-n", "-w", str(self.interval)]
                self.children.append(_Child(argv, self.vmstat_parser))
            else:
                self.sampler = _ProcfsSampler([], self.interval, self.proc_root, want_iostat=False)
        else:
            self.sampler = _ProcfsSampler(self.devices, self.interval, self.proc_root)
        started = []
        try:
            for c in self.children:
                c.start()
                started.append(c)
                self.argvs.append(c.argv)
            if self.sampler is not None:
                self.sampler.start()
        except Exception:
            for c in started:
                c.stop()
            raise

    def stop(self):
        """Stop everything (always safe to call twice) and return the samples."""
        for c in self.children:
            c.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.stopped_epoch is None:
            self.stopped_epoch = time.time()
        errors = [c.error for c in self.children if c.error]
        if self.sampler is not None and self.sampler.error:
            errors.append(self.sampler.error)
        iostat = []
        vmstat = []
        if self.iostat_parser is not None:
            iostat = self.iostat_parser.samples
        if self.vmstat_parser is not None:
            vmstat = self.vmstat_parser.samples
        if self.sampler is not None:
            iostat = iostat or self.sampler.iostat
            vmstat = vmstat or self.sampler.vmstat
        return {
            "source": self.source,
            "devices": self.devices,
            "interval_s": self.interval,
            "started_epoch": round(self.started_epoch, 3) if self.started_epoch else None,
            "stopped_epoch": round(self.stopped_epoch, 3),
            "commands": self.argvs,
            "errors": errors,
            "iostat": iostat,
            "vmstat": vmstat,
        }
