# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retention of the results directory: keep the last runs / days and
each host's accepted baseline, and touch nothing of the user's."""
from __future__ import annotations

import hashlib
import json
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as history_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import retention

from history_records import make_record, run_id, store


def tree(path):
    """{relative path: sha256 of the bytes, or 'dir', or 'link -> target'} of everything below path."""
    out = {}
    if os.path.islink(path):
        return {"": "link -> %s" % os.readlink(path)}
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return {"": hashlib.sha256(f.read()).hexdigest()}
    for d, dirs, files in os.walk(path):
        rel = os.path.relpath(d, path)
        out[rel] = "dir"
        for n in dirs + files:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[os.path.normpath(os.path.join(rel, n))] = "link -> %s" % os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[os.path.normpath(os.path.join(rel, n))] = hashlib.sha256(f.read()).hexdigest()
    return out


def user_things(root):
    """A user's own entries in the results directory, some named like runs, one holding a
    record copied from another run (its run id is not the directory's), a symlink."""
    os.makedirs(os.path.join(root, "20250101T000000Z"))
    with open(os.path.join(root, "20250101T000000Z", "notes.json"), "w") as f:
        json.dump({"host": "x", "verdict": "PASS"}, f)            # looks like a record, is not one
    os.makedirs(os.path.join(root, "archive", "old"))
    rec = make_record("h1", run_id(0), slim=True)
    with open(os.path.join(root, "archive", "h1.json"), "w") as f:
        json.dump(rec, f)                                           # a record, but of run_id(0), not "archive"
    with open(os.path.join(root, "archive", "old", "x.txt"), "w") as f:
        f.write("keep me\n")
    with open(os.path.join(root, "README.txt"), "w") as f:
        f.write("results of the nightly compliance runs\n")
    os.symlink(run_id(0), os.path.join(root, "latest"))
    return ["20250101T000000Z", "archive", "README.txt", "latest"]


def test_fifty_runs_keep_last_ten_plus_each_hosts_baseline(tmp_path):
    root = str(tmp_path)
    for day in range(50):
        for host in ("h1", "h2", "h3", "h4"):
            if host == "h4" and day > 20:
                continue                                        # h4 left the fleet after day 20
            verdict = "FAIL" if host == "h3" and day >= 5 else "PASS"   # h3 failing since day 5
            store(root, make_record(host, run_id(day), verdict=verdict,
                                    block_size=4096 if host == "h2" and day >= 45 else None))
        with open(os.path.join(root, run_id(day), "h1.json.1234.2026-10-01@02:00:00~"), "w") as f:
            f.write("{}\n")                                     # a replaced record (copy backup)
        os.makedirs(os.path.join(root, run_id(day), "fleet.d"))
        with open(os.path.join(root, run_id(day), "fleet.d", "run-20261001T020000.000000Z-1.jsonl"), "w") as f:
            f.write('{"host": "h1"}\n')
        with open(os.path.join(root, run_id(day), "report.md"), "w") as f:
            f.write("# report\n")
    # a user's note inside a run directory this collection wrote
    with open(os.path.join(root, run_id(2), "my-notes.txt"), "w") as f:
        f.write("disk swapped on h2\n")
    foreign = user_things(root)
    before = {n: tree(os.path.join(root, n)) for n in foreign}
    before_note = tree(os.path.join(root, run_id(2), "my-notes.txt"))

    out = retention.prune(root, {"keep_runs": 10})

    assert out["kept"] == [run_id(d) for d in range(49, 39, -1)]
    assert out["partial"] == {run_id(4): ["h3"], run_id(20): ["h4"]}
    for day in range(40, 50):                                   # the last 10: whole
        assert tree(os.path.join(root, run_id(day)))["report.md"]
    for day, host in ((4, "h3"), (20, "h4")):                   # baselines: that host's files only
        assert sorted(os.listdir(os.path.join(root, run_id(day)))) == ["%s.json" % host, "history.d"]
        assert os.listdir(os.path.join(root, run_id(day), "history.d")) == ["%s.json" % host]
    assert os.listdir(os.path.join(root, run_id(2))) == ["my-notes.txt"]   # the user's file, nothing of ours
    assert tree(os.path.join(root, run_id(2), "my-notes.txt")) == before_note
    ours = {run_id(d) for d in list(range(40, 50)) + [2, 4, 20]}
    assert set(os.listdir(root)) == ours | set(foreign)
    assert {n: tree(os.path.join(root, n)) for n in foreign} == before
    assert len(out["pruned"]) == 50 - 10 - 2
    # what the history then finds is what it found before: the baselines survived
    assert history.host_drift(root, make_record("h3", run_id(50)))["baselines"][""]["run_id"] == run_id(4)
    assert history.host_drift(root, make_record("h1", run_id(50)))["baselines"][""]["run_id"] == run_id(49)
    # a second pass changes nothing
    again = retention.prune(root, {"keep_runs": 10})
    assert again["pruned"] == [] and again["removed"] == 0


def test_keep_days_and_the_history_file(tmp_path):
    root = str(tmp_path)
    for day in range(6):
        store(root, make_record("h1", run_id(day), slim=True, verdict="FAIL" if day else "PASS"))
    lines = "".join(json.dumps({"run_id": run_id(d), "host": "h1", "verdict": "PASS"}) + "\n" for d in range(6))
    with open(os.path.join(root, "history.jsonl"), "w") as f:
        f.write(lines)
    now = history_store.run_time(run_id(5)) + 3600
    out = retention.prune(root, {"keep_days": 2}, now=now)
    assert out["kept"] == [run_id(5), run_id(4)]                # 1 h and 1 day 1 h old; day 3 is 2 days 1 h
    assert out["partial"] == {run_id(0): ["h1"]}               # its accepted baseline
    assert sorted(out["pruned"]) == [run_id(1), run_id(2), run_id(3)]
    with open(os.path.join(root, "history.jsonl")) as f:
        assert [json.loads(x)["run_id"] for x in f] == [run_id(0), run_id(4), run_id(5)]
    # a history file with a line of someone else's is left alone
    store(root, make_record("h1", run_id(10), slim=True))
    with open(os.path.join(root, "history.jsonl"), "a") as f:
        f.write("not json\n")
    before = tree(os.path.join(root, "history.jsonl"))
    retention.prune(root, {"keep_runs": 1}, now=now)
    assert tree(os.path.join(root, "history.jsonl")) == before


def test_no_policy_prunes_nothing_and_dry_run_removes_nothing(tmp_path):
    root = str(tmp_path)
    for day in range(4):
        store(root, make_record("h1", run_id(day), slim=True))
    snap = tree(root)
    assert retention.prune(root, None)["pruned"] == []
    out = retention.prune(root, {"keep_runs": 1}, dry_run=True)
    assert out["pruned"] == [run_id(2), run_id(1), run_id(0)] and out["removed"] > 0
    assert tree(root) == snap


def test_validation_names_host_variable_and_closest():
    errs = retention.validate_retention({"keep_run": 5, "keep_days": -1}, host="db01")
    assert "host db01: fleetqual_retention.keep_run: unknown key (did you mean keep_runs?)" in errs[0]
    assert "fleetqual_retention.keep_days" in errs[1] and "closest: 0" in errs[1]
    assert "closest: 1" in retention.validate_retention({"keep_runs": 0})[0]
    assert retention.validate_retention({"keep_runs": 10, "keep_days": 30}, host="db01") == []


RUNS = st.lists(st.tuples(st.sets(st.sampled_from(["h1", "h2", "h3"]), min_size=1),   # hosts in the run
                          st.sampled_from(["PASS", "PASS", "FAIL", "INCONCLUSIVE"]),  # h1's verdict
                          st.booleans()),                                             # h2 plan variant
                min_size=1, max_size=12)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(runs=RUNS, keep_runs=st.one_of(st.none(), st.integers(1, 14)),
       keep_days=st.one_of(st.none(), st.integers(0, 14)), user_dir_name=st.sampled_from(["x", run_id(99)]))
def test_property_keeps_exactly_the_policy_and_every_baseline(tmp_path_factory, runs, keep_runs, keep_days,
                                                              user_dir_name):
    root = str(tmp_path_factory.mktemp("results"))
    for day, (hosts, h1_verdict, variant) in enumerate(runs):
        for host in sorted(hosts):
            store(root, make_record(host, run_id(day), slim=True, verdict=h1_verdict if host == "h1" else "PASS",
                                    block_size=4096 if host == "h2" and variant else None))
    os.makedirs(os.path.join(root, user_dir_name))
    with open(os.path.join(root, user_dir_name, "h1.json"), "w") as f:   # a record of another run id
        json.dump(make_record("h1", run_id(0), slim=True), f)
    foreign_before = tree(os.path.join(root, user_dir_name))
    now = history_store.run_time(run_id(len(runs) - 1)) + 60

    out = retention.prune(root, {"keep_runs": keep_runs, "keep_days": keep_days}, now=now)

    n = len(runs)
    if keep_runs is None and keep_days is None:
        expect = set(range(n))
    else:
        # runs a day apart, the newest a minute old (always kept)
        expect = {d for d in range(n) if (keep_runs is not None and n - 1 - d < keep_runs)
                  or (keep_days is not None and (n - 1 - d) < keep_days) or d == n - 1}
    assert set(out["kept"]) == {run_id(d) for d in expect}
    for d in expect:                                             # kept runs are whole
        assert sorted(os.listdir(os.path.join(root, run_id(d)))) == sorted(
            ["%s.json" % h for h in runs[d][0]] + (["history.d"] if os.path.isdir(
                os.path.join(root, run_id(d), "history.d")) else []))
    # each host's baseline: the newest accepted run of its newest run's plan
    for host in ("h1", "h2", "h3"):
        days = [d for d in range(n) if host in runs[d][0]]
        if not days:
            continue
        plan = runs[days[-1]][2] if host == "h2" else None
        acc = [d for d in days if (host != "h1" or runs[d][1] == "PASS") and (host != "h2" or runs[d][2] == plan)]
        if acc:
            assert os.path.isfile(os.path.join(root, run_id(acc[-1]), "%s.json" % host))
    # everything else of ours is gone; the user's directory is byte-identical
    held = set(out["partial"])
    for d in range(n):
        if d not in expect and run_id(d) not in held:
            assert not os.path.exists(os.path.join(root, run_id(d)))
    for rid, hosts in out["partial"].items():                    # a held run: its baseline hosts' files only
        assert sorted(os.listdir(os.path.join(root, rid))) == sorted(["%s.json" % h for h in hosts] + ["history.d"])
    assert tree(os.path.join(root, user_dir_name)) == foreign_before
    assert user_dir_name in out["foreign"]


def test_the_report_step_prunes_with_the_most_permissive_policy_of_its_hosts(tmp_path):
    root = str(tmp_path)
    for day in range(6):
        store(root, make_record("h1", run_id(day), slim=True))
    hosts = [{"host": "h1", "history": {"retention": {"keep_runs": 2, "keep_days": None}}},
             {"host": "h2", "history": {"retention": {"keep_runs": 3, "keep_days": None}}},
             {"host": "h3"}]
    assert retention.fleet_policy(hosts) == {"keep_runs": 3, "keep_days": None}
    assert retention.fleet_policy(hosts + [{"host": "h4", "history": {"retention": {"keep_runs": None}}}]) is None
    assert retention.fleet_policy(hosts + [{"host": "h5", "history": {"retention": {"keep_run": 1}}}]) is None
    assert retention.after_report({"run_id": run_id(5), "hosts": [{"host": "h3"}]}, os.path.join(root, run_id(5))) is None
    out = retention.after_report({"run_id": run_id(5), "hosts": hosts}, os.path.join(root, run_id(5)))
    assert out["kept"] == [run_id(5), run_id(4), run_id(3)]
    assert sorted(os.listdir(root)) == [run_id(3), run_id(4), run_id(5)]
