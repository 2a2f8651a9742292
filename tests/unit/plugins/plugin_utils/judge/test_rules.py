"""plugin_utils/judge/rules.py: threshold rule validation, names, matching."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import (
    rule_limits,
    rule_matches,
    rule_name,
    validate_rules,
)

V = "fleetqual_thresholds"
TESTS = unitpaths.TESTS
COLLECTIONS = os.path.join(os.path.dirname(TESTS), "build", "collections")
FIX = os.path.join(TESTS, "unit", "fixtures", "controller")


def test_valid_rules():
    rules = [
        {"workload": "over_cache", "mode": "rndrd", "threads": 64, "min_iops": 20000, "max_read_p99_ms": 20},
        {"workload": ["cache", "over_cache"], "threads": [1, 64], "min_mibps": 100.5},
        {"id": "log-seqwr-t1", "max_fsync_p999_ms": 5, "max_write_p50_ms": 0.5},
        {"name": "util", "description": "device not saturated", "metric": "metrics.dev_util_pct", "max": 95},
        {"metric": 'result.bench.ops.read.latency_us."p99.99"', "min": 0, "max": 100000},
        {"min_iops": 0},
    ]
    assert validate_rules(rules) == []
    assert validate_rules(None) == []
    assert validate_rules([]) == []


def test_every_latency_family_is_known():
    rules = [{"max_%s_%s_ms" % (op, p): 1} for op in ("read", "write", "fsync")
             for p in ("p50", "p90", "p95", "p99", "p999")]
    assert validate_rules(rules) == []


def test_unknown_key_names_the_path_and_suggests():
    errs = validate_rules([{"min_iops": 1}, {"min_iops": 1}, {"max_raed_p99_ms": 20}])
    assert len(errs) == 2
    assert errs[0] == ("fleetqual_thresholds[2].max_raed_p99_ms: unknown key (did you mean max_read_p99_ms?); "
                       "known: name, description, id, workload, mode, threads, min_iops, min_mibps, "
                       "max_<read|write|fsync>_<p50|p90|p95|p99|p999>_ms, max_stall_s, require_steady_state, metric, min, max, diagnostic, expect")
    assert errs[1] == ("fleetqual_thresholds[2]: rule sets no limit; give min_iops, min_mibps, "
                       "max_<op>_<pct>_ms (op read|write|fsync, pct p50|p90|p95|p99|p999), max_stall_s, metric with min/max, "
                       "or diagnostic with expect")


def test_unknown_key_without_close_match():
    (err,) = validate_rules([{"min_iops": 1, "colour": "red"}])
    assert err.startswith("fleetqual_thresholds[0].colour: unknown key; known: ")


@pytest.mark.parametrize("rule, message", [
    ({"min_iops": "1000"}, "[0].min_iops: must be a number, got string '1000'"),
    ({"min_iops": True}, "[0].min_iops: must be a number, got boolean True"),
    ({"min_iops": float("nan")}, "[0].min_iops: must be a finite number, got nan"),
    ({"min_iops": -5}, "[0].min_iops: must not be negative, got -5"),
    ({"min_mibps": -0.5}, "[0].min_mibps: must not be negative, got -0.5"),
    ({"max_read_p99_ms": 0}, "[0].max_read_p99_ms: a latency limit must be greater than 0 ms, got 0"),
    ({"max_fsync_p999_ms": -1}, "[0].max_fsync_p999_ms: a latency limit must be greater than 0 ms, got -1"),
    ({"metric": "metrics.iops", "min": 10, "max": 5}, "[0]: min 10 is greater than max 5; no value can pass"),
    ({"metric": "metrics.iops", "max": -1}, "[0].max: must not be negative, got -1"),
    ({"metric": "metrics.[iops", "max": 5}, "[0].metric: JMESPath 'metrics.[iops' does not parse: "),
    ({"metric": "", "max": 5}, "[0].metric: must be a JMESPath expression (string), got string ''"),
    ({"metric": 3, "max": 5}, "[0].metric: must be a JMESPath expression (string), got integer 3"),
    ({"metric": "metrics.iops"}, "[0].metric: needs min and/or max"),
    ({"min": 3}, "[0].min: only valid with metric (for the built-in figures use min_iops / min_mibps)"),
    ({"max": 3, "min_iops": 1}, "[0].max: only valid with metric"),
    ({"threads": 0, "min_iops": 1}, "[0].threads: must be a thread count >= 1 (or a list of them), got 0"),
    ({"threads": [1, "8"], "min_iops": 1}, "[0].threads: must be a thread count >= 1 (or a list of them), got '8'"),
    ({"mode": "randread", "min_iops": 1}, "[0].mode: unknown mode 'randread'; known: seqwr, seqrewr, seqrd, rndrd"),
    ({"workload": [], "min_iops": 1}, "[0].workload: list must not be empty"),
    ({"workload": 5, "min_iops": 1}, "[0].workload: must be a non-empty string (or a list of them), got integer 5"),
    ({"name": "", "min_iops": 1}, "[0].name: must be a non-empty string, got string ''"),
    ({}, "[0]: rule sets no limit"),
])
def test_rejections(rule, message):
    errs = validate_rules([rule])
    assert any(e.startswith(V + message) for e in errs), errs


def test_structure_rejections():
    assert validate_rules({"min_iops": 1}) == ["fleetqual_thresholds: must be a list of rules, got mapping"]
    assert validate_rules(["min_iops: 1"]) == ["fleetqual_thresholds[0]: must be a mapping (a rule), got string"]
    assert validate_rules({}, var_name="x") == ["x: must be a list of rules, got mapping"]


def test_duplicate_names_rejected():
    errs = validate_rules([{"name": "a", "min_iops": 1}, {"name": "a", "min_iops": 2}])
    assert errs == ["fleetqual_thresholds[1].name: duplicate rule name 'a' (also fleetqual_thresholds[0])"]


@pytest.mark.parametrize("rule, limit, name", [
    ({"workload": "over_cache", "mode": "rndrd", "threads": 64, "min_iops": 1}, "min_iops",
     "min_iops@over_cache/rndrd/t64"),
    ({"workload": "cache", "max_read_p99_ms": 1}, "max_read_p99_ms", "max_read_p99_ms@cache"),
    ({"min_iops": 1}, "min_iops", "min_iops@*"),
    ({"mode": "rndwr", "min_iops": 1}, "min_iops", "min_iops@*/rndwr"),
    ({"threads": [1, 64], "min_iops": 1}, "min_iops", "min_iops@*/*/t1,t64"),
    ({"workload": ["a", "b"], "min_iops": 1}, "min_iops", "min_iops@a,b"),
    ({"id": "log-seqwr-t1", "min_iops": 1}, "min_iops", "min_iops@*[log-seqwr-t1]"),
    ({"metric": "metrics.dev_util_pct", "max": 1, "mode": "rndwr"}, "max", "max(metrics.dev_util_pct)@*/rndwr"),
    ({"name": "mine", "min_iops": 1, "max_read_p99_ms": 3}, "max_read_p99_ms", "mine"),
])
def test_rule_names(rule, limit, name):
    assert rule_name(rule, limit) == name


def test_rule_limits_canonical_order():
    rule = {"max": 9, "metric": "m", "max_fsync_p50_ms": 1, "max_read_p999_ms": 2, "max_read_p50_ms": 3,
            "min_mibps": 4, "min_iops": 5, "min": 1}
    assert rule_limits(rule) == [("min_iops", ">=", 5), ("min_mibps", ">=", 4), ("max_read_p50_ms", "<=", 3),
                                 ("max_read_p999_ms", "<=", 2), ("max_fsync_p50_ms", "<=", 1),
                                 ("min", ">=", 1), ("max", "<=", 9)]


def test_matching():
    w = {"id": "over_cache-rndrd-t64", "workload": "over_cache", "mode": "rndrd", "threads": 64}
    assert rule_matches({}, w)
    assert rule_matches({"workload": "over_cache"}, w)
    assert rule_matches({"workload": "over_cache", "mode": "rndrd", "threads": 64}, w)
    assert rule_matches({"threads": [1, 64], "mode": ["rndrd", "rndwr"]}, w)
    assert rule_matches({"id": ["x", "over_cache-rndrd-t64"]}, w)
    assert not rule_matches({"workload": "cache"}, w)
    assert not rule_matches({"workload": "over_cache", "threads": 1}, w)
    assert not rule_matches({"mode": "rndwr"}, w)
    assert not rule_matches({"id": "other"}, w)


@pytest.mark.parametrize("expr, fragment", [
    ("metrics.no_such_metric", "unknown metric 'no_such_metric'"),
    ("metrics.dev_util_pc", "did you mean dev_util_pct?"),
    ("metrcis.iops", "'metrcis' is not a field of the workload record"),
])
def test_metric_naming_a_field_no_record_has_is_refused(expr, fragment):
    errors = validate_rules([{"metric": expr, "max": 1}])
    assert len(errors) == 1 and errors[0].startswith("fleetqual_thresholds[0].metric: ") and fragment in errors[0], errors


@pytest.mark.parametrize("expr", ["metrics.dev_util_pct", "result.bench.ops.read.latency_us.\"p99.99\"",
                                  "result.vmstat.avg.wa", "threads", "max([metrics.read_p99_ms, metrics.write_p99_ms])"])
def test_metric_paths_a_record_has_are_accepted(expr):
    assert validate_rules([{"metric": expr, "max": 1}]) == []


# --------------------------------------------------------------------------- drive rules

def test_drive_rules_validate():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import rule_limits, rule_name
    ok = [{"max_media_errors": 0, "max_critical_warning": 0, "max_reallocated_sectors": 0, "max_pending_sectors": 0,
           "max_percentage_used": 90, "min_available_spare": 10, "max_temperature_c": 70, "max_power_on_hours": 50},
          {"name": "boot", "drive": ["nvme0n1", "S64GNE0R601234"], "max_media_errors": 0}]
    assert validate_rules(ok) == []
    assert rule_limits(ok[1]) == [("max_media_errors", "<=", 0)]
    assert rule_limits({"min_available_spare": 10}) == [("min_available_spare", ">=", 10)]
    assert rule_name({"drive": "sda", "max_media_errors": 0}, "max_media_errors") == "max_media_errors@drive:sda"


@pytest.mark.parametrize("rule, message", [
    ({"max_media_error": 0}, "[0].max_media_error: unknown key (did you mean max_media_errors?); known: name, "
                             "description, id, workload"),
    ({"drive": "sda", "max_media_erors": 0},
     "[0].max_media_erors: unknown key in a drive rule (did you mean max_media_errors?); known: name, description, "
     "drive, max_media_errors"),
    ({"drive": "sda", "max_media_errors": 0, "workload": "cache"},
     "[0].workload: unknown key in a drive rule (workload selectors, limits, metric and diagnostic do not apply to "
     "a drive rule); known: name, description, drive"),
    ({"drive": "sda"}, "[0]: drive rule sets no limit; give one of max_media_errors, max_critical_warning"),
    ({"max_media_errors": -1}, "[0].max_media_errors: must not be negative, got -1; closest: 0"),
    ({"max_media_errors": "0"}, "[0].max_media_errors: must be a number, got string '0'"),
    ({"drive": 3, "max_media_errors": 0}, "[0].drive: must be a drive's name, /dev path, serial or model (or a list "
                                          "of them), got integer 3; for example nvme0n1"),
])
def test_drive_rule_errors(rule, message):
    errs = validate_rules([rule])
    assert errs and errs[0].startswith("fleetqual_thresholds" + message), errs


def test_metric_rule_may_read_the_target_keys_of_a_record():
    assert validate_rules([{"metric": "device_size", "min": 1}]) == []
    (err,) = validate_rules([{"metric": "target_sise", "min": 1}])
    assert "'target_sise' is not a field of the workload record" in err


# --------------------------------------------------------------------------- jmespath missing

def test_without_jmespath_a_metric_rule_says_to_install_it(monkeypatch):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import rules
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge

    monkeypatch.setattr(rules, "jmespath", None)
    with open(os.path.join(FIX, "vda_over_cache-rndrd-t8-slow.json")) as fh:
        slow = json.load(fh)
    rule_set = [{"metric": "metrics.dev_util_pct", "max": 95}, {"workload": "over_cache", "max_read_p99_ms": 20}]
    assert validate_rules(rule_set) == ["fleetqual_thresholds[0].metric: " + rules.JMESPATH_MISSING]
    assert "pip install jmespath" in rules.JMESPATH_MISSING and "does not parse" not in rules.JMESPATH_MISSING
    with pytest.raises(ValueError, match="install the Python package jmespath"):
        rules.compile_metric("metrics.dev_util_pct")
    with pytest.raises(ValueError, match="install the Python package jmespath"):
        judge([slow], rule_set)
    # rules without a metric do not need jmespath: judged as usual
    assert validate_rules(rule_set[1:]) == []
    got = judge([slow], rule_set[1:])
    assert got["verdict"] == "FAIL" and got["reasons"][0].startswith("over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms")


def test_the_plugins_import_without_jmespath():
    """A fresh interpreter where ``import jmespath`` fails (None in sys.modules): the rules
    module, the judge and the filter plugin still import, and a metric rule gets the message."""
    code = textwrap.dedent("""
        import json, sys
        sys.modules["jmespath"] = None
        sys.modules["jmespath.exceptions"] = None
        sys.path.insert(0, sys.argv[1])
        from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import host as judge, rules
        from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import FILTERS
        from ansible_collections.fleetqual.storage.plugins.filter import judge as judge_plugin
        assert judge_plugin.FilterModule().filters()["judge"] is FILTERS["judge"]
        print(json.dumps({
            "jmespath": rules.jmespath,
            "filters": sorted(FILTERS),
            "errors": rules.validate_rules([{"metric": "metrics.iops", "min": 1}, {"min_iops": 1}]),
        }))
    """)
    out = subprocess.run([sys.executable, "-c", code, COLLECTIONS], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["jmespath"] is None
    assert "validate_inputs" in got["filters"] and "judge" in got["filters"]
    assert got["errors"] == ["fleetqual_thresholds[0].metric: metric rules are JMESPath expressions: install the "
                             "Python package jmespath on the controller (pip install jmespath; it is in the "
                             "collection's requirements.txt)"]


def test_known_text_is_derived_from_known_keys():
    """The "known:" list of the messages is KNOWN_KEYS, not a hand copy."""
    import re as _re
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import rules as R
    parts = R.KNOWN_TEXT.split(", ")
    patterns = [_re.compile("^" + _re.sub(r"<([^>]*)>", r"(\1)", p) + "$") for p in parts]
    for key in R.KNOWN_KEYS:
        assert any(p.match(key) for p in patterns), key
    # and nothing else: every part names a key
    for p in patterns:
        assert any(p.match(key) for key in R.KNOWN_KEYS), p.pattern
    assert len(parts) < len(R.KNOWN_KEYS)          # the 15 latency limits are one pattern
