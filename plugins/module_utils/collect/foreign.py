# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Foreign I/O and impact limits on the host (docs/compliance.md): what else uses the disk while a
workload runs, and how the workload keeps out of its way. Used by ``workload.run_workload``.

* **Attribution** (``cgroup``): the benchmark runs in a block-I/O group of its own
  (``cgroups.py``: a cgroup v1 ``blkio`` child of the job's group with the job's and its
  ancestors' strictest throttle rules copied in; on cgroup v2 under systemd a transient unit
  systemd makes in the job's slice (``units.py``), else an ``io`` group below the job's path),
  never less limited than the session that started it; the record says which limits it
  inherited and which it carries (``cgroup``). The kernel charges every bio our processes submit to it, per device:
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
  keeps them compactly and ``plugin_utils/metrics/workload.py`` (the one reader of the result)
  computes the foreign figures over the samples inside the measured window.
* **Quiet wait**: before the workload, the devices are sampled for ``sample_s`` seconds;
  while their %util is above ``quiet_util_pct`` the job samples again, for at most
  ``wait_s`` seconds, then runs, or gives up (``quiet.ok`` false: the workload is not run).
* **Guard**: while the benchmark runs, the foreign I/O's own await per sample interval:
  (device read+write ticks - the benchmark's summed latency) / (device requests - the
  benchmark's requests). Above ``guard_await_ms`` for ``guard_samples`` intervals in a row
  (with at least ``guard_min_iops`` foreign requests/s) the benchmark is stopped, and the
  record says why (``guard``).
* **Impact limits** (``impact``): idle I/O priority, ``nice``, the IOPS, bandwidth, thread
  and working-set caps are ``impact.py``; the settings' defaults and validation are
  ``module_utils/collect/foreign_settings.py``.
"""

import bisect
import collections
import json
import os
import threading
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.foreign_settings import (
    FOREIGN_DEFAULTS,
    IMPACT_DEFAULTS,
    options,
    validate,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.impact import (
    applied,
    enforced_note,
    io_weight,
    kernel_limits,
    limit_params,
    preexec,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.cgroups import Cgroup
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import OPS


# --------------------------------------------------------------------------- devices

def read_stat(dev):
    """The 17 (or fewer, older kernels) counters of ``/sys/block/<dev>/stat`` as ints, or None."""
    try:
        with open("/sys/block/%s/stat" % dev) as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return None


def readable_devices(devices):
    """The devices whose ``/sys/block/<dev>/stat`` can be read (the ones a sampler can watch)."""
    return [d for d in devices or [] if read_stat(d) is not None]


def util_pct(a, b, secs):
    """%util of one device between two stat readings ``secs`` apart (io_ticks, field 10)."""
    if not a or not b or secs <= 0 or len(a) < 10 or len(b) < 10:
        return None
    return min(100.0, (b[9] - a[9]) / (secs * 1000.0) * 100.0)


# --------------------------------------------------------------------------- sampling

def _stat_subset(st):
    """rd_ios, rd_sectors, rd_ticks, wr_ios, wr_sectors, wr_ticks, io_ticks (counters) and
    in_flight (a gauge: the requests the device holds at that instant); the kernel's
    Documentation/admin-guide/iostats.rst, fields 1, 3, 4, 5, 7, 8, 10 and 9."""
    return [st[0], st[2], st[3], st[4], st[6], st[7], st[9], st[8]] if st and len(st) >= 10 else None


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
    """One sample: ``{e: epoch, d: {dev: [7 counters, in_flight]}, c: {dev: [4]} | None, l: [6], w: bool, r: run}``
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


# how often the sampler looks for iobench's next live-log line, and its shortest sleep
LIVE_LOOK_S = 0.05
MIN_PAUSE_S = 0.001


class Sampler(threading.Thread):
    """Samples while the benchmark runs; with a guard limit, sets ``stop`` (and ``reason``)
    when the foreign await stays above it."""

    def __init__(self, devices, cgroup, live_path, fopts, stop, keep=None):
        super().__init__(name="fleetqual-foreign-sampler")
        self.daemon = True
        self.devices = devices
        self.cgroup = cgroup
        self.live = LiveLog(live_path)
        self.fopts = fopts
        self.stop_bench = stop
        self.done = threading.Event()
        # ``keep``: only the last so many samples (a bound on a long workload's memory)
        self.samples = collections.deque(maxlen=keep) if keep else []
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
            # a live log is looked at 20 times a second, so that its lines are sampled as they come;
            # without one, the thread sleeps until the next sample is due
            pause = LIVE_LOOK_S if self.live.path else max(MIN_PAUSE_S, self._t + interval - time.monotonic())
            if self.done.wait(pause):
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
        return list(self.samples)


# --------------------------------------------------------------------------- silences

# The device samples every workload keeps (``device_samples``; a compliance run's too, beside
# its foreign-I/O samples): read this often, so that a silence of one second holds several of
# them, and at most the last hour of them in memory (a silence earlier in a longer workload
# is judged without them).
SILENCE_SAMPLE_S = 0.2
SILENCE_KEEP = int(3600 / SILENCE_SAMPLE_S)


def interval_completions(iv):
    """The reads, writes and fsyncs completed in one interval of iobench's series."""
    return sum(iv.get(op + "_ops") or 0 for op in OPS if is_number(iv.get(op + "_ops")))


def near_silences(samples, intervals, start_epoch):
    """The samples read inside an interval of iobench's series in which nothing completed
    (a silence; ``start_epoch``: the series' origin), and the last one before and the first
    one after each such interval (kept even when none fell inside: a gap in the samples is
    the host not running the sampler): what the stall rule reads a silence's device counters
    from, without keeping every sample of a long run."""
    if not isinstance(start_epoch, (int, float)):
        return []
    spans = []
    for iv in intervals or []:
        t, dur = iv.get("t"), iv.get("duration_s")
        if not isinstance(t, (int, float)) or not isinstance(dur, (int, float)) or dur <= 0:
            continue
        if interval_completions(iv) == 0:
            spans.append((start_epoch + t - dur, start_epoch + t))
    epochs = [smp["e"] for smp in samples]      # in the order they were read
    keep = set()
    for a, b in spans:
        lo, hi = bisect.bisect_left(epochs, a), bisect.bisect_right(epochs, b)
        keep.update(range(lo - 1, hi + 1))
    return [samples[i] for i in sorted(keep) if 0 <= i < len(samples)]


def wait_quiet(devices, fopts, stop=None, progress=None):
    """Sample ``sample_s`` seconds at a time until the devices' %util is at most
    ``quiet_util_pct``, for at most ``wait_s`` seconds. Returns the ``quiet`` record:
    ``{ok, waited_s, util_pct, rounds, limit_pct, wait_s}``. ``progress`` (the job's
    ``Job.quiet_progress``) is told each busy round ``{waiting: true, util_pct, limit_pct,
    waited_s, wait_s, devices}`` and, at the end, ``{waiting: false, waited_s}``."""
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
            if progress is not None:
                progress({"waiting": False, "waited_s": round(waited, 1)})
            return {"ok": ok, "waited_s": round(waited, 1), "util_pct": util, "rounds": rounds,
                    "limit_pct": limit, "wait_s": float(fopts["wait_s"])}
        if progress is not None:
            progress({"waiting": True, "util_pct": util, "limit_pct": limit, "waited_s": round(waited, 1),
                      "wait_s": float(fopts["wait_s"]), "devices": list(devices)})


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
        self.devices = readable_devices(devices)
        self.stop = stop
        self.label = params.get("run_id")       # the run id, in the name of a systemd unit
        self.bench_stop = threading.Event()
        self.cgroup = None
        self.sampler = None
        self.pid = None
        self.live_path = None
        self.got = None
        self.section = {"settings": dict(self.fopts, impact=self.iopts), "devices": self.devices, "source": None,
                        "blind": None, "quiet": None, "samples": [], "guard": None, "impact": None,
                        "cgroup_error": None, "cgroup": None, "skipped": None}

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
            report = params.get("quiet_progress")
            quiet = wait_quiet(self.devices, f, self.stop, report if callable(report) else None)
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
        if self.fopts["enabled"] and self.fopts["cgroup"] == "auto" and self.devices and os.geteuid() != 0:
            # a run without root (fleetqual_become false) makes no cgroup: attribution by iobench's own
            # requests, the reason recorded (docs/privileges.md)
            self.section["cgroup_error"] = "not root (uid %d): no cgroup is made without root" % os.geteuid()
        elif self.fopts["enabled"] and self.fopts["cgroup"] == "auto" and self.devices:
            self.cgroup = Cgroup(self.devices, caps=kernel_limits(self.iopts), weight=io_weight(self.iopts),
                                 label=self.label)
            err = self.cgroup.create()
            if err:
                self.section["cgroup_error"] = err
                self.cgroup = None
        if self.cgroup is not None:
            self.section["source"] = self.cgroup.source()
            self.section["cgroup"] = self.cgroup.describe()
            # the impact caps the kernel enforces on the group, and those it would not take
            if self.section["impact"] is None:
                self.section["impact"] = {"notes": []}
            self.section["impact"]["notes"].extend(
                enforced_note(self.cgroup.source(), self.cgroup.enforced, self.cgroup.weight if self.cgroup.unit else None)
                + self.cgroup.notes)
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
            # the caps' and the group's notes first, then what the child got
            notes = self.section["impact"].get("notes") or []
            self.section["impact"].update(got)
            self.section["impact"]["notes"] = notes + [n for n in got.get("notes") or [] if n not in notes]
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
    p["run_id"] = spec.get("run_id")
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


__all__ = ["read_stat", "readable_devices", "util_pct", "LiveLog", "take_sample", "foreign_await", "Sampler", "SILENCE_SAMPLE_S", "SILENCE_KEEP",
           "interval_completions", "near_silences", "wait_quiet",
           "supports_live_log", "Run", "job_params"]
