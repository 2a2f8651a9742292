# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode, the host side: lock-step windows.

Every member host of an array runs the array's steps inside its detached job
(``module_utils/job/runner.py`` calls :func:`run_array` before the host's own plan):

1. it prepares its data set (``iobench prepare`` in ``<target>/array-<name>``), records its
   clock's sync state (:func:`sync_state`), rehearses a step's launch (:meth:`ArrayRun.rehearse`:
   its probes, its collectors started and stopped, an iobench started; ``launch_s``) and says
   ``ready`` in its status with the lead it needs (``launch_lead_s``);
2. it waits for the start file ``<test_dir>/.fleetqual-job/array-start.json`` that the
   controller writes ONCE per host (action ``fleetqual.storage.lockstep``, phase ``start``),
   after every member was ready: the common start ``t0`` (controller clock), this host's
   measured clock offset ``offset_s`` (host - controller) and its uncertainty;
3. it runs the steps on the schedule fixed by ``plugin_utils/array/mode.py`` (``plan_steps``):
   step k's measured window opens at ``t0 + offset_s(k)`` controller time, i.e. at
   ``t0 + clock.offset_s + offset_s(k)`` in this host's clock. Each active step is an
   ``iobench run --start-at <warm-up start, real clock>`` started ``launch_lead_s`` before
   its warm-up (all setup is done before the instant), with ``--report-interval``
   ``REPORT_INTERVAL_S`` so per-interval counts exist. No controller round trip per step.

Every clock reading of the array record is in this host's clock (:func:`now`) and is then
converted to the controller's clock with the measured offset. **Test-only hook**: when the
job's spec sets ``test_clock`` (role variable ``_fleetqual_test_clock``, never set in
production), the host's clock reads ``FLEETQUAL_TEST_CLOCK_OFFSET_S`` seconds off the real
clock (:func:`clock_skew`); iobench's epochs (real clock) are shifted the same way in the
stored result (:func:`shift_epochs`) and ``--start-at`` is given in the real clock, so every
reading the job reports is consistently in the (skewed) host clock. The controller's clock
exchange reads the same variable (:data:`CLOCK_COMMAND`, :func:`parse_clock_reply`).

Status ``array`` (in ``status.json``)::

    {"name", "rank", "state": "preparing" | "ready" | "running" | "done" | "failed",
     "ready_epoch" (host clock), "prepare": {"elapsed_s", "error"}, "sync": {...},
     "launch_s", "launch_lead_s",
     "start": <the start file> | null, "step": k, "of": n,
     "steps": [{"index", "active", "complete", "error", "scheduled_start", "scheduled_end",
                "window_start", "window_end" (controller clock), "start_late_ms",
                "launch": {"reached_s", "probed_s", "launched_s"} (seconds before the warm-up
                start at which the job reached the step, had probed, launched iobench),
                "measured": {"target", "kind", "path" | "device", "wwid", "alias",
                             "device_name", "devices"} (what the step's I/O went to:
                :func:`measured_of`) | null,
                "result": <run_workload result, epochs in the host clock> | null}]}

A step is incomplete (``complete: false`` with ``error``) when this host was not ready at
its start (no common start yet, the start file refused the host, or the job reached the
step after its warm-up should have begun), or lost mid-step (iobench failed, was killed, was interrupted, reported
I/O errors, or the job was stopped). Steps the job never reached are absent (the
controller names a missing host by that absence). An inactive host (rank >= initiators)
has ``active: false``, ``complete: true`` and no result.
"""

import json
import os
import re
import subprocess
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.collector import Collector
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload as _workload
from ansible_collections.fleetqual.storage.plugins.module_utils.job.cleanup import remove_datasets
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as _targets

START_FILE = "array-start.json"
TEST_CLOCK_ENV = "FLEETQUAL_TEST_CLOCK_OFFSET_S"
# iobench is started at least this long before its step's warm-up (the collectors' and
# iobench's start, then iobench's setup: open the files, drop their page cache, start the
# threads; the devices and probes are done before); arrays.STEP_GAP_S leaves room for it
LAUNCH_LEAD_S = 1.5
# the rehearsal's iobench exec gives up after this (the job's own start would then be late too)
REHEARSAL_EXEC_TIMEOUT_S = 20
# a host whose rehearsed launch (probes, collectors, an iobench exec) took launch_s starts
# iobench LAUNCH_MARGIN x launch_s before the warm-up when that is more (a loaded or emulated
# host: measured, not guessed), at most MAX_LAUNCH_LEAD_S
LAUNCH_MARGIN = 3.0
MAX_LAUNCH_LEAD_S = 60.0
# per-interval counts for the aggregate over the common window
REPORT_INTERVAL_S = 0.1
# members whose measured windows began further apart than this share of the step's time
# did not run it in lock-step (judged by the controller over every member's window: iobench's
# own lateness, ``start_late_ms``, is kept in each entry; all late together is one window)
LATE_SHARE = 0.10
# a member whose measured window held less than this share of the step's time did not run the
# step (iobench launched so late on a loaded host that its end came almost at once: a window of
# microseconds and no request): its entry says so instead of calling the step complete
MIN_WINDOW_SHARE = 0.5
START_POLL_S = 0.02
# the controller's clock exchange: the test hook's variable (empty line without it), then
# the host's real clock; GNU date prints nanoseconds, one process, no interpreter start-up
CLOCK_COMMAND = 'printf "%%s\\n" "${%s-}"; date +%%s.%%N' % TEST_CLOCK_ENV


def stream_command(start_path):
    """One shell on the host for the whole exchange over an SSH channel: first line the test
    hook's variable; then, per empty line read, the host's clock (GNU ``date``, one fork: the
    round trip is the channel's, a few ms); a non-empty line is the start file's content,
    written atomically to ``start_path`` (answer ``written`` or ``failed``)."""
    q = "'" + start_path.replace("'", "'\\''") + "'"
    return ('printf "%%s\\n" "${%s-}"; umask 077; while IFS= read -r l; do if [ -z "$l" ]; then date +%%s.%%N; '
            'else printf "%%s\\n" "$l" > %s.tmp && mv -f %s.tmp %s && echo written || echo failed; fi; done'
            % (TEST_CLOCK_ENV, q, q, q))


def clock_skew(enabled, environ=None):
    """Seconds the host's clock reads off the real clock: 0, unless the test-only hook is
    ``enabled`` (job spec ``test_clock``) and ``FLEETQUAL_TEST_CLOCK_OFFSET_S`` is set."""
    if not enabled:
        return 0.0
    value = (os.environ if environ is None else environ).get(TEST_CLOCK_ENV, "")
    try:
        return float(value) if value.strip() else 0.0
    except ValueError:
        return 0.0


def now(skew=0.0):
    """This host's clock (Unix seconds), as the job reads it."""
    return time.time() + skew


def parse_clock_reply(stdout, test_clock=False):
    """The host clock reading of one :data:`CLOCK_COMMAND` reply, or None when it has none
    (a ``date`` without ``%N`` prints it literally)."""
    lines = [ln.strip() for ln in (stdout or "").splitlines()]
    if len(lines) < 2:
        return None
    if not re.match(r"^\d+\.\d+$", lines[-1]):
        return None
    return float(lines[-1]) + clock_skew(test_clock, {TEST_CLOCK_ENV: lines[-2]})


def best_exchange(samples):
    """The clock offset from round-trip-bounded exchanges ``[(sent, host_time, received)]``
    (controller clock at send and receipt, host clock in between): the exchange with the
    smallest round trip wins; the host read its clock somewhere inside it, so the offset
    (host - controller) is ``host - midpoint`` within half the round trip."""
    good = [s for s in samples if s[1] is not None and s[2] >= s[0]]
    if not good:
        return None
    sent, host, received = min(good, key=lambda s: s[2] - s[0])
    rtt = received - sent
    return {"offset_s": round(host - (sent + received) / 2.0, 6), "uncertainty_s": round(rtt / 2.0, 6),
            "rtt_s": round(rtt, 6), "exchanges": len(samples), "method": "round-trip-bounded exchange "
            "(%d exchanges, smallest round trip kept, uncertainty = half of it)" % len(samples)}


def clock_check(host, uncertainty_s, steps, max_ms=None, warn_share=0.01, refuse_share=0.05):
    """``(level, message)``: ``refuse`` when the offset uncertainty is over ``max_ms``
    (``max_clock_uncertainty_ms``; default ``refuse_share`` of the shortest step's measured
    time), ``warn`` when it is over ``warn_share`` of it, else ``(None, None)``."""
    shortest = min([float(s["time"]) for s in steps if s.get("time")] or [0.0])
    unc_ms = round(uncertainty_s * 1000.0, 6)
    limit_ms = float(max_ms) if max_ms is not None else refuse_share * shortest * 1000.0
    if limit_ms and unc_ms > limit_ms:
        return "refuse", ("host %s: clock offset uncertainty %.1f ms is over max_clock_uncertainty_ms %.1f "
                          "(%s); its steps are not measured in lock-step"
                          % (host, unc_ms, limit_ms, "set" if max_ms is not None else
                             "default: %d %% of the shortest step, %g s" % (refuse_share * 100, shortest)))
    if shortest and unc_ms > warn_share * shortest * 1000.0:
        return "warn", ("host %s: clock offset uncertainty %.1f ms is %.1f %% of the shortest step (%g s)"
                        % (host, unc_ms, unc_ms / (shortest * 10.0), shortest))
    return None, None


def _run(argv, timeout=10):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=timeout, env=dict(os.environ, LC_ALL="C"), check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.decode("utf-8", "replace") if p.returncode == 0 else None


def parse_chrony_tracking(text):
    """``chronyc -c tracking`` (CSV: ref id, name, stratum, ref time, system time, last
    offset, rms offset, frequency, residual freq, skew, root delay, root dispersion, update
    interval, leap status) -> ``{synchronized, source, system_offset_s}`` or None."""
    fields = (text or "").strip().split(",")
    if len(fields) < 14:
        return None
    leap = fields[13].strip()
    try:
        system = float(fields[4])
    except ValueError:
        system = None
    return {"synchronized": leap.lower() in ("normal", "insert second", "delete second"),
            "source": "chrony: %s (stratum %s, leap %s)" % (fields[1] or fields[0], fields[2], leap),
            "system_offset_s": system}


def sync_state(run=_run):
    """Whether this host's clock is synchronized: ``chronyc -c tracking`` when chrony
    answers, else ``timedatectl show`` (``NTPSynchronized``); ``synchronized`` is None when
    neither tells."""
    out = run(["chronyc", "-c", "tracking"])
    chrony = parse_chrony_tracking(out) if out else None
    if chrony:
        return chrony
    out = run(["timedatectl", "show", "-p", "NTPSynchronized", "-p", "NTP"])
    if out:
        values = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
        synced = values.get("NTPSynchronized")
        if synced in ("yes", "no"):
            return {"synchronized": synced == "yes", "source": "timedatectl: NTPSynchronized=%s, NTP=%s"
                    % (synced, values.get("NTP", "?")), "system_offset_s": None}
    return {"synchronized": None, "source": "unknown: neither chronyc tracking nor timedatectl answered",
            "system_offset_s": None}


EPOCH_PATHS = (("bench", "window", "start_epoch"), ("bench", "window", "end_epoch"),
               ("bench", "warmup_window", "start_epoch"), ("bench", "warmup_window", "end_epoch"),
               ("bench", "start_at"))


def shift_epochs(result, skew):
    """Express a run_workload result's real-clock epochs in the host's clock (``+ skew``):
    iobench's windows and ``start_at``, the iostat / vmstat samples, the device counters'
    samples (``foreign``, ``device_samples``). In place; returns it."""
    if not skew or not isinstance(result, dict):
        return result
    for path in EPOCH_PATHS:
        node = result
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(path[-1]), (int, float)):
            node[path[-1]] = round(node[path[-1]] + skew, 6)
    for section in ("iostat", "vmstat"):
        for sample in ((result.get(section) or {}).get("samples") or []):
            if isinstance(sample.get("epoch"), (int, float)):
                sample["epoch"] = round(sample["epoch"] + skew, 6)
    # the device counters read inside the window (compared with iobench's series)
    for section in ("foreign", "device_samples"):
        for sample in ((result.get(section) or {}).get("samples") or []):
            if isinstance(sample.get("e"), (int, float)):
                sample["e"] = round(sample["e"] + skew, 4)
    return result


def dataset_name(name):
    """The array's data set directory name: ``array-<name>`` with unsafe characters replaced."""
    return "array-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def resolve_target(cfg, targets, workloads, test_dir, name):
    """``{target, target_kind, target_path | target_device, device_size, device_offset}`` of
    the array's target (``plan.targets.array_target``: the one named, else the host's only
    target, else the ``fleetqual_test_dir`` shorthand). Raises ValueError when the host has
    no such target, or several and the array names none."""
    t = _targets.array_target(cfg.get("target"), targets, "fleetqual_arrays.%s" % name)
    if t is None or t.get("shorthand"):
        return {"target": None, "target_kind": "path", "target_path": test_dir}
    if t.get("kind") == "device":
        sizes = [int(w.get("device_size") or 0) for w in workloads or [] if w.get("target") == t["name"]]
        out = {"target": t["name"], "target_kind": "device", "target_device": t["device"],
               "device_size": 0 if (not sizes or 0 in sizes) else max(sizes),
               "device_offset": int(t.get("offset") or 0)}
        out.update((k, t[k]) for k in ("wwid", "alias", "serial") if t.get(k))
        return out
    return {"target": t["name"], "target_kind": "path", "target_path": t["path"]}


def measured_of(spec, info):
    """What a step measured: the array's target (its name, null for ``fleetqual_test_dir``;
    the directory or device, a LUN's WWID and alias) and the block devices under it as the
    step resolved them: ``device_name`` the top one (``dm-0`` of a multipath map, ``vda1``
    of a partition), ``devices`` those whose counters the step reads (a map's paths)."""
    out = {"target": spec.get("target"), "kind": spec.get("target_kind"),
           "device_name": ((info or {}).get("chain") or [None])[0], "devices": list((info or {}).get("devices") or [])}
    if spec.get("target_kind") == "device":
        out["device"] = spec.get("target_device")
        out.update((k, spec[k]) for k in ("wwid", "alias") if spec.get(k))
    else:
        out["path"] = spec.get("target_path")
    return out


def complete_spec(spec, targets, workloads, test_dir, prepare_min_mibps=20):
    """The host's part of the job's ``array`` parameter (the controller's is
    ``action/lockstep.member_spec``): where the data set lives, from the host's own plan
    and targets, and the waits: preparing it at ``prepare_min_mibps`` at the slowest, and
    the others' preparation before the common start."""
    spec = dict(spec)
    spec.update(resolve_target(spec.get("config") or {}, targets, workloads, test_dir, spec["name"]))
    size = int(spec.get("total_size") or spec.get("device_size") or 0)
    spec["prepare_timeout_s"] = int(60 + size // (int(prepare_min_mibps) * 1048576))
    # the job waits this long for the common start after it is ready: the others' preparation
    spec["ready_timeout_s"] = int(spec["prepare_timeout_s"] + 600)
    return spec


def array_timing(spec):
    """``(planned_s, deadline_extra_s)`` of the array part of a job: the schedule, and the
    preparation, the wait for the common start and its lead on top of it."""
    planned = int(spec["schedule_s"])
    return planned, planned + spec["prepare_timeout_s"] + spec["ready_timeout_s"] + 120


def dataset_dir(spec):
    """Where the array's data set lives on this host: ``<target path>/array-<name>`` (the
    shorthand: ``<test_dir>/array-<name>``), or None for a device target (its region)."""
    if spec.get("target_kind") == "device":
        return None
    return os.path.join(spec["target_path"], spec["dataset"])


def step_workload(spec, step):
    """The plan-workload shape of one step (``Job.params_for`` turns it into run_workload
    parameters): the step's mode, threads, block size, times, on the prepared data set."""
    def pick(key, default=None):
        return step.get(key) if step.get(key) is not None else spec.get(key, default)

    wl = {"id": "array-%s-s%d" % (spec["name"], step["index"]), "dataset": spec["dataset"],
          "mode": step["mode"], "threads": int(step["threads"]), "block_size": int(step["block_size"]),
          "time": int(step["time"]), "warmup": int(step["warmup"]), "direct": bool(pick("direct", True)),
          "report_interval": REPORT_INTERVAL_S, "prepare": False, "file_num": int(pick("file_num", 1)),
          "total_size": int(pick("total_size")) if pick("total_size") else None, "seed": spec.get("seed"),
          "engine": pick("engine", "sync"), "iodepth": int(pick("iodepth", 1))}
    if step.get("rw_ratio") is not None:
        wl["rw_ratio"] = float(step["rw_ratio"])
    if spec.get("target_kind") == "device":
        wl.update(target_kind="device", target_device=spec["target_device"], device_size=spec.get("device_size") or 0,
                  device_offset=spec.get("device_offset") or 0)
    else:
        wl.update(target_kind="path", target_path=spec["target_path"])
    if step["index"] == spec.get("failover_step"):
        wl.update(verify=True, verify_pass=True)      # every block it wrote, read back and checked
    return wl


def prepare_argv(spec, binary):
    """``iobench prepare`` of the array's data set: its files in a directory, or its region of
    a device (stamped for --verify, from the target's offset: reads read written blocks, and
    the failover step's read-back checks every block against what was written)."""
    if spec.get("target_kind") == "device":
        size = int(spec.get("total_size") or spec.get("device_size") or 0)
        return ([binary, "prepare", "--device", spec["target_device"], "--verify"]
                + (["--offset", str(int(spec["device_offset"]))] if spec.get("device_offset") else [])
                + (["--size", str(size)] if size else []))
    return [binary, "prepare", "--dir", dataset_dir(spec), "--file-num", str(int(spec.get("file_num") or 1)),
            "--total-size", str(int(spec["total_size"]))]


def launch_lead(launch_s):
    """Seconds before a step's warm-up at which a host whose rehearsed launch took
    ``launch_s`` starts iobench: ``LAUNCH_LEAD_S``, or ``LAUNCH_MARGIN`` x ``launch_s`` when
    more, at most ``MAX_LAUNCH_LEAD_S``."""
    if not isinstance(launch_s, (int, float)) or launch_s < 0:
        return LAUNCH_LEAD_S
    return round(min(MAX_LAUNCH_LEAD_S, max(LAUNCH_LEAD_S, LAUNCH_MARGIN * float(launch_s))), 3)


def scheduled(start, step):
    """Controller-clock and host-clock instants of a step: ``(window_start, window_end,
    host_warmup_start, host_window_start)``."""
    t0, off = float(start["t0"]), float(start["offset_s"])
    return (t0 + step["offset_s"], t0 + step["end_s"], t0 + off + step["offset_s"] - step["warmup"],
            t0 + off + step["offset_s"])


class ArrayRun:
    """The array part of one job (``job``: a ``module_utils.job_runner.Job``)."""

    def __init__(self, job):
        self.job = job
        self.spec = job.spec["array"]
        self.skew = clock_skew(self.spec.get("test_clock"))
        self.start_path = os.path.join(job.dir, START_FILE)
        self.lead = LAUNCH_LEAD_S

    def now(self):
        return now(self.skew)

    def save(self):
        self.job.save()

    def run(self):
        spec, st = self.spec, self.job.status
        steps = list(spec.get("steps") or [])
        rank = int(spec["rank"])
        doc = st["array"] = {"name": spec["name"], "rank": rank, "members": spec.get("members"),
                             "config": spec.get("config"), "plan": steps,
                             "spec": {k: v for k, v in spec.items() if k not in ("steps", "config", "members")},
                             "state": "preparing", "ready_epoch": None,
                             "prepare": None, "sync": None, "launch_s": None, "launch_lead_s": None,
                             "start": None, "step": 0, "of": len(steps),
                             "steps": [], "test_clock_skew_s": self.skew or None}
        self.save()
        try:
            doc["sync"] = sync_state()
            began = time.time()
            argv = prepare_argv(spec, self.job.spec["binary"])
            error = None
            if argv:
                if dataset_dir(spec):
                    os.makedirs(dataset_dir(spec), mode=0o700, exist_ok=True)
                rc, _out, err, timed_out, _s, _e = _workload.run_bench(argv, spec.get("prepare_timeout_s"), self.job.stop)
                if rc != 0 or timed_out:
                    error = "iobench prepare of the array's data set failed (exit %s%s): %s" % (
                        rc, ", stopped" if timed_out else "", _workload.error_line(err) or "no error message")
            doc["prepare"] = {"elapsed_s": round(time.time() - began, 3), "error": error}
            if not error:
                doc["launch_s"] = self.rehearse(steps, rank)
                self.lead = doc["launch_lead_s"] = launch_lead(doc["launch_s"])
            doc["ready_epoch"] = round(self.now(), 6)
            doc["state"] = "ready" if not error else "failed"
            self.save()
            start = self.wait_start() if not error else None
            doc["start"] = start
            doc["state"] = "running"
            self.save()
            for step in steps:
                if self.job.stop.is_set():
                    break
                doc["step"] = step["index"]
                self.save()
                doc["steps"].append(self.run_step(step, rank, start, error))
                self.save()
            doc["state"] = "done" if not error else "failed"
        finally:
            d = dataset_dir(spec)
            if d:
                _removed, _left, warnings = remove_datasets(os.path.dirname(d), [os.path.basename(d)],
                                                            self.job.spec["binary"])
                doc["cleanup_warnings"] = warnings
            self.save()

    def rehearse(self, steps, rank):
        """Seconds this host takes to launch a step, measured before it says ready: its first
        active step's probes (``workload.prepare``, whether iobench reads device counters),
        its collectors started and stopped, and an iobench executed (``--version``); None
        when it has no active step, the probes refuse the step (the step says why) or the
        rehearsal itself failed (the launch lead is then its floor)."""
        step = next((s for s in steps if rank < int(s["initiators"])), None)
        if step is None:
            return None
        began = time.monotonic()
        try:
            params = self.job.params_for(step_workload(self.spec, step), 60)
            errors, _sizes, info, source, tools = _workload.prepare(params)
            if errors:
                return None
            _workload.supports_devstat(params["binary"])
            collector = Collector(info["devices"], params["collect_interval"], source, tools)
            try:
                collector.start()
            except OSError:
                pass            # the step's own start says so; its launch is still measured
            finally:
                collector.stop()
            # an exec of its own: the help text behind supports_devstat is read once per job
            subprocess.run([params["binary"], "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=REHEARSAL_EXEC_TIMEOUT_S, check=False)
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):
            return None
        return round(time.monotonic() - began, 3)

    def wait_start(self):
        """The start file's content, once the controller wrote it (None: never, before the
        job's ready wait ran out or it was stopped)."""
        limit = time.monotonic() + float(self.spec.get("ready_timeout_s") or 3600)
        while not self.job.stop.is_set() and time.monotonic() < limit:
            try:
                with open(self.start_path) as fh:
                    start = json.load(fh)
                start["received_epoch"] = round(self.now(), 6)
                return start
            except (OSError, ValueError):
                self.job.stop.wait(START_POLL_S)
        return None

    def entry(self, step, rank, start):
        active = rank < int(step["initiators"])
        e = {"index": step["index"], "active": active, "complete": not active, "error": None,
             "scheduled_start": None, "scheduled_end": None, "window_start": None, "window_end": None,
             "start_late_ms": None, "measured": None, "result": None}
        if start:
            e["scheduled_start"], e["scheduled_end"] = [round(x, 6) for x in scheduled(start, step)[:2]]
        return e

    def run_step(self, step, rank, start, prepare_error):
        e = self.entry(step, rank, start)
        if not e["active"]:
            return e
        if prepare_error:
            e["error"] = "not ready at the start: %s" % prepare_error
            return e
        if not start:
            e["error"] = "not ready at the start: no common start time reached the host"
            return e
        if start.get("refused"):
            e["error"] = "not ready at the start: %s" % start["refused"]
            return e
        _ws, _we, warm_host, window_host = scheduled(start, step)
        reached = self.now()
        e["launch"] = {"reached_s": round(warm_host - reached, 3), "probed_s": None, "launched_s": None}
        if reached > warm_host:
            e["error"] = ("not ready at the start: the host reached step %d %.3f s after its warm-up start%s"
                          % (step["index"], reached - warm_host,
                             " (it was still saving the step before; the array's step_gap_s gives it more time)"
                             if step["index"] > 1 else ""))
            return e
        wl = step_workload(self.spec, step)
        timeout = int(LAUNCH_LEAD_S + step["warmup"] + step["time"] + 60)
        if step["index"] == self.spec.get("failover_step"):
            # its read-back of the data set: no slower than the preparation's bound
            timeout += int(self.spec.get("prepare_timeout_s") or 0)
        params = self.job.params_for(wl, timeout)
        params["start_at"] = round(warm_host - self.skew, 6)      # iobench sleeps on the real clock
        # everything but the launch before the wait (resolving the devices, probing the
        # collectors and iobench's options): on a loaded host they took much of the lead
        errors, sizes, info, source, tools = _workload.prepare(params)
        e["measured"] = measured_of(self.spec, info)
        if not errors:
            _workload.supports_devstat(params["binary"])
        e["launch"]["probed_s"] = round(warm_host - self.now(), 3)
        self.job.stop.wait(max(0.0, warm_host - self.lead - self.now()))
        e["launch"]["launched_s"] = round(warm_host - self.now(), 3)
        if self.job.stop.is_set():
            e["error"] = "lost: the job was stopped (%s) before the step" % (self.job.reason or "stopped")
            return e
        if errors:
            result, failed, msg, warnings = _workload.not_prepared(errors, info)
        else:
            result, failed, msg, warnings = _workload.run_workload(params, self.job.stop, sizes, info, source, tools,
                                                                   stopped_by=self.job.stopped_by,
                                                                   scratch_dir=self.job.scratch)
        shift_epochs(result, self.skew)
        e["result"] = dict(result or {}, warnings=warnings) if warnings else result
        bench = (result or {}).get("bench") or {}
        window = bench.get("window") or {}
        off = float(start["offset_s"])
        if window.get("start_epoch") and window.get("end_epoch"):
            e["window_start"] = round(window["start_epoch"] - off, 6)
            e["window_end"] = round(window["end_epoch"] - off, 6)
        e["start_late_ms"] = bench.get("start_late_ms")
        # the failover step's window is its figures whatever happened in it (array/failover.py)
        short = short_window(e, step) if step["index"] != self.spec.get("failover_step") else None
        if failed:
            e["error"] = "lost mid-step: iobench failed: %s" % msg
        elif self.job.stop.is_set():
            e["error"] = "lost mid-step: the job was stopped (%s)" % (self.job.reason or "stopped")
        elif result.get("rc") == 5 or result.get("timed_out") or bench.get("interrupted"):
            e["error"] = "lost mid-step: iobench was interrupted (exit %s)" % result.get("rc")
        elif (result.get("rc") == 4 or (bench.get("errors") or {}).get("total")) and step["index"] != self.spec.get(
                "failover_step"):
            e["error"] = "iobench reported I/O errors (exit %s)" % result.get("rc")
        elif short:
            e["error"] = short
        else:
            # the failover step ran whole whatever its I/O errors: they are its figures
            # (plugin_utils/array/failover.py judges them)
            # late or not, the step ran whole; whether the members ran it together is the
            # controller's to judge from all their windows (array figures: lock-step)
            e["complete"] = True
        return e


def short_window(entry, step):
    """Why the step's measured window of ``entry`` is too short to be the step (text), or None:
    it held less than :data:`MIN_WINDOW_SHARE` of the step's time."""
    start, end = entry.get("window_start"), entry.get("window_end")
    if start is None or end is None:
        return None             # no window at all: the controller's entry_problem says so
    held = end - start
    if held >= MIN_WINDOW_SHARE * float(step["time"]):
        return None
    late = entry.get("start_late_ms")
    return ("lost mid-step: its measured window held %.3f s of the step's %g s%s" % (
        max(0.0, held), float(step["time"]), " (iobench started %.0f ms late)" % late if late is not None else ""))


def status_view(doc, full=False):
    """The array part of a status for the controller: everything, but the steps' results
    only with ``full`` (the job ended, or results were asked for)."""
    out = dict(doc)
    if not full:
        out["steps"] = [{k: v for k, v in s.items() if k != "result"} for s in doc.get("steps") or []]
    return out


def run_array(job):
    """The job's array hook: run the array steps of ``job.spec['array']`` (when set)."""
    if job.spec.get("array"):
        ArrayRun(job).run()
