# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a resolved plan costs and how it reads (``profiles.py`` builds it):
its data sets and the space they need, the planned seconds of each workload, one human line
per workload and the summary lines.

:func:`timing` (here, so that a host can compute it too) turns the planned seconds into a job's workload timeouts and deadline."""

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as iobench_options
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import compact_size
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size

WORKING_SETS = ("cache", "over_cache")
# the binary's defaults of the options a duration depends on (the option table)
SS_DEFAULTS = {k: iobench_options.BINARY_DEFAULTS[k]
               for k in ("ss_round_time", "ss_window", "ss_range_pct", "ss_slope_pct", "ss_max_rounds")}
SEARCH_DEFAULTS = {k: iobench_options.BINARY_DEFAULTS[k] for k in ("search_max", "search_step_time")}
DB_LOG_SIZE_DEFAULT = iobench_options.BINARY_DEFAULTS["db_log_size"]


def read_pct(ratio):
    """The read percentage of a reads-per-write ratio (9 -> 90)."""
    return int(round(100.0 * ratio / (ratio + 1.0)))


def dataset_name(spec):
    """Name of the data set (the files) a workload runs on: ``<working set or workload
    label>-<file_num>x<file size>``, e.g. ``over_cache-128x32M``. Workloads with the same
    name use the same files, so the role can prepare them once in
    ``<fleetqual_test_dir>/<dataset>``; it is a plain directory name."""
    label = spec.get("working_set") if spec.get("working_set") in WORKING_SETS else spec.get("workload")
    fn = int(spec.get("file_num") or 1)
    return "%s-%dx%s" % (label, fn, compact_size(int(spec.get("total_size") or 0) // fn))


def largest_working_set(plan_list):
    """Largest ``total_size`` (bytes) in the plan: the free space the test dir needs."""
    sizes = [int(w.get("total_size") or 0) for w in plan_list or []]
    return max(sizes) if sizes else 0


def required_space(plan_list):
    """Bytes of all distinct data sets of the plan: the free space needed when data sets
    are kept until the end of the run (prepared once, shared by their workloads). A
    dbpattern workload adds its log file (db_log_size, iobench's default 64 MiB). Device
    targets need no free space and are not counted; with several path targets, call it on
    each target's workloads (``selectattr('target', 'equalto', name)``)."""
    sizes = {}
    for w in plan_list or []:
        if w.get("target_kind") == "device":
            continue
        name = w.get("dataset") or dataset_name(w)
        log = int(w.get("db_log_size") or DB_LOG_SIZE_DEFAULT) if w.get("mode") == "dbpattern" else 0
        sizes[name] = max(sizes.get(name, 0), int(w.get("total_size") or 0) + log)
    return sum(sizes.values())


def search_steps(w):
    """Number of steps a search runs: 1, 2, 4, ... up to search_max, plus max itself."""
    top = int(w.get("search_max") or SEARCH_DEFAULTS["search_max"])
    steps, k = 0, 1
    while k < top:
        steps, k = steps + 1, k * 2
    return steps + 1


def workload_duration_s(w):
    """Planned seconds of one workload: warmup + time, or warmup + steps x step time, or
    for steady state at most warmup + max rounds x round time (preconditioning not included)."""
    if w.get("steady_state"):
        return int(w.get("warmup") or 0) + int(w.get("ss_max_rounds") or SS_DEFAULTS["ss_max_rounds"]) * float(
            w.get("ss_round_time") or SS_DEFAULTS["ss_round_time"])
    if w.get("search"):
        return int(w.get("warmup") or 0) + search_steps(w) * int(w.get("search_step_time") or 0)
    return int(w.get("time") or 0) + int(w.get("warmup") or 0)


def expected_duration_s(plan_list):
    """Sum of ``warmup + time`` over the plan, in seconds (prepare/cleanup not included;
    a workload bounded by ``requests`` with ``time: 0`` counts its warmup only)."""
    return sum(workload_duration_s(w) for w in plan_list or [])


def timing(workloads, slack, prepare_min_mibps):
    """Per workload: (timeout_s, planned_s); and the job's (planned_s, deadline_s).

    A workload's timeout is what the single-workload task used: planned + slack + writing
    its data set, and its ``precondition`` passes over it, at ``prepare_min_mibps``. The deadline is the planned time of all, plus
    their preparation, plus one ``slack``."""
    timeouts, planned = [], []
    prep_total = 0
    for w in workloads:
        plan_s = int(workload_duration_s(w))
        # writes before the measurement: the data set (prepare) and N precondition passes
        writes = (1 if w.get("prepare", True) else 0) + int(w.get("precondition") or 0)
        size = int(w.get("total_size") or w.get("device_size") or 0)
        prep = writes * size // (int(prepare_min_mibps) * 1048576)
        planned.append(plan_s)
        timeouts.append(plan_s + int(slack) + prep)
        prep_total += prep
    total = sum(planned)
    return timeouts, planned, total, total + prep_total + int(slack)


def duration_text(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return "%d s" % seconds
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return "%d h %02d min" % (h, m)
    return "%d min %02d s" % (m, s) if s else "%d min" % m


def workload_line(w):
    """One human line for a workload spec."""
    parts = ["%s, %d thread%s" % (w["mode"], w["threads"], "" if w["threads"] == 1 else "s")]
    fn = int(w.get("file_num") or 1)
    total = int(w.get("total_size") or 0)
    if w.get("target_kind") == "device":
        off = int(w.get("device_offset") or 0)
        parts.append("device %s, %s" % (w.get("target_device"), (
            "%s from offset %s" % (human_size(w["device_size"]), human_size(off)) if off else
            "the first %s" % human_size(w["device_size"])) if w.get("device_size") else (
            "from offset %s to its end" % human_size(off) if off else "the whole device")))
    elif fn == 1:
        parts.append("1 file of %s" % human_size(total))
    else:
        parts.append("%d files x %s = %s" % (fn, human_size(total // fn), human_size(total)))
    if w.get("working_set") in WORKING_SETS:
        parts[-1] += " (%s)" % w["working_set"]
    parts.append("%s blocks" % human_size(w.get("block_size")))
    parts.append("O_DIRECT" if w.get("direct") else "buffered")
    if w.get("rw_ratio") is not None:
        pct = read_pct(w["rw_ratio"])
        parts.append("%d/%d read/write" % (pct, 100 - pct))
    if w.get("precondition"):
        parts.append("preconditioned (%d pass%s)" % (w["precondition"], "" if w["precondition"] == 1 else "es"))
    if w.get("fsync_freq"):
        parts.append("%s every %d write%s" % (w.get("fsync_mode", "fsync"), w["fsync_freq"],
                                              "" if w["fsync_freq"] == 1 else "s"))
    if w.get("engine") and w["engine"] != "sync":
        parts.append("%s iodepth %s" % (w["engine"], w.get("iodepth", 1)))
    if w.get("search"):
        parts.append("search %s 1..%s for p%s <= %s ms, %d steps x %s s + %s s warmup" % (
            w["search"], w.get("search_max"), str(w.get("search_percentile", "p99"))[1:],
            fmt_num(w.get("search_bound_ms", 50)), search_steps(w), w.get("search_step_time"),
            w.get("warmup", 0)))
    elif w.get("steady_state"):
        parts.append("steady state: rounds of %s s, up to %s, + %s s warmup" % (
            w.get("ss_round_time") or SS_DEFAULTS["ss_round_time"],
            w.get("ss_max_rounds") or SS_DEFAULTS["ss_max_rounds"], w.get("warmup", 0)))
    elif w.get("time"):
        parts.append("%s s + %s s warmup" % (w["time"], w.get("warmup", 0)))
    else:
        parts.append("%s requests + %s s warmup" % (w.get("requests"), w.get("warmup", 0)))
    where = " on %s" % w["target"] if w.get("target") else ""
    return "[%s/%s] %s%s: %s" % (w.get("index", "?"), w.get("of", "?"), w["id"], where, ", ".join(parts))


def plan_summary(plan_list):
    """Printable lines: one per workload, then a total line."""
    lines = [workload_line(w) for w in plan_list or []]
    n = len(plan_list or [])
    lines.append("%d workload%s, about %s of measurement and warmup (prepare not included), "
                 "largest working set %s" % (n, "" if n == 1 else "s",
                                             duration_text(expected_duration_s(plan_list)),
                                             human_size(largest_working_set(plan_list))))
    return lines
