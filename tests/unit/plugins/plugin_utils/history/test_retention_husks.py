# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Housekeeping of compliance runs (docs/compliance.md): retention removes the whole run
directory it prunes, the wait's ``.progress/`` included, and nothing of the user's; a
directory an older retention left holding only an ended run's ``.progress/`` (a husk) goes
too; a compliance run with a custom matrix is still compliance for the drift rules."""
from __future__ import annotations

import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as history_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import retention

from history_records import make_record, run_id, store
import unitpaths


def progress(root, rid, hosts=("h1", "h2"), state="done", extra=()):
    """The wait's progress directory as plugins/action/job.py leaves it."""
    d = os.path.join(str(root), rid, retention.PROGRESS_DIR)
    os.makedirs(d, exist_ok=True)
    for h in hosts:
        with open(os.path.join(d, "%s.json" % h), "w") as f:
            json.dump({"run_id": rid, "host": h, "state": state, "of": 6, "index": 6}, f)
    for name in ("round-58830421", "round-58830422", "plan-0123456789abcdef", ".h1.json.abc123") + tuple(extra):
        with open(os.path.join(d, name), "w") as f:
            f.write("")
    return d


def run_dirs(root):
    return sorted(n for n in os.listdir(str(root)) if os.path.isdir(os.path.join(str(root), n)))


def test_keep_runs_two_after_four_runs_leaves_two_run_directories(tmp_path):
    for day in range(4):
        for h in ("h1", "h2"):
            store(tmp_path, make_record(h, run_id(day)))
        progress(tmp_path, run_id(day))
    out = retention.prune(str(tmp_path), {"keep_runs": 2})
    assert run_dirs(tmp_path) == sorted([run_id(2), run_id(3)])
    assert sorted(out["pruned"]) == [run_id(0), run_id(1)] and out["left"] == [] and out["husks"] == []
    # the kept runs keep their progress
    assert os.path.isdir(os.path.join(str(tmp_path), run_id(3), retention.PROGRESS_DIR))


def test_a_baseline_run_keeps_only_the_hosts_record_and_summary(tmp_path):
    for day in range(4):
        store(tmp_path, make_record("h1", run_id(day), verdict="PASS" if day < 2 else "FAIL"))
        store(tmp_path, make_record("h2", run_id(day)))
        progress(tmp_path, run_id(day))
    out = retention.prune(str(tmp_path), {"keep_runs": 2})
    assert out["partial"] == {run_id(1): ["h1"]}
    assert run_dirs(tmp_path) == sorted([run_id(1), run_id(2), run_id(3)])
    kept = os.path.join(str(tmp_path), run_id(1))
    assert sorted(os.listdir(kept)) == ["h1.json", history_store.HISTORY_DIR]
    assert os.listdir(os.path.join(kept, history_store.HISTORY_DIR)) == ["h1.json"]


def test_a_users_file_in_progress_stays_with_its_directory(tmp_path):
    for day in range(3):
        store(tmp_path, make_record("h1", run_id(day)))
        progress(tmp_path, run_id(day), hosts=("h1",), extra=("notes.txt",) if day == 0 else ())
    out = retention.prune(str(tmp_path), {"keep_runs": 1})
    prog = os.path.join(str(tmp_path), run_id(0), retention.PROGRESS_DIR)
    assert os.listdir(prog) == ["notes.txt"]                 # the user's file, nothing of ours
    assert os.listdir(os.path.join(str(tmp_path), run_id(0))) == [retention.PROGRESS_DIR]
    assert out["left"] == [os.path.join(prog, "notes.txt")]
    assert not os.path.exists(os.path.join(str(tmp_path), run_id(1)))


def test_husks_of_ended_runs_go_and_a_waiting_run_stays(tmp_path):
    for day in range(3):
        store(tmp_path, make_record("h1", run_id(day)))
    progress(tmp_path, run_id(5))                              # an ended run pruned by an older retention
    progress(tmp_path, run_id(6), state="running")             # a run still waiting (another controller)
    progress(tmp_path, run_id(7), extra=("mine.txt",))         # a user's file beside it: not only ours
    os.makedirs(os.path.join(str(tmp_path), "20260101T000000Z", retention.PROGRESS_DIR))   # empty: nobody's run
    out = retention.prune(str(tmp_path), {"keep_runs": 5}, current_run=run_id(2))
    assert out["husks"] == [run_id(5)]
    assert not os.path.exists(os.path.join(str(tmp_path), run_id(5)))
    for rid in (run_id(6), run_id(7), "20260101T000000Z"):
        assert os.path.isdir(os.path.join(str(tmp_path), rid, retention.PROGRESS_DIR)), rid
    # dry run: says it, removes nothing
    progress(tmp_path, run_id(8))
    out = retention.prune(str(tmp_path), {"keep_runs": 5}, dry_run=True)
    assert out["husks"] == [run_id(8)] and os.path.isdir(os.path.join(str(tmp_path), run_id(8)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.integers(1, 6), keep=st.integers(1, 6), noted=st.sets(st.integers(0, 5)),
       failing=st.sets(st.integers(0, 5)))
def test_exactly_keep_runs_directories_plus_baselines_and_the_users_files(tmp_path_factory, runs, keep, noted, failing):
    root = str(tmp_path_factory.mktemp("results"))
    for day in range(runs):
        store(root, make_record("h1", run_id(day), verdict="FAIL" if day in failing else "PASS"))
        progress(root, run_id(day), hosts=("h1",), extra=("notes.txt",) if day in noted else ())
    out = retention.prune(root, {"keep_runs": keep})
    newest = [run_id(d) for d in range(runs - 1, -1, -1)]
    kept = set(newest[:keep])
    assert set(out["kept"]) == kept
    left = set(run_dirs(root))
    for rid in newest:
        d = os.path.join(root, rid)
        if rid in kept:
            assert os.path.isdir(os.path.join(d, retention.PROGRESS_DIR))
            continue
        day = int(newest.index(rid))
        day = runs - 1 - day
        if rid in out["partial"]:
            want = {"h1.json", history_store.HISTORY_DIR} | ({retention.PROGRESS_DIR} if day in noted else set())
            assert set(os.listdir(d)) == want
        elif day in noted:
            assert os.listdir(d) == [retention.PROGRESS_DIR]
            assert os.listdir(os.path.join(d, retention.PROGRESS_DIR)) == ["notes.txt"]
        else:
            assert rid not in left
    # nothing but the kept runs, the baselines' parts and directories holding a user's file
    assert left == kept | set(out["partial"]) | {run_id(d) for d in noted if d < runs and run_id(d) not in kept}


# --------------------------------------------------------------------------- custom matrix

def test_a_compliance_run_with_a_custom_matrix_fails_on_drift_by_default(tmp_path):
    """The record keeps the profile's name (compliance) and says the matrix was the user's
    (``matrix: custom``); the drift rules follow the profile."""
    root = str(tmp_path)
    base = make_record("db1", run_id(0))
    base["matrix"] = "custom"
    store(root, base)
    cur = make_record("db1", run_id(1), iops=0.5)
    cur["matrix"] = "custom"
    store(root, cur)
    h = {"host": "db1", "verdict": "PASS"}
    history.judge_entry(h, cur, root)
    drift = [f for f in h["history"]["findings"] if f["kind"] == "drift"]
    assert drift and all(f["severity"] == "fail" for f in drift), h["history"]["findings"]
    summary = history.summarize(cur)
    assert summary["profile"] == "compliance" and summary["matrix"] == "custom"
    # another profile's custom matrix only warns, as before
    store(root, dict(make_record("db1", run_id(2), profile="standard"), matrix="custom"))
    other = dict(make_record("db1", run_id(3), iops=0.5, profile="standard"), matrix="custom")
    store(root, other)
    h2 = {"host": "db1", "verdict": "PASS"}
    history.judge_entry(h2, other, root)
    drift = [f for f in h2["history"]["findings"] if f["kind"] == "drift"]
    assert drift and all(f["severity"] == "warn" for f in drift)


# --------------------------------------------------------------------------- the progress line

def _action():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as action
    return action


def test_the_line_says_who_waits_for_a_quiet_disk_and_counts_the_waits_in_the_plan():
    action = _action()
    hosts = [{"state": "running", "index": 2, "of": 6, "started_epoch": 100, "planned_s": 150, "waited_s": 40,
              "quiet": {"waiting": True, "util_pct": 45.2, "limit_pct": 10, "waited_s": 40, "wait_s": 120}},
             {"state": "running", "index": 3, "of": 6, "started_epoch": 100, "planned_s": 150, "waited_s": 3,
              "quiet": None},
             {"state": "done", "index": 6, "of": 6, "started_epoch": 100, "planned_s": 150, "waited_s": 18}]
    line = action.fleet_line(hosts, now=418)
    assert line == ("fleetqual: workload 2/6 | 3 hosts: 2 running, 1 done, 0 failed | 1 waiting for a quiet disk "
                    "(%util 45 > 10, 40s of 2m) | 5m18s of ~4m30s planned (2m30s + 2m of quiet waits)")
    # no wait at all: the line as before
    assert action.fleet_line([dict(hosts[1], waited_s=0)], now=250).endswith("| 2m30s of ~2m30s planned")


def test_the_line_shows_the_burnin_round_and_the_passes_hosts_are_in():
    action = _action()

    def b(k, p):
        return {"round": k, "rounds": 8, "pass": p}
    hosts = [{"state": "running", "index": 7, "of": 24, "planned_s": 3600, "started_epoch": 1, "burnin": b(3, "write")},
             {"state": "running", "index": 8, "of": 24, "planned_s": 3600, "started_epoch": 1, "burnin": b(3, "verify")},
             {"state": "running", "index": 8, "of": 24, "planned_s": 3600, "started_epoch": 1, "burnin": b(3, "verify")}]
    line = action.fleet_line(hosts, now=61)
    assert line.startswith("fleetqual: workload 7/24 (burnin round 3/8, write pass; hosts in verify 2, write 1) | 3 hosts")
    assert action.fleet_line(hosts[1:], now=61).startswith("fleetqual: workload 8/24 (burnin round 3/8, verify pass) |")
    # another profile's hosts carry no burnin: nothing said
    assert "burnin" not in action.fleet_line([{k: v for k, v in h.items() if k != "burnin"} for h in hosts], now=61)


STATES = st.sampled_from(["running", "done", "failed", "expired", "stopped", "died", "unreachable", "lost", None])
QUIET = st.one_of(st.none(), st.fixed_dictionaries({
    "waiting": st.booleans(), "util_pct": st.floats(0, 100), "limit_pct": st.floats(0, 100),
    "waited_s": st.floats(0, 600), "wait_s": st.floats(0, 600)}))
HOST = st.fixed_dictionaries({
    "state": STATES, "index": st.integers(0, 30), "of": st.integers(0, 30), "planned_s": st.integers(0, 10 ** 5),
    "started_epoch": st.floats(1, 1000), "waited_s": st.floats(0, 10 ** 4), "quiet": QUIET,
    "burnin": st.one_of(st.none(), st.fixed_dictionaries({"round": st.integers(1, 9), "rounds": st.integers(1, 9),
                                                          "pass": st.sampled_from(["write", "verify", "mix"])}))})


@settings(max_examples=300, deadline=None)
@given(st.lists(HOST, max_size=12), st.floats(0, 10 ** 5))
def test_the_line_never_claims_more_than_there_is(hosts, now):
    action = _action()
    p = action.fleet_progress(hosts, now=now)
    assert p["running"] + p["done"] + p["failed"] <= p["hosts"] == len(hosts)
    assert p["waiting"] <= p["running"]
    assert p["k"] <= p["of"]
    # the planned time is at least every host's plan plus the waits it has had and may still have
    for h in hosts:
        planned, waits = action.host_bound(h)
        assert p["planned_s"] + p["waits_s"] >= planned + waits - 1e-6
    line = action.fleet_line(hosts, now=now)
    assert line.startswith("fleetqual: workload ") and ("waiting for a quiet disk" in line) == bool(p["waiting"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 600), st.floats(0, 300)), min_size=1, max_size=10), st.integers(0, 9),
       st.floats(0, 1), st.floats(1, 300))
def test_planned_covers_the_elapsed_time_of_a_host_on_schedule(plan, k, frac, wait_s):
    """A host whose workloads took their planned time and whose quiet waits stayed within
    their bound is never past the planned time the line shows."""
    action = _action()
    k = min(k, len(plan) - 1)
    done = sum(t + w for t, w in plan[:k])
    waited_now = frac * wait_s                                  # the current wait, within its bound
    elapsed = done + waited_now
    h = {"state": "running", "index": k + 1, "of": len(plan), "started_epoch": 1000.0,
         "planned_s": sum(t for t, _w in plan), "waited_s": sum(w for _t, w in plan[:k]) + waited_now,
         "quiet": {"waiting": True, "util_pct": 50, "limit_pct": 10, "waited_s": waited_now, "wait_s": wait_s}}
    p = action.fleet_progress([h], now=1000.0 + elapsed)
    assert p["planned_s"] + p["waits_s"] >= p["elapsed_s"] - 1e-6


# reads the device with O_DIRECT, 4K at a time, round and round, for at most argv[2] seconds
READER = r"""
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 4096)
end, off = time.time() + float(sys.argv[2]), 0
while time.time() < end:
    os.preadv(fd, [buf], off)
    off = (off + 4096) % size
"""


def test_the_jobs_status_carries_a_real_quiet_wait(tmp_path):
    """A busy loop device (a reader of its own, ended by PID): the job's status says it waits,
    the poll's brief carries it, and the progress line names it."""
    import subprocess
    import time as _time
    import loopdev
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import runner as job_runner
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as job_runner_status
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    with loopdev.loop_ext4(128, prefix="fq-quiet-") as lp:
        reader = subprocess.Popen([sys.executable, "-c", READER, lp["dev"], "30"])
        try:
            before = foreign.read_stat(lp["name"])
            while foreign.read_stat(lp["name"])[0] - before[0] < 1000 and reader.poll() is None:
                _time.sleep(0.05)                                # the reader reads
            job = job_runner.Job({"path": str(tmp_path)})
            os.makedirs(job.dir)
            job.status = {"run_id": "r1", "pid": os.getpid(), "state": "running", "planned_s": 60, "of": 2, "index": 1,
                          "started_epoch": _time.time(), "quiet": None, "waited_s": 0.0, "burnin": None}
            seen = []

            def report(q):
                job.quiet_progress(q)
                seen.append(job_runner_status.read_status(job.dir))
            # quiet only at a %util of 0.0 over a whole second: the reader, however little of the
            # CPU a loaded machine leaves it, keeps the device busier than that (at 1 % over 0.3 s,
            # a fresh-clone run's reader, starved by the other streams, let one round pass as quiet)
            quiet = foreign.wait_quiet([lp["name"]], {"sample_s": 1.0, "quiet_util_pct": 0, "wait_s": 2.0}, None, report)
        finally:
            reader.kill()
            reader.wait()
    assert quiet["ok"] is False, quiet
    waiting = [s for s in seen if s.get("quiet")]
    assert waiting and waiting[0]["quiet"]["waiting"] and waiting[0]["quiet"]["util_pct"] > 0
    assert seen[-1]["quiet"] is None and seen[-1]["waited_s"] == quiet["waited_s"]
    brief = job_runner_status.brief(waiting[-1], _time.time(), None)
    assert brief["quiet"] == waiting[-1]["quiet"]
    line = _action().fleet_line([dict(brief, state="running")])
    assert "1 waiting for a quiet disk" in line and "quiet waits" in line


def _record_inputs(variables):
    """The role's record inputs (roles/qualify/tasks/main.yml, the wait task's ``record``)
    rendered with ``variables``, as Jinja renders them for the task."""
    import jinja2
    import yaml
    root = unitpaths.ROOT
    with open(os.path.join(root, "roles", "qualify", "tasks", "main.yml"), encoding="utf-8") as f:
        tasks = yaml.safe_load(f)
    block = [t for t in tasks if "block" in t][0]["block"]
    record = [t for t in block if "record" in (t.get("fleetqual.storage.qualify_host") or {})][0]
    record = record["fleetqual.storage.qualify_host"]["record"]
    env = jinja2.Environment()
    return {k: env.from_string(v).render(**variables) for k, v in record.items() if k in ("profile", "matrix")}


def test_the_role_records_the_profile_name_and_a_custom_matrix():
    got = _record_inputs({"fleetqual_profile": "compliance", "fleetqual_matrix": [{"workload": "log", "mode": "seqwr"}]})
    assert got == {"profile": "compliance", "matrix": "custom"}
    got = _record_inputs({"fleetqual_profile": "compliance", "fleetqual_matrix": []})
    assert got["profile"] == "compliance" and got.get("matrix") in ("None", "")
