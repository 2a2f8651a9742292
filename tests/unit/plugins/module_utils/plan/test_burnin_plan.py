"""The burnin profile's plan (module_utils/plan/profiles.py, docs/integrity.md): rounds from
``fleetqual_burnin_time``, each round write then verify then mix, every workload marked
``burnin: {round, rounds, pass}``, the write and verify passes sized to one pass over the
data set, bad durations refused naming the variable and the closest valid value."""
import copy
import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import burnin as B
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary

ROOT = unitpaths.ROOT
with open(os.path.join(ROOT, "roles", "qualify", "defaults", "main", "profiles.yml")) as fh:
    SHIPPED = yaml.safe_load(fh)["fleetqual_profiles"]
with open(os.path.join(ROOT, "roles", "qualify", "defaults", "main", "main.yml")) as fh:
    DEFAULT_HOURS = yaml.safe_load(fh)["fleetqual_burnin_time"]


def profiles(hours):
    """The shipped profiles with the burnin profile's hours templated as Ansible would."""
    p = copy.deepcopy(SHIPPED)
    assert p["burnin"]["burnin"] == {"hours": "{{ fleetqual_burnin_time }}"}
    p["burnin"]["burnin"]["hours"] = hours
    return p


def burnin_plan(hours, overrides=None, **kw):
    return P.plan_on_targets("burnin", profiles=profiles(hours), mem_total_mb=8192, overrides=overrides, **kw)


def errors_of(hours, overrides=None):
    with pytest.raises(P.PlanError) as exc:
        burnin_plan(hours, overrides)
    return exc.value.errors


def test_the_default_duration_plans_a_day_of_one_hour_rounds():
    specs = burnin_plan(DEFAULT_HOURS)
    assert DEFAULT_HOURS == 24 and len(specs) == 24 * 3
    assert [s["id"] for s in specs[:4]] == ["burnin-write-r1", "burnin-verify-r1", "burnin-mix-r1", "burnin-write-r2"]
    assert specs[-1]["burnin"] == {"round": 24, "rounds": 24, "pass": "mix"}
    assert summary.expected_duration_s(specs) == 24 * 3600
    assert [s["index"] for s in specs] == list(range(1, 73)) and {s["of"] for s in specs} == {72}


def test_write_and_verify_cover_the_whole_data_set_once_and_every_workload_verifies():
    specs = burnin_plan(2)
    write, verify, mix = specs[:3]
    assert write["dataset"] == verify["dataset"] == mix["dataset"]     # one data set, written then read
    assert write["requests"] == verify["requests"] == write["total_size"] // write["block_size"]
    assert "requests" not in mix
    assert write["verify_pass"] is True and (write["mode"], verify["mode"]) == ("seqwr", "seqrd")
    assert all(s.get("verify", True) is not False for s in specs)
    # the marker never reaches iobench
    assert "burnin" not in P.module_args(write)


def test_on_a_device_target_the_passes_cover_the_whole_device():
    cap = 8 * 1024 ** 3
    targets = [{"device": "/dev/loop7", "destroy_data": True}]
    specs = burnin_plan(1, targets=targets, capacities={"/dev/loop7": cap})
    write = specs[0]
    assert write["device_size"] == cap and write["requests"] == cap // write["block_size"]


def test_other_profiles_carry_no_burnin_marker():
    for name in ("quick", "standard", "compliance"):
        assert not any("burnin" in s for s in P.plan(name, profiles=profiles(1), mem_total_mb=8192)), name


def test_quick_reads_back_its_write_workloads():
    specs = P.plan("quick", profiles=profiles(1))
    writes = [s["id"] for s in specs if s["mode"] in ("rndwr", "seqwr")]
    assert writes and all(s.get("verify_pass") is True for s in specs if s["id"] in writes)
    assert not any(s.get("verify_pass") for s in specs if s["id"] not in writes)


@pytest.mark.parametrize("hours, message", [
    (0, "fleetqual_burnin_time: must be more than 0 hours, got 0; closest valid value: 1"),
    (-3, "fleetqual_burnin_time: must be more than 0 hours, got -3; closest valid value: 1"),
    (721, "fleetqual_burnin_time: at most 720 hours (30 days), got 721; closest valid value: 720"),
    ("a day", "fleetqual_burnin_time: must be a number of hours (e.g. 24), got 'a day'"),
    ([24], "fleetqual_burnin_time: must be a number of hours (e.g. 24), got list [24]"),
    (True, "fleetqual_burnin_time: must be a number of hours (e.g. 24), got boolean True"),
    ("{{ fleetqual_burnin_time }}", "fleetqual_burnin_time: must be a number of hours (e.g. 24), "
                                    "got '{{ fleetqual_burnin_time }}'"),
    (0.5, "fleetqual_burnin_time: 0.5 h is shorter than one burn-in round (3600 s: burnin-write 1200 s, "
          "burnin-verify 1200 s, burnin-mix 1200 s); closest valid value: 1 (or shorten the round with "
          "fleetqual_workload_overrides: {time: ...})"),
])
def test_bad_durations_are_refused_naming_the_variable_and_the_closest_value(hours, message):
    assert errors_of(hours) == [message]


def test_a_duration_under_a_hundredth_of_an_hour_is_quoted_as_given():
    # 0.003 h = 10.8 s, shorter than one round of three 6 s passes: quoted as given, not as "0 h"
    assert errors_of(0.003, {"time": 6}) == [
        "fleetqual_burnin_time: 0.003 h is shorter than one burn-in round (18 s: burnin-write 6 s, burnin-verify 6 s, "
        "burnin-mix 6 s); closest valid value: 0.01 (or shorten the round with fleetqual_workload_overrides: "
        "{time: ...})"]


def test_too_many_rounds_are_refused_with_the_longest_duration_that_fits():
    over = {"time": 1}
    assert errors_of(2, over) == ["fleetqual_burnin_time: 2 h makes 2400 rounds of 3 s, more than 1000; closest valid "
                                  "value: 0.83 (or lengthen the round with fleetqual_workload_overrides: {time: ...})"]
    assert len(burnin_plan(0.83, over)) == 3 * 996


def test_a_numeric_string_is_hours():
    assert len(burnin_plan("2")) == 6 and len(burnin_plan(" 1.5 ")) == 3


def test_a_round_without_write_then_verify_is_refused():
    p = profiles(2)
    p["burnin"]["matrix"] = [p["burnin"]["matrix"][1], p["burnin"]["matrix"][0]]
    with pytest.raises(P.PlanError) as exc:
        P.plan("burnin", profiles=p, mem_total_mb=8192)
    assert exc.value.errors == ["fleetqual_profiles.<profile>.matrix: a burn-in round needs a write pass (writes only) "
                                "and then a verify pass (reads only) before its other workloads; passes now: "
                                "burnin-verify verify, burnin-write write"]


def test_verification_cannot_be_turned_off_in_a_burnin():
    errors = errors_of(3, overrides={"burnin-mix": {"verify": False}})
    assert errors == ["a burn-in workload must verify its data: burnin-mix has verify: false (from the profile or "
                      "fleetqual_workload_overrides)"]


def test_a_profile_extending_burnin_inherits_its_rounds():
    p = profiles(4)
    p["mine"] = {"extends": "burnin", "defaults": {"time": 60}}
    specs = P.plan("mine", profiles=p, mem_total_mb=8192)
    assert {s["burnin"]["rounds"] for s in specs} == {4}


# --------------------------------------------------------------------------- properties

@settings(max_examples=120, deadline=None)
@given(hours=st.floats(min_value=0.01, max_value=B.BURNIN_MAX_HOURS, allow_nan=False),
       times=st.lists(st.integers(min_value=1, max_value=4000), min_size=3, max_size=3))
def test_planned_time_never_exceeds_the_duration_by_more_than_one_round(hours, times):
    over = {"burnin-write": {"time": times[0]}, "burnin-verify": {"time": times[1]}, "burnin-mix": {"time": times[2]}}
    round_s = sum(times)
    if B.seconds_of(hours) // round_s > B.BURNIN_MAX_ROUNDS:
        errors = errors_of(hours, over)
        assert len(errors) == 1 and "more than %d; closest valid value: " % B.BURNIN_MAX_ROUNDS in errors[0]
        closest = float(errors[0].split("closest valid value: ")[1].split()[0])
        assert closest * 3600 // round_s <= B.BURNIN_MAX_ROUNDS
        return
    if round_s > B.seconds_of(hours):
        errors = errors_of(hours, over)
        assert len(errors) == 1 and errors[0].startswith("fleetqual_burnin_time: ")
        assert "closest valid value: " in errors[0]
        closest = float(errors[0].split("closest valid value: ")[1].split()[0])
        assert B.seconds_of(closest) >= round_s           # the value it proposes is accepted
        assert len(burnin_plan(closest, over)) == 3
        return
    specs = P.plan("burnin", profiles=profiles(hours), mem_total_mb=8192, overrides=over)
    planned = summary.expected_duration_s(specs)
    rounds = specs[0]["burnin"]["rounds"]
    assert planned <= B.seconds_of(hours) + round_s
    assert planned == rounds * round_s and rounds == max(1, int(B.seconds_of(hours) // round_s))
    assert planned + round_s > B.seconds_of(hours)         # no whole round left unused
    for k in range(rounds):
        r = specs[3 * k:3 * k + 3]
        assert [s["burnin"]["pass"] for s in r] == ["write", "verify", "mix"]
        assert {s["burnin"]["round"] for s in r} == {k + 1}
        assert all(s["burnin"]["rounds"] == rounds for s in r)
