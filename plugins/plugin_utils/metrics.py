# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Flat per-workload metrics (docs/contracts.md section 4, ``metrics``): the one reader
of the benchmark's result.

Computed once from ``record['result']`` (iobench JSON in ``bench``, the collector's
``iostat``) and stored in the workload record, so the judge, the diagnostics, the
callback and the reports read the same numbers and never the raw JSON. Never raises on
odd input: a missing op, a missing collector, NaN or a wrong type gives ``None``.

Conventions:

* ``iops`` / ``mibps`` are read + write (fsyncs are not I/O transfers; see
  ``fsync_per_sec``).
* An op the benchmark reports with ``count`` 0 has rate 0.0 and latency ``None`` (the
  workload does not do that op); an op absent from the JSON has everything ``None``.
  ``commit_*`` are iobench's ``ops.commit`` (one sample per fsync, from the start of the
  oldest write it makes durable to the end of the fsync).
* Latencies are milliseconds (iobench reports microseconds); ``p999`` is p99.9.
* **Which latency describes a workload** (``latency_op``; ``lat_<pct>_ms`` are its
  percentiles; docs/report.md, "The headline latency"). The one rule, used by every report
  format, the Prometheus series and the history's drift: the headline latency is what ONE
  request or ONE transaction waits on the device:

  - reads at least as many as writes (read-only runs, read-dominated mixes, 50/50
    mixes): ``read``;
  - otherwise, when each commit is a transaction's own wait -- an fsync after every write
    of the thread (``fsync_freq`` 1, ``fsync_all``; without the config, at least as many
    fsyncs as writes): ``commit`` (write plus the fsync that makes it durable); when the
    benchmark did not report ``ops.commit`` (an older iobench), ``fsync``, and
    ``latency_note`` says so;
  - otherwise (plain, ``O_DSYNC`` or ``O_SYNC`` writes, where the write is the commit, and
    **periodic fsyncs**, ``fsync_freq`` > 1): ``write``. A periodic-fsync workload's
    commit span runs from the oldest write since the file's last fsync to the end of the
    fsync: it holds every write between, and under ``--rate-iops`` the pacing sleeps
    between them, so it measures the schedule, not the device (23 s at 2,000 requests/s
    over 128 files, for 0.2 ms writes and 0.16 ms fsyncs). Its fsync percentiles are
    beside the write's (``fsync_<pct>_ms``, ``latency_note``), its commit spans stay in
    ``commit_*``;
  - fsyncs only: ``fsync``; nothing measured: ``None``.

  iobench measures read and write latency from the request's actual issue, after any
  pacing sleep (``engine_sync.c``), so no latency figure holds time iobench spent pacing
  itself, except the commit spans of periodic fsyncs, which the rule above never heads.
* ``concurrency`` ``{threads, iodepth}`` is what the figures were measured at: for a
  latency-bounded search the best step (else the last step), else the run's config.
* ``dev_*`` are the device's figures over the measured window, summed over the devices
  behind the target for rates. ``dev_source`` tells where they come from: ``devstat``
  (iobench's ``window.devstat``: the kernel's counters read at the window's exact start
  and end, so reads, writes, bytes, await, aqu-sz and util are exact, computed with
  sysstat's formulas by ``module_utils.sysstat.compute_iostat``), ``iostat`` (the
  average of the collector's iostat samples in the window), or ``None`` (no device
  figures; ``device_note`` says why when iobench reported a devstat error).
  ``dev_read_bytes`` / ``dev_write_bytes`` are window totals (exact with devstat,
  rate x window with iostat); ``bench_read_bytes`` / ``bench_write_bytes`` the
  benchmark's.
* ``dev_read_ratio`` / ``dev_write_ratio`` = device r/s (w/s) divided by the benchmark's
  read (write) ops/s. An over-cache random-read run that really reaches the disk has
  ``dev_read_ratio`` near 1 (or above, when the device splits requests); near 0 means
  the page or controller cache served the reads. A write ratio above 1 shows journal /
  metadata amplification.
* ``steady_state``: ``None`` unless the run asked for it, else ``{reached, round,
  rounds (how many ran), max_rounds, metric, values (the tracked value per round)}``.
* ``stability``: the run's pace from iobench's per-interval series (``None`` with fewer
  than 6 full intervals; the short tail interval is left out): ``{intervals, first_iops, last_iops (means of the first and last
  third), change_pct, min_iops, max_iops, series (<= 12 means of equal slices)}``.
* ``search`` / ``db``: compact copies of iobench's search steps and database-pattern
  figures (``None`` for other runs), for the diagnostics.
* ``foreign_*`` (docs/compliance.md; ``None`` when the job ran without ``foreign_io``): the I/O on
  the target's devices that was not ours, from the samples ``module_utils/foreign.py``
  took beside the benchmark (device counters and ours read at the same instants; the
  samples around the measured window: the last one at or before its start to the first
  one at or after its end, ``foreign_span_s`` long). Ours are the requests and bytes the
  kernel charged to the benchmark's own cgroup (``foreign_source`` ``cgroup-v1`` /
  ``cgroup-v2``), else the benchmark's own completed requests from its live log
  (``iobench``); ``foreign_blind`` says what that method cannot see. ``foreign_reads`` /
  ``foreign_writes`` / ``*_bytes`` = device minus ours, never below 0 (our bios merge into
  fewer device requests); ``foreign_share`` = the larger of foreign requests / device
  requests and foreign bytes / device bytes (0 on an idle device); ``foreign_iops`` the
  foreign requests per second (the judge ignores a share whose foreign I/O is under
  ``foreign_min_iops``: 2 journal writes against a device that did nothing else are 100 %
  of nothing); ``foreign_busy_pct`` =
  the device's %util x the foreign request share; ``foreign_await_ms`` = (device read+write
  ticks - the benchmark's summed latency) / foreign requests (with a live log).
  ``foreign_quiet`` is the wait before the run (``{ok, waited_s, util_pct, ...}``),
  ``foreign_skipped`` why it did not run (never quiet, time budget spent),
  ``foreign_guard`` why the guard stopped it, ``foreign_max_share`` / ``foreign_on_busy``
  the settings it ran with, ``impact`` what the run got (``ioprio_class``, ``nice``,
  ``schedulers``, ``notes``: caps applied, priority not honoured), ``foreign_cgroup`` the
  attribution group (``{version, path, parent, inherited: [{rule, device, value, from,
  applies}]}``: the job's block-I/O limits it kept, docs/compliance.md) or None.
* Integrity, for the judge: ``measured`` (true when the result carries the benchmark's
  JSON, else null), ``errors``, ``error_kinds``, ``error_first``, ``interrupted``,
  ``signal``, ``timed_out``; ``filesystem`` of the target (iobench's environment).
* Data verification (iobench's ``verify`` section; docs/integrity.md), every key ``None``
  when the benchmark reported no ``verify`` section (an iobench without verification):

  - ``verify_enabled`` (bool), ``verify_reason`` (why it was off, else null);
  - ``verify_checked``: blocks whose header and checksum were checked (reads and the
    verify pass); ``verify_corrupt`` (checksum wrong), ``verify_misplaced`` (the header
    names another offset), ``verify_stale`` (an older generation than the last
    acknowledged write: a lost write); ``verify_bad`` = their sum;
  - ``verify_stale_tracked``: whether the generation map was kept, so lost writes could
    be seen at all (``verify_stale_reason`` says why not, e.g. the map's memory bound);
  - ``verify_pass``: the read-back pass after a write workload ``{blocks, bytes,
    elapsed_s, mib_per_sec}`` or null when none ran;
  - ``verify_first``: the first mismatches (at most 16) ``[{op, file, device, offset, found_offset,
    kind, expected, found}]``, as iobench reported them.
* I/O errors in detail: ``error_samples`` (at most 16 of ``{op, file, device, offset,
  errno, errno_name, t_s, message}``, the first error first), ``errors_ok_after_first``
  (requests that succeeded after the first error: > 0 means the drive still serves the
  rest of its space, 0 with errors means it stopped answering), ``errors_stopped``
  (``max_errors`` when the workload was stopped after ``errors_max`` errors, else null).
  ``error_first`` is the first error as one line (``read /dev/loop7 offset 1048576: EIO
  (Input/output error) at 3.2 s``).
"""

import re

from ansible_collections.fleetqual.storage.plugins.module_utils.sysstat import (
    DISKSTATS_KEYS,
    compute_iostat,
    iostat_average,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.vocabulary import (
    dig,
    OPS,
    PCT_SOURCE,
    PCTS,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stalls import stall_figures
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import as_number, mean, median, ratio
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import fmt_ms
from ansible_collections.fleetqual.storage.plugins.module_utils.numeric import is_int

# ops with latency percentiles in the metrics (rules' built-in limits cover OPS)
METRIC_OPS = OPS + ("commit",)
LATENCY_OPS = ("read", "write", "fsync", "commit")

# metrics key -> iostat -x column
DEVICE_FIELDS = (
    ("dev_r_s", "r/s"),
    ("dev_w_s", "w/s"),
    ("dev_rkb_s", "rkB/s"),
    ("dev_wkb_s", "wkB/s"),
    ("dev_r_await_ms", "r_await"),
    ("dev_w_await_ms", "w_await"),
    ("dev_aqu_sz", "aqu-sz"),
    ("dev_util_pct", "%util"),
    ("dev_rareq_sz_kb", "rareq-sz"),
    ("dev_wareq_sz_kb", "wareq-sz"),
)

FOREIGN_KEYS = ("foreign_share", "foreign_reads", "foreign_writes", "foreign_read_bytes", "foreign_write_bytes",
                "foreign_bytes", "foreign_iops", "foreign_min_iops", "foreign_busy_pct", "foreign_await_ms", "foreign_span_s", "foreign_source",
                "foreign_blind", "foreign_quiet", "foreign_guard", "foreign_skipped", "foreign_max_share",
                "foreign_on_busy", "impact", "foreign_cgroup")

# data verification (iobench's verify section) and I/O errors in detail: integrity_figures
VERIFY_KINDS = ("corrupt", "misplaced", "stale")
VERIFY_FIRST_MAX = 16
INTEGRITY_KEYS = ("verify_enabled", "verify_reason", "verify_checked", "verify_corrupt", "verify_misplaced",
                  "verify_stale", "verify_bad", "verify_stale_tracked", "verify_stale_reason", "verify_pass",
                  "verify_first", "error_samples", "errors_ok_after_first", "errors_stopped", "errors_max")

STABILITY_MIN_INTERVALS = 6
STABILITY_SERIES_POINTS = 12

METRIC_KEYS = (
    ("iops", "mibps", "read_iops", "write_iops", "fsync_per_sec")
    + tuple("%s_%s_ms" % (op, pct) for op in OPS for pct in PCTS)
    + tuple(k for k, _col in DEVICE_FIELDS)
    + ("errors", "interrupted", "read_count", "write_count", "fsync_count", "elapsed_s",
       "dev_read_ratio", "dev_write_ratio")
    # the commit, headline latency, device and run figures (docs/contracts.md section 4)
    + tuple("commit_%s_ms" % pct for pct in PCTS)
    + ("commit_count", "latency_op", "latency_note")
    + tuple("lat_%s_ms" % pct for pct in PCTS)
    + ("read_mibps", "write_mibps", "concurrency", "device", "dev_source", "device_note",
       "dev_read_bytes", "dev_write_bytes", "bench_read_bytes", "bench_write_bytes",
       "steady_state", "stability", "stall", "search", "db",
       "error_kinds", "error_first", "signal", "timed_out", "measured", "filesystem")
    # foreign I/O over the window (see foreign_figures, docs/compliance.md)
    + FOREIGN_KEYS
    # data verification and I/O errors in detail (see integrity_figures, docs/integrity.md)
    + INTEGRITY_KEYS
)


def op_count(record_or_bench, op):
    """Number of ``op`` operations iobench reported, or None when unknown."""
    bench = record_or_bench
    if isinstance(bench, dict) and "result" in bench:
        bench = dig(bench, "result", "bench")
    count = dig(bench, "ops", op, "count")
    return count if is_int(count) else as_number(count)


def _sum(*values):
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


# at least this many fsyncs per write: each write has its own (fsync_freq 1; the measured
# window's edges cut a request or two off either count)
PER_WRITE_FSYNCS = 0.9


def per_write_fsync(config, write_count=None, fsync_count=None):
    """Whether each write of a thread is followed by its own fsync (a commit is then one
    transaction's wait): from the benchmark's config (``fsync_all``, ``fsync_freq`` 1), else,
    without one (an older record), from the counts; None when neither tells."""
    cfg = config if isinstance(config, dict) else {}
    if cfg.get("fsync_all") is True:
        return True
    freq = as_number(cfg.get("fsync_freq"))
    if freq is not None:
        return freq == 1
    w, f = as_number(write_count), as_number(fsync_count)
    if w and f is not None:
        return f >= PER_WRITE_FSYNCS * w
    return None


def latency_op(read_count, write_count, fsync_count, has_commit, per_write=None):
    """The operation whose latency describes a workload (the rule of the module docstring).
    ``per_write``: whether each write has its own fsync (:func:`per_write_fsync`); None:
    decided from the counts."""
    r, w, f = read_count or 0, write_count or 0, fsync_count or 0
    if r and r >= w:
        return "read"
    if w:
        if f and (per_write if per_write is not None else f >= PER_WRITE_FSYNCS * w):
            return "commit" if has_commit else "fsync"
        return "write"
    return "fsync" if f else None


def headline_latency(m, config=None):
    """Set ``latency_op``, ``lat_<pct>_ms`` and ``latency_note`` of the metrics ``m`` (its
    per-op figures filled) by the one rule (:func:`latency_op`)."""
    per_write = per_write_fsync(config, m["write_count"], m["fsync_count"])
    op = latency_op(m["read_count"], m["write_count"], m["fsync_count"], bool(m["commit_count"]), per_write)
    m["latency_op"] = op
    if op is not None:
        for pct in PCTS:
            m["lat_%s_ms" % pct] = m["%s_%s_ms" % (op, pct)]
    if op == "fsync" and m["write_count"]:
        m["latency_note"] = ("fsync percentiles: this iobench reports no commit latency (ops.commit), "
                             "the write before each fsync is not included")
    elif op == "write" and m["fsync_count"]:
        freq = as_number((config or {}).get("fsync_freq")) if isinstance(config, dict) else None
        m["latency_note"] = (
            "periodic fsync (%s): the write latency; each fsync's own: p50 %s, p99 %s; the commit spans "
            "(commit_*) run from the oldest write since the file's last fsync and hold every write and pause "
            "between, so they are not one request's wait"
            % ("every %d writes per file" % int(freq) if freq else "fewer fsyncs than writes",
               fmt_ms(m.get("fsync_p50_ms")), fmt_ms(m.get("fsync_p99_ms"))))
    return op


def _concurrency(bench, result_spec):
    search = bench.get("search")
    if isinstance(search, dict):
        best = search.get("best")
        steps = search.get("steps") if isinstance(search.get("steps"), list) else []
        if is_int(best) and 0 <= best < len(steps):
            best = steps[best]
        if not isinstance(best, dict) and steps:
            best = steps[-1]
        if isinstance(best, dict):
            return {"threads": as_number(best.get("threads")), "iodepth": as_number(best.get("iodepth")) or 1}
    cfg = bench.get("config") if isinstance(bench.get("config"), dict) else {}
    threads = as_number(cfg.get("threads"))
    if threads is None:
        threads = as_number(result_spec.get("threads"))
    iodepth = as_number(cfg.get("iodepth"))
    if iodepth is None:
        iodepth = as_number(result_spec.get("iodepth")) or 1
    if threads is None:
        return None
    return {"threads": threads, "iodepth": iodepth}


def window_seconds(bench):
    """Length of the measured window: its epochs, else ``elapsed_s``."""
    start, end = as_number(dig(bench, "window", "start_epoch")), as_number(dig(bench, "window", "end_epoch"))
    if start is not None and end is not None and end > start:
        return end - start
    el = as_number(bench.get("elapsed_s"))
    return el if el and el > 0 else None


def _counters(values):
    if not isinstance(values, list) or len(values) < 11 or not all(is_int(v) and v >= 0 for v in values):
        return None
    vals = list(values[:len(DISKSTATS_KEYS)]) + [0] * max(0, len(DISKSTATS_KEYS) - len(values))
    return dict(zip(DISKSTATS_KEYS, vals))


def devstat_figures(bench):
    """Exact device figures over the window from ``window.devstat``:
    ``(iostat-like avg mapping, read bytes, write bytes, devices)``, or None when absent.

    Each device's start/end counters (/sys/block/<dev>/stat fields, sectors of 512
    bytes) go through sysstat's formulas (``compute_iostat``) over the window's length;
    devices combine as the collector's average does (rates summed, awaits weighted by
    ops, %util the busiest device's)."""
    devstat = dig(bench, "window", "devstat")
    secs = window_seconds(bench)
    if not isinstance(devstat, dict) or not devstat or not secs:
        return None
    samples, rbytes, wbytes = [], 0, 0
    for dev, d in devstat.items():
        if not isinstance(d, dict):
            continue
        start, end = _counters(d.get("start")), _counters(d.get("end"))
        if start is None or end is None:
            continue
        samples.append(dict(compute_iostat(start, end, secs), device=dev))
        rbytes += (end["rd_sectors"] - start["rd_sectors"]) % (1 << 64) * 512
        wbytes += (end["wr_sectors"] - start["wr_sectors"]) % (1 << 64) * 512
    if not samples:
        return None
    return iostat_average(samples), rbytes, wbytes, [s["device"] for s in samples]


def _device(result, bench, m):
    """Fill the dev_* figures, their source, the device string and byte totals."""
    exact = devstat_figures(bench)
    avg = dig(result, "iostat", "avg")
    error = dig(bench, "window", "devstat_error")
    if exact is not None:
        avg, rbytes, wbytes, devs = exact
        m["dev_source"] = "devstat"
        m["device"] = ",".join(devs)
        m["dev_read_bytes"], m["dev_write_bytes"] = rbytes, wbytes
    elif isinstance(avg, dict) and any(as_number(avg.get(col)) is not None for _key, col in DEVICE_FIELDS):
        m["dev_source"] = "iostat"
        secs = window_seconds(bench)
        for key, col in (("dev_read_bytes", "rkB/s"), ("dev_write_bytes", "wkB/s")):
            rate = as_number(avg.get(col))
            m[key] = int(round(rate * 1024 * secs)) if rate is not None and secs else None
    else:
        avg = None
    if isinstance(error, str) and error:
        m["device_note"] = "device counters at the window's edges unavailable (%s); %s" % (
            error, "iostat average used" if m["dev_source"] == "iostat" else "no device figures")
    if isinstance(avg, dict):
        for key, col in DEVICE_FIELDS:
            m[key] = as_number(avg.get(col))
    if m["device"] is None:
        dev = avg.get("device") if isinstance(avg, dict) else None
        devs = dig(result, "collector", "devices")
        if isinstance(dev, str) and dev:
            m["device"] = dev
        elif isinstance(devs, list) and devs:
            m["device"] = ",".join(str(d) for d in devs)


def _delta_span(samples, bench, source):
    """The two samples bounding the measured window (see foreign_figures)."""
    start = as_number(dig(bench, "window", "start_epoch"))
    end = as_number(dig(bench, "window", "end_epoch"))
    if source == "iobench":
        samples = [s for s in samples if s.get("l") and s.get("w")]
        runs = [s.get("r") for s in samples]
        if runs:
            samples = [s for s in samples if s.get("r") == runs[-1]]
        return (samples[0], samples[-1]) if len(samples) >= 2 else (None, None)
    if len(samples) < 2:
        return None, None
    a = samples[0]
    b = samples[-1]
    if start is not None:
        before = [s for s in samples if s["e"] <= start]
        a = before[-1] if before else a
    if end is not None:
        after = [s for s in samples if s["e"] >= end - 0.05]
        b = after[0] if after else b
    return (a, b) if b["e"] > a["e"] else (None, None)


def foreign_figures(result, bench):
    """The ``foreign_*`` and ``impact`` metrics of a result (module docstring), or {}."""
    f = dig(result, "foreign")
    if not isinstance(f, dict):
        return {}
    settings = f.get("settings") if isinstance(f.get("settings"), dict) else {}
    guard = f.get("guard") if isinstance(f.get("guard"), dict) else None
    impact = f.get("impact") if isinstance(f.get("impact"), dict) else {}
    out = {"foreign_source": f.get("source"), "foreign_blind": f.get("blind"), "foreign_quiet": f.get("quiet"),
           "foreign_guard": guard.get("reason") if guard else None, "foreign_skipped": f.get("skipped"),
           "foreign_max_share": as_number(settings.get("max_share")), "foreign_on_busy": settings.get("on_busy"),
           "foreign_min_iops": as_number(settings.get("min_foreign_iops")),
           # where the attribution group was and the limits it inherited (docs/compliance.md)
           "foreign_cgroup": f.get("cgroup") if isinstance(f.get("cgroup"), dict) else None,
           "impact": {"ioprio_class": impact.get("ioprio_class"), "nice": impact.get("nice"),
                      "schedulers": [s.get("name") for s in impact.get("schedulers") or [] if isinstance(s, dict)],
                      "notes": list(impact.get("notes") or [])}}
    samples = [s for s in f.get("samples") or [] if isinstance(s, dict) and as_number(s.get("e")) is not None]
    a, b = _delta_span(samples, bench, f.get("source"))
    if a is None:
        return out
    secs = b["e"] - a["e"]
    dev = [0] * 7
    ours = [0] * 4
    for name, cur in (b.get("d") or {}).items():
        prev = (a.get("d") or {}).get(name)
        if not isinstance(cur, list) or not isinstance(prev, list) or len(cur) < 7 or len(prev) < 7:
            return out
        dev = [x + (c - p) for x, c, p in zip(dev, cur, prev)]
        if f.get("source", "").startswith("cgroup"):
            cb = (b.get("c") or {}).get(name) or [0] * 4
            ca = (a.get("c") or {}).get(name) or [0] * 4
            ours = [x + (c - p) for x, c, p in zip(ours, cb, ca)]
    if f.get("source") == "iobench":
        la, lb = a["l"], b["l"]
        ours = [lb[0] - la[0], lb[1] - la[1], lb[3] - la[3], lb[4] - la[4]]
    dev_r, dev_rb, dev_w, dev_wb = dev[0], dev[1] * 512, dev[3], dev[4] * 512
    fr, frb = max(0, dev_r - ours[0]), max(0, dev_rb - ours[1])
    fw, fwb = max(0, dev_w - ours[2]), max(0, dev_wb - ours[3])
    ios_share = ratio(fr + fw, dev_r + dev_w) or 0.0
    bytes_share = ratio(frb + fwb, dev_rb + dev_wb) or 0.0
    util = min(100.0, dev[6] / (secs * 1000.0) * 100.0) if secs > 0 else None
    out.update(foreign_reads=fr, foreign_writes=fw, foreign_read_bytes=frb, foreign_write_bytes=fwb,
               foreign_bytes=frb + fwb, foreign_iops=round((fr + fw) / secs, 2) if secs > 0 else None,
               foreign_share=round(min(1.0, max(ios_share, bytes_share)), 4),
               foreign_busy_pct=None if util is None else round(util * ios_share, 1),
               foreign_span_s=round(secs, 3))
    if a.get("l") and b.get("l") and a.get("r") == b.get("r") and fr + fw:
        our_ms = ((b["l"][2] - a["l"][2]) + (b["l"][5] - a["l"][5])) / 1e6
        out["foreign_await_ms"] = round(max(0.0, dev[2] + dev[5] - our_ms) / (fr + fw), 3)
    return out


def _steady_state(bench):
    ss = bench.get("steady_state")
    if not isinstance(ss, dict) or not ss.get("enabled"):
        return None
    rounds = ss.get("rounds") if isinstance(ss.get("rounds"), list) else []
    metric = ss.get("metric") if isinstance(ss.get("metric"), str) else "iops"
    return {"reached": bool(ss.get("reached")), "round": as_number(ss.get("round")), "rounds": len(rounds),
            "max_rounds": as_number(ss.get("max_rounds")), "metric": metric,
            "values": [as_number(r.get(metric)) for r in rounds if isinstance(r, dict)]}


def interval_iops(intervals):
    """IOPS per interval of iobench's series, without the short tail interval (a fraction
    of a second holding the last few operations, whose rate is noise)."""
    ivs = [iv for iv in intervals or [] if isinstance(iv, dict) and as_number(iv.get("iops")) is not None]
    typical = median(as_number(iv.get("duration_s")) for iv in ivs)
    return [iv["iops"] for iv in ivs
            if typical is None or as_number(iv.get("duration_s")) is None or iv["duration_s"] >= 0.5 * typical]


def stability_of(series):
    """Pace figures of a per-interval IOPS series (see the module docstring), or None."""
    vals = [v for v in (as_number(x) for x in series or []) if v is not None]
    n = len(vals)
    if n < STABILITY_MIN_INTERVALS:
        return None
    third = n // 3
    first, last = mean(vals[:third]), mean(vals[n - third:])
    slices = min(STABILITY_SERIES_POINTS, n)
    bounds = [round(i * n / slices) for i in range(slices + 1)]
    return {"intervals": n, "first_iops": round(first, 1), "last_iops": round(last, 1),
            "change_pct": round((last - first) / first * 100.0, 1) if first > 0 else None,
            "min_iops": round(min(vals), 1), "max_iops": round(max(vals), 1),
            "series": [round(mean(vals[a:b]), 1) for a, b in zip(bounds, bounds[1:])]}


def _search(bench):
    s = bench.get("search")
    if not isinstance(s, dict) or not isinstance(s.get("steps"), list):
        return None
    pct = s.get("percentile") if isinstance(s.get("percentile"), str) else "p99"

    def step(d):
        if not isinstance(d, dict):
            return None
        lat = as_number(d.get("p99_us"))
        for key in ("%s_us" % pct, "pct_us"):        # the searched percentile, when not p99
            if lat is None:
                lat = as_number(d.get(key))
        return {"threads": as_number(d.get("threads")), "iodepth": as_number(d.get("iodepth")),
                "iops": as_number(d.get("iops")), "p99_ms": None if lat is None else lat / 1000.0,
                "complete": d.get("complete", True) is not False}

    steps = [step(d) for d in s["steps"] if isinstance(d, dict)]
    best = s.get("best")
    if is_int(best) and 0 <= best < len(steps):
        best = steps[best]
    else:
        best = step(best)
    knob = s.get("knob") if s.get("knob") in ("threads", "iodepth") else None
    return {"knob": knob, "bound_ms": as_number(s.get("bound_ms")), "percentile": pct,
            "stopped": s.get("stopped"), "steps": steps, "best": best}


def _db(bench):
    db = bench.get("db")
    if not isinstance(db, dict):
        return None

    def part(name):
        d = db.get(name) if isinstance(db.get(name), dict) else {}
        lat = d.get("latency_us") if isinstance(d.get("latency_us"), dict) else {}
        out = {"per_sec": as_number(d.get("per_sec"))}
        for pct in PCTS:
            v = as_number(lat.get(PCT_SOURCE[pct]))
            out["%s_ms" % pct] = None if v is None else v / 1000.0
        return out

    return {name: part(name) for name in ("commits", "transactions", "page_reads", "page_writes")}


def count_of(value):
    """A non-negative count, else None."""
    n = as_number(value)
    return int(n) if n is not None and n >= 0 else None


def _place(d):
    """``/dev/loop7 offset 1048576`` of an error or a mismatch (its file, else its device)."""
    off = count_of(d.get("offset"))
    return str(d.get("file") or d.get("device") or "?") + (" offset %d" % off if off is not None else "")


def error_text(e):
    """One I/O error as one line: ``read /dev/loop7 offset 1048576: EIO (Input/output error) at 3.2 s``."""
    name = e.get("errno_name") or ("errno %s" % e["errno"] if e.get("errno") is not None else e.get("kind") or "error")
    msg, t = e.get("message"), as_number(e.get("t_s"))
    return "%s%s: %s%s%s" % ("%s " % e["op"] if e.get("op") else "", _place(e), name,
                             " (%s)" % msg if msg and msg != name else "", " at %s s" % round(t, 3) if t is not None else "")


def mismatch_text(d):
    """One verify mismatch (an entry of ``verify_first``) as reasons and reports quote it: where,
    expected vs found; a stale block the generation it holds and the last acknowledged one
    (``lost write: /dev/loop7 offset 8192 holds generation 2, the last acknowledged write was generation 5``)."""
    found, expected = d.get("found"), d.get("expected")
    if d.get("kind") == "stale":     # iobench writes "gen G run R" (docs/iobench-json.md)
        held, last = [(_GENERATION.findall(str(t or "")) or [None])[0] for t in (found, expected)]
        if held is not None and last is not None:
            return "lost write: %s holds generation %s, the last acknowledged write was generation %s" % (
                _place(d), held, last)
        return "lost write: %s: expected %s, found %s" % (_place(d), expected, found)
    return "%s: expected %s, found %s" % (_place(d), expected, found)


_MISMATCH_KEYS = ("op", "file", "device", "offset", "kind", "expected", "found", "found_offset")
_GENERATION = re.compile(r"\bgen(?:eration)?\s+(\d+)")
_ERROR_KEYS = ("op", "file", "device", "offset", "errno", "errno_name", "t_s", "message")


def _text(value):
    return value if isinstance(value, str) and value else None


def integrity_figures(bench):
    """The data verification and error-detail metrics of a benchmark result (module
    docstring): ``verify_*`` (all None without a ``verify`` section), ``error_samples``,
    ``errors_ok_after_first``, ``errors_stopped``, ``errors_max``."""
    out = dict.fromkeys(INTEGRITY_KEYS)
    v = bench.get("verify") if isinstance(bench, dict) else None
    if isinstance(v, dict):
        gen = v.get("generation_map") if isinstance(v.get("generation_map"), dict) else {}
        vp = v.get("pass")
        out.update(verify_enabled=bool(v.get("enabled")), verify_reason=_text(v.get("reason")),
                   verify_checked=count_of(v.get("checked")), verify_stale_reason=_text(gen.get("reason")),
                   verify_stale_tracked=bool(gen["tracked"]) if "tracked" in gen else None,
                   verify_pass={"blocks": count_of(vp.get("blocks")), "bytes": count_of(vp.get("bytes")),
                                "elapsed_s": as_number(vp.get("elapsed_s")),
                                "mib_per_sec": as_number(vp.get("mib_per_sec"))} if isinstance(vp, dict) else None,
                   verify_first=[{k: f.get(k) for k in _MISMATCH_KEYS if k in f} for f in v.get("first") or []
                                 if isinstance(f, dict)][:VERIFY_FIRST_MAX])
        counts = [count_of(v.get(kind)) for kind in VERIFY_KINDS]
        out.update(("verify_%s" % kind, n) for kind, n in zip(VERIFY_KINDS, counts))
        out["verify_bad"] = sum(n or 0 for n in counts) if any(n is not None for n in counts) else None
    errs = bench.get("errors") if isinstance(bench, dict) and isinstance(bench.get("errors"), dict) else {}
    samples = [e for e in errs.get("samples") or [] if isinstance(e, dict)]
    if not samples and isinstance(errs.get("first"), dict) and "errno_name" in errs["first"]:
        samples = [errs["first"]]
    out["error_samples"] = [{k: e.get(k) for k in _ERROR_KEYS if k in e} for e in samples] \
        if samples or "samples" in errs else None
    stopped = errs.get("stopped")
    out.update(errors_ok_after_first=count_of(errs.get("ok_after_first")), errors_max=count_of(errs.get("max_errors")),
               errors_stopped=stopped if isinstance(stopped, str) and stopped else None)
    return out


def workload_metrics(record):
    """Flat metrics dict of a workload record (or of a bare module result)."""
    m = dict.fromkeys(METRIC_KEYS)
    m["interrupted"] = False
    if not isinstance(record, dict):
        return m
    result = record.get("result") if "result" in record else record
    spec = record if "result" in record else {}
    bench = dig(result, "bench")
    if not isinstance(bench, dict):
        bench = {}

    for op in METRIC_OPS:
        opd = dig(bench, "ops", op)
        if not isinstance(opd, dict):
            continue
        count = as_number(opd.get("count"))
        m["%s_count" % op] = int(count) if count is not None else None
        rate = as_number(opd.get("per_sec"))
        if op == "fsync":
            m["fsync_per_sec"] = rate
        elif op in ("read", "write"):
            m["%s_iops" % op] = rate
            m["%s_mibps" % op] = as_number(opd.get("mib_per_sec"))
            nbytes = as_number(opd.get("bytes"))
            m["bench_%s_bytes" % op] = int(nbytes) if nbytes is not None else None
        if count:  # latency only for ops the workload did
            lat = opd.get("latency_us") if isinstance(opd.get("latency_us"), dict) else {}
            for pct in PCTS:
                v = as_number(lat.get(PCT_SOURCE[pct]))
                m["%s_%s_ms" % (op, pct)] = v / 1000.0 if v is not None else None

    m["iops"] = _sum(m["read_iops"], m["write_iops"])
    m["mibps"] = _sum(m["read_mibps"], m["write_mibps"])
    m["elapsed_s"] = as_number(bench.get("elapsed_s"))

    headline_latency(m, bench.get("config"))

    if bench:
        m["concurrency"] = _concurrency(bench, spec)
        _device(result, bench, m)
    m["dev_read_ratio"] = ratio(m["dev_r_s"], m["read_iops"])
    m["dev_write_ratio"] = ratio(m["dev_w_s"], m["write_iops"])

    if bench:
        m["steady_state"] = _steady_state(bench)
        m["stability"] = stability_of(interval_iops(bench.get("intervals")))
        m["stall"] = stall_figures(bench.get("intervals"), as_number(dig(bench, "config", "rate_iops")))
        m["search"] = _search(bench)
        m["db"] = _db(bench)

    errors = dig(bench, "errors", "total")
    m["errors"] = int(errors) if as_number(errors) is not None else None
    kinds = dig(bench, "errors", "by_kind")
    if isinstance(kinds, dict):
        m["error_kinds"] = {str(k): v for k, v in kinds.items() if as_number(v)}
    first = dig(bench, "errors", "first")
    if isinstance(first, dict):
        first = error_text(first) if "errno_name" in first else \
            ", ".join("%s %s" % (k, v) for k, v in first.items())
    m["error_first"] = str(first) if first else None
    m.update(integrity_figures(bench))
    m["interrupted"] = bool(bench.get("interrupted")) if bench else False
    m.update(foreign_figures(result, bench))
    if bench:
        m["measured"] = True
        fs = dig(bench, "environment", "filesystem")
        m["filesystem"] = fs if isinstance(fs, str) and fs else None
        m["signal"] = bench.get("signal") if isinstance(bench.get("signal"), str) else None
        m["timed_out"] = bool(isinstance(result, dict) and result.get("timed_out"))
    return m


def record_metrics(record):
    """The metrics of a stored record: its ``metrics`` when they carry every key of
    :data:`METRIC_KEYS`, else computed from its result (keys it has win: a record written
    by an older version, or a test, keeps its figures)."""
    given = record.get("metrics") if isinstance(record, dict) else None
    if isinstance(given, dict) and all(k in given for k in METRIC_KEYS):
        return given
    fresh = workload_metrics(record)
    if isinstance(given, dict):
        fresh.update(given)
    return fresh


# keys of a registered module result that only repeat the spec or Ansible bookkeeping
_DROP_FROM_RESULT = ("invocation", "_ansible_no_log", "_ansible_verbose_always", "ansible_loop_var", "item")


def workload_record(spec, result):
    """The stored record of one workload (contracts section 4): the plan spec, plus
    ``result`` (the registered module result without ``invocation``) and ``metrics``."""
    rec = dict(spec or {})
    res = {k: v for k, v in (result or {}).items() if k not in _DROP_FROM_RESULT} if isinstance(result, dict) else result
    rec["result"] = res
    rec["metrics"] = workload_metrics(rec)
    return rec


__all__ = ["workload_metrics", "workload_record", "record_metrics", "op_count", "latency_op", "headline_latency",
           "per_write_fsync", "devstat_figures", "stability_of",
           "foreign_figures", "FOREIGN_KEYS",
           "window_seconds", "interval_iops", "integrity_figures", "error_text", "mismatch_text", "count_of", "INTEGRITY_KEYS", "VERIFY_KINDS",
           "METRIC_KEYS", "DEVICE_FIELDS", "METRIC_OPS", "LATENCY_OPS"]
