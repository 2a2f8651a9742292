"""Array mode over SSH: three hosts share one loop device and run its steps in lock-step.

The "array" is one loop device this test creates, with one ext4 filesystem mounted once;
each host's ``fleetqual_test_dir`` is a directory on it (unmounted and detached in a
``finally``). The hosts fq71..fq73 (group ``arr``, ``fleetqual_array: san1``) run with two
forks, fewer than hosts. The array sweeps 1 and 3 initiators x random reads and writes, steps
of 2 s (+1 s warm-up):

* step 1: rndrd x 1 initiator (fq71), step 2: rndrd x 3, step 3: rndwr x 1, step 4: rndwr x 3.

fq71's clock reads 7 s ahead (the test-only hook: ``_fleetqual_test_clock: true`` and
``FLEETQUAL_TEST_CLOCK_OFFSET_S=7`` in the environment its sshd gives every session, so both
its job and the controller's clock exchange see it). In step 4 the test SIGKILLs fq73's
iobench (found by PID: its own binary, ``--start-at``) in the middle of the measured window.
fq72's own plan after the array is one paced 75 s workload, and once the wait has found its job
running, fq72's sshd (every session below it) is killed and started again on its port 60 s
later: a member of an array away for a while.

What must hold:

* every host's record has ``array_run`` with the same ``t0``, its rank, and an entry per step;
* fq71's measured offset is 7 s within the exchange's own uncertainty (the others' 0), and its
  windows, converted with it, open together with the others' (far closer than the 7 s its
  clock is off), while its own result keeps its clock (iobench's epochs + 7 s);
* the array's aggregate IOPS per step (``plugin_utils/array/mode.py`` over the hosts' records: the
  hosts' per-interval counts summed over the common window) equals the loop device's own
  counters (``--devstat``: /sys/block/loopN/stat read at the window's edges) within 5 %;
* each step's start spread is reported;
* step 4 is incomplete and names fq73 (its entry says it was lost mid-step); steps 1-3 stand;
* the array's data sets are gone afterwards;
* fq72 was waited for and collected when it came back: its record says how long it was away,
  and its own workload was measured to its end.
"""
import json
import os
import re
import signal
import statistics
import threading
import time

import pytest

import fleetlib
from proctree import cmdline
import loopdev
from fleetrun import run_playbook

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays_mod

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOSTS = ["fq71", "fq72", "fq73"]
SKEWED, KILLED, AWAY = "fq71", "fq73", "fq72"
AWAY_S = 60
# the away member's own plan: long enough that the wait finds its job running (paced: little CPU)
AWAY_PLAN = [{"workload": "cache", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
              "block_size": "16K", "direct": True, "time": 75, "warmup": 0, "rate_iops": 200}]
SKEW_S = 7.0
KILL_STEP = 4
# step_gap_s 4 (the default 2): on a fresh-clone run a member still saved step 2 0.83 s into
# step 3's warm-up (the loaded machine, not lock-step, is not this test's subject)
ARRAY = {"initiators": [1, 3], "threads": [2], "modes": ["rndrd", "rndwr"], "time": 2, "warmup": 1,
         "block_size": "16K", "total_size": "32M", "file_num": 1, "step_gap_s": 4}
# the host's own plan after the array: one tiny workload
TINY = [{"workload": "cache", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "16K",
         "direct": True, "time": 1, "warmup": 0}]


@pytest.fixture(scope="module")
def shared_loop(tmp_path_factory):
    """One ext4 filesystem on one loop device, mounted: (mount point, /dev/loopN)."""
    if fleetlib.loop_tools_missing():
        pytest.skip(fleetlib.loop_tools_missing())
    base = str(tmp_path_factory.mktemp("arrayloop"))
    mnt = os.path.join(base, "mnt")
    # ext4 initialised at mkfs (loop_device): no ext4lazyinit writing into the measured windows;
    # its image on a tmpfs, so the loop device's flushes never wait on a loaded machine's disk
    with loopdev.tmpfs(os.path.join(base, "memory"), 512 + 16) as memory, \
            fleetlib.loop_device(os.path.join(memory, "array.img"), 512 << 20, mount=mnt) as dev:
        yield mnt, dev


def _iobench_of(binary, dataset_dir):
    """PIDs of the lock-step iobench runs of one host (its own binary, on its array data set)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            argv = cmdline(int(name))
            if argv and argv[0] == binary and "--start-at" in argv and dataset_dir in argv:
                out.append((int(name), argv))
    return out


class Watcher(threading.Thread):
    """Reads the JSON file ``path`` every ``every`` s until :meth:`act` on what it holds (an
    empty dict while it is missing or half-written) returns True, :attr:`done` is set, or
    ``limit`` seconds have passed: it stops by itself."""

    def __init__(self, path, every, limit=400):
        super().__init__(daemon=True)
        self.path, self.every, self.limit = path, every, limit
        self.done = threading.Event()

    def act(self, doc):
        raise NotImplementedError

    def run(self):
        deadline = time.monotonic() + self.limit
        while not self.done.is_set() and time.monotonic() < deadline:
            try:
                with open(self.path) as fh:
                    doc = json.load(fh)
            except (OSError, ValueError):
                doc = {}
            if self.act(doc):
                return
            self.done.wait(self.every)


class Killer(Watcher):
    """Waits for KILLED's job (its status file) to reach KILL_STEP, then SIGKILLs that step's
    iobench (by PID) in the middle of its measured window."""

    def __init__(self, status_path, binary, dataset_dir):
        super().__init__(status_path, 0.05)
        self.binary, self.dataset_dir = binary, dataset_dir
        self.killed = None

    def act(self, doc):
        if (doc.get("array") or {}).get("step") != KILL_STEP:
            return False
        for pid, argv in _iobench_of(self.binary, self.dataset_dir):
            start_at = float(argv[argv.index("--start-at") + 1])
            when = start_at + ARRAY["warmup"] + ARRAY["time"] / 2.0
            self.done.wait(max(0.0, when - time.time()))
            if cmdline(pid) == argv:
                os.kill(pid, signal.SIGKILL)
                self.killed = {"pid": pid, "at": time.time(), "start_at": start_at}
            return True
        return False


class Away(Watcher):
    """Once the wait has polled AWAY's job running (its progress record), kills AWAY's sshd and
    every session below it, and starts it again on the same port AWAY_S later (from this
    thread, which then ends: fleetlib starts every sshd from its launcher thread, so the host
    outlives it)."""

    def __init__(self, progress, host):
        super().__init__(progress, 0.5)
        self.host = host
        self.away_s = None

    def act(self, doc):
        if not (doc.get("polls") and doc.get("state") == "running"):
            return False
        self.host.kill()
        gone = time.monotonic()
        self.done.wait(AWAY_S)
        self.host.start(port=self.host.port)
        self.away_s = time.monotonic() - gone
        return True


@pytest.fixture(scope="module")
def array_run(fleet, shared_loop, tmp_path_factory):
    mnt, dev = shared_loop
    base = str(tmp_path_factory.mktemp("array"))
    hosts = []
    for n, name in zip((71, 72, 73), HOSTS):
        env = 'environment="FLEETQUAL_TEST_CLOCK_OFFSET_S=%g"' % SKEW_S if name == SKEWED else ""
        hv = {"fleetqual_test_dir": os.path.join(mnt, name, "test")}
        if name == AWAY:
            hv["fleetqual_matrix"] = AWAY_PLAN
        hosts.append({"name": name, "group": "arr", "inst": fleet.host(n, key_options=env), "vars": hv})
    # the wait polls the jobs every 2 s, not at 30 s round boundaries (nothing here reads progress lines)
    group = {"fleetqual_array": "san1", "fleetqual_arrays": {"san1": ARRAY}, "fleetqual_matrix": TINY,
             "_fleetqual_test_clock": True, "fleetqual_progress_interval": 2}
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts, group_vars={"arr": group})
    killed_dirs = fleet.host_dirs(KILLED, fleet.default_dirs_root(os.path.join(base, "inventory")))
    test_dir = os.path.join(mnt, KILLED, "test")
    killer = Killer(os.path.join(test_dir, ".fleetqual-job", "status.json"),
                    os.path.join(killed_dirs["fleetqual_bin_dir"], "iobench"), os.path.join(test_dir, "array-san1"))
    killer.start()
    away = Away(os.path.join(base, "results", "array", ".progress", AWAY + ".json"), fleet.host(72))
    away.start()
    try:
        # fewer forks than hosts: the array still starts together
        run = run_playbook(fleet, inv, base, "array", args=["--forks", "2"])
    finally:
        killer.done.set()
        away.done.set()
        killer.join(10)
        away.join(AWAY_S + 30)
    run.killed = killer.killed
    run.away_s = away.away_s
    run.loop = os.path.basename(dev)
    run.mnt = mnt
    run.records = {h: run.record(h) for h in HOSTS if run.has_record(h)}
    run.array = arrays_mod.build_array("san1", {h: r.get("array_run") for h, r in run.records.items()})
    return run


def _entry(run, host, index):
    return next(e for e in run.records[host]["array_run"]["steps"] if e["index"] == index)


def test_every_member_ran_the_same_schedule(array_run):
    assert sorted(array_run.records) == HOSTS, array_run.out[-5000:]
    runs = {h: r["array_run"] for h, r in array_run.records.items()}
    assert all(r is not None for r in runs.values()), array_run.out[-5000:]
    assert len({r["t0"] for r in runs.values()}) == 1, {h: r["t0"] for h, r in runs.items()}
    for h, r in runs.items():
        # every member got the common start before step 1's iobench had to be launched
        assert r["handover"]["margin_s"] > 0, (h, r["handover"], r["lead_s"])
    assert {h: r["rank"] for h, r in runs.items()} == {h: i for i, h in enumerate(HOSTS)}
    for h, r in runs.items():
        assert [e["index"] for e in r["steps"]] == [1, 2, 3, 4], (h, r["steps"])
        for e in r["steps"]:
            assert e["active"] == (HOSTS.index(h) < e["initiators"]), (h, e["index"])
            if not e["active"]:
                assert e["result"] is None, (h, e["index"])
            elif e["complete"]:
                # the step's result has the job's workload shape and its metrics (plugin_utils/metrics/workload.py)
                assert e["result"]["rc"] == 0 and e["metrics"]["iops"] > 0, (h, e["index"], e["metrics"])
                assert e["result"]["bench"]["config"]["threads"] == ARRAY["threads"][0]
                assert e["scheduled_start"] == pytest.approx(r["t0"] + e["offset_s"], abs=1e-5)


def test_skewed_clock_measured_and_windows_open_together(array_run):
    runs = {h: r["array_run"] for h, r in array_run.records.items()}
    for h, r in runs.items():
        clock = r["clock"]
        want = SKEW_S if h == SKEWED else 0.0
        # the host read its clock inside the exchange's round trip: the error is at most half of it
        assert abs(clock["offset_s"] - want) <= clock["uncertainty_s"] + 1e-3, (h, clock)
        assert "round-trip" in clock["method"] and clock["exchanges"] >= 3, clock
        assert clock["synchronized"] in (True, False, None) and clock["source"], clock
    assert runs[SKEWED]["clock"]["test_clock_skew_s"] == SKEW_S
    for index in (2, 4):
        starts = {h: _entry(array_run, h, index)["window_start"] for h in HOSTS}
        starts = {h: s for h, s in starts.items() if s is not None}
        others = [s for h, s in starts.items() if h != SKEWED]
        assert SKEWED in starts and others, (index, starts)
        # together: far closer than the 7 s the skewed clock is off
        assert abs(starts[SKEWED] - statistics.median(others)) < SKEW_S / 4, (index, starts)
    # its own result stays in its own clock: iobench's window epochs 7 s after the controller's
    e = _entry(array_run, SKEWED, 2)
    own = e["result"]["bench"]["window"]["start_epoch"]
    assert abs((own - e["window_start"]) - runs[SKEWED]["clock"]["offset_s"]) < 1e-3, (own, e["window_start"])


def _device_iops(entry, loop):
    """IOPS the loop device itself counted over a host's measured window (iobench --devstat:
    /sys/block/<loop>/stat at the window's edges; reads + writes completed)."""
    w = entry["result"]["bench"]["window"]
    ds = (w.get("devstat") or {}).get(loop)
    assert ds, (loop, w.get("devstat"), w.get("devstat_error"))
    ios = (ds["end"][0] - ds["start"][0]) + (ds["end"][4] - ds["start"][4])
    return ios / (w["end_epoch"] - w["start_epoch"])


def test_aggregate_iops_equals_the_loop_device_counters(array_run):
    steps = {s["index"]: s for s in array_run.array["steps"]}
    for index in (1, 2, 3):
        s = steps[index]
        assert s["complete"], (index, s["missing"], s["problem"])
        active = HOSTS[:s["initiators"]]
        # the aggregate is over the windows' overlap: on a schedule every window ends at the
        # planned instant, so the overlap is the window of the member that opened last (one
        # late to its start opens after the others); the device's own counters over that
        # window hold every member's I/O in it. A median over windows of other lengths
        # divided the same I/O by up to 0.14 s more (6 % of a 2 s step)
        last = max(active, key=lambda h: _entry(array_run, h, index)["window_start"])
        device = _device_iops(_entry(array_run, last, index), array_run.loop)
        agg = s["aggregate"]["iops"]
        assert agg > 0 and abs(agg - device) <= 0.05 * device, (index, agg, device)
        # the windows' start spread is reported (measured from the hosts' own timestamps)
        assert s["window"]["start_spread_ms"] is not None and s["window"]["start_spread_ms"] >= 0, s["window"]
        assert s["window"]["overlap_s"] > 0, s["window"]
    assert array_run.array["start_spread_ms"]["median"] is not None


def test_host_killed_mid_step_makes_that_step_incomplete_naming_it(array_run):
    assert array_run.killed, "the test found no iobench of %s to kill in step %d" % (KILLED, KILL_STEP)
    e = _entry(array_run, KILLED, KILL_STEP)
    assert e["active"] and not e["complete"], e
    assert e["error"].startswith("lost mid-step"), e["error"]
    steps = {s["index"]: s for s in array_run.array["steps"]}
    assert not steps[KILL_STEP]["complete"] and steps[KILL_STEP]["missing_hosts"] == [KILLED], steps[KILL_STEP]
    assert steps[KILL_STEP]["aggregate"]["iops"] is None       # never summed as if whole
    # the other steps stand, the survivors of step 4 included
    assert all(steps[i]["complete"] for i in (1, 2, 3))
    for h in HOSTS[:2]:
        assert _entry(array_run, h, KILL_STEP)["complete"], h
    # and so says the run's report (fleet.json, rebuilt by the callback from the stored records)
    (reported,) = [a for a in array_run.fleet().get("arrays") or [] if a["name"] == "san1"]
    assert [(s["index"], s["complete"], s["missing_hosts"]) for s in reported["steps"]] == \
        [(1, True, []), (2, True, []), (3, True, []), (KILL_STEP, False, [KILLED])]


def test_a_member_away_for_a_while_is_waited_for_and_collected(array_run):
    assert array_run.away_s is not None, "the wait never found %s's job running" % AWAY
    rec = array_run.records[AWAY]
    away = rec["away"]
    assert away and away["episodes"] >= 1 and away["seconds"] >= AWAY_S * 0.5, (away, array_run.away_s)
    assert any(w.startswith("not answering for ") for w in rec["warnings"]), rec["warnings"]
    # its own workload measured to its end, every array step of it in the record
    (own,) = [w for w in rec["workloads"] if w["id"].startswith("cache-")]
    assert own["result"]["bench"]["window"]["end_epoch"] - own["result"]["bench"]["window"]["start_epoch"] >= 74, own
    assert [e["index"] for e in rec["array_run"]["steps"]] == [1, 2, 3, 4]
    assert [h for h in HOSTS if h != AWAY and array_run.records[h].get("away")] == []
    assert "UNREACHABLE!" not in array_run.out


def test_array_data_sets_removed(array_run):
    for h in HOSTS:
        assert not os.path.exists(os.path.join(array_run.mnt, h, "test", "array-san1")), h


def test_the_gate_agrees_with_the_report(array_run):
    """The gate play (action fleet_verdicts) judges the members with their array like the
    report does: a host is failed at the gate exactly when fleet.json's verdict is not PASS."""
    reported = {h["host"]: h["verdict"] for h in array_run.fleet()["hosts"] if h["host"] in HOSTS}
    assert sorted(reported) == HOSTS
    gated = {h for h in HOSTS if re.search(r"fatal: \[%s\]: FAILED! => .*%s: (FAIL|ERROR|UNREACHABLE|INCONCLUSIVE)"
                                           % (h, h), array_run.out)}
    assert gated == {h for h, v in reported.items() if v != "PASS"}, (reported, array_run.out[-3000:])
    assert (array_run.rc != 0) == bool(gated)
