"""A threshold rule's ``max_stall_s`` (docs/thresholds.md, docs/integrity.md "Stalls"): it replaces
the built-in 1 s stall limit for the workloads it matches, the lowest of several holds, a stall
within it is a warning that quotes it, and a bad value is refused with the rule's path. Records
are real iobench results (tests/unit/fixtures/controller) with an interval series laid over them."""
import copy
import json
import os

from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import validate_rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import stalls

FIX = os.path.join(unitpaths.UNIT, "fixtures", "controller")
with open(os.path.join(FIX, "nvme_over_cache-rndrd-t64.json")) as fh:
    BASE = json.load(fh)
WID = BASE["id"]


def series(counts):
    return [{"t": float(i + 1), "duration_s": 1.0, "read_ops": n, "write_ops": 0, "fsync_ops": 0,
             "read_max_us": 100.0 if n else 0.0, "write_max_us": 0.0, "fsync_max_us": 0.0}
            for i, n in enumerate(counts)]


def record(counts):
    rec = copy.deepcopy(BASE)
    rec.pop("metrics", None)
    rec["result"]["bench"]["intervals"] = series(counts)
    return rec


def runs(counts):
    """The lengths of the runs of empty intervals, independently of the product."""
    out, cur = [], 0
    for n in list(counts) + [1]:
        if n == 0:
            cur += 1
        elif cur:
            out.append(float(cur))
            cur = 0
    return out


def held(counts):
    return max(runs(counts) or [0.0])


def stall_checks(result):
    return [c for c in result["checks"] if c["metric"] == "stall"]


TWO_S = [900, 880, 0, 0, 910, 905]


def test_without_a_rule_a_two_second_stall_fails_at_the_built_in_limit():
    r = judge([record(TWO_S)], [])
    assert r["verdict"] == "FAIL"
    [c] = stall_checks(r)
    assert c["rule"] == "stall" and c["limit"] == stalls.STALL_S and c["value"] == 2.0
    assert "stall limit 1 s)" in c["message"]


def test_a_rule_above_the_stall_passes_it_with_a_warning_that_quotes_the_rule():
    r = judge([record(TWO_S)], [{"name": "shared-disk", "max_stall_s": 5}])
    assert r["verdict"] == "PASS", r["reasons"]
    [c] = stall_checks(r)
    assert c["status"] == "pass" and c["rule"] == "shared-disk" and c["value"] == 2.0 and c["limit"] == 5
    assert c["kind"] == "integrity"
    warned = [w for w in r["warnings"] if "within the stall limit 5 s of rule shared-disk" in w]
    assert len(warned) == 1 and "no request for 2 s" in warned[0]


def test_a_rule_below_the_stall_fails_it_naming_the_rule():
    r = judge([record([900, 0, 0, 0, 910])], [{"max_stall_s": 2.5}])
    assert r["verdict"] == "FAIL"
    [c] = stall_checks(r)
    assert c["status"] == "fail" and c["value"] == 3.0 and c["limit"] == 2.5
    assert "stall limit 2.5 s, rule max_stall_s@*" in c["message"]
    assert any("completed no request for 3 s" in reason for reason in r["reasons"])


def test_the_lowest_matching_limit_holds_and_a_rule_that_does_not_match_leaves_the_default():
    rules = [{"name": "loose", "max_stall_s": 10}, {"name": "tight", "max_stall_s": 1.5}]
    r = judge([record(TWO_S)], rules)
    assert r["verdict"] == "FAIL"
    assert [c["status"] for c in stall_checks(r) if c["rule"] == "tight"] == ["fail"]
    assert [c["status"] for c in stall_checks(r) if c["rule"] == "loose"] == ["pass"]
    other = judge([record(TWO_S)], [{"workload": "no-such-label", "max_stall_s": 10}])
    assert [c["rule"] for c in stall_checks(other)] == ["stall"] and other["verdict"] == "FAIL"


def test_an_answering_workload_passes_the_rule_with_no_stall():
    r = judge([record([900, 880, 870])], [{"max_stall_s": 1}])
    [c] = stall_checks(r)
    assert c["status"] == "pass" and c["value"] == 0.0
    assert not [w for w in r["warnings"] if "stall limit" in w]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0, 0, 500]), min_size=1, max_size=14), st.sampled_from([0.5, 1, 2, 2.5, 4, 30]))
def test_the_verdict_on_stalls_is_exactly_the_longest_silence_against_the_limit(counts, limit):
    counts = [700] + counts + [700]
    r = judge([record(counts)], [{"name": "limit", "max_stall_s": limit}])
    longest = held(counts)
    [c] = stall_checks(r)
    assert c["value"] == longest
    assert c["status"] == ("fail" if longest > limit else "pass")
    # a stall the rule let through is always said
    said = any("within the stall limit" in w for w in r["warnings"])
    assert said == any(stalls.STALL_S <= run <= limit for run in runs(counts))


@given(st.one_of(st.just(0), st.floats(max_value=0, allow_nan=False, allow_infinity=False), st.text(max_size=3),
                 st.booleans(), st.none()))
def test_a_stall_limit_that_is_not_a_positive_number_is_refused_with_its_path(value):
    errs = validate_rules([{"min_iops": 1}, {"name": "x", "max_stall_s": value}])
    assert errs and errs[0].startswith("fleetqual_thresholds[1].max_stall_s: "), errs


def test_a_stall_limit_is_a_limit_of_its_own_and_not_one_of_a_diagnostic_or_drive_rule():
    assert validate_rules([{"workload": "cache", "max_stall_s": 3}]) == []
    assert validate_rules([{"max_stall_s": 0}]) == [
        "fleetqual_thresholds[0].max_stall_s: a stall limit must be greater than 0 s (the default, with no rule, "
        "is 1 s), got 0"]
    assert any("max_stall_s" in e for e in validate_rules([{"diagnostic": "cache_proof", "expect": "pass",
                                                           "max_stall_s": 3}]))
    assert any("max_stall_s" in e for e in validate_rules([{"drive": "sda", "max_media_errors": 0,
                                                           "max_stall_s": 3}]))
    assert any("did you mean max_stall_s" in e for e in validate_rules([{"max_stal_s": 3}]))
