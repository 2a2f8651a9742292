# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of iobench's pass-through options (issue 13).

Every option of ``iobench run`` that a workload may set is one row here: its name (the
module parameter and the plan key), its Ansible type, its default (``None``: the binary's
own default applies and nothing is passed), its command-line flag, how it is written on the
command line (``how``) and one doc line. From it come:

* ``argument_spec()``: the ``fleetqual.storage.iobench`` module's argument spec for these
  options (the module adds its own: ``binary``, ``collect``, ``timeout``, ...);
* ``build_argv()``: the iobench command line;
* ``option_names()`` / ``PLAN_KEYS``: the keys a workload of the plan may carry
  (``plugins/plugin_utils/plan.py`` imports them);
* ``workload_params()``: a plan workload's options, as the detached job hands them over.

``how``:

* ``value``: ``FLAG VALUE`` when the value is not None;
* ``size``: a size (``16K``, bytes), passed in bytes (``sizes`` from ``validate``);
* ``float``: ``FLAG repr(float(VALUE))``;
* ``switch``: ``FLAG`` when true;
* ``onoff``: ``FLAG`` when true, ``FLAG=off`` when false, nothing when None;
* ``csv``: a list, de-duplicated in order, joined with ``,``.

``group``: ``search`` options are only passed with ``search``, ``db`` options only with
``mode: dbpattern``, ``steady_state`` options only with ``steady_state``, ``device``
(``device``, ``size``) only with ``device``; with ``device`` neither ``total_size`` nor
``file_num`` is passed (iobench refuses them: the device region is the one "file"), and
``size`` only when it is not 0 (0 = the whole device, the binary's default). ``own_default``:
the module's default differs from the binary's on purpose (``prepare``, ``cleanup``). The
row order is the order on the command line.

A test (tests/unit/test_iobench_options.py) fails when this table, the binary's own table
(``iobench options --format json``) and docs/iobench.md disagree.
"""

MODES = ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw", "dbpattern")

# name, type, default, flag, how, extra (choices, elements, required, group, plan), doc
OPTIONS = (
    dict(name="dir", type="path", default=None, flag="--dir", how="value", plan=False,
         doc="Test directory; iobench creates its files there (exactly one of dir and device)."),
    dict(name="device", type="path", default=None, flag="--device", how="value", plan=False, group="device",
         doc="A whole block device as the target instead of dir; its first size bytes are overwritten (issue 11)."),
    dict(name="size", type="raw", default=None, flag="--size", how="size", plan=False, group="device",
         doc="With device: bytes used from offset 0, a multiple of 512; 0 or unset = the whole device."),
    dict(name="mode", type="str", default=None, flag="--mode", how="value", required=True, choices=list(MODES),
         doc="Workload, with sysbench fileio's names (dbpattern: an InnoDB-like server)."),
    dict(name="file_num", type="int", default=128, flag="--file-num", how="value",
         doc="Number of files."),
    dict(name="total_size", type="raw", default=None, flag="--total-size", how="size",
         doc="Total size of all files (bytes or K/M/G/T, binary); required with dir, refused with device."),
    dict(name="block_size", type="raw", default="16K", flag="--block-size", how="size",
         doc="Request size."),
    dict(name="threads", type="int", default=1, flag="--threads", how="value",
         doc="Worker threads, 1 to 1024."),
    dict(name="engine", type="str", default="sync", flag="--engine", how="value", choices=["sync", "io_uring"],
         doc="I/O engine."),
    dict(name="iodepth", type="int", default=1, flag="--iodepth", how="value",
         doc="Requests in flight per thread with engine io_uring, 1 to 4096."),
    dict(name="search", type="str", default=None, flag="--search", how="value", choices=["threads", "iodepth"],
         doc="Latency-bounded maximum search over this knob (1, 2, 4, ... search_max)."),
    dict(name="search_bound_ms", type="float", default=None, flag="--search-bound-ms", how="float", group="search",
         doc="Latency bound of the search in ms (binary default 50)."),
    dict(name="search_max", type="int", default=None, flag="--search-max", how="value", group="search",
         doc="Last value of the searched knob (binary default 64)."),
    dict(name="search_step_time", type="int", default=None, flag="--search-step-time", how="value", group="search",
         doc="Measured seconds per search step (binary default 5)."),
    dict(name="search_percentile", type="str", default=None, flag="--search-percentile", how="value",
         group="search", choices=["p50", "p90", "p95", "p99", "p99.9"],
         doc="Percentile compared with the bound (binary default p99)."),
    dict(name="db_reads_per_txn", type="int", default=None, flag="--db-reads-per-txn", how="value", group="db",
         doc="dbpattern: page reads per transaction (binary default 4)."),
    dict(name="db_log_block", type="raw", default=None, flag="--db-log-block", how="size", group="db",
         doc="dbpattern: redo log bytes per group commit (binary default 4K)."),
    dict(name="db_log_size", type="raw", default=None, flag="--db-log-size", how="size", group="db",
         doc="dbpattern: size of the circular redo log file (binary default 64M)."),
    dict(name="db_flushers", type="int", default=None, flag="--db-flushers", how="value", group="db",
         doc="dbpattern: page flusher threads, 0 to 64 (binary default 1)."),
    dict(name="db_flush_rate", type="float", default=None, flag="--db-flush-rate", how="float", group="db",
         doc="dbpattern: page writes per second over all flushers; 0 = as fast as they go."),
    dict(name="db_group_commit_max", type="int", default=None, flag="--db-group-commit-max", how="value",
         group="db", doc="dbpattern: transactions per group commit at most; 0 = no limit."),
    dict(name="direct", type="bool", default=False, flag="--direct", how="switch",
         doc="Open files with O_DIRECT."),
    dict(name="open_flags", type="list", elements="str", default=None, flag="--open-flags", how="csv",
         choices=["sync", "dsync"], doc="Extra open flags."),
    dict(name="fsync_freq", type="int", default=None, flag="--fsync-freq", how="value",
         doc="fsync a file after every N writes to it; 0 disables (binary default 100)."),
    dict(name="fsync_mode", type="str", default=None, flag="--fsync-mode", how="value",
         choices=["fsync", "fdatasync"], doc="Sync call used."),
    dict(name="time", type="int", default=None, flag="--time", how="value",
         doc="Seconds of the measured window; 0 = no limit, needs requests (binary default 10)."),
    dict(name="requests", type="int", default=None, flag="--requests", how="value",
         doc="Stop after this many requests; 0 = no limit."),
    dict(name="warmup", type="int", default=None, flag="--warmup", how="value",
         doc="Seconds run before the measured window starts."),
    dict(name="seed", type="int", default=None, flag="--seed", how="value",
         doc="Random seed."),
    dict(name="rw_ratio", type="float", default=None, flag="--rw-ratio", how="float",
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
    dict(name="report_interval", type="float", default=None, flag="--report-interval", how="float",
         doc="Seconds per time-series interval of the result; 0 = none (binary default 1)."),
    dict(name="rate_iops", type="float", default=None, flag="--rate-iops", how="float",
         doc="At most this many read+write requests per second over all threads; 0 = unlimited."),
    dict(name="search_min_gain", type="float", default=None, flag="--search-min-gain", how="float", group="search",
         doc="Stop the search after two steps each gaining less than this % IOPS (binary default 5)."),
    dict(name="steady_state", type="bool", default=False, flag="--steady-state", how="switch",
         doc="Run in rounds until the SNIA PTS steady-state rule holds (or ss_max_rounds ran)."),
    dict(name="ss_round_time", type="float", default=None, flag="--ss-round-time", how="float", group="steady_state",
         doc="Seconds per steady-state round (binary default 10)."),
    dict(name="ss_window", type="int", default=None, flag="--ss-window", how="value", group="steady_state",
         doc="Rounds judged together (binary default 5)."),
    dict(name="ss_range_pct", type="float", default=None, flag="--ss-range-pct", how="float", group="steady_state",
         doc="Max - min of the window at most this % of its average (binary default 20)."),
    dict(name="ss_slope_pct", type="float", default=None, flag="--ss-slope-pct", how="float", group="steady_state",
         doc="Least-squares excursion over the window at most this % of the average (binary default 10)."),
    dict(name="ss_max_rounds", type="int", default=None, flag="--ss-max-rounds", how="value", group="steady_state",
         doc="Stop after this many rounds (binary default 25)."),
    dict(name="ss_metric", type="str", default=None, flag="--ss-metric", how="value", group="steady_state",
         choices=["iops", "mib_per_sec", "lat_p99_us"], doc="Value tracked per round (binary default iops)."),
)

BY_NAME = {o["name"]: o for o in OPTIONS}
SEARCH_OPTS = tuple(o["name"] for o in OPTIONS if o.get("group") == "search")
DB_OPTS = tuple(o["name"] for o in OPTIONS if o.get("group") == "db")
SIZE_OPTS = tuple(o["name"] for o in OPTIONS if o["how"] == "size")
# keys of a plan workload that are iobench options (dir, device, size and cleanup are the runner's)
# options of the files in dir that a device target has no use for (iobench refuses them)
FILE_OPTS = ("total_size", "file_num")
PLAN_KEYS = tuple(o["name"] for o in OPTIONS if o.get("plan", True))


def option_names():
    """Names of every pass-through option, in command-line order."""
    return [o["name"] for o in OPTIONS]


def argument_spec():
    """Ansible argument spec entries of the options (a new dict each call)."""
    spec = {}
    for o in OPTIONS:
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
        if name == "size" and not sizes.get("size"):
            continue
        argv += _emit(o, params.get(name), sizes)
    if params.get("devstat"):
        argv += ["--devstat", ",".join(params["devstat"])]
    if params.get("start_at"):          # the job's lock-step schedule (module_utils/lockstep.py, issue 16)
        argv += ["--start-at", "%.6f" % float(params["start_at"])]
    argv += ["--format", "json", "--output", output]
    return argv
