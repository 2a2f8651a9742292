# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One iobench workload on the target, with iostat/vmstat beside it: the one place of the
run logic, used by the single-workload module ``fleetqual.storage.iobench`` and by the
detached job (``module_utils/job.py``) that runs a host's whole plan.

``run_workload(params)`` returns ``(result, failed, msg, warnings)``; ``result`` is the
module result (docs/contracts.md section 3) without ``failed``/``msg``.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fleetqual.storage.plugins.module_utils.size import parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.device import resolve_devices
from ansible_collections.fleetqual.storage.plugins.module_utils.collector import Collector, choose_source
from ansible_collections.fleetqual.storage.plugins.module_utils.sysstat import (
    select_window, iostat_average, vmstat_average,
)
from ansible_collections.fleetqual.storage.plugins.module_utils import iobench_options as opts
from ansible_collections.fleetqual.storage.plugins.module_utils import foreign as _foreign
from ansible_collections.fleetqual.storage.plugins.module_utils.iobench_options import (  # noqa: F401
    SEARCH_OPTS, DB_OPTS, build_argv,
)

MODES = list(opts.MODES)
KILL_GRACE_S = 30

# module parameters that are not iobench options
RUNNER_SPEC = dict(
    binary=dict(type="path", default="/opt/fleetqual/bin/iobench"),
    collect=dict(type="str", default="auto", choices=["auto", "sysstat", "procfs", "none"]),
    collect_interval=dict(type="int", default=1),
    timeout=dict(type="int"),
    device_counters=dict(type="str", default="auto", choices=["auto", "off"]),
)

ARGUMENT_SPEC = dict(opts.argument_spec(), **RUNNER_SPEC)


def defaults():
    """Every parameter at its default (what AnsibleModule would fill in)."""
    return {k: v.get("default") for k, v in ARGUMENT_SPEC.items()}


def validate(params):
    """Check the parameters; return ``(errors, sizes)`` with sizes in bytes."""
    errors = []
    sizes = {}
    device = params.get("device")
    errors.extend(_validate_target(params))
    for name in ("block_size",) if device else ("total_size", "block_size"):
        if name == "total_size" and params[name] is None:
            errors.append("total_size is required with dir")
            continue
        try:
            sizes[name] = parse_size(params[name], name)
        except ValueError as e:
            errors.append(str(e))
    if device:
        errors.extend(_validate_device(params, sizes))
    if sizes.get("block_size") == 0:
        errors.append("block_size must be greater than 0")
    if sizes.get("total_size") == 0:
        errors.append("total_size must be greater than 0")
    if not 1 <= params["threads"] <= 1024:
        errors.append("threads must be between 1 and 1024, got %d" % params["threads"])
    if not device and (params["file_num"] is None or params["file_num"] < 1):
        errors.append("file_num must be at least 1, got %s" % params["file_num"])
    if not 1 <= params["iodepth"] <= 4096:
        errors.append("iodepth must be between 1 and 4096, got %d" % params["iodepth"])
    if not 1 <= params["collect_interval"] <= 60:
        errors.append("collect_interval must be between 1 and 60 seconds, got %d" % params["collect_interval"])
    for name in ("fsync_freq", "time", "requests", "warmup", "seed"):
        if params[name] is not None and params[name] < 0:
            errors.append("%s must not be negative, got %d" % (name, params[name]))
    if params["rw_ratio"] is not None and not params["rw_ratio"] > 0:
        errors.append("rw_ratio must be greater than 0, got %s" % params["rw_ratio"])
    if params["iodepth"] > 1 and params["engine"] != "io_uring":
        errors.append("iodepth %d needs engine io_uring (the sync engine has one request in flight per thread)"
                      % params["iodepth"])
    if params["time"] == 0 and not params["requests"]:
        errors.append("time 0 (no limit) needs requests, or the run would never end")
    if params["timeout"] is not None and params["timeout"] < 1:
        errors.append("timeout must be at least 1 second, got %d" % params["timeout"])
    if (not device and sizes.get("total_size") and sizes.get("block_size")
            and sizes["total_size"] < max(params["file_num"], 1) * sizes["block_size"]):
        errors.append("total_size %s must be at least file_num x block_size (%d x %s)"
                      % (params["total_size"], params["file_num"], params["block_size"]))
    if params["direct"] and sizes.get("block_size") and sizes["block_size"] % 512:
        errors.append("block_size %s is not a multiple of 512, which direct (O_DIRECT) needs"
                      % params["block_size"])
    errors.extend(_validate_search(params))
    errors.extend(_validate_db(params, sizes))
    return errors, sizes


def _validate_target(p):
    """Exactly one of dir and device, an absolute path."""
    given = [n for n in ("dir", "device") if p.get(n)]
    if len(given) != 1:
        return ["exactly one of dir and device must be set, got %s" % (" and ".join(given) or "neither")]
    name = given[0]
    if not os.path.isabs(p[name]):
        return ["%s must be an absolute path, got %r" % (name, p[name])]
    return []


def _validate_device(p, sizes):
    """A device target: no files (total_size, file_num unset), no dbpattern, size a multiple of 512."""
    errors = []
    if p.get("size") is not None:
        try:
            sizes["size"] = parse_size(p["size"], "size")
        except ValueError as e:
            errors.append(str(e))
    if sizes.get("size") and sizes["size"] % 512:
        errors.append("size %s is not a multiple of 512, which a device target needs (closest: %d)"
                      % (p["size"], sizes["size"] // 512 * 512 or 512))
    if p["mode"] == "dbpattern":
        errors.append("mode dbpattern needs a directory (its log and data files), not device %s" % p["device"])
    return errors


def _validate_search(p):
    errors = []
    knob = p.get("search")
    if not knob:
        given = [n for n in SEARCH_OPTS if p.get(n) is not None]
        if given:
            errors.append("%s need search (threads or iodepth)" % ", ".join(given))
        return errors
    if p["mode"] not in ("rndrd", "rndwr", "rndrw"):
        errors.append("search needs mode rndrd, rndwr or rndrw, got %s" % p["mode"])
    if knob == "iodepth" and p["engine"] != "io_uring":
        errors.append("search iodepth needs engine io_uring")
    if knob == "threads" and p["threads"] != 1:
        errors.append("threads %d cannot be combined with search threads (the search sets it; leave threads at 1)"
                      % p["threads"])
    if knob == "iodepth" and p["iodepth"] != 1:
        errors.append("iodepth %d cannot be combined with search iodepth (the search sets it; leave iodepth at 1)"
                      % p["iodepth"])
    for name in ("time", "requests"):
        if p[name] is not None:
            errors.append("%s cannot be combined with search (each step runs search_step_time seconds)" % name)
    if p.get("search_bound_ms") is not None and not p["search_bound_ms"] > 0:
        errors.append("search_bound_ms must be greater than 0, got %s" % p["search_bound_ms"])
    top = 1024 if knob == "threads" else 4096
    if p.get("search_max") is not None and not 1 <= p["search_max"] <= top:
        errors.append("search_max must be between 1 and %d for search %s, got %d" % (top, knob, p["search_max"]))
    if p.get("search_step_time") is not None and not 1 <= p["search_step_time"] <= 3600:
        errors.append("search_step_time must be between 1 and 3600 seconds, got %d" % p["search_step_time"])
    return errors


def _validate_db(p, sizes):
    errors = []
    if p["mode"] != "dbpattern":
        given = [n for n in DB_OPTS if p.get(n) is not None]
        if given:
            errors.append("%s need mode dbpattern" % ", ".join(given))
        return errors
    if p["engine"] != "sync":
        errors.append("mode dbpattern runs with engine sync only")
    if p["requests"]:
        errors.append("requests cannot be combined with mode dbpattern (use time)")
    if p["time"] == 0:
        errors.append("time 0 is not valid with mode dbpattern")
    for name in ("db_log_block", "db_log_size"):
        if p.get(name) is not None:
            try:
                sizes[name] = parse_size(p[name], name)
            except ValueError as e:
                errors.append(str(e))
    lb = sizes.get("db_log_block")
    if lb is not None and (lb < 512 or lb % 512 or lb > 1 << 20):
        errors.append("db_log_block must be a multiple of 512 bytes between 512 and 1M, got %s" % p["db_log_block"])
    elif lb is not None and sizes.get("block_size") and lb > sizes["block_size"]:
        errors.append("db_log_block %s must not be larger than block_size %s" % (p["db_log_block"], p["block_size"]))
    ls = sizes.get("db_log_size")
    if ls is not None and not (1 << 20) <= ls <= (64 << 30):
        errors.append("db_log_size must be between 1M and 64G, got %s" % p["db_log_size"])
    if p.get("db_reads_per_txn") is not None and not 1 <= p["db_reads_per_txn"] <= 1000000:
        errors.append("db_reads_per_txn must be between 1 and 1000000, got %d" % p["db_reads_per_txn"])
    if p.get("db_flushers") is not None and not 0 <= p["db_flushers"] <= 64:
        errors.append("db_flushers must be between 0 and 64, got %d" % p["db_flushers"])
    if p.get("db_flush_rate") is not None and p["db_flush_rate"] < 0:
        errors.append("db_flush_rate must not be negative, got %s" % p["db_flush_rate"])
    if p.get("db_group_commit_max") is not None and p["db_group_commit_max"] < 0:
        errors.append("db_group_commit_max must not be negative, got %d" % p["db_group_commit_max"])
    return errors


def _existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def resolve_for(path):
    """Device resolution for ``path`` (its nearest existing ancestor when it does not exist yet)."""
    target = _existing_ancestor(path)
    try:
        info = resolve_devices(target)
    except OSError as e:
        return {"path": target, "st_dev": None, "fstype": None, "source": None, "devices": [],
                "chain": [], "reason": "cannot stat %s: %s" % (target, e)}
    if target != os.path.abspath(path):
        info["path"] = target
    return info


def error_line(stderr):
    """The binary's ``iobench: error: ...`` line, else its last non-empty stderr line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln
    return lines[-1] if lines else ""


def run_bench(argv, timeout, stop=None, preexec_fn=None, on_start=None):
    """Run iobench; on timeout, or when ``stop`` (a ``threading.Event``) is set, SIGTERM it,
    wait up to KILL_GRACE_S, then SIGKILL.

    Returns ``(rc, stdout, stderr, timed_out, start, end)``; ``timed_out`` is true when it
    was stopped (by the timeout or by ``stop``). ``preexec_fn`` runs in the child before it
    executes iobench, ``on_start(proc)`` once it runs (the foreign-I/O side, ``foreign.Run``).
    """
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    start = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, close_fds=True, preexec_fn=preexec_fn)
    if on_start is not None:
        on_start(proc)
    timed_out = False
    limit = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            slice_s = 0.5 if stop is not None else None
            if limit is not None:
                left = max(0.0, limit - time.monotonic())
                slice_s = left if slice_s is None else min(slice_s, left)
            try:
                out, err = proc.communicate(timeout=slice_s)
                break
            except subprocess.TimeoutExpired:
                if (limit is not None and time.monotonic() >= limit) or (stop is not None and stop.is_set()):
                    timed_out = True
                    proc.send_signal(signal.SIGTERM)
                    try:
                        out, err = proc.communicate(timeout=KILL_GRACE_S)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        out, err = proc.communicate()
                    break
    except BaseException:
        # module killed / interrupted: never leave the benchmark behind
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise
    end = time.time()
    return (proc.returncode, to_native(out, errors="surrogate_or_replace"),
            to_native(err, errors="surrogate_or_replace"), timed_out, start, end)


def assemble(collected, window, interval):
    """iostat / vmstat result sections from the collector output and the bench window."""
    start, end = window
    io = select_window(collected["iostat"], start, end, interval)
    vm = select_window(collected["vmstat"], start, end, interval)
    return ({"samples": io, "avg": iostat_average(io)},
            {"samples": vm, "avg": vmstat_average(vm)})


_DEVSTAT_SUPPORT = {}
_HELP = {}


def run_help(binary):
    """This iobench's ``run --help`` text (bytes; empty when it cannot run); cached."""
    if binary not in _HELP:
        try:
            p = subprocess.run([binary, "run", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=20, env=dict(os.environ, LC_ALL="C"), check=False)
            _HELP[binary] = p.stdout
        except (OSError, subprocess.TimeoutExpired):
            _HELP[binary] = b""
    return _HELP[binary]


def supports_devstat(binary):
    """Whether this iobench knows ``--devstat`` (its ``run --help`` names it); cached."""
    if binary not in _DEVSTAT_SUPPORT:
        _DEVSTAT_SUPPORT[binary] = b"--devstat" in run_help(binary)
    return _DEVSTAT_SUPPORT[binary]


EMPTY_IO = {"samples": [], "avg": {}}


def prepare(p):
    """Validate and resolve: ``(errors, sizes, collector_info, source, tools)``.
    ``errors`` non-empty: nothing may run (``collector_info`` may be None)."""
    errors, sizes = validate(p)
    if errors:
        return ["invalid parameters: " + "; ".join(errors)], sizes, None, None, None
    dev = resolve_for(p["dir"] or p["device"])
    try:
        source, reason, tools = choose_source(p["collect"])
    except ValueError as e:
        return [str(e)], sizes, None, None, None
    reasons = [r for r in (reason, dev["reason"]) if r]
    info = {
        "source": source,
        "reason": "; ".join(reasons) if reasons else None,
        "devices": dev["devices"],
        "chain": dev["chain"],
        "st_dev": dev["st_dev"],
        "fstype": dev["fstype"],
        "interval_s": p["collect_interval"],
        "commands": [],
        "errors": [],
    }
    return [], sizes, info, source, tools


def run_workload(p, stop=None, sizes=None, collector_info=None, source=None, tools=None):
    """Run one workload (``p``: every parameter, validated or not).

    Returns ``(result, failed, msg, warnings)``. ``stop``: a ``threading.Event`` that stops
    the benchmark with SIGTERM (an interrupted, partial result with ``timed_out``).

    With ``foreign_io`` / ``impact`` in ``p`` (the job passes them; ``module_utils/foreign.py``)
    it first waits for a quiet device (a workload that never got quiet is not run: a result
    with ``foreign.skipped`` and no ``bench``, not failed), applies the impact caps, runs
    iobench in a cgroup of its own at the asked priority, samples the devices beside it,
    lets the guard stop it, and adds the ``foreign`` section to the result."""
    if collector_info is None:
        errors, sizes, collector_info, source, tools = prepare(p)
        if errors:
            res = {"collector": collector_info} if collector_info else {}
            return res, True, errors[0], []
    if not os.path.isfile(p["binary"]) or not os.access(p["binary"], os.X_OK):
        return ({"collector": collector_info}, True,
                "iobench binary %s not found or not executable" % p["binary"], [])
    params = dict(p)
    fx = None
    if p.get("foreign_io") is not None or p.get("impact") is not None:
        fx = _foreign.Run(p, collector_info["devices"], stop)
        if fx.errors:
            return {"collector": collector_info}, True, "invalid parameters: " + "; ".join(fx.errors), []
        sizes = dict(sizes or {})
        params, skip, _notes = fx.before(params, sizes)
        if skip:
            return {"collector": collector_info, "foreign": fx.section, "changed": False}, False, None, [skip]
    if p.get("device_counters", "auto") == "auto" and collector_info["devices"] and supports_devstat(p["binary"]):
        params["devstat"] = list(collector_info["devices"])
    else:
        params["devstat"] = None
    tmpdir = tempfile.mkdtemp(prefix="fleetqual-iobench-")
    collector = None
    try:
        output = os.path.join(tmpdir, "result.json")
        argv = build_argv(params, sizes, output)
        preexec_fn = bench_stop = None
        if fx is not None:
            extra, preexec_fn = fx.start(tmpdir, _foreign.supports_live_log(run_help(p["binary"])))
            argv = argv + extra
            bench_stop = fx.watch_stop()
        collector = Collector(collector_info["devices"], p["collect_interval"], source, tools)
        try:
            collector.start()
        except OSError as e:
            # run the benchmark anyway; say why there is no device data
            collector.stop()
            collector = Collector([], p["collect_interval"], "none")
            collector.start()
            collector_info["source"] = "none"
            collector_info["reason"] = "; ".join(
                [r for r in (collector_info["reason"], "could not start the %s collectors: %s" % (source, e)) if r])
        try:
            if fx is not None:
                rc, out, err, timed_out, started, ended = run_bench(argv, p["timeout"], bench_stop, preexec_fn,
                                                                    fx.on_start)
            else:
                rc, out, err, timed_out, started, ended = run_bench(argv, p["timeout"], stop)
        finally:
            collected = collector.stop()
            if fx is not None:
                fx.finish()
        collector_info["commands"] = collected["commands"]
        collector_info["errors"] = collected["errors"]
        collector_info["samples_total"] = {"iostat": len(collected["iostat"]),
                                           "vmstat": len(collected["vmstat"])}
        bench = {}
        json_error = None
        if os.path.exists(output):
            try:
                with open(output) as f:
                    bench = json.load(f)
            except ValueError as e:
                json_error = "iobench wrote unparsable JSON to %s: %s" % (output, e)
        result = dict(argv=argv, rc=rc, timed_out=timed_out, stderr=err[-4096:], collector=collector_info)
        if fx is not None:
            result["foreign"] = fx.section
            if fx.section["guard"]:
                timed_out = result["timed_out"] = False     # the guard's stop, said in foreign.guard
        failed = dict(bench=bench, iostat=EMPTY_IO, vmstat=EMPTY_IO, **result)
        stopped = " after a timeout of %ss" % p["timeout"] if timed_out else ""
        if stop is not None and stop.is_set():
            stopped = " when the job's deadline passed"
        elif fx is not None and fx.section["guard"]:
            stopped = " by the foreign-I/O guard (%s)" % fx.section["guard"]["reason"]
        if rc in (1, 2, 3):
            return failed, True, error_line(err) or "iobench exited %d" % rc, []
        if rc not in (0, 4, 5) and not (timed_out and bench):
            return failed, True, ("iobench ended abnormally (exit %s)%s: %s"
                                  % (rc, stopped, error_line(err) or "no error message")), []
        if json_error or not bench:
            return failed, True, json_error or "iobench exited %d but wrote no JSON result to %s" % (rc, output), []
        window = bench.get("window") or {}
        start = window.get("start_epoch") or started
        end = window.get("end_epoch") or ended
        iostat, vmstat = assemble(collected, (start, end), p["collect_interval"])
        # failed=False is explicit: Ansible marks a result with a non-zero rc and no
        # 'failed' key as failed, and exits 4 (I/O errors) and 5 (interrupted) are partial
        # results to keep; the judge turns them into an ERROR verdict.
        result.update(changed=True, bench=bench, iostat=iostat, vmstat=vmstat)
        warnings = []
        if rc == 4:
            warnings.append("iobench reported I/O errors (exit 4): %s" % (error_line(err) or "see bench.errors"))
        if rc == 5 or timed_out:
            warnings.append("iobench was interrupted%s; the result is partial" % stopped)
        errs = (bench.get("errors") or {}).get("total") or 0
        if rc == 0 and (errs or bench.get("interrupted") or bench.get("exit_code") not in (0, None)):
            # never let a failed benchmark pass for a good one because it exited 0
            warnings.append("iobench exited 0 but its JSON reports errors %s, interrupted %s, exit_code %s"
                            % (errs, bench.get("interrupted"), bench.get("exit_code")))
        if source != "none" and collector_info["devices"] and not iostat["samples"]:
            warnings.append("no iostat sample fell inside the measured window (%.1f s)" % (end - start))
        warnings.extend(collected["errors"])
        return result, False, None, warnings
    finally:
        if collector is not None:
            collector.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)
