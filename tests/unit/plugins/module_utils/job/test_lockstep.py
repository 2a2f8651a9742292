"""Array mode's host side and clock exchange (module_utils/job/lockstep.py, action/lockstep.py).

Property tests over the clock arithmetic (the offset estimate, the refusal rule, the clock
shift of a result), a real exchange over a real shell channel with the test clock hook, and
the job's array part run in-process on a real directory with the real iobench: a step whose
warm-up has passed before the job reaches it, a refused host, an inactive rank, and one real
lock-step step on a host clock 5 s off whose window opens at the scheduled controller instant.
"""
import json
import os
import shutil
import sys
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st
import unitpaths

HERE = unitpaths.UNIT
sys.path.insert(0, HERE)

import test_module_iobench  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import array_start as ctl  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as _job
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as _job_status  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.job import lockstep as ls  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays  # noqa: E402

iobench_binary = test_module_iobench.iobench_binary   # the fixtures
adir = test_module_iobench.testdir

exchange = st.tuples(st.floats(0, 100), st.floats(0.0001, 2.0), st.floats(0, 1))   # (sent, rtt, where in it)


@settings(max_examples=300, deadline=None)
@given(offset=st.floats(-1e5, 1e5), exchanges=st.lists(exchange, min_size=1, max_size=12))
def test_offset_within_half_the_smallest_round_trip(offset, exchanges):
    t_base = 1.8e9
    samples = [(t_base + s, t_base + s + rtt * f + offset, t_base + s + rtt) for s, rtt, f in exchanges]
    best = ls.best_exchange(samples)
    smallest = min(rtt for _s, rtt, _f in exchanges)
    assert best["rtt_s"] == pytest.approx(smallest, abs=2e-6)
    assert best["uncertainty_s"] == pytest.approx(smallest / 2, abs=2e-6)
    # the host read its clock somewhere in the round trip: the true offset is within the bound
    assert abs(best["offset_s"] - offset) <= best["uncertainty_s"] + 1e-5


def test_no_reading_no_offset():
    assert ls.best_exchange([(1.0, None, 1.1)]) is None
    assert ls.best_exchange([]) is None


@settings(max_examples=200, deadline=None)
@given(unc_us=st.integers(0, 5000000), step_s=st.integers(1, 600), max_us=st.one_of(st.none(), st.integers(100, 5000000)))
def test_clock_check_refuses_over_the_limit_and_warns_over_one_percent(unc_us, step_s, max_us):
    # microseconds: what an exchange over a channel resolves
    unc_ms, max_ms = unc_us / 1000.0, None if max_us is None else max_us / 1000.0
    steps = [{"time": step_s}, {"time": step_s * 2}]
    level, msg = ls.clock_check("db07", unc_ms / 1000.0, steps, max_ms)
    limit = max_ms if max_ms is not None else 0.05 * step_s * 1000
    if unc_ms > limit:
        assert level == "refuse" and "db07" in msg and "max_clock_uncertainty_ms" in msg
    elif unc_ms > 0.01 * step_s * 1000:
        assert level == "warn" and "db07" in msg
    else:
        assert (level, msg) == (None, None)


def _result(epoch):
    return {"bench": {"window": {"start_epoch": epoch, "end_epoch": epoch + 2},
                      "warmup_window": {"start_epoch": epoch - 1, "end_epoch": epoch}, "start_at": epoch - 1},
            "iostat": {"samples": [{"epoch": epoch + 1, "r/s": 3.0}]}, "vmstat": {"samples": [{"epoch": epoch + 1}]}}


@given(epoch=st.floats(1e9, 2e9), skew=st.floats(-1e4, 1e4))
def test_shift_epochs_moves_every_clock_reading_and_nothing_else(epoch, skew):
    r = ls.shift_epochs(_result(epoch), skew)
    b = r["bench"]
    for got, want in ((b["window"]["start_epoch"], epoch), (b["window"]["end_epoch"], epoch + 2),
                      (b["warmup_window"]["start_epoch"], epoch - 1), (b["start_at"], epoch - 1),
                      (r["iostat"]["samples"][0]["epoch"], epoch + 1), (r["vmstat"]["samples"][0]["epoch"], epoch + 1)):
        assert got == pytest.approx(want + skew, abs=2e-6)
    assert r["iostat"]["samples"][0]["r/s"] == 3.0


def test_test_clock_hook_only_with_its_flag():
    env = {ls.TEST_CLOCK_ENV: "7.5"}
    assert ls.clock_skew(True, env) == 7.5
    assert ls.clock_skew(False, env) == 0.0
    assert ls.clock_skew(True, {}) == 0.0
    assert ls.parse_clock_reply("7.5\n100.25\n", test_clock=True) == 107.75
    assert ls.parse_clock_reply("7.5\n100.25\n", test_clock=False) == 100.25
    assert ls.parse_clock_reply("\n100.%N\n", test_clock=True) is None      # a date without %N


def test_chrony_tracking_parsed():
    line = "A9FEA97B,169.254.169.123,4,1795572000.1,-0.000012,0.000001,0.000020,-12.5,0.001,0.02,0.0004,0.0002,64.2,Normal\n"
    got = ls.parse_chrony_tracking(line)
    assert got["synchronized"] is True and "169.254.169.123" in got["source"] and got["system_offset_s"] == -0.000012
    assert ls.parse_chrony_tracking(line.replace("Normal", "Not synchronised"))["synchronized"] is False
    assert ls.parse_chrony_tracking("garbage") is None
    assert ls.sync_state(run=lambda argv: None)["synchronized"] is None


def test_stream_exchange_over_a_real_shell_channel(tmp_path):
    """The exchange the controller runs over the host's channel, here a local shell whose
    environment carries the test hook: the offset is the hook's 3 s within the measured
    uncertainty, and the start file arrives whole."""
    path = str(tmp_path / "array-start.json")
    argv = ["/bin/sh", "-c", ls.stream_command(path)]
    env = dict(os.environ, **{ls.TEST_CLOCK_ENV: "3"})
    samples, doc, written = ctl.stream_exchange(argv, 6, True, lambda s: {"t0": 1.0, "best": ls.best_exchange(s)},
                                                env=env)
    assert len(samples) == 6 and written is True
    best = doc["best"]
    assert abs(best["offset_s"] - 3.0) <= best["uncertainty_s"] + 1e-3, best
    with open(path) as fh:
        assert json.load(fh) == doc
    assert not os.path.exists(path + ".tmp")


def test_start_lead_grows_with_the_waves_of_forks():
    one = ctl.start_lead(4, 4, 0.5)
    four = ctl.start_lead(16, 4, 0.5)
    assert four > one >= ctl.MIN_LEAD_S + ls.LAUNCH_LEAD_S
    assert ctl.start_lead(16, 16, 0.5) == one


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 64), forks=st.integers(1, 16), rtt=st.floats(0, 2, allow_nan=False),
       a=st.floats(-1, 20, allow_nan=False), b=st.floats(-1, 20, allow_nan=False))
def test_a_loaded_controller_gives_every_wave_more_time_within_a_bound(n, forks, rtt, a, b):
    lo, hi = sorted((a, b))
    idle = ctl.start_lead(n, forks, rtt)
    if lo <= 1:
        assert ctl.start_lead(n, forks, rtt, load=lo) == idle        # an idle controller: the lead as it was
    assert ctl.start_lead(n, forks, rtt, load=hi) >= ctl.start_lead(n, forks, rtt, load=lo)
    waves = -(-n // forks)
    # the run queue stretches Ansible's task overhead only, never the launch or the connections
    assert ctl.start_lead(n, forks, rtt, load=hi) - idle == pytest.approx(
        waves * 2.0 * ctl.PER_HOST_TASK_S * (min(ctl.MAX_LOAD_FACTOR, max(1.0, hi)) - 1.0), abs=2e-3)


def test_the_controllers_load_is_read_from_its_run_queue_and_recorded_with_t0(tmp_path):
    load = ctl.controller_load()
    assert 1.0 <= load <= ctl.MAX_LOAD_FACTOR
    doc, fixed = ctl.fix_t0(ctl.array_dir(str(tmp_path), "loaded"), 2, 2)
    assert fixed and 1.0 <= doc["controller_load"] <= ctl.MAX_LOAD_FACTOR
    assert doc["lead_s"] == pytest.approx(ctl.start_lead(2, 2, 0.0, doc["launch_need_s"], doc["controller_load"]),
                                          abs=2e-3)


@settings(max_examples=200, deadline=None)
@given(a=st.one_of(st.none(), st.floats(-5, 100, allow_nan=False)), b=st.floats(0, 100, allow_nan=False))
def test_a_hosts_launch_lead_is_its_rehearsed_launch_with_margin_within_bounds(a, b):
    lead = ls.launch_lead(a)
    assert ls.LAUNCH_LEAD_S <= lead <= ls.MAX_LAUNCH_LEAD_S
    if a is None or a < 0:
        assert lead == ls.LAUNCH_LEAD_S          # nothing measured: the fixed lead
    else:
        assert lead == pytest.approx(min(ls.MAX_LAUNCH_LEAD_S, max(ls.LAUNCH_LEAD_S, ls.LAUNCH_MARGIN * a)), abs=1e-3)
        if b >= a:
            assert ls.launch_lead(b) >= lead      # a slower launch never gets less lead


def test_t0_gives_the_slowest_members_launch_its_time():
    fast = {"launch_s": 0.1, "launch_lead_s": ls.LAUNCH_LEAD_S}
    slow = {"launch_s": 4.0, "launch_lead_s": ls.launch_lead(4.0)}
    assert ctl.launch_need([]) == ctl.launch_need([{"connect_s": 0.2}]) == ls.LAUNCH_LEAD_S
    assert ctl.launch_need([fast, slow, None]) == pytest.approx(4.0 + ls.launch_lead(4.0))
    base = ctl.start_lead(2, 2, 0.5)
    assert ctl.start_lead(2, 2, 0.5, ctl.launch_need([fast])) == pytest.approx(base + 0.1)
    assert ctl.start_lead(2, 2, 0.5, ctl.launch_need([fast, slow])) - base == pytest.approx(
        4.0 + ls.launch_lead(4.0) - ls.LAUNCH_LEAD_S)


def test_fix_t0_once_per_playbook_run(tmp_path):
    adir = ctl.array_dir(str(tmp_path), "san 1")
    first, fixed = ctl.fix_t0(adir, 3, 2)
    again, fixed_again = ctl.fix_t0(adir, 3, 2)
    assert fixed and not fixed_again and again == first
    assert first["t0"] > first["fixed_at"] and first["controller"] == ctl.controller_id()


# --------------------------------------------------------------------------- the job's array part, in-process

CFG = {"initiators": [1, 2], "threads": [1], "modes": ["rndrd"], "time": 2, "warmup": 1, "total_size": "4M",
       "block_size": "4K"}


def _job_for(binary, d, rank, skew=None):
    steps = arrays.plan_steps(CFG, 2)
    spec = {"path": d, "run_id": "t", "binary": binary, "datasets": [], "workloads": [], "timeouts": [],
            "planned": [], "planned_s": 10, "deadline_s": 300, "seed": 1, "collect": "none", "collect_interval": 1,
            "array": {"name": "a", "rank": rank, "members": ["h1", "h2"], "config": CFG, "steps": steps,
                      "dataset": "array-a", "total_size": steps[0]["total_size"], "file_num": 1, "seed": 1,
                      "test_clock": skew is not None, "target_kind": "path", "target_path": d,
                      "prepare_timeout_s": 60, "ready_timeout_s": 60}}
    os.makedirs(_job_status.job_dir(d), exist_ok=True)
    job = _job.Job(spec)
    job.begin(time.time())
    return job, steps


def _hand_start(d, make):
    """Write the start file once the job says ready (what the controller's phase start does)."""
    def run():
        while ((_job_status.read_status(_job_status.job_dir(d)) or {}).get("array") or {}).get("state") != "ready":
            time.sleep(0.02)
        with open(os.path.join(_job_status.job_dir(d), ls.START_FILE), "w") as fh:
            json.dump(make(), fh)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_steps_whose_start_passed_are_not_ready_and_never_run(iobench_binary, adir):
    job, steps = _job_for(iobench_binary, adir, rank=1)
    _hand_start(adir, lambda: {"t0": time.time() - 100, "offset_s": 0.0, "uncertainty_s": 0.001, "refused": None})
    job.run()
    a = job.status["array"]
    assert a["state"] == "done" and [e["index"] for e in a["steps"]] == [1, 2]
    inactive, late = a["steps"]
    assert inactive["active"] is False and inactive["result"] is None and inactive["complete"] is True
    assert late["active"] and not late["complete"] and late["result"] is None
    assert late["error"].startswith("not ready at the start: the host reached step 2"), late["error"]
    # a step after another: the host was still saving the one before, and the key that helps is named
    assert late["error"].endswith("(it was still saving the step before; the array's step_gap_s gives it more "
                                  "time)"), late["error"]
    assert not os.path.exists(os.path.join(adir, "array-a")), "the array's data set is removed"


def test_a_refused_host_runs_no_step_and_says_why(iobench_binary, adir):
    job, _steps = _job_for(iobench_binary, adir, rank=0)
    why = "host h1: clock offset uncertainty 900.0 ms is over max_clock_uncertainty_ms 100.0"
    _hand_start(adir, lambda: {"t0": time.time() + 1, "offset_s": 0.0, "uncertainty_s": 0.9, "refused": why})
    job.run()
    for e in job.status["array"]["steps"]:
        assert e["active"] and not e["complete"] and e["result"] is None
        assert e["error"] == "not ready at the start: " + why


def test_one_lock_step_window_on_a_skewed_host_clock(iobench_binary, adir, monkeypatch):
    """The host's clock reads 5 s ahead (the test hook): the job starts iobench on the real
    clock so its measured window opens at the scheduled controller instant; the stored result
    is in the host's clock (5 s ahead); the entry's window is back in the controller's."""
    monkeypatch.setenv(ls.TEST_CLOCK_ENV, "5")
    job, steps = _job_for(iobench_binary, adir, rank=0, skew=5.0)
    job.spec["array"]["steps"] = steps[:1]
    _hand_start(adir, lambda: {"t0": time.time() + 1.5, "offset_s": 5.0, "uncertainty_s": 0.001, "refused": None})
    job.run()
    (e,) = job.status["array"]["steps"]
    assert e["complete"], e["error"]
    window = e["result"]["bench"]["window"]
    assert window["start_epoch"] - e["window_start"] == pytest.approx(5.0, abs=1e-6)
    # the window opened at its scheduled instant, within what iobench says it was late
    late_s = (e["start_late_ms"] or 0) / 1000.0
    assert e["window_start"] >= e["scheduled_start"] - 0.001
    assert e["window_start"] - e["scheduled_start"] <= late_s + 0.05 * steps[0]["time"]
    assert "--start-at" in e["result"]["argv"] and "--report-interval" in e["result"]["argv"]
    assert len(e["result"]["bench"]["intervals"]) >= 10
    # the launch rehearsed before ready, and the step's lead is the one it gives; the step's
    # own moments in order (seconds before the warm-up: reached, probed, launched)
    a = job.status["array"]
    assert a["launch_s"] > 0 and a["launch_lead_s"] == ls.launch_lead(a["launch_s"]), a
    assert e["launch"]["reached_s"] >= e["launch"]["probed_s"] >= e["launch"]["launched_s"], e["launch"]
    # what the step measured: the test directory (no named target) and the device under it
    m = e["measured"]
    assert (m["target"], m["kind"], m["path"]) == (None, "path", adir)
    assert m["devices"] == e["result"]["collector"]["devices"] and m["device_name"] == e["result"]["collector"]["chain"][0]


def test_a_rehearsal_that_cannot_run_leaves_the_floor_lead_and_one_that_can_measures(iobench_binary, adir, monkeypatch):
    job, steps = _job_for(iobench_binary, adir, rank=0)
    try:
        run = ls.ArrayRun(job)
        measured = run.rehearse(steps, 0)
        assert isinstance(measured, float) and measured > 0
        # a host no step is active on has nothing to rehearse
        assert run.rehearse([dict(s, initiators=1) for s in steps], 1) is None

        def broken(_params):
            raise OSError("no such device")
        monkeypatch.setattr(ls._workload, "prepare", broken)
        assert run.rehearse(steps, 0) is None
        assert ls.launch_lead(None) == ls.LAUNCH_LEAD_S
    finally:
        shutil.rmtree(job.scratch, ignore_errors=True)      # begun, never run: Job.run would remove it


def test_timedatectl_state_when_chrony_is_absent():
    answers = {"chronyc": None, "timedatectl": "NTPSynchronized=yes\nNTP=yes\n"}
    got = ls.sync_state(run=lambda argv: answers[argv[0]])
    assert got["synchronized"] is True and got["source"].startswith("timedatectl: NTPSynchronized=yes")


def test_array_spec_ranks_members_and_the_deadline_covers_the_schedule():
    arrays_var = {"san": dict(CFG, initiators=[1, 2, 10], target="lun")}
    hosts_vars = {h: {"fleetqual_array": "san"} for h in ("h10", "h2", "h1")}
    hosts_vars["other"] = {}
    targets = [{"name": "lun", "kind": "path", "path": "/data/fq"}]
    spec = ctl.array_spec("san", arrays_var, hosts_vars, "h10", "/var/tmp/fq", targets=targets)
    assert spec["members"] == ["h1", "h2", "h10"] and spec["rank"] == 2          # natural order
    assert spec["target_kind"] == "path" and spec["target_path"] == "/data/fq" and spec["dataset"] == "array-san"
    planned, extra = ls.array_timing(spec)
    assert planned >= arrays.schedule_seconds(spec["steps"])
    # the job's deadline: the schedule, the data set's preparation and the wait for the start
    assert extra >= planned + spec["prepare_timeout_s"] + spec["ready_timeout_s"]
    other = [{"name": "data1", "kind": "path", "path": "/d"}]
    with pytest.raises(Exception) as e:
        ctl.array_spec("san", arrays_var, hosts_vars, "h1", "/var/tmp/fq", targets=other)
    assert "target 'lun'" in str(e.value) and "data1" in str(e.value)


# --------------------------------------------------------------------------- the array's target

def test_without_target_an_array_measures_the_hosts_only_target():
    """A host whose one target is a SAN LUN and an array that names no target: the array's
    data set is on the LUN (its region), never in fleetqual_test_dir; the spec says which."""
    arrays_var = {"san": dict(CFG, initiators=[1])}
    hosts_vars = {"h1": {"fleetqual_array": "san"}}
    lun = {"name": "lun", "kind": "device", "device": "/dev/disk/by-id/dm-uuid-mpath-3600a", "wwid": "3600a",
           "offset": 1 << 20}
    spec = ctl.array_spec("san", arrays_var, hosts_vars, "h1", "/var/tmp/fq", targets=[lun],
                          workloads=[{"target": "lun", "device_size": 64 << 20}])
    assert (spec["target"], spec["target_kind"], spec["target_device"], spec["wwid"]) == \
        ("lun", "device", lun["device"], "3600a")
    assert spec["device_offset"] == 1 << 20 and spec["device_size"] == 64 << 20 and "target_path" not in spec
    # no targets at all: the test directory, and the spec says it is no named target
    spec = ctl.array_spec("san", arrays_var, hosts_vars, "h1", "/var/tmp/fq", targets=[])
    assert (spec["target"], spec["target_kind"], spec["target_path"]) == (None, "path", "/var/tmp/fq")


_NAMES = st.lists(st.sampled_from(["lun", "data", "logs", "lun0", "scratch"]), unique=True, max_size=3)


@settings(max_examples=200, deadline=None)
@given(names=_NAMES, want=st.one_of(st.none(), st.sampled_from(["lun", "data", "lnu", "logs", "x"])),
       shorthand=st.booleans())
def test_the_controller_and_the_host_pick_the_same_target_or_refuse_alike(names, want, shorthand):
    """One rule (plan.targets.array_target) on both sides: the controller's validation
    (before any host is touched) and the host's job agree on every host's targets and every
    ``target`` value: the one named, else the only one, else the test directory; a name that
    is none of them, or several targets and no name, refused naming the targets."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.arrays import validate_arrays
    cfg = dict(CFG, initiators=[1], total_size="4M")
    if want is not None:
        cfg["target"] = want
    user = [{"name": n, "path": "/srv/%s" % n} for n in names]
    errors = validate_arrays({"h1": {"fleetqual_array": "san", "fleetqual_arrays": {"san": cfg},
                                     "fleetqual_targets": user}}, None,
                             {"fleetqual_arrays": {}, "fleetqual_cache_size": "256M", "fleetqual_targets": [],
                              "fleetqual_test_dir": "/var/tmp/fleetqual"})
    host_targets = [{"name": n, "kind": "path", "path": "/srv/%s" % n} for n in names]
    if shorthand and not names:
        host_targets = [{"name": "test_dir", "kind": "path", "path": "/var/tmp/fq", "shorthand": True}]
    try:
        got = ls.resolve_target(cfg, host_targets, [], "/var/tmp/fq", "san")
        host_error = None
    except ValueError as exc:
        got, host_error = None, str(exc)
    refused = [e for e in errors if "fleetqual_arrays.san.target" in e]
    if want is not None and want not in names:
        assert host_error and refused and "no target %r" % want in host_error
        assert refused == ["host h1: " + host_error]
    elif want is None and len(names) > 1:
        assert host_error and refused == ["host h1: " + host_error]
        assert "this host has %d targets (%s); name one" % (len(names), ", ".join(names)) in host_error
    else:
        assert host_error is None and not refused, (host_error, errors)
        expect = want or (names[0] if names else None)
        assert got["target"] == expect
        assert got["target_path"] == ("/srv/%s" % expect if expect else "/var/tmp/fq")


@given(time_s=st.sampled_from([1, 2, 10]), held_share=st.floats(min_value=0.0, max_value=1.2),
       late_ms=st.one_of(st.none(), st.floats(min_value=0, max_value=5000)))
def test_a_member_whose_window_held_under_half_the_step_did_not_run_it(time_s, held_share, late_ms):
    """A member's iobench launched so late on a loaded host that its window held microseconds
    and no request (seen: 2 us of a 2 s step, 1.19 s late): its entry is an error, never a
    complete step; a window of at least half the step stands (lateness is the controller's)."""
    entry = {"window_start": 1000.0, "window_end": 1000.0 + held_share * time_s, "start_late_ms": late_ms}
    why = ls.short_window(entry, {"time": time_s})
    if held_share >= ls.MIN_WINDOW_SHARE:
        assert why is None
    else:
        assert why.startswith("lost mid-step: its measured window held ") and ("%g s" % time_s) in why
        assert ("ms late" in why) == (late_ms is not None)
    assert ls.short_window({"window_start": None, "window_end": None}, {"time": time_s}) is None
