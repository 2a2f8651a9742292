"""Failover under load (plugins/plugin_utils/array/failover.py, docs/san.md): the variable's
checks before any host, the controller's timer (the real runner, real commands, real
times), and the judgement of each initiator from its interval series, errors and mismatches."""
import json
import os
import time

from hypothesis import given, settings, strategies as st
import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as F
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as M
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import arrays as A

ARRAY = {"initiators": [1, 2], "threads": [2], "modes": ["rndwr"], "time": 20, "warmup": 1, "block_size": "16K",
         "total_size": "32M"}
GOOD = {"cut": "true", "restore": "true", "at_s": 3, "hold_s": 12, "max_stall_s": 30}


def fleet(failover_of):
    return {h: {"fleetqual_array": "san", "fleetqual_arrays": {"san": ARRAY}, "fleetqual_failover": failover_of(h)}
            for h in ("h1", "h2")}


def test_a_valid_failover_takes_the_last_step_and_a_command_time_limit():
    steps = M.plan_steps(ARRAY, 2)
    checked, errors = F.check(GOOD, steps)
    assert errors == [] and checked == dict(GOOD, step=2, timeout_s=F.DEFAULT_TIMEOUT_S)
    assert A.validate_arrays(fleet(lambda h: GOOD)) == []
    when = F.schedule(checked, 1000.0, steps)
    assert when == {"step": 2, "cut_at": 1000.0 + steps[1]["offset_s"] + 3, "restore_at": 1000.0 + steps[1]["offset_s"] + 15}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(F.KEYS) + ["at", "hold", "max_stall"]),
                       st.one_of(st.integers(-5, 40), st.floats(-1, 40, allow_nan=False), st.text(max_size=6),
                                 st.none(), st.booleans()), max_size=8))
def test_a_failover_is_refused_before_any_host_unless_every_key_is_right(value):
    steps = M.plan_steps(ARRAY, 2)
    checked, errors = F.check(value, steps)
    if value == {}:
        assert (checked, errors) == (None, [])
        return
    num = (int, float)
    ok = (set(value) <= set(F.KEYS) and all(k in value for k in F.REQUIRED)
          and all(isinstance(value[k], str) and value[k].strip() for k in ("cut", "restore"))
          and all(isinstance(value[k], num) and not isinstance(value[k], bool) and value[k] > 0
                  for k in ("hold_s", "max_stall_s") + (("timeout_s",) if "timeout_s" in value else ()))
          and isinstance(value["at_s"], num) and not isinstance(value["at_s"], bool) and value["at_s"] >= 0
          and ("step" not in value or (isinstance(value["step"], int) and not isinstance(value["step"], bool)
                                       and 1 <= value["step"] <= 2)))
    if ok:
        ok = value["at_s"] + value["hold_s"] < steps[value.get("step", 2) - 1]["time"]
    assert (checked is not None) == ok and bool(errors) != ok, (value, errors)
    problems = A.validate_arrays(fleet(lambda h: value))
    assert bool(problems) != ok and all(p.startswith("host h1: fleetqual_failover") for p in problems), problems


def test_members_must_share_one_failover_and_a_host_outside_an_array_has_none():
    problems = A.validate_arrays(fleet(lambda h: GOOD if h == "h1" else dict(GOOD, at_s=4)))
    assert problems == ["fleetqual_failover: differs between hosts h1 and h2 of array san; a failover is one cut for "
                        "the whole array: define it once (e.g. in the group_vars of the array's initiators) (array "
                        "san: hosts h1, h2)"], problems
    lone = {"db1": {"fleetqual_failover": GOOD}}
    assert A.validate_arrays(lone)[0].startswith("host db1: fleetqual_failover: set on a host in no array")
    hold = A.validate_arrays(fleet(lambda h: dict(GOOD, hold_s=20)))
    assert "is not inside step 2's measured window of 20 s" in hold[0] and "at most 0" in hold[0], hold


def test_the_timer_runs_the_cut_and_the_restore_at_their_times(tmp_path):
    """The real runner, detached: both commands run at their planned times (a command's own
    output and exit status kept), the restore even after a failed cut; it ends by itself."""
    adir = str(tmp_path)
    marks = tmp_path / "marks"
    steps = [{"index": 1, "offset_s": 0.0, "time": 10}]
    t0 = time.time() + 0.5
    cfg = dict(GOOD, cut="date +%%s.%%N >> %s; echo cut; exit 3" % marks, restore="date +%%s.%%N >> %s" % marks,
               at_s=0.5, hold_s=1.0, step=1, timeout_s=5)
    when = F.launch(adir, cfg, t0, steps)
    deadline = time.time() + 30
    log = None
    while time.time() < deadline:
        log = F.read_log(adir)
        if log and log.get("state") == "done":
            break
        time.sleep(0.1)
    assert log and log["state"] == "done", log
    cut, restore = log["events"]
    got = (cut["event"], cut["rc"], cut["stdout"].strip(), restore["event"], restore["rc"])
    assert got == ("cut", 3, "cut", "restore", 0), log
    ran = [float(x) for x in marks.read_text().split()]
    # each ran at or after its planned time (the controller's clock), never before (a late cut
    # does not push the restore: it is planned from the cut's time, not from the cut's run)
    assert ran[0] >= when["cut_at"] and ran[1] >= when["restore_at"], (ran, when)
    assert abs(cut["start"] - when["cut_at"]) == cut["late_s"] or cut["late_s"] >= 0
    assert not os.path.exists(os.path.join(adir, F.LOG + ".%d.tmp" % log["pid"]))


def _entry(series, errors=0, mismatches=0, window_start=100.0, kernel=()):
    ivs = [{"t": round(0.1 * (i + 1), 3), "duration_s": 0.1, "read_ops": 0, "write_ops": n, "fsync_ops": 0,
            "write_max_us": 1000.0, "read_max_us": 0.0} for i, n in enumerate(series)]
    return {"active": True, "complete": True, "window_start": window_start, "failover_kernel": list(kernel),
            "result": {"bench": {"intervals": ivs, "errors": {"total": errors, "samples": [
                {"op": "write", "offset": 4096, "errno_name": "EIO"}] if errors else []},
                "verify": {"enabled": True, "checked": 100, "corrupt": mismatches, "misplaced": 0, "stale": 0}}}}


def _log(cut_rc=0, cut_at=101.0):
    return {"spec": dict(GOOD, step=2), "events": [
        {"event": "cut", "rc": cut_rc, "start": cut_at, "end": cut_at + 0.1, "stderr": "no route" if cut_rc else ""},
        {"event": "restore", "rc": 0, "start": cut_at + 12, "end": cut_at + 12.1, "stderr": ""}]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=20, max_size=200), st.integers(0, 2), st.integers(0, 2),
       st.floats(0.5, 20, allow_nan=False))
def test_an_initiator_fails_exactly_on_an_error_a_mismatch_or_a_stall_over_the_limit(series, errors, bad, limit):
    spec = dict(GOOD, step=2, max_stall_s=limit)
    got = F.judge_failover({}, {"h1": _entry(series, errors, bad)}, dict(_log(), spec=spec), spec)
    h = got["hosts"]["h1"]
    # the stall: the longest run of empty 0.1 s intervals
    longest = run = 0
    for n in series:
        run = run + 1 if n == 0 else 0
        longest = max(longest, run)
    assert h["stall_s"] == pytest.approx(longest * 0.1, abs=1e-6)
    want_fail = bool(errors) or bool(bad) or longest * 0.1 > limit + 1e-9
    assert h["verdict"] == ("FAIL" if want_fail else "PASS"), h
    seen = want_fail or longest * 0.1 >= 1.0
    assert got["verdict"] == ("FAIL" if want_fail else "PASS" if seen else "ERROR"), got["reasons"]
    if longest * 0.1 > limit + 1e-9:
        assert any("over max_stall_s" in r for r in h["reasons"])


def test_a_cut_that_failed_or_that_no_initiator_saw_is_an_error_never_a_pass():
    spec = dict(GOOD, step=2)
    got = F.judge_failover({}, {"h1": _entry([3] * 50)}, dict(_log(cut_rc=1), spec=spec), spec)
    assert got["verdict"] == "ERROR" and "the cut command 'true' failed" in got["reasons"][0], got
    got = F.judge_failover({}, {"h1": _entry([3] * 50)}, dict(_log(), spec=spec), spec)
    assert got["verdict"] == "ERROR" and "no initiator saw it" in got["reasons"][0], got
    # a kernel line is seeing it: the path failed and multipath went on without a stall
    line = {"t_s": 7.1, "kind": "dm_error", "text": "device-mapper: multipath: 253:0: Failing path 8:0."}
    got = F.judge_failover({}, {"h1": _entry([3] * 50, kernel=[line])}, dict(_log(), spec=spec), spec)
    assert got["verdict"] == "PASS" and got["hosts"]["h1"]["kernel"] == [line], got
    # the stall's place is said from the cut: the window opened at 100 s, the cut at 101 s
    tight = dict(spec, max_stall_s=5)
    got = F.judge_failover({}, {"h1": _entry([3] * 20 + [0] * 80 + [3] * 20)}, dict(_log(), spec=tight), tight)
    h = got["hosts"]["h1"]
    assert (h["stall_s"], h["stall_from_s"], h["stall_to_s"]) == (pytest.approx(8.0), 1.0, 9.0), h
    assert got["verdict"] == "FAIL" and "(from 1 s to 9 s after the cut), over max_stall_s 5" in got["reasons"][0], got


def test_a_cut_seen_on_a_device_the_step_did_not_measure_names_both():
    """The step measured the root disk (no array target named, the test directory) while the
    cut failed a path of the host's LUN: an ERROR naming where the kernel saw the cut and what
    the step measured, never "no initiator saw it"; a path of the measured LUN is seeing it."""
    spec = dict(GOOD, step=2)
    log = _log(cut_at=1000.0)
    kernel = {"messages": [], "path_states": [
        {"epoch": 1004.7, "state": "failed", "map": "253:0", "path": "8:0", "drive": "sda",
         "text": "device-mapper: multipath: 253:0: Failing path 8:0."},
        {"epoch": 1010.7, "state": "reinstated", "map": "253:0", "path": "8:0", "drive": "sda",
         "text": "device-mapper: multipath: 253:0: Reinstating path 8:0."}]}
    root = {"target": None, "kind": "path", "path": "/var/tmp/fleetqual", "device_name": "vda1", "devices": ["vda"]}
    entry = dict(_entry([3] * 200, window_start=998.0), index=2, measured=root)
    entry["result"]["collector"] = {"devices": ["vda"]}
    run = {"steps": [entry], "clock": {"offset_s": 0.0}}
    F.attach(run, dict(log, spec=spec), kernel)
    assert entry["failover_kernel"] == [] and entry["failover_paths"] == []
    assert [c["drive"] for c in entry["failover_elsewhere"]] == ["sda"]
    got = F.judge_failover({}, {"h1": entry}, dict(log, spec=spec), spec)
    assert got["verdict"] == "ERROR", got
    assert got["reasons"] == [
        "failover: the cut ran ('true') and the kernel saw it, on h1, on sda (path 8:0 of multipath map 253:0, "
        "failed at +4.7 s), but step 2 measured test_dir /var/tmp/fleetqual vda1 (vda) there: name the LUN as "
        "the array's target"], got["reasons"]
    # a stall of the measured root disk at the same time is not the cut's: still the ERROR
    stalled = dict(_entry([3] * 40 + [0] * 30 + [3] * 130, window_start=998.0), index=2, measured=root)
    stalled["result"]["collector"] = {"devices": ["vda"]}
    F.attach({"steps": [stalled], "clock": {"offset_s": 0.0}}, dict(log, spec=spec), kernel)
    got = F.judge_failover({}, {"h1": stalled}, dict(log, spec=spec), spec)
    assert got["hosts"]["h1"]["stall_s"] == pytest.approx(3.0) and got["verdict"] == "ERROR", got
    assert "but step 2 measured test_dir" in got["reasons"][0], got["reasons"]
    # the same cut on the measured LUN's path: seen, judged by its stall, errors and lines
    lun = {"target": "lun", "kind": "device", "device": "/dev/mapper/mpatha", "device_name": "dm-0",
           "devices": ["sda", "sdb"], "wwid": "3600a"}
    entry = dict(_entry([3] * 200, window_start=998.0), index=2, measured=lun)
    entry["result"]["collector"] = {"devices": ["sda", "sdb"]}
    run = {"steps": [entry], "clock": {"offset_s": 0.0}}
    F.attach(run, dict(log, spec=spec), kernel)
    assert entry["failover_elsewhere"] == [] and [c["drive"] for c in entry["failover_paths"]] == ["sda"]
    assert F.judge_failover({}, {"h1": entry}, dict(log, spec=spec), spec)["verdict"] == "PASS"


def test_an_initiator_that_did_not_run_the_step_whole_is_an_error_that_says_why():
    """Its stall is not known, and the reason is the step entry's own (never a bare "no series")."""
    spec = dict(GOOD, step=2)
    late = {"active": True, "complete": False, "result": None,
            "error": "not ready at the start: the host reached step 2 0.8 s after its warm-up start"}
    got = F.judge_failover({}, {"h1": _entry([3] * 20 + [0] * 30 + [3] * 20), "h2": late}, dict(_log(), spec=spec), spec)
    assert got["verdict"] == "ERROR" and got["hosts"]["h2"]["verdict"] == "ERROR", got
    assert got["hosts"]["h1"]["verdict"] == "PASS", got
    assert any(r.startswith("failover: h2: its stall is not known: step 2 not ready at the start: the host reached step 2")
               for r in got["reasons"]), got["reasons"]


def test_kernel_lines_of_the_failover_in_the_hosts_clock():
    log = _log(cut_at=1000.0)
    kernel = {"messages": [{"epoch": 1003.0 + 7.0, "kind": "dm_error", "text": "Failing path 8:0."},
                           {"epoch": 900.0, "kind": "io_error", "text": "long before"},
                           {"epoch": 1003.0 + 30.0, "kind": "dm_error", "text": "long after"}]}
    # the host's clock 3 s ahead of the controller's
    assert F.kernel_lines(kernel, log, offset_s=3.0) == [{"t_s": 7.0, "kind": "dm_error", "drive": None,
                                                          "text": "Failing path 8:0."}]
    run = {"steps": [{"index": 2}], "clock": {"offset_s": 3.0}}
    F.attach(run, dict(log, spec=dict(GOOD, step=2)), kernel)
    assert run["steps"][0]["failover_kernel"][0]["text"] == "Failing path 8:0." and run["failover"]["spec"]["step"] == 2
    assert json.dumps(run)


def test_a_failovers_path_events_are_set_apart_from_the_drives_errors():
    """The messages on a path of a LUN target between the cut and a little after the restore
    leave the drive's count (the cut made them); any other message stays counted."""
    log = _log(cut_at=1000.0)
    run = {"failover": dict(log, spec=dict(GOOD, step=2)), "clock": {"offset_s": 0.0}}
    targets = [{"name": "lun", "multipath": {"paths": [{"name": "sda"}, {"name": "sdb"}]}}]
    msgs = [{"drive": "sda", "kind": "io_error", "epoch": 1009.1, "text": "I/O error, dev sda"},
            {"drive": "sda", "kind": "dm_error", "epoch": 1009.1, "text": "Failing path 8:0."},
            {"drive": "sda", "kind": "io_error", "epoch": 1200.0, "text": "later: a real error"},
            {"drive": "vda", "kind": "io_error", "epoch": 1009.5, "text": "another drive"}]
    kernel = {"collected": True, "messages": msgs, "counts": {"sda": {"io_error": 2, "dm_error": 1},
                                                              "vda": {"io_error": 1}}}
    out = F.path_events(kernel, run, targets)
    assert [m["text"] for m in out["failover_path_events"]] == ["I/O error, dev sda", "Failing path 8:0."]
    assert [m["text"] for m in out["messages"]] == ["later: a real error", "another drive"]
    assert out["counts"] == {"sda": {"io_error": 1}, "vda": {"io_error": 1}}
    assert kernel["counts"]["sda"] == {"io_error": 2, "dm_error": 1}          # the input is not changed
    assert F.path_events(kernel, {"clock": {}}, targets) is kernel             # no failover: as it was


def _state(epoch, state, path="8:0", drive="sda"):
    what = "Failing" if state == "failed" else "Reinstating"
    return {"epoch": epoch, "state": state, "map": "254:0", "path": path, "drive": drive,
            "text": "device-mapper: multipath: 254:0: %s path %s." % (what, path)}


def test_a_paths_errors_until_its_reinstatement_are_the_failover_s_not_the_drives():
    """A recovering session logs errors on its path until dm-multipath reinstates it, however
    long after the restore; errors after that are the drive's again. A path never reinstated
    keeps every later error of the run out of the drive's count."""
    log = _log(cut_at=1000.0)          # restore ends at 1012.1
    run = {"failover": dict(log, spec=dict(GOOD, step=2)), "clock": {"offset_s": 0.0}}
    targets = [{"name": "lun", "multipath": {"paths": [{"name": "sda"}, {"name": "sdb"}]}}]
    msgs = [{"drive": "sda", "kind": "scsi_sense", "epoch": 1029.0, "text": "hostbyte=DID_TRANSPORT_DISRUPTED"},
            {"drive": "sda", "kind": "io_error", "epoch": 1036.0, "text": "after the reinstatement"},
            {"drive": "sdb", "kind": "io_error", "epoch": 1029.0, "text": "sdb, its path never failed"}]
    kernel = {"messages": msgs, "counts": {"sda": {"scsi_sense": 1, "io_error": 1}, "sdb": {"io_error": 1}},
              "path_states": [_state(1003.0, "failed"), _state(1030.0, "reinstated")]}
    out = F.path_events(kernel, run, targets)
    assert [m["text"] for m in out["failover_path_events"]] == ["hostbyte=DID_TRANSPORT_DISRUPTED"]
    assert out["counts"] == {"sda": {"io_error": 1}, "sdb": {"io_error": 1}}
    # never reinstated: the path's later errors are all the cut's
    stuck = dict(kernel, path_states=[_state(1003.0, "failed")])
    out = F.path_events(stuck, run, targets)
    assert [m["text"] for m in out["failover_path_events"]] == ["hostbyte=DID_TRANSPORT_DISRUPTED",
                                                                "after the reinstatement"]
    # the kernel lines: the reinstatement among them, the window up to it
    lines = F.kernel_lines(dict(kernel, messages=msgs[:1]), log)
    assert [(k["t_s"], k["kind"]) for k in lines] == [(29.0, "scsi_sense"), (30.0, "path_reinstated")]


def test_time_to_fail_back_and_max_failback_s():
    spec = dict(GOOD, step=2)
    log = dict(_log(cut_at=101.0), spec=spec)      # the restore ends 12.1 s after the cut
    kernel = {"path_states": [_state(101.5, "failed"), _state(99.0, "reinstated", "8:16", "sdb"),
                              _state(121.1, "reinstated")]}
    # another LUN's path (sdc under map 253:1) failed and came back later: not this step's device
    kernel["path_states"] += [_state(101.6, "failed", "8:32", "sdc"), _state(130.0, "reinstated", "8:32", "sdc")]
    run = {"steps": [{"index": 2, "result": {"collector": {"devices": ["sda", "sdb"]}}}], "clock": {"offset_s": 0.0}}
    kernel["messages"] = [{"epoch": 110.0, "kind": "io_error", "drive": "sdc", "text": "I/O error, dev sdc"},
                          {"epoch": 110.1, "kind": "io_error", "drive": "sda", "text": "I/O error, dev sda"},
                          {"epoch": 110.2, "kind": "dm_error", "drive": None, "text": "device-mapper: a line"}]
    F.attach(run, log, kernel)
    assert [(k["drive"], k["kind"]) for k in run["steps"][0]["failover_kernel"]] == [
        ("sda", "io_error"), (None, "dm_error"), ("sda", "path_reinstated")]
    entry = dict(_entry([3] * 20 + [0] * 30 + [3] * 100), failover_paths=run["steps"][0]["failover_paths"])
    got = F.judge_failover({}, {"h1": entry}, log, spec)
    h = got["hosts"]["h1"]
    assert (h["paths_failed"], h["failback_s"], h["not_reinstated"]) == (["sda"], 8.0, []), h
    assert got["verdict"] == "PASS" and "failed back 8 s after the restore" in F.failover_line(got), got
    strict = dict(spec, max_failback_s=5)
    got = F.judge_failover({}, {"h1": entry}, dict(log, spec=strict), strict)
    assert got["verdict"] == "FAIL" and "came back 8 s after the restore, over max_failback_s 5" in got["reasons"][0]
    # not reinstated while the job ran: a figure, and a FAIL with max_failback_s
    entry["failover_paths"] = F.path_changes({"path_states": [_state(101.5, "failed")]}, log)
    got = F.judge_failover({}, {"h1": entry}, log, spec)
    assert got["verdict"] == "PASS" and got["hosts"]["h1"]["not_reinstated"] == ["sda"]
    assert "path sda not reinstated" in F.failover_line(got)
    got = F.judge_failover({}, {"h1": entry}, dict(log, spec=strict), strict)
    assert got["verdict"] == "FAIL" and "path sda not reinstated by dm-multipath" in got["reasons"][0], got
    assert F.check(dict(GOOD, max_failback_s=0), M.plan_steps(ARRAY))[1][0].startswith(
        "fleetqual_failover.max_failback_s: must be a number of seconds above 0")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 60, allow_nan=False), st.sampled_from(["failed", "reinstated"]),
                          st.sampled_from(["sda", "sdb"])), max_size=8),
       st.lists(st.tuples(st.floats(-5, 80, allow_nan=False), st.sampled_from(["sda", "sdb", "vda"])), max_size=8))
def test_property_a_message_leaves_the_count_exactly_inside_its_paths_failover_time(states, msgs):
    """A message is set apart exactly when it is on a LUN path, from 1 s before the cut to the
    end of that path's failover time (restore + margin, or its reinstatement + margin when
    later; no end when it failed and was not reinstated); the counts keep every other one."""
    cut = 1000.0
    log = _log(cut_at=cut)
    run = {"failover": dict(log, spec=dict(GOOD, step=2)), "clock": {"offset_s": 0.0}}
    targets = [{"name": "lun", "multipath": {"paths": [{"name": "sda"}, {"name": "sdb"}]}}]
    path_of = {"sda": "8:0", "sdb": "8:16"}
    states = sorted(states)
    kernel = {"path_states": [_state(cut + t, s, path_of[d], d) for t, s, d in states],
              "messages": [{"drive": d, "kind": "io_error", "epoch": cut + t, "text": "m%d" % i}
                           for i, (t, d) in enumerate(msgs)]}
    kernel["counts"] = {}
    for m in kernel["messages"]:
        kernel["counts"].setdefault(m["drive"], {}).setdefault("io_error", 0)
        kernel["counts"][m["drive"]]["io_error"] += 1
    out = F.path_events(kernel, run, targets)
    restore_end = 12.1
    for i, (t, d) in enumerate(msgs):
        end = restore_end + F.KERNEL_MARGIN_S
        if d != "vda":
            failed_at = next((st_ for st_, s, dd in states if dd == d and s == "failed" and st_ >= -1.0), None)
            if failed_at is not None:
                back = next((st_ for st_, s, dd in states if dd == d and s == "reinstated" and st_ >= failed_at), None)
                end = float("inf") if back is None else max(end, back + F.KERNEL_MARGIN_S)
        moved = d != "vda" and -1.0 <= t <= end
        assert any(m["text"] == "m%d" % i for m in out.get("failover_path_events", [])) is moved, (i, t, d, end)
    kept = sum(sum(k.values()) for k in out["counts"].values())
    assert kept == len(msgs) - len(out.get("failover_path_events", []))
