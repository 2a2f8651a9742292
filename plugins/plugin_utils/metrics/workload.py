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
* ``planned_s``: the measured window's planned length (``time_s`` of a run bounded by time
  alone; null for a request count, steady-state rounds or a search) and ``pace_gap_s`` (a
  paced run's gap between one thread's requests), against which the judge holds
  ``elapsed_s`` (error ``short_window``, plugin_utils/judge/workload.py).
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
  third), change_pct, min_iops, max_iops, series (<= 12 means of equal slices), change_at_s (the second of
  the measured window the pace changed: where one step best splits the series, stability.change_point;
  null without the intervals' times)}``.
* ``search`` / ``db``: compact copies of iobench's search steps and database-pattern
  figures (``None`` for other runs), for the diagnostics.
* ``foreign_*`` (docs/compliance.md; ``None`` when the job ran without ``foreign_io``): the I/O on
  the target's devices that was not ours, from the samples ``module_utils/collect/foreign.py``
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

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import (
    dig,
    OPS,
    PCT_SOURCE,
    PCTS,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, ratio
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.device import (
    DEVICE_FIELDS,
    FOREIGN_KEYS,
    device_figures,
    foreign_figures,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.integrity import (
    INTEGRITY_KEYS,
    error_text,
    integrity_figures,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stability import (
    db_figures,
    run_pace,
    search_figures,
    steady_state_of,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stalls import stall_figures

# ops with latency percentiles in the metrics (rules' built-in limits cover OPS)
METRIC_OPS = OPS + ("commit",)
LATENCY_OPS = ("read", "write", "fsync", "commit")


METRIC_KEYS = (
    ("iops", "mibps", "read_iops", "write_iops", "fsync_per_sec")
    + tuple("%s_%s_ms" % (op, pct) for op in OPS for pct in PCTS)
    + tuple(k for k, _col in DEVICE_FIELDS)
    + ("errors", "interrupted", "read_count", "write_count", "fsync_count", "elapsed_s", "planned_s",
       "pace_gap_s", "dev_read_ratio", "dev_write_ratio")
    # the commit, headline latency, device and run figures (docs/contracts.md section 4)
    + tuple("commit_%s_ms" % pct for pct in PCTS)
    + ("commit_count", "latency_op", "latency_note")
    + tuple("lat_%s_ms" % pct for pct in PCTS)
    + ("read_mibps", "write_mibps", "concurrency", "device", "dev_source", "device_note",
       "dev_read_bytes", "dev_write_bytes", "bench_read_bytes", "bench_write_bytes",
       "steady_state", "stability", "stall", "search", "db",
       "error_kinds", "error_first", "signal", "timed_out", "stopped_by", "measured", "filesystem")
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


def planned_window(config):
    """``(planned_s, pace_gap_s)`` of a run's config: the measured window's planned length
    (``time_s`` of a run bounded by time alone; null for a request count, steady-state
    rounds or a search, whose length is theirs to decide) and, when paced (``rate_iops``),
    the gap between one thread's requests, by which its window may end early."""
    cfg = config if isinstance(config, dict) else {}
    time_s = as_number(cfg.get("time_s"))
    if not time_s or time_s <= 0 or as_number(cfg.get("requests")) or cfg.get("steady_state") or cfg.get("search"):
        return None, None
    rate, threads = as_number(cfg.get("rate_iops")), as_number(cfg.get("threads")) or 1
    return time_s, (threads / rate if rate and rate > 0 else None)


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
    m["planned_s"], m["pace_gap_s"] = planned_window(bench.get("config"))

    headline_latency(m, bench.get("config"))

    if bench:
        m["concurrency"] = _concurrency(bench, spec)
        device_figures(result, bench, m)
    m["dev_read_ratio"] = ratio(m["dev_r_s"], m["read_iops"])
    m["dev_write_ratio"] = ratio(m["dev_w_s"], m["write_iops"])

    if bench:
        m["steady_state"] = steady_state_of(bench)
        m["stability"] = run_pace(bench.get("intervals"))
        m["stall"] = stall_figures(bench.get("intervals"), as_number(dig(bench, "config", "rate_iops")),
                                   result.get("device_samples") or result.get("foreign"),
                                   as_number(dig(bench, "window", "start_epoch")))
        m["search"] = search_figures(bench)
        m["db"] = db_figures(bench)

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
        m["stopped_by"] = result.get("stopped_by") if isinstance(result, dict) else None
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
           "per_write_fsync", "METRIC_KEYS", "METRIC_OPS", "LATENCY_OPS"]
