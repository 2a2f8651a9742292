"""The power-cut test's verdict (plugin_utils/judge/durability.py): a host FAILs exactly when
an acknowledged write was lost, torn, misplaced or unreadable after a cut, each kind a reason
naming the target and its drive; the window before the cut is the earliest lost write's;
fewer cuts than planned with nothing bad is ERROR; the record takes the worse verdict."""
from hypothesis import given, settings
from hypothesis import strategies as st
# unitpaths: the collection on sys.path
import unitpaths  # noqa: F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import durability as d
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import durability as v

DRIVE = {"name": "nvme0n1", "model": "ACME X200", "serial": "S4XN1", "write_cache": "write back",
         "write_cache_source": "queue/write_cache", "fua": True}

result_st = st.fixed_dictionaries({
    "acked": st.integers(0, 5000), "lost": st.integers(0, 3), "torn": st.integers(0, 2),
    "misplaced": st.integers(0, 1), "read_errors": st.integers(0, 1), "first_back_ms": st.integers(0, 5000)})


def cycle(n, cut_ms, results):
    out = {}
    for name, r in results.items():
        bad = r["lost"] + r["torn"] + r["misplaced"] + r["read_errors"]
        out[name] = {"acked": max(r["acked"], bad), "intact": 0, "lost": r["lost"], "torn": r["torn"],
                     "misplaced": r["misplaced"], "read_errors": r["read_errors"], "unreadable_entries": 0,
                     "lost_acked_ms": {"first": cut_ms - r["first_back_ms"], "last": cut_ms} if bad else None,
                     "samples": [], "drive": DRIVE}
    return {"cycle": n, "cut_ms": cut_ms, "taken_ms": cut_ms - 10, "results": out}


@settings(max_examples=300, deadline=None)
@given(cycles=st.lists(st.dictionaries(st.sampled_from(["a", "b"]), result_st, min_size=1), max_size=4),
       planned=st.integers(1, 4), recovered=st.booleans())
def test_fail_exactly_when_something_acknowledged_is_missing(cycles, planned, recovered):
    cs = [cycle(i + 1, 1_000_000 * (i + 1), r) for i, r in enumerate(cycles)]
    if recovered and cs:
        # the first cycle is one a killed run cut and this run read back: judged, not one of the planned
        cs[0]["recovered_from"] = "killed"
    own = len(cs) - (1 if recovered and cs else 0)
    got = d.judge_durability(cs, {"cycles": planned})
    bad = {k: sum(r[k] for c in cycles for r in c.values()) for k in d.NOT_HELD}
    assert [c["recovered_from"] for c in got["per_cycle"]] == [c.get("recovered_from") for c in cs]
    if any(bad.values()):
        assert got["verdict"] == "FAIL"
    elif own < planned:
        assert got["verdict"] == "ERROR" and got["reasons"] == ["only %d of %d power cuts ran" % (own, planned)]
    else:
        assert got["verdict"] == "PASS" and got["reasons"] == []
    for k in d.NOT_HELD:
        assert got[k] == bad[k]
    names = {n for c in cycles for n in c}
    for name in names:
        t = got["targets"][name]
        for k, word in (("lost", "lost across"), ("torn", "torn across"), ("misplaced", "another place"),
                        ("read_errors", "could not be read")):
            lines = [x for x in got["reasons"] if word in x and "target %s," % name in x]
            assert len(lines) == (1 if t[k] else 0), (k, got["reasons"])
            assert all("ACME X200 S4XN1" in x and "write cache write back" in x for x in lines)
        assert t["verdict"] == ("FAIL" if any(t[k] for k in d.NOT_HELD) else "PASS")
        windows = [r["first_back_ms"] for c in cycles for n, r in c.items()
                   if n == name and r["lost"] + r["torn"] + r["misplaced"] + r["read_errors"]]
        assert t["lost_window_ms"] == (max(windows) if windows else None)


def test_the_reason_reads_like_the_issue_says():
    got = d.judge_durability([cycle(1, 10_000, {"data": {"acked": 1200, "lost": 37, "torn": 0, "misplaced": 0,
                                                         "read_errors": 0, "first_back_ms": 850}})], {"cycles": 1})
    assert got["reasons"] == ["37 of 1200 acknowledged writes lost across a power cut (the last 850 ms before it): "
                              "the drive's write cache is volatile or ignores flushes (target data, drive ACME X200 "
                              "S4XN1, write cache write back (queue/write_cache), FUA on)"]


def test_the_record_takes_the_worse_verdict_and_the_tests_reasons_first():
    fail = {"verdict": "FAIL", "reasons": ["lost"]}
    for before, after in (("PASS", "FAIL"), ("INCONCLUSIVE", "FAIL"), ("FAIL", "FAIL"), ("ERROR", "ERROR")):
        rec = d.merge_into_record({"verdict": before, "reasons": ["slow"]}, fail)
        assert rec["verdict"] == after and rec["reasons"] == ["lost", "slow"] and rec["durability"] is fail
    rec = d.merge_into_record({"verdict": "FAIL", "reasons": ["slow"]}, {"verdict": "PASS", "reasons": []})
    assert rec["verdict"] == "FAIL" and rec["reasons"] == ["slow"]
    assert d.merge_into_record({"verdict": "PASS", "reasons": []}, None) == {"verdict": "PASS", "reasons": []}


def test_the_plan_resolves_targets_and_refuses_what_validation_refuses():
    plan = v.durability_plan({"cycles": 2}, [{"device": "/dev/disk/by-id/nvme-X", "destroy_data": True},
                                             {"path": "/mnt/d", "destroy_data": True}])
    assert plan["settings"]["cycles"] == 2 and plan["settings"]["size"] == 64 << 20
    assert [t["kind"] for t in plan["targets"]] == ["device", "path"]
    assert all(t["destroy_data"] is True for t in plan["targets"])
    try:
        v.durability_plan({"cycles": 0}, [{"path": "/mnt/d", "destroy_data": "yes"}])
    except ValueError as e:
        assert "fleetqual_durability.cycles" in str(e) and "destroy_data" in str(e)
    else:
        raise AssertionError("refused inputs were planned")


def test_what_the_controller_lacks_for_a_power_method():
    none = v.power_tools_missing({"method": "ipmi"}, "db1", find_module=lambda n: False, find_library=lambda n: False)
    assert len(none) == 2 and "community.general.ipmi_power" in none[0] and "pip install pyghmi" in none[1]
    assert v.power_tools_missing({"method": "redfish"}, "db1", find_module=lambda n: True,
                                 find_library=lambda n: False) == []
    assert v.power_tools_missing({"method": "command"}, "db1", find_module=lambda n: False) == []


def test_fleet_json_and_prometheus_carry_the_test_per_target():
    from prometheus_client import CollectorRegistry, generate_latest
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.prometheus import add_durability

    got = d.judge_durability([cycle(1, 10_000, {"data": {"acked": 1200, "lost": 37, "torn": 1, "misplaced": 0,
                                                         "read_errors": 0, "first_back_ms": 850}})], {"cycles": 1})
    summary = d.durability_summary(got)
    assert summary["targets"]["data"] == {"verdict": "FAIL", "acked": 1200, "lost": 37, "torn": 1, "misplaced": 0, "read_errors": 0,
                                          "lost_window_ms": 850, "serial": "S4XN1", "model": "ACME X200",
                                          "write_cache": "write back", "fua": True}
    assert d.durability_summary(None) is None
    reg = add_durability(CollectorRegistry(), [({"host": "db1"}, summary), ({"host": "db2"}, None)], ["host"])
    text = generate_latest(reg).decode()
    assert 'fleetqual_durability_lost_writes{host="db1",serial="S4XN1",target="data"} 38.0' in text
    assert 'fleetqual_durability_acknowledged_writes{host="db1",serial="S4XN1",target="data"} 1200.0' in text
    assert "db2" not in text


def test_a_cycle_a_killed_run_left_is_judged_with_a_note_and_one_never_cut_is_only_noted():
    lost = cycle(2, 50_000, {"data": {"acked": 900, "lost": 5, "torn": 0, "misplaced": 0, "read_errors": 0,
                                      "first_back_ms": 40}})
    lost["recovered_from"] = "killed"
    kept = cycle(1, 90_000, {"data": {"acked": 800, "lost": 0, "torn": 0, "misplaced": 0, "read_errors": 0,
                                      "first_back_ms": 0}})
    got = d.judge_durability([lost, kept], {"cycles": 1}, {"run_id": "killed", "cycle": 2, "state": "cut"})
    # the writes the killed run's cut lost fail the host: what the witnesses named is judged
    assert got["verdict"] == "FAIL" and got["lost"] == 5 and got["cycles"] == 2, got
    assert got["recovered"]["judged"] is True and "power cut 2 of run killed" in got["recovered"]["note"]
    rec = d.merge_into_record({"verdict": "PASS", "reasons": [], "warnings": ["w"]}, got)
    assert rec["warnings"] == ["w", got["recovered"]["note"]] and rec["verdict"] == "FAIL"
    armed = d.judge_durability([kept], {"cycles": 1}, {"run_id": "killed", "cycle": 1, "state": "armed"})
    assert armed["verdict"] == "PASS" and armed["recovered"]["judged"] is False
    assert "did not judge it" in armed["recovered"]["note"]
    assert d.judge_durability([kept], {"cycles": 1})["recovered"] is None
