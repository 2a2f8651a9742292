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
import threading
import time

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import resolve_devices
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.collector import Collector, choose_source
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import (
    select_window,
    iostat_average,
    vmstat_average,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as opts
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign as _foreign
from ansible_collections.fleetqual.storage.plugins.module_utils.job import hung as _hung
# build_argv is also the iobench module's (it imports it from here)
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import build_argv

KILL_GRACE_S = 30
# the warning of a workload whose measured window holds no iostat report (a short window on a
# host that ran iostat late): the tests that accept either look for this text
NO_IOSTAT_SAMPLE = "no iostat sample fell inside the measured window"

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
    """Check the parameters; return ``(errors, sizes)`` with sizes in bytes. Types, choices
    and ranges come from the option table (``iobench_options``, checked against the binary's
    own), the rules between options from ``iobench_options.rule_errors`` (the plan applies
    the same ones on the controller)."""
    errors = []
    sizes = {}
    bad = set()
    device = params.get("device")
    errors.extend(_validate_target(params))
    if not device and params.get("total_size") is None:
        errors.append("total_size is required with dir")
    for o in opts.OPTIONS:
        name, value = o["name"], params.get(o["name"])
        if value is None or name in ("dir", "device") or (device and name in opts.FILE_OPTS):
            continue
        if o["how"] != "size":
            msg = opts.value_error(name, value, say_type=False)
        else:
            try:
                sizes[name] = parse_size(value, name)
            except ValueError as e:
                errors.append(str(e))
                bad.add(name)
                continue
            msg = opts.range_error(name, sizes[name], str(value), say_type=False)
            if name == "total_size" and sizes[name] == 0:
                msg = "must be greater than 0"
        if msg:
            errors.append("%s %s" % (name, msg))
            bad.add(name)
    if device:
        errors.extend(_validate_device(params, sizes))
    if not 1 <= params["collect_interval"] <= 60:
        errors.append("collect_interval must be between 1 and 60 seconds, got %d" % params["collect_interval"])
    if params["timeout"] is not None and params["timeout"] < 1:
        errors.append("timeout must be at least 1 second, got %d" % params["timeout"])
    good = {k: v for k, v in params.items() if k not in bad}     # a bad value is reported once, above
    good_sizes = {k: v for k, v in sizes.items() if k not in bad}
    errors.extend(msg for _name, msg in opts.rule_errors(good, good_sizes, device=bool(device)))
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
    """A device target: no files (total_size, file_num unset), no dbpattern, size and offset
    multiples of 512."""
    errors = []
    for key in ("size", "offset"):
        if p.get(key) is None:
            continue
        try:
            sizes[key] = parse_size(p[key], key)
        except ValueError as e:
            errors.append(str(e))
            continue
        if sizes[key] % 512:
            errors.append("%s %s is not a multiple of 512, which a device target needs (closest: %d)"
                          % (key, p[key], sizes[key] // 512 * 512 or 512))
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
    was stopped (by the timeout or by ``stop``); ``rc`` is None when iobench would not end
    even after SIGKILL (threads waiting on a device that never completes, ``hung.py``):
    ``stderr`` then says which threads sleep where, and the process is left to the kernel. ``preexec_fn`` runs in the child before it
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
                        out, err, hung = _hung.kill_bounded(proc, "iobench")
                        err = hung or err
                    break
    except BaseException:
        # module killed / interrupted: never leave the benchmark behind (nor wait on it forever)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _hung.kill_bounded(proc, "iobench")
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


def not_prepared(errors, collector_info):
    """:func:`run_workload`'s answer for a workload :func:`prepare` refused (its ``errors``)."""
    return ({"collector": collector_info} if collector_info else {}), True, errors[0], []


def run_workload(p, stop=None, sizes=None, collector_info=None, source=None, tools=None, stopped_by=None,
                 scratch_dir=None):
    """Run one workload (``p``: every parameter, validated or not).

    Returns ``(result, failed, msg, warnings)``. ``stop``: a ``threading.Event`` that stops
    the benchmark with SIGTERM (an interrupted, partial result with ``timed_out``);
    ``stopped_by``: a callable that says who set it when that was not the job's deadline (the
    result then says ``stopped_by``, not ``timed_out``).

    With ``foreign_io`` / ``impact`` in ``p`` (the job passes them; ``module_utils/collect/foreign.py``)
    it first waits for a quiet device (a workload that never got quiet is not run: a result
    with ``foreign.skipped`` and no ``bench``, not failed), applies the impact caps, runs
    iobench in a cgroup of its own at the asked priority, samples the devices beside it,
    lets the guard stop it, and adds the ``foreign`` section to the result.

    iobench's JSON result (and a compliance run's live log) go to a directory made for this
    workload and removed when it ends, in ``scratch_dir`` when given, else in the system's
    temporary directory. A measurement job passes its scratch directory (``status.SCRATCH_PREFIX``
    in the temporary directory, not on the filesystem under test, which a run may fill),
    named in its status so that the next run's preflight removes it after a SIGKILL; the
    module's own run is ended by a signal through this function's cleanup."""
    if collector_info is None:
        errors, sizes, collector_info, source, tools = prepare(p)
        if errors:
            return not_prepared(errors, collector_info)
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
    if scratch_dir:
        tmpdir = tempfile.mkdtemp(prefix="iobench-", dir=scratch_dir)
    else:
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
        # the devices' counters a few times a second: whether a silence of the benchmark was
        # the device's (docs/integrity.md, "Stalls"); in a compliance run too, whose
        # foreign-I/O sampler reads them once a report interval, too seldom to see inside a
        # one-second silence
        silence = None
        readable = _foreign.readable_devices(collector_info["devices"])
        if readable:
            silence = _foreign.Sampler(readable, None, None, {"interval": _foreign.SILENCE_SAMPLE_S},
                                       threading.Event(), keep=_foreign.SILENCE_KEEP)
            silence.start()
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
            device_samples = silence.finish() if silence is not None else None
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
        if device_samples is not None:
            result["device_samples"] = {
                "interval": _foreign.SILENCE_SAMPLE_S, "devices": silence.devices,
                "samples": _foreign.near_silences(device_samples, bench.get("intervals"),
                                                  (bench.get("window") or {}).get("start_epoch"))}
        if fx is not None:
            result["foreign"] = fx.section
            if fx.section["guard"]:
                timed_out = result["timed_out"] = False     # the guard's stop, said in foreign.guard
        why = stopped_by() if stopped_by is not None and stop is not None and stop.is_set() else None
        if why:
            # the operator's stop (or a signal) is not a timeout: said as what it was
            timed_out = result["timed_out"] = False
            result["stopped_by"] = why
        failed = dict(bench=bench, iostat=EMPTY_IO, vmstat=EMPTY_IO, **result)
        stopped = " after a timeout of %ss" % p["timeout"] if timed_out else ""
        if why:
            stopped = " (%s)" % why
        elif stop is not None and stop.is_set():
            stopped = " when the job's deadline passed"
        elif fx is not None and fx.section["guard"]:
            stopped = " by the foreign-I/O guard (%s)" % fx.section["guard"]["reason"]
        if rc is None:
            # iobench would not end: its threads wait on a device that completes nothing
            failed["hung"] = err
            return failed, True, ("stopped%s: %s" % (stopped, err)) if stopped else err, []
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
            warnings.append("%s (%.1f s)" % (NO_IOSTAT_SAMPLE, end - start))
        warnings.extend(collected["errors"])
        return result, False, None, warnings
    finally:
        if collector is not None:
            collector.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)
