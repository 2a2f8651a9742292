# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Foreign I/O and impact limits on the host (issue 17): what else uses the disk while a
workload runs, and how the workload keeps out of its way. Used by ``workload.run_workload``.

* **Attribution** (``cgroup``): the benchmark runs in a block-I/O cgroup of its own (cgroup
  v1 ``blkio``: ``/sys/fs/cgroup/blkio/fleetqual-<pid>``; cgroup v2: an ``io`` cgroup beside
  the job's own). The kernel charges every bio our processes submit to it, per device:
  reads (buffered readahead included), O_DIRECT writes, and the writeback our own
  ``fsync``/``fdatasync`` calls issue. What it cannot see is said in ``blind``: the
  journal commits the filesystem's thread (jbd2, xfsaild) writes for our fsyncs and, on
  cgroup v1, writeback that the kernel's flusher threads do for our buffered writes;
  both are charged to the root group and therefore count as foreign. On cgroup v1 the
  per-device counters of a group only run once the device's throttling is activated: we
  write the no-limit rule ``<maj:min> 0`` into our own group's
  ``blkio.throttle.read_iops_device`` (it limits nothing and leaves no rule behind).
  Without a cgroup (not root, no controller) the attribution falls back to the
  benchmark's own completed requests from ``iobench --live-log`` (``iobench``), which
  cannot see any filesystem write amplification, and counts page-cache hits as ours.
* **Samples**: a thread reads the devices' ``/sys/block/<dev>/stat``, the cgroup's
  counters and the live log at the same instants, every ``interval`` seconds; the record
  keeps them compactly and ``plugin_utils/metrics.py`` (the one reader of the result)
  computes the foreign figures over the samples inside the measured window.
* **Quiet wait**: before the workload, the devices are sampled for ``sample_s`` seconds;
  while their %util is above ``quiet_util_pct`` the job samples again, for at most
  ``wait_s`` seconds, then runs, or gives up (``quiet.ok`` false: the workload is not run).
* **Guard**: while the benchmark runs, the foreign I/O's own await per sample interval:
  (device read+write ticks - the benchmark's summed latency) / (device requests - the
  benchmark's requests). Above ``guard_await_ms`` for ``guard_samples`` intervals in a row
  (with at least ``guard_min_iops`` foreign requests/s) the benchmark is stopped, and the
  record says why (``guard``).
* **Impact limits** (``impact``): idle I/O priority (``ioprio_set`` IDLE in the child before
  it executes iobench; recorded with the device's scheduler and whether it honours it),
  ``nice``, an IOPS cap and a bandwidth cap (a rate from the block size, through
  ``--rate-iops``), a thread cap and a working-set cap (a share of the free space).
"""

import ctypes
import ctypes.util
import difflib
import json
import os
import platform
import threading
import time

BLKIO_V1 = "/sys/fs/cgroup/blkio"
CGROUP2_CANDIDATES = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")

FOREIGN_DEFAULTS = dict(enabled=True, max_share=0.1, wait_s=120, on_busy="inconclusive", sample_s=3.0,
                        quiet_util_pct=10.0, interval=1.0, guard_await_ms=0.0, guard_samples=2,
                        guard_min_iops=5.0, min_foreign_iops=5.0, cgroup="auto")
IMPACT_DEFAULTS = dict(ioprio="none", nice=0, max_iops=0.0, max_mibps=0.0, max_threads=0, max_free_share=0.0,
                       budget_s=0)
ON_BUSY = ("inconclusive", "fail", "warn")

# schedulers and whether they honour the IDLE I/O priority class
SCHEDULER_IDLE = {
    "bfq": (True, "bfq serves idle-class I/O only when no other class waits"),
    "cfq": (True, "cfq serves idle-class I/O only when no other class waits"),
    "mq-deadline": (False, "mq-deadline orders dispatch by priority class (kernel 5.14+) but has no idle "
                           "semantics: idle-class requests still compete"),
    "kyber": (False, "kyber ignores I/O priorities"),
    "none": (False, "no scheduler: I/O priorities are ignored"),
}

IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13
_SYS_IOPRIO = {"x86_64": (251, 252), "i386": (289, 290), "i686": (289, 290), "aarch64": (30, 31),
               "arm64": (30, 31), "riscv64": (30, 31), "ppc64le": (273, 274), "ppc64": (273, 274),
               "s390x": (282, 283), "armv7l": (314, 315)}


def options(given, defaults):
    """``given`` over ``defaults`` (None values take the default); ``(options, errors)``."""
    out = dict(defaults)
    errors = []
    if given is not None and not isinstance(given, dict):
        return out, ["must be a mapping, got %s" % type(given).__name__]
    for k, v in (given or {}).items():
        if k not in defaults:
            close = difflib.get_close_matches(str(k), sorted(defaults), n=1)
            hint = " (did you mean %s?)" % close[0] if close else ""
            errors.append("%s: unknown key%s; known: %s" % (k, hint, ", ".join(sorted(defaults))))
        elif v is not None:
            out[k] = v
    return out, errors


def settings_errors(foreign_io, impact, host=None):
    """Every problem of the role's ``fleetqual_foreign_io`` / ``fleetqual_impact`` (after the
    profile's), as sentences naming the host and the variable, for the controller's
    validation before any host is contacted."""
    fopts, ferr = options(foreign_io, FOREIGN_DEFAULTS)
    iopts, ierr = options(impact, IMPACT_DEFAULTS)
    errors = ["fleetqual_foreign_io.%s" % e if ":" in e else "fleetqual_foreign_io %s" % e for e in ferr]
    errors += ["fleetqual_impact.%s" % e if ":" in e else "fleetqual_impact %s" % e for e in ierr]
    if not errors:
        try:
            errors = [e.replace("foreign_io.", "fleetqual_foreign_io.").replace("impact.", "fleetqual_impact.")
                      for e in validate(fopts, iopts)]
        except (TypeError, ValueError) as e:
            errors = ["fleetqual_foreign_io / fleetqual_impact: a value is not a number: %s" % e]
    return ["host %s: %s" % (host, e) if host else e for e in errors]


def validate(foreign, impact):
    """Errors of the ``foreign_io`` and ``impact`` settings (after :func:`options`)."""
    errors = []
    if not 0 <= float(foreign["max_share"]) <= 1:
        errors.append("foreign_io.max_share must be between 0 and 1, got %s" % foreign["max_share"])
    if foreign["on_busy"] not in ON_BUSY:
        errors.append("foreign_io.on_busy must be one of %s, got %r" % (", ".join(ON_BUSY), foreign["on_busy"]))
    for k in ("wait_s", "sample_s", "quiet_util_pct", "guard_await_ms", "guard_min_iops", "min_foreign_iops"):
        if float(foreign[k]) < 0:
            errors.append("foreign_io.%s must not be negative, got %s" % (k, foreign[k]))
    if not 0.1 <= float(foreign["interval"]) <= 60:
        errors.append("foreign_io.interval must be between 0.1 and 60 seconds, got %s" % foreign["interval"])
    if foreign["cgroup"] not in ("auto", "off"):
        errors.append("foreign_io.cgroup must be auto or off, got %r" % foreign["cgroup"])
    if impact["ioprio"] not in ("none", "idle"):
        errors.append("impact.ioprio must be none or idle, got %r" % impact["ioprio"])
    if not -20 <= int(impact["nice"]) <= 19:
        errors.append("impact.nice must be between -20 and 19, got %s" % impact["nice"])
    for k in ("max_iops", "max_mibps", "max_threads", "budget_s"):
        if float(impact[k]) < 0:
            errors.append("impact.%s must not be negative, got %s" % (k, impact[k]))
    if not 0 <= float(impact["max_free_share"]) <= 1:
        errors.append("impact.max_free_share must be between 0 and 1, got %s" % impact["max_free_share"])
    return errors


# --------------------------------------------------------------------------- devices

def read_stat(dev):
    """The 17 (or fewer, older kernels) counters of ``/sys/block/<dev>/stat`` as ints, or None."""
    try:
        with open("/sys/block/%s/stat" % dev) as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return None


def devnum(dev):
    try:
        with open("/sys/block/%s/dev" % dev) as fh:
            return fh.read().strip()
    except OSError:
        return None


def scheduler(dev):
    """``{name, idle_honoured, note}`` of the device's I/O scheduler (``[name]`` in
    ``/sys/block/<dev>/queue/scheduler``)."""
    try:
        with open("/sys/block/%s/queue/scheduler" % dev) as fh:
            text = fh.read()
    except OSError as e:
        return {"device": dev, "name": None, "idle_honoured": False, "note": "scheduler unknown: %s" % e}
    name = text[text.find("[") + 1:text.find("]")] if "[" in text else text.strip() or None
    honoured, note = SCHEDULER_IDLE.get(name, (False, "scheduler %s: idle priority not known to be honoured" % name))
    return {"device": dev, "name": name, "idle_honoured": honoured, "note": note}


def util_pct(a, b, secs):
    """%util of one device between two stat readings ``secs`` apart (io_ticks, field 10)."""
    if not a or not b or secs <= 0 or len(a) < 10 or len(b) < 10:
        return None
    return min(100.0, (b[9] - a[9]) / (secs * 1000.0) * 100.0)


# --------------------------------------------------------------------------- cgroup

def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


class Cgroup:
    """The benchmark's own block-I/O cgroup (v1 blkio or v2 io); ``counters()`` gives
    ``{dev: [rios, rbytes, wios, wbytes]}`` for the devices it was made for."""

    def __init__(self, devices, name=None):
        self.devices = [d for d in devices if devnum(d)]
        self.numbers = {devnum(d): d for d in self.devices}
        self.name = name or "fleetqual-%d-%d" % (os.getpid(), int(time.time() * 1000) % 1000000)
        self.path = None
        self.version = None
        self.error = None

    def create(self):
        """Create it; return None, or why it could not be made."""
        errors = []
        if os.path.isfile(os.path.join(BLKIO_V1, "blkio.throttle.io_serviced")):
            path = os.path.join(BLKIO_V1, self.name)
            try:
                os.mkdir(path, 0o755)
                self.path, self.version = path, 1
                for num in self.numbers:
                    # activates the queue's throttling (and so the group's counters); 0 = no limit
                    _write(os.path.join(path, "blkio.throttle.read_iops_device"), "%s 0" % num)
                return None
            except OSError as e:
                errors.append("cgroup v1 blkio %s: %s" % (path, e))
                self.remove()
        for root in CGROUP2_CANDIDATES:
            ctl = os.path.join(root, "cgroup.subtree_control")
            try:
                with open(ctl) as fh:
                    enabled = fh.read().split()
            except OSError:
                continue
            if "io" not in enabled:
                errors.append("cgroup v2 %s: the io controller is not enabled for its children" % root)
                continue
            path = os.path.join(root, self.name)
            try:
                os.mkdir(path, 0o755)
                self.path, self.version = path, 2
                return None
            except OSError as e:
                errors.append("cgroup v2 %s: %s" % (path, e))
        self.error = "; ".join(errors) or "no blkio (v1) or io (v2) cgroup controller mounted"
        return self.error

    @property
    def procs(self):
        return os.path.join(self.path, "cgroup.procs") if self.path else None

    def counters(self):
        if not self.path:
            return None
        out = dict((d, [0, 0, 0, 0]) for d in self.devices)
        try:
            if self.version == 1:
                for fname, col in (("blkio.throttle.io_serviced", 0), ("blkio.throttle.io_service_bytes", 1)):
                    with open(os.path.join(self.path, fname)) as fh:
                        for line in fh:
                            parts = line.split()
                            if len(parts) == 3 and parts[0] in self.numbers and parts[1] in ("Read", "Write"):
                                out[self.numbers[parts[0]]][col + (2 if parts[1] == "Write" else 0)] = int(parts[2])
            else:
                with open(os.path.join(self.path, "io.stat")) as fh:
                    for line in fh:
                        parts = line.split()
                        if parts and parts[0] in self.numbers:
                            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
                            keys = ("rios", "rbytes", "wios", "wbytes")
                            out[self.numbers[parts[0]]] = [int(kv.get(k, 0)) for k in keys]
        except (OSError, ValueError):
            return None
        return out

    def remove(self):
        """Remove the group (its processes have ended; any left is moved to the parent first)."""
        if not self.path:
            return
        parent = os.path.dirname(self.path)
        try:
            with open(self.procs) as fh:
                for pid in fh.read().split():
                    try:
                        _write(os.path.join(parent, "cgroup.procs"), pid)
                    except OSError:
                        pass
        except OSError:
            pass
        for _attempt in range(50):
            try:
                os.rmdir(self.path)
                break
            except OSError:
                time.sleep(0.1)
        self.path = None


# --------------------------------------------------------------------------- priority

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


def _ioprio_nr(which):
    nums = _SYS_IOPRIO.get(platform.machine())
    return None if nums is None else nums[which]


def ioprio_get(pid):
    """The I/O priority class of ``pid`` (0 none, 1 RT, 2 BE, 3 IDLE), or None."""
    nr = _ioprio_nr(1)
    if nr is None:
        return None
    value = _libc().syscall(nr, IOPRIO_WHO_PROCESS, pid)
    return None if value < 0 else value >> IOPRIO_CLASS_SHIFT


def preexec(procs_path=None, ioprio="none", nice=0):
    """A ``preexec_fn`` that joins the cgroup, sets the idle I/O class and the nice value in
    the child before it executes the benchmark (failures are seen afterwards by
    :func:`applied`, which reads what the child really got)."""
    nr = _ioprio_nr(0) if ioprio == "idle" else None
    libc = _libc() if nr is not None else None

    def fn():
        if procs_path:
            try:
                fd = os.open(procs_path, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
            except OSError:
                pass
        if libc is not None:
            libc.syscall(nr, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT)
        if nice:
            try:
                os.nice(int(nice))
            except OSError:
                pass
    return fn


def applied(pid, cgroup, ioprio, nice, devices):
    """What the child really got: ``{cgroup, ioprio, nice, schedulers, notes}``."""
    notes = []
    in_group = None
    if cgroup is not None and cgroup.path:
        try:
            with open(cgroup.procs) as fh:
                in_group = str(pid) in fh.read().split()
        except OSError:
            in_group = False
        if not in_group:
            notes.append("the benchmark could not join cgroup %s" % cgroup.path)
    got_class = ioprio_get(pid) if ioprio == "idle" else None
    scheds = [scheduler(d) for d in devices]
    if ioprio == "idle":
        if got_class != IOPRIO_CLASS_IDLE:
            notes.append("idle I/O priority not set (class %s)" % got_class)
        for s in scheds:
            if not s["idle_honoured"]:
                notes.append("device %s: idle I/O priority not honoured: %s" % (s["device"], s["note"]))
    try:
        got_nice = os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        got_nice = None
    return {"in_cgroup": in_group, "ioprio_class": got_class, "nice": got_nice, "schedulers": scheds, "notes": notes}


# --------------------------------------------------------------------------- impact

def limit_params(params, impact, block_size, total_size, free_bytes):
    """Apply the impact caps to the run parameters (a copy): ``(params, notes)``. A
    bandwidth cap becomes a request rate: max_mibps x 1 MiB / block size."""
    p = dict(params)
    notes = []
    rates = []
    if impact.get("max_iops"):
        rates.append(float(impact["max_iops"]))
    if impact.get("max_mibps") and block_size:
        rates.append(float(impact["max_mibps"]) * 1048576.0 / block_size)
    if rates and p.get("engine", "sync") == "sync" and not p.get("search") and p.get("mode") != "dbpattern":
        cap = max(1.0, round(min(rates), 1))
        if not p.get("rate_iops") or p["rate_iops"] > cap:
            p["rate_iops"] = cap
            notes.append("paced at %s requests/s (max_iops %s, max_mibps %s at block %d)"
                         % (cap, impact.get("max_iops") or "-", impact.get("max_mibps") or "-", block_size or 0))
    elif rates:
        notes.append("not paced: rate pacing needs the sync engine and a plain run (not search or dbpattern)")
    if impact.get("max_threads") and p.get("threads", 1) > int(impact["max_threads"]) and not p.get("search"):
        notes.append("threads %d capped to %d" % (p["threads"], int(impact["max_threads"])))
        p["threads"] = int(impact["max_threads"])
    share = float(impact.get("max_free_share") or 0)
    if share and total_size and free_bytes is not None and not p.get("device"):
        cap = int(free_bytes * share)
        files = max(1, int(p.get("file_num") or 1))
        unit = files * (block_size or 512)
        if total_size > cap:
            new = max(unit, cap // unit * unit)
            p["total_size"] = new
            notes.append("working set %d bytes capped to %d (%s of the %d bytes free)"
                         % (total_size, new, share, free_bytes))
    return p, notes


# --------------------------------------------------------------------------- sampling

def _stat_subset(st):
    """rd_ios, rd_sectors, rd_ticks, wr_ios, wr_sectors, wr_ticks, io_ticks."""
    return [st[0], st[2], st[3], st[4], st[6], st[7], st[9]] if st and len(st) >= 10 else None


class LiveLog:
    """Reads the lines ``iobench --live-log`` appends, keeping the last one."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.last = None
        self.buf = b""

    def poll(self):
        if not self.path:
            return None
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return self.last
        self.offset += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                self.last = doc
        return self.last


def take_sample(devices, cgroup, live, line=None):
    """One sample: ``{e: epoch, d: {dev: [7 counters]}, c: {dev: [4]} | None, l: [6], w: bool, r: run}``
    (``l``: iobench's live-log line: reads, read bytes, read latency ns, writes, ...)."""
    ln = live.poll() if live is not None else line
    s = {"e": round(time.time(), 4), "d": {d: _stat_subset(read_stat(d)) for d in devices}}
    c = cgroup.counters() if cgroup is not None else None
    s["c"] = c
    if ln:
        s["l"] = [int(ln.get(k) or 0) for k in ("reads", "read_bytes", "read_lat_ns", "writes", "write_bytes",
                                                "write_lat_ns")]
        s["w"] = bool(ln.get("window"))
        s["r"] = ln.get("run")
    return s


def foreign_await(a, b):
    """``(foreign requests/s, foreign await ms)`` between two samples, or ``(None, None)``:
    (device read+write ticks - the benchmark's summed latency) / (device requests - ours),
    over every device; ours are the cgroup's requests when there is one, else iobench's."""
    if not a.get("l") or not b.get("l") or a.get("r") != b.get("r"):
        return None, None
    secs = b["e"] - a["e"]
    dev_ios = dev_ticks = our_ios = 0
    for d, cur in b["d"].items():
        prev = a["d"].get(d)
        if not cur or not prev:
            return None, None
        dev_ios += (cur[0] - prev[0]) + (cur[3] - prev[3])
        dev_ticks += (cur[2] - prev[2]) + (cur[5] - prev[5])
        if a.get("c") and b.get("c"):
            ca, cb = a["c"].get(d) or [0] * 4, b["c"].get(d) or [0] * 4
            our_ios += (cb[0] - ca[0]) + (cb[2] - ca[2])
    if not (a.get("c") and b.get("c")):
        our_ios = (b["l"][0] - a["l"][0]) + (b["l"][3] - a["l"][3])
    our_ms = ((b["l"][2] - a["l"][2]) + (b["l"][5] - a["l"][5])) / 1e6
    fios = dev_ios - our_ios
    if secs <= 0:
        return None, None
    if fios <= 0:
        return 0.0, None
    return fios / secs, max(0.0, dev_ticks - our_ms) / fios


class Sampler(threading.Thread):
    """Samples while the benchmark runs; with a guard limit, sets ``stop`` (and ``reason``)
    when the foreign await stays above it."""

    def __init__(self, devices, cgroup, live_path, fopts, stop):
        super().__init__(name="fleetqual-foreign-sampler")
        self.daemon = True
        self.devices = devices
        self.cgroup = cgroup
        self.live = LiveLog(live_path)
        self.fopts = fopts
        self.stop_bench = stop
        self.done = threading.Event()
        self.samples = []
        self.guard = None
        self.over = 0
        self._t = 0.0

    def run(self):
        # a sample when iobench writes a live-log line (so the benchmark's counts and the
        # device's are read together), else every ``interval`` seconds
        interval = float(self.fopts["interval"])
        last = None
        while True:
            now = time.monotonic()
            line = self.live.poll()
            fresh = line is not None and line is not last
            if fresh or not self.samples or now - self._t >= (2 * interval if last is not None else interval):
                last = line
                self._t = now
                self.samples.append(take_sample(self.devices, self.cgroup, None, line))
                self._check()
            if self.done.wait(0.05):
                break
        self.samples.append(take_sample(self.devices, self.cgroup, self.live))

    def _check(self):
        limit = float(self.fopts.get("guard_await_ms") or 0)
        if not limit or self.guard or len(self.samples) < 2:
            return
        a, b = self.samples[-2], self.samples[-1]
        rate, aw = foreign_await(a, b)
        if aw is not None and rate >= float(self.fopts["guard_min_iops"]) and aw > limit:
            self.over += 1
        else:
            self.over = 0
        if self.over >= int(self.fopts["guard_samples"]):
            self.guard = {"stopped": True, "epoch": b["e"], "foreign_await_ms": round(aw, 2),
                          "foreign_iops": round(rate, 1), "limit_ms": limit,
                          "reason": "stopped: the other I/O's await was %.1f ms (> %s ms) for %d intervals "
                                    "of %s s, at %.0f requests/s not ours"
                                    % (aw, limit, self.over, self.fopts["interval"], rate)}
            self.stop_bench.set()

    def finish(self):
        self.done.set()
        self.join(30)
        return self.samples


def wait_quiet(devices, fopts, stop=None):
    """Sample ``sample_s`` seconds at a time until the devices' %util is at most
    ``quiet_util_pct``, for at most ``wait_s`` seconds. Returns the ``quiet`` record:
    ``{ok, waited_s, util_pct, rounds, limit_pct, wait_s}``."""
    began = time.monotonic()
    rounds = 0
    util = None
    sample_s = max(0.2, float(fopts["sample_s"]))
    limit = float(fopts["quiet_util_pct"])
    while True:
        a = {d: read_stat(d) for d in devices}
        t0 = time.monotonic()
        if stop is not None:
            stop.wait(sample_s)
        else:
            time.sleep(sample_s)
        b = {d: read_stat(d) for d in devices}
        secs = time.monotonic() - t0
        utils = [u for u in (util_pct(a[d], b[d], secs) for d in devices) if u is not None]
        util = round(max(utils), 1) if utils else None
        rounds += 1
        waited = time.monotonic() - began
        ok = util is None or util <= limit
        if ok or waited >= float(fopts["wait_s"]) or (stop is not None and stop.is_set()):
            return {"ok": ok, "waited_s": round(waited, 1), "util_pct": util, "rounds": rounds,
                    "limit_pct": limit, "wait_s": float(fopts["wait_s"])}


# --------------------------------------------------------------------------- one workload

def supports_live_log(help_text):
    return b"--live-log" in help_text


class Run:
    """The foreign-I/O side of one workload run (``workload.run_workload``): quiet wait,
    caps, cgroup, sampler, guard, and the ``foreign`` section of the result."""

    def __init__(self, params, devices, stop=None):
        self.fopts, ferr = options(params.get("foreign_io"), FOREIGN_DEFAULTS)
        self.iopts, ierr = options(params.get("impact"), IMPACT_DEFAULTS)
        self.errors = ["foreign_io: %s" % e for e in ferr] + ["impact: %s" % e for e in ierr]
        if not self.errors:
            self.errors = validate(self.fopts, self.iopts)
        self.enabled = bool(params.get("foreign_io") is not None or params.get("impact") is not None)
        self.devices = [d for d in devices or [] if read_stat(d) is not None]
        self.stop = stop
        self.bench_stop = threading.Event()
        self.cgroup = None
        self.sampler = None
        self.pid = None
        self.live_path = None
        self.got = None
        self.section = {"settings": dict(self.fopts, impact=self.iopts), "devices": self.devices, "source": None,
                        "blind": None, "quiet": None, "samples": [], "guard": None, "impact": None,
                        "cgroup_error": None, "skipped": None}

    def budget_left(self, params):
        end = params.get("budget_end_epoch")
        return None if not end else end - time.time()

    def before(self, params, sizes):
        """Wait for a quiet device and apply the caps: ``(params, skip_reason or None, notes)``."""
        notes = []
        left = self.budget_left(params)
        if left is not None and left <= 0:
            self.section["skipped"] = ("no time left for this workload: the host's time budget (budget_s %s) or the "
                                       "job's deadline came first" % (self.iopts["budget_s"] or "-"))
            return params, self.section["skipped"], notes
        if self.fopts["enabled"] and self.devices:
            f = dict(self.fopts)
            if left is not None:
                f["wait_s"] = max(0.0, min(float(f["wait_s"]), left))
            quiet = wait_quiet(self.devices, f, self.stop)
            self.section["quiet"] = quiet
            if not quiet["ok"]:
                self.section["skipped"] = ("the device never got quiet: %%util %s > %s %% over %s s of waiting"
                                           % (quiet["util_pct"], quiet["limit_pct"], quiet["waited_s"]))
                return params, self.section["skipped"], notes
        free = None
        path = params.get("dir")
        while path and not os.path.exists(path):
            path = os.path.dirname(path)
        if path:
            try:
                st = os.statvfs(path)
                free = st.f_bavail * st.f_frsize
            except OSError:
                free = None
        params, notes = limit_params(params, self.iopts, sizes.get("block_size"), sizes.get("total_size"), free)
        if "total_size" in params and params["total_size"] != sizes.get("total_size") and sizes.get("total_size"):
            sizes["total_size"] = params["total_size"]
        self.section["impact"] = {"notes": list(notes)}
        return params, None, notes

    def start(self, tmpdir, supports_live):
        """Create the cgroup; return ``(extra argv, preexec_fn)``."""
        extra = []
        self.live_path = None
        if supports_live:
            self.live_path = os.path.join(tmpdir, "live.jsonl")
            extra = ["--live-log", self.live_path]
        if self.fopts["enabled"] and self.fopts["cgroup"] == "auto" and self.devices:
            self.cgroup = Cgroup(self.devices)
            err = self.cgroup.create()
            if err:
                self.section["cgroup_error"] = err
                self.cgroup = None
        if self.cgroup is not None:
            self.section["source"] = "cgroup-v%d" % self.cgroup.version
            self.section["blind"] = (
                "journal commits written by the filesystem's own thread for our fsyncs%s count as foreign"
                % (", and writeback of our buffered writes done by the kernel's flusher threads (cgroup v1 "
                   "charges it to the root group)" if self.cgroup.version == 1 else ""))
        elif self.live_path:
            self.section["source"] = "iobench"
            self.section["blind"] = ("no cgroup (%s): ours are the benchmark's own completed requests; every "
                                     "write the filesystem adds (journal, metadata, writeback merging) counts as "
                                     "foreign, and reads the page cache served count as ours"
                                     % (self.section["cgroup_error"] or "cgroup off"))
        else:
            self.section["blind"] = "no cgroup and no iobench --live-log: foreign I/O not measured"
        procs = self.cgroup.procs if self.cgroup is not None else None
        if not self.fopts["enabled"]:
            procs = None
        return extra, preexec(procs, self.iopts["ioprio"], int(self.iopts["nice"] or 0))

    def on_start(self, proc):
        self.pid = proc.pid
        # the child has executed iobench: what it got (cgroup, I/O class, nice), read while it runs
        self.got = applied(self.pid, self.cgroup, self.iopts["ioprio"], self.iopts["nice"], self.devices)
        if self.fopts["enabled"] and self.devices and self.section["source"]:
            self.sampler = Sampler(self.devices, self.cgroup, self.live_path, self.fopts, self.bench_stop)
            self.sampler.start()

    def watch_stop(self):
        """An event for ``run_bench``: set by the guard or by the job's own stop."""
        if self.stop is None:
            return self.bench_stop
        outer, inner = self.stop, self.bench_stop

        def relay():
            while not inner.is_set():
                if outer.wait(0.5):
                    inner.set()
        t = threading.Thread(target=relay, name="fleetqual-stop-relay")
        t.daemon = True
        t.start()
        return inner

    def finish(self):
        """Stop sampling, read what the child got, remove the cgroup; the ``foreign`` section."""
        if self.sampler is not None:
            self.section["samples"] = self.sampler.finish()
            self.section["guard"] = self.sampler.guard
        got = self.got
        if self.section["impact"] is None:
            self.section["impact"] = {"notes": []}
        if got:
            self.section["impact"].update(got)
        if self.cgroup is not None:
            self.cgroup.remove()
        self.bench_stop.set()
        return self.section


def job_params(spec, params, started_epoch, wl=None, index=None):
    """One workload's run parameters with the ``foreign_io`` / ``impact`` settings (the
    job module's parameters of those names; the plan workload's own keys of those names
    win, which is how the role passes them) and ``budget_end_epoch``: the end of the
    host's time budget, and never later than the latest start that lets this workload and
    the rest of the plan finish before the job's deadline (a quiet wait must not make the
    job expire)."""
    p = dict(params)
    wl = wl or {}
    for key in ("foreign_io", "impact"):
        value = wl.get(key) if wl.get(key) is not None else spec.get(key)
        if value is not None:
            p[key] = value
    if p.get("foreign_io") is None and p.get("impact") is None:
        return p
    ends = []
    budget = (p.get("impact") or {}).get("budget_s")
    if budget:
        ends.append(float(started_epoch) + float(budget))
    if index is not None and spec.get("deadline_s") and spec.get("planned"):
        rest = sum(int(x) for x in spec["planned"][index:])
        ends.append(float(started_epoch) + float(spec["deadline_s"]) - rest - 30)
    if ends:
        p["budget_end_epoch"] = min(ends)
    return p
