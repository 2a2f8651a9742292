# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of iobench's pass-through options.

Every option of ``iobench run`` that a workload may set is one row here: its name (the
module parameter and the plan key), its Ansible type, its default (``None``: the binary's
own default applies and nothing is passed), its command-line flag, how it is written on the
command line (``how``) and one doc line. From it come:

* ``argument_spec()``: the ``fleetqual.storage.iobench`` module's argument spec for these
  options (the module adds its own: ``binary``, ``collect``, ``timeout``, ...);
* ``build_argv()``: the iobench command line;
* ``option_names()`` / ``PLAN_KEYS``: the keys a workload of the plan may carry
  (``plugins/module_utils/plan/profiles.py`` imports them);
* ``workload_params()``: a plan workload's options, as the detached job hands them over.

``how``:

* ``value``: ``FLAG VALUE`` when the value is not None;
* ``size``: a size (``16K``, bytes), passed in bytes (``sizes`` from ``validate``);
* ``float``: ``FLAG repr(float(VALUE))``;
* ``switch``: ``FLAG`` when true;
* ``onoff``: ``FLAG`` when true, ``FLAG=off`` when false, nothing when None;
* ``csv``: a list, de-duplicated in order, joined with ``,``.

``module: False``: a runner's option (``start_at``, set by the array job), not a module
parameter: passed when the runner's parameters hold it.

``group``: ``search`` options are only passed with ``search``, ``db`` options only with
``mode: dbpattern``, ``steady_state`` options only with ``steady_state``, ``device``
(``device``, ``size``) only with ``device``; with ``device`` neither ``total_size`` nor
``file_num`` is passed (iobench refuses them: the device region is the one "file"), and
``size`` only when it is not 0 (0 = the whole device, the binary's default). ``own_default``:
the module's default differs from the binary's on purpose (``prepare``, ``cleanup``). The
row order is the order on the command line.

A test (tests/unit/plugins/module_utils/plan/test_iobench_options.py) fails when this table, the binary's own table
(``iobench options --format json``) and docs/iobench.md disagree.
"""

import math

MODES = ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw", "dbpattern")

# name, type, default, flag, how, extra (choices, elements, required, group, plan), doc
OPTIONS = (
    dict(name="dir", type="path", default=None, flag="--dir", how="value", plan=False,
         doc="Test directory; iobench creates its files there (exactly one of dir and device)."),
    dict(name="device", type="path", default=None, flag="--device", how="value", plan=False, group="device",
         doc="A whole block device as the target instead of dir; its first size bytes are overwritten."),
    dict(name="size", type="raw", default=None, flag="--size", how="size", plan=False, group="device",
         doc="With device: bytes used from offset, a multiple of 512; 0 or unset = up to the device's end."),
    dict(name="offset", type="raw", default=None, flag="--offset", how="size", plan=False, group="device",
         doc="With device: where the bytes used start, a multiple of the device's logical block size; default 0."),
    dict(name="mode", type="str", default=None, flag="--mode", how="value", required=True, choices=list(MODES),
         doc="Workload, with sysbench fileio's names (dbpattern: an InnoDB-like server)."),
    dict(name="file_num", type="int", default=128, flag="--file-num", how="value", min=1, max=1000000,
         doc="Number of files."),
    dict(name="total_size", type="raw", default=None, flag="--total-size", how="size",
         doc="Total size of all files (bytes or K/M/G/T, binary); required with dir, refused with device."),
    dict(name="block_size", type="raw", default="16K", flag="--block-size", how="size", min=1, max=256 << 20,
         doc="Request size."),
    dict(name="threads", type="int", default=1, flag="--threads", how="value", min=1, max=1024,
         doc="Worker threads."),
    dict(name="engine", type="str", default="sync", flag="--engine", how="value", choices=["sync", "io_uring"],
         doc="I/O engine."),
    dict(name="iodepth", type="int", default=1, flag="--iodepth", how="value", min=1, max=4096,
         doc="Requests in flight per thread with engine io_uring."),
    dict(name="search", type="str", default=None, flag="--search", how="value", choices=["threads", "iodepth"],
         doc="Latency-bounded maximum search over this knob (1, 2, 4, ... search_max)."),
    dict(name="search_bound_ms", type="float", default=None, flag="--search-bound-ms", how="float", min=0, max=3600000, min_exclusive=True, group="search",
         doc="Latency bound of the search in ms (binary default 50)."),
    dict(name="search_max", type="int", default=None, flag="--search-max", how="value", min=1, max=4096, group="search",
         doc="Last value of the searched knob (binary default 64)."),
    dict(name="search_step_time", type="int", default=None, flag="--search-step-time", how="value", min=0.1, max=3600, group="search",
         doc="Measured seconds per search step (binary default 5)."),
    dict(name="search_percentile", type="str", default=None, flag="--search-percentile", how="value",
         group="search", choices=["p50", "p90", "p95", "p99", "p99.9"],
         doc="Percentile compared with the bound (binary default p99)."),
    dict(name="db_reads_per_txn", type="int", default=None, flag="--db-reads-per-txn", how="value", min=1, max=1000000, group="db",
         doc="dbpattern: page reads per transaction (binary default 4)."),
    dict(name="db_log_block", type="raw", default=None, flag="--db-log-block", how="size", min=512, max=1 << 20, group="db",
         doc="dbpattern: redo log bytes per group commit (binary default 4K)."),
    dict(name="db_log_size", type="raw", default=None, flag="--db-log-size", how="size", min=1 << 20, max=64 << 30, group="db",
         doc="dbpattern: size of the circular redo log file (binary default 64M)."),
    dict(name="db_flushers", type="int", default=None, flag="--db-flushers", how="value", min=0, max=64, group="db",
         doc="dbpattern: page flusher threads (binary default 1)."),
    dict(name="db_flush_rate", type="float", default=None, flag="--db-flush-rate", how="float", min=0, max=10000000, group="db",
         doc="dbpattern: page writes per second over all flushers; 0 = as fast as they go."),
    dict(name="db_group_commit_max", type="int", default=None, flag="--db-group-commit-max", how="value", min=0, max=1000000,
         group="db", doc="dbpattern: transactions per group commit at most; 0 = no limit."),
    dict(name="direct", type="bool", default=False, flag="--direct", how="switch",
         doc="Open files with O_DIRECT."),
    dict(name="open_flags", type="list", elements="str", default=None, flag="--open-flags", how="csv",
         choices=["sync", "dsync"], doc="Extra open flags."),
    dict(name="fsync_freq", type="int", default=None, flag="--fsync-freq", how="value", min=0, max=2 ** 32 - 1,
         doc="fsync a file after every N writes to it; 0 disables (binary default 100)."),
    dict(name="fsync_mode", type="str", default=None, flag="--fsync-mode", how="value",
         choices=["fsync", "fdatasync"], doc="Sync call used."),
    dict(name="time", type="int", default=None, flag="--time", how="value", min=0, max=10000000,
         doc="Seconds of the measured window; 0 = no limit, needs requests (binary default 10)."),
    dict(name="requests", type="int", default=None, flag="--requests", how="value", min=0, max=2 ** 63 - 1,
         doc="Stop after this many requests; 0 = no limit."),
    dict(name="warmup", type="int", default=None, flag="--warmup", how="value", min=0, max=1000000,
         doc="Seconds run before the measured window starts."),
    dict(name="seed", type="int", default=None, flag="--seed", how="value", min=0, max=2 ** 64 - 1,
         doc="Random seed."),
    dict(name="rw_ratio", type="float", default=None, flag="--rw-ratio", how="float", min=0, max=1000000, min_exclusive=True,
         doc="Read/write ratio of rndrw, greater than 0."),
    dict(name="fsync_all", type="bool", default=False, flag="--fsync-all", how="switch",
         doc="fsync after every write."),
    dict(name="keep_cache", type="bool", default=False, flag="--keep-cache", how="switch",
         doc="Do not drop the page cache of the test files before the run."),
    dict(name="prepare", type="bool", default=True, flag="--prepare", how="switch", own_default=True,
         doc="Create and fill the test files before the run."),
    dict(name="cleanup", type="bool", default=True, flag="--cleanup", how="switch", plan=False, own_default=True,
         doc="Remove the test files after the run."),
    dict(name="fsync_end", type="bool", default=None, flag="--fsync-end", how="onoff",
         doc="fsync the written files at the end (binary default on)."),
    dict(name="report_interval", type="float", default=None, flag="--report-interval", how="float", min=0, max=10000000,
         doc="Seconds per time-series interval of the result; 0 = none (binary default 1)."),
    dict(name="rate_iops", type="float", default=None, flag="--rate-iops", how="float", min=0, max=100000000,
         doc="At most this many read+write requests per second over all threads; 0 = unlimited."),
    dict(name="search_min_gain", type="float", default=None, flag="--search-min-gain", how="float", min=0, max=1000, group="search",
         doc="Stop the search after two steps each gaining less than this % IOPS (binary default 5)."),
    # set by the runner, not by a workload nor the module: the array job's lock-step instant
    dict(name="start_at", type="float", default=None, flag="--start-at", how="float", min=0, max=100000000000,
         plan=False, module=False, doc="Unix time (real clock) at which the warm-up starts, after all setup."),
    dict(name="steady_state", type="bool", default=False, flag="--steady-state", how="switch",
         doc="Run in rounds until the SNIA PTS steady-state rule holds (or ss_max_rounds ran)."),
    dict(name="ss_round_time", type="float", default=None, flag="--ss-round-time", how="float", min=0.1, max=86400, group="steady_state",
         doc="Seconds per steady-state round (binary default 10)."),
    dict(name="ss_window", type="int", default=None, flag="--ss-window", how="value", min=2, max=100, group="steady_state",
         doc="Rounds judged together (binary default 5)."),
    dict(name="ss_range_pct", type="float", default=None, flag="--ss-range-pct", how="float", min=0, max=1000, group="steady_state",
         doc="Max - min of the window at most this % of its average (binary default 20)."),
    dict(name="ss_slope_pct", type="float", default=None, flag="--ss-slope-pct", how="float", min=0, max=1000, group="steady_state",
         doc="Least-squares excursion over the window at most this % of the average (binary default 10)."),
    dict(name="ss_max_rounds", type="int", default=None, flag="--ss-max-rounds", how="value", min=1, max=1000, group="steady_state",
         doc="Stop after this many rounds (binary default 25)."),
    dict(name="ss_metric", type="str", default=None, flag="--ss-metric", how="value", group="steady_state",
         choices=["iops", "mib_per_sec", "lat_p99_us"], doc="Value tracked per round (binary default iops)."),
    # data verification (docs/iobench.md "Data verification"): on for every workload unless it says verify: false
    dict(name="verify", type="bool", default=True, flag="--verify", how="onoff", own_default=True,
         doc="Stamp every 4 KiB written (offset, file, generation, run id, CRC-32C) and check every block read."),
    dict(name="verify_pass", type="bool", default=None, flag="--verify-pass", how="onoff",
         doc="With verify, after a workload that writes: read the whole working set back and check it (outside the window)."),
    dict(name="verify_map_max", type="raw", default=None, flag="--verify-map-max", how="size",
         doc="Memory for verify's per-block generation map (binary default 256M); larger working sets get no stale detection."),
    # set by the durability runner, not by a workload nor the module (docs/durability.md)
    dict(name="witness", type="path", default=None, flag="--witness", how="value", plan=False, module=False,
         doc="A new file in shared memory in which every write acknowledged as durable is recorded."),
    dict(name="max_errors", type="int", default=None, flag="--max-errors", how="value", min=1, max=1000000000,
         doc="The workload stops at this many I/O errors in total (binary default 64); an error does not stop its thread."),
)

# The binary's own defaults of the options a workload leaves unset (``default: None`` above):
# the rules between options (rule_errors) need them. tests/unit/plugins/module_utils/plan/test_iobench_options.py checks
# them, and every row's min/max/min_exclusive, against ``iobench options --format json``.
BINARY_DEFAULTS = {
    "file_num": 128, "total_size": 2 << 30, "block_size": 16 << 10, "rw_ratio": 1.5, "threads": 1, "engine": "sync",
    "iodepth": 1, "direct": False, "fsync_freq": 100, "fsync_all": False, "fsync_end": True, "fsync_mode": "fsync",
    "time": 10, "requests": 0, "warmup": 0, "report_interval": 1, "rate_iops": 0, "keep_cache": False,
    "prepare": False, "cleanup": False, "search_bound_ms": 50, "search_max": 64, "search_step_time": 5,
    "search_percentile": "p99", "search_min_gain": 5, "db_reads_per_txn": 4, "db_log_block": 4 << 10,
    "db_log_size": 64 << 20, "db_flushers": 1, "db_flush_rate": 0, "db_group_commit_max": 0, "steady_state": False,
    "ss_round_time": 10, "ss_window": 5, "ss_range_pct": 20, "ss_slope_pct": 10, "ss_max_rounds": 25,
    "ss_metric": "iops", "size": 0, "offset": 0, "verify": False, "verify_pass": False, "verify_map_max": 256 << 20,
    "max_errors": 64,
}
PRECONDITION_MAX_PASSES = 100     # iobench precondition --passes (C row "passes"; not a run option)
RANDOM_MODES = ("rndrd", "rndwr", "rndrw")
SEQUENTIAL_MODES = ("seqwr", "seqrewr", "seqrd")
SECTOR = 512

BY_NAME = {o["name"]: o for o in OPTIONS}
SEARCH_OPTS = tuple(o["name"] for o in OPTIONS if o.get("group") == "search")
DB_OPTS = tuple(o["name"] for o in OPTIONS if o.get("group") == "db")
SIZE_OPTS = tuple(o["name"] for o in OPTIONS if o["how"] == "size")
# keys of a plan workload that are iobench options (dir, device, size and cleanup are the runner's)
# options of the files in dir that a device target has no use for (iobench refuses them)
FILE_OPTS = ("total_size", "file_num")
PLAN_KEYS = tuple(o["name"] for o in OPTIONS if o.get("plan", True))


def _type_name(value):
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "list"),
                       (dict, "mapping")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _num(x):
    return str(int(x)) if float(x) == int(x) else repr(float(x))


def _human(n):
    for suffix, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return "%d%s" % (n // mult, suffix)
    return str(n)


def value_range(name):
    """``(low, high, low_excluded)`` of a numeric option (the row's min/max), or None. For a
    row narrowed to whole numbers (``type: int`` where the binary takes a float: time,
    warmup, search_step_time) the bounds are the whole numbers inside the binary's range."""
    row = BY_NAME.get(name)
    if not row or "min" not in row:
        return None
    low, high = row["min"], row["max"]
    if row["type"] == "int":
        low, high = int(-(-low // 1)), int(high // 1)
    return low, high, bool(row.get("min_exclusive"))


def range_error(name, number, shown=None, say_type=True):
    """The message (without the name) when ``number`` is outside the row's range, else None.
    ``shown``: how the value is written in the message (a size as the user gave it);
    ``say_type``: say "an integer"/"a number" (False where the type is already checked)."""
    rng = value_range(name)
    if rng is None:
        return None
    low, high, open_low = rng
    shown = repr(number) if shown is None else shown
    if open_low and not low < number <= high:
        return "must be greater than %s and at most %s, got %s" % (_num(low), _num(high), shown)
    if not open_low and not low <= number <= high:
        if BY_NAME[name]["how"] == "size":
            return "must be between %s and %s, got %s" % (_human(low), _human(high), shown)
        kind = ("an integer " if BY_NAME[name]["type"] == "int" else "a number ") if say_type else ""
        return "must be %sbetween %s and %s, got %s" % (kind, _num(low), _num(high), shown)
    return None


def value_error(name, value, say_type=True):
    """The message (without the name) when ``value`` does not fit the row of ``name`` (its
    type, choices and range: the binary's own table), else None. Sizes are checked by
    :func:`range_error` once parsed (the callers parse them and name the variable)."""
    row = BY_NAME[name]
    kind, choices = row["type"], row.get("choices")
    if kind == "bool":
        ok = isinstance(value, bool)
        return None if ok else "must be true or false, got %s %r" % (_type_name(value), value)
    if kind == "int":
        if not _is_int(value):
            rng = value_range(name)
            if rng:
                return "must be an integer between %s and %s, got %r" % (_num(rng[0]), _num(rng[1]), value)
            return "must be an integer, got %s %r" % (_type_name(value), value)
        return range_error(name, value, say_type=say_type)
    if kind == "float":
        if not _is_number(value):
            return "must be a number, got %s %r" % (_type_name(value), value)
        return range_error(name, value, say_type=say_type)
    if kind == "list":
        if not isinstance(value, list) or any(v not in (choices or [v]) for v in value):
            return "must be a list of %s, got %r" % (", ".join(choices or ["strings"]), value)
        return None
    if kind in ("str", "path"):
        if choices and value not in choices:
            return "must be one of %s, got %r" % (", ".join(choices), value)
        if not isinstance(value, str):
            return "must be a string, got %s %r" % (_type_name(value), value)
    return None


def rule_errors(params, sizes=None, device=False):
    """The rules between options that ``iobench run`` applies (cli.c ``cli_parse``), checked
    on a workload before it reaches a host: ``[(option, message), ...]``, the message a
    sentence that starts with the option. ``params``: the workload's options (absent or None:
    the binary's default, :data:`BINARY_DEFAULTS`); ``sizes``: the size options in bytes (by
    default parsed values already in ``params``); ``device``: a raw device target (no files).
    The plan (module_utils/plan/profiles.py) and the module (module_utils/job/workload.py) both call it, so
    whatever the binary refuses is refused first, naming the option; tests/unit/
    test_option_space.py holds this to the binary's ``--check``."""
    sizes = dict(sizes or {})

    def given(k):
        return params.get(k) is not None

    def v(k):
        if k in sizes and sizes[k] is not None:
            return sizes[k]
        return params[k] if given(k) else BINARY_DEFAULTS.get(k)

    def shown(k):
        return params[k] if given(k) else _human(BINARY_DEFAULTS[k])

    out = []
    mode, knob, engine = params.get("mode"), params.get("search"), v("engine")
    bs = v("block_size")
    if device and mode == "dbpattern":
        out.append(("mode", "mode dbpattern needs a directory (its log and data files), not a device"))
    if not device and given("total_size") and _is_int(v("total_size")) and bs and v("total_size") < v("file_num") * bs:
        out.append(("total_size", "total_size %s must be at least file_num x block_size (%d x %s)"
                    % (params["total_size"], v("file_num"), params.get("block_size") or shown("block_size"))))
    if (v("direct") or device) and bs % SECTOR:
        out.append(("block_size", "block_size %s is not a multiple of %d, which O_DIRECT (direct: true) needs"
                    % (params.get("block_size"), SECTOR)))
    if engine == "sync" and given("iodepth") and params["iodepth"] > 1 and knob != "iodepth":
        out.append(("iodepth", "iodepth %d needs engine io_uring (the sync engine has one request in flight per thread)"
                    % params["iodepth"]))
    if (v("rate_iops") or 0) > 0 and (engine != "sync" or mode == "dbpattern" or knob):
        out.append(("rate_iops", "rate_iops needs engine sync and is not valid with mode dbpattern or search"))
    ri = v("report_interval")
    if 0 < ri < 0.01:
        out.append(("report_interval", "report_interval must be 0 (off) or at least 0.01 seconds, got %r" % ri))
    if knob:
        if mode not in RANDOM_MODES:
            out.append(("search", "search needs mode rndrd, rndwr or rndrw, got %s" % mode))
        if knob == "iodepth" and engine != "io_uring":
            out.append(("search", "search iodepth needs engine io_uring (the sync engine has one request in flight)"))
        for k in ("time", "requests"):
            if given(k):
                out.append((k, "%s cannot be combined with search (each step runs search_step_time seconds)" % k))
        if knob == "threads" and v("threads") != 1:
            out.append(("threads", "threads %d cannot be combined with search threads (the search sets it; leave "
                                   "threads at 1)" % v("threads")))
        if knob == "iodepth" and v("iodepth") != 1:
            out.append(("iodepth", "iodepth %d cannot be combined with search iodepth (the search sets it; leave "
                                   "iodepth at 1)" % v("iodepth")))
        top = BY_NAME["threads"]["max"] if knob == "threads" else BY_NAME["iodepth"]["max"]
        if _is_int(v("search_max")) and v("search_max") > top:
            out.append(("search_max", "search_max must be between 1 and %d for search %s, got %d"
                        % (top, knob, v("search_max"))))
    else:
        extra = [o["name"] for o in OPTIONS if o.get("group") == "search" and given(o["name"])]
        if extra:
            out.append((extra[0], "%s need search (threads or iodepth)" % ", ".join(extra)))
    if mode == "dbpattern":
        if engine != "sync":
            out.append(("engine", "mode dbpattern runs with engine sync only"))
        if params.get("requests"):
            out.append(("requests", "requests cannot be combined with mode dbpattern (use time)"))
        if given("time") and params["time"] == 0:
            out.append(("time", "time 0 is not valid with mode dbpattern (no limit needs requests)"))
        lb, ls = v("db_log_block"), v("db_log_size")
        if _is_int(lb) and lb % SECTOR:
            out.append(("db_log_block", "db_log_block must be a multiple of 512 bytes between 512 and 1M, got %s"
                        % shown("db_log_block")))
        elif _is_int(lb) and bs and lb > bs:
            out.append(("db_log_block", "db_log_block %s must not be larger than block_size %s (the page size)"
                        % (shown("db_log_block"), params.get("block_size") or shown("block_size"))))
        elif _is_int(lb) and _is_int(ls) and lb and (ls < 16 * lb or ls % lb):
            out.append(("db_log_size", "db_log_size %s must be a multiple of db_log_block (%s) and at least 16 of them"
                        % (shown("db_log_size"), shown("db_log_block"))))
    else:
        extra = [o["name"] for o in OPTIONS if o.get("group") == "db" and given(o["name"])]
        if extra:
            out.append((extra[0], "%s need mode dbpattern" % ", ".join(extra)))
    if params.get("steady_state"):
        if knob:
            out.append(("steady_state", "steady_state cannot be combined with search (a search runs steps of fixed "
                                        "length)"))
        if mode == "dbpattern":
            out.append(("steady_state", "steady_state is not supported by mode dbpattern"))
        if _is_int(v("ss_window")) and _is_int(v("ss_max_rounds")) and v("ss_max_rounds") < v("ss_window"):
            out.append(("ss_max_rounds", "ss_max_rounds %d must be at least ss_window %d"
                        % (v("ss_max_rounds"), v("ss_window"))))
        rt = v("ss_round_time")
        if given("report_interval") and ri > 0 and _is_number(rt):
            q = rt / ri
            if abs(q - round(q)) > 1e-6 * q:
                out.append(("ss_round_time", "ss_round_time %r must be a multiple of report_interval %r (or set "
                                             "report_interval: 0)" % (rt, ri)))
    else:
        extra = [o["name"] for o in OPTIONS if o.get("group") == "steady_state" and given(o["name"])]
        if extra:
            out.append((extra[0], "%s given without steady_state: true" % ", ".join(extra)))
    if not knob and not params.get("steady_state"):
        time_s = params["time"] if given("time") else (0 if params.get("requests") else BINARY_DEFAULTS["time"])
        if time_s == 0 and not params.get("requests"):
            out.append(("time", "time 0 (no limit) needs requests, or the run would never end"))
    sized = all(_is_int(v(k)) and v(k) > 0 for k in ("total_size", "file_num", "block_size", "threads"))
    if not device and mode in SEQUENTIAL_MODES and sized:
        blocks = v("total_size") // v("file_num") // bs * v("file_num")
        if blocks < v("threads"):
            out.append(("threads", "threads %d is more than the %d blocks of the working set (each thread of a "
                                   "sequential mode needs its own stripe)" % (v("threads"), blocks)))
    return out


def option_names():
    """Names of every pass-through option, in command-line order."""
    return [o["name"] for o in OPTIONS]


def argument_spec():
    """Ansible argument spec entries of the options (a new dict each call)."""
    spec = {}
    for o in OPTIONS:
        if o.get("module") is False:
            continue
        s = {"type": o["type"]}
        for key in ("elements", "choices", "required"):
            if o.get(key) is not None:
                s[key] = list(o[key]) if key == "choices" else o[key]
        if o["default"] is not None:
            s["default"] = o["default"]
        spec[o["name"]] = s
    return spec


def workload_params(workload):
    """The iobench options a plan workload sets (plan-only keys such as id dropped)."""
    return {k: workload[k] for k in PLAN_KEYS if k in workload and workload[k] is not None}


def _emit(o, value, sizes):
    flag, how = o["flag"], o["how"]
    if how == "switch":
        return [flag] if value else []
    if value is None:
        return []
    if how == "onoff":
        return [flag if value else flag + "=off"]
    if how == "size":
        return [flag, str(sizes[o["name"]])]
    if how == "float":
        return [flag, repr(float(value))]
    if how == "csv":
        seen = []
        for v in value:
            if v not in seen:
                seen.append(v)
        return [flag, ",".join(seen)] if seen else []
    return [flag, str(value)]


def build_argv(params, sizes, output):
    """The ``iobench run`` command line (a list) for validated ``params``.

    ``sizes`` holds the size options in bytes (``workload.validate``). The searched knob
    is not passed (the search sets it); search options only with ``search``, db options
    only with mode dbpattern, device options only with device (and then no file options).
    """
    knob = params.get("search")
    argv = [params["binary"], "run"]
    for o in OPTIONS:
        name = o["name"]
        if name == knob:
            continue
        if o.get("group") == "search" and not knob:
            continue
        if o.get("group") == "db" and params.get("mode") != "dbpattern":
            continue
        if o.get("group") == "steady_state" and not params.get("steady_state"):
            continue
        if o.get("group") == "device" and not params.get("device"):
            continue
        if name in FILE_OPTS and params.get("device"):
            continue
        if name in ("time", "requests") and params.get("steady_state"):
            continue                     # rounds of ss_round_time replace them (iobench refuses both)
        if name in ("size", "offset") and not sizes.get(name):
            continue
        argv += _emit(o, params.get(name), sizes)
    if params.get("devstat"):
        argv += ["--devstat", ",".join(params["devstat"])]
    argv += ["--format", "json", "--output", output]
    return argv
