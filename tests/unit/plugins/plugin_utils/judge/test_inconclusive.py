"""The foreign figures (metrics.foreign_figures), the judge's foreign_io check and
INCONCLUSIVE, and how final_verdict and the exit code treat it. Property tests over the
space of shares, limits, rates and on_busy; the loop-device tests are test_foreign_io.py."""
from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import verdict as verdictmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge, target_verdicts
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.device import foreign_figures
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_metrics

LAT = {"min": 100, "mean": 200, "stddev": 10, "max": 900, "p50": 200, "p90": 300, "p95": 350, "p99": 500,
       "p99.9": 800, "p99.99": 900}


def bench(start=1000.0, end=1010.0, reads=10000):
    return {"window": {"start_epoch": start, "end_epoch": end}, "elapsed_s": end - start,
            "ops": {"read": {"count": reads, "bytes": reads * 16384, "per_sec": reads / (end - start),
                             "mib_per_sec": reads * 16384 / 1048576.0 / (end - start), "latency_us": LAT},
                    "write": {"count": 0, "bytes": 0, "per_sec": 0.0, "mib_per_sec": 0.0, "latency_us": LAT}},
            "errors": {"total": 0}, "interrupted": False}


def sample(e, dev, cg):
    """dev: [rd_ios, rd_sectors, rd_ticks, wr_ios, wr_sectors, wr_ticks, io_ticks]; cg: [rios, rbytes, wios, wbytes]."""
    return {"e": e, "d": {"vdb": list(dev)}, "c": {"vdb": list(cg)}}


def foreign_section(samples, source="cgroup-v1", **settings_kw):
    s = {"max_share": 0.1, "on_busy": "inconclusive", "min_foreign_iops": 5.0}
    s.update(settings_kw)
    return {"settings": s, "devices": ["vdb"], "source": source, "blind": "journal", "quiet": {"ok": True},
            "samples": samples, "guard": None, "impact": {"notes": []}, "skipped": None}


@settings(max_examples=200, deadline=None)
@given(ours_r=st.integers(0, 10 ** 6), ours_w=st.integers(0, 10 ** 6), their_r=st.integers(0, 10 ** 6),
       their_w=st.integers(0, 10 ** 6), merged=st.integers(0, 1000))
def test_foreign_counts_are_the_device_minus_what_the_cgroup_was_charged(ours_r, ours_w, their_r, their_w, merged):
    # our bios may merge into fewer device requests (merged): never a negative foreign count
    dev_r = max(0, ours_r - merged) + their_r
    a = sample(999.0, [0] * 7, [0] * 4)
    b = sample(1010.5, [dev_r, (ours_r + their_r) * 32, 0, ours_w + their_w, (ours_w + their_w) * 32, 0, 5000],
               [ours_r, ours_r * 16384, ours_w, ours_w * 16384])
    f = foreign_figures({"foreign": foreign_section([a, b])}, bench())
    assert f["foreign_writes"] == their_w
    assert f["foreign_reads"] == max(0, dev_r - ours_r)
    assert f["foreign_read_bytes"] == their_r * 16384 and f["foreign_write_bytes"] == their_w * 16384
    assert 0.0 <= f["foreign_share"] <= 1.0
    total = dev_r + ours_w + their_w
    if total and not merged:
        assert abs(f["foreign_share"] - (their_r + their_w) / float(total)) < 1e-3
    assert f["foreign_span_s"] == 11.5


def test_the_span_is_the_samples_around_the_window():
    edges = ((990.0, 0), (999.5, 100), (1005.0, 300), (1010.2, 500), (1020.0, 9000))
    samples = [sample(e, [n, 0, 0, 0, 0, 0, 0], [0] * 4) for e, n in edges]
    f = foreign_figures({"foreign": foreign_section(samples)}, bench())
    assert f["foreign_reads"] == 400 and f["foreign_span_s"] == 10.7


def test_no_foreign_section_no_figures_and_no_check():
    m = workload_metrics({"id": "x", "result": {"bench": bench()}})
    assert m["foreign_share"] is None and m["foreign_source"] is None
    r = judge([{"id": "x", "workload": "cache", "mode": "rndrd", "result": {"bench": bench()}}], [])
    assert r["verdict"] == "PASS" and not [c for c in r["checks"] if c["rule"] == "foreign_io"]


def record(share, limit, on_busy, foreign_iops, min_iops, rule_passes, target=None, wid="cache-rndrd-t1"):
    """A measured record whose foreign figures are ``share`` at ``foreign_iops``."""
    dev_ios = 100000
    their = int(round(share * dev_ios))
    span = 10.0
    # foreign_iops: their / span; scale the counts so that the rate is what is asked
    if foreign_iops is not None and their:
        scale = foreign_iops * span / their
        dev_ios, their = max(1, int(dev_ios * scale)), max(0, int(round(their * scale)))
    ours = dev_ios - their
    a = sample(999.0, [0] * 7, [0] * 4)
    b = sample(999.0 + span, [dev_ios, dev_ios * 32, 0, 0, 0, 0, 9000], [ours, ours * 16384, 0, 0])
    res = {"bench": bench(), "foreign": foreign_section([a, b], max_share=limit, on_busy=on_busy,
                                                        min_foreign_iops=min_iops), "rc": 0}
    rec = {"id": wid, "workload": "cache", "mode": "rndrd", "threads": 1, "result": res}
    if target:
        rec["target"] = target
    rules = [{"workload": "cache", "min_iops": 1 if rule_passes else 10 ** 9}]
    return rec, rules


@settings(max_examples=150, deadline=None)
@given(share=st.floats(0, 1), limit=st.floats(0, 1), on_busy=st.sampled_from(["inconclusive", "fail", "warn"]),
       rate=st.floats(0.5, 5000), min_iops=st.sampled_from([0.0, 5.0, 50.0]), rule_passes=st.booleans())
def test_a_shared_window_is_never_judged_on_its_numbers(share, limit, on_busy, rate, min_iops, rule_passes):
    rec, rules = record(share, limit, on_busy, rate, min_iops, rule_passes)
    m = workload_metrics(rec)
    r = judge([rec], rules, expected_ids=[rec["id"]])
    shared = m["foreign_share"] > limit and m["foreign_iops"] >= min_iops
    plain = "PASS" if rule_passes else "FAIL"
    fc = [c for c in r["checks"] if c["rule"] == "foreign_io"]
    assert len(fc) == 1
    if not shared or on_busy == "warn":
        assert r["verdict"] == plain
        assert fc[0]["status"] in ("pass", "n/a")
        if shared:
            assert any("on_busy: warn" in w for w in r["warnings"])
    elif on_busy == "fail":
        assert r["verdict"] == "FAIL" and fc[0]["status"] == "fail"
    else:
        assert r["verdict"] == "INCONCLUSIVE"
        assert fc[0]["status"] == "inconclusive" and "shared window" in r["reasons"][0]
        assert all(c["status"] != "fail" for c in r["checks"])       # a missed threshold is not a FAIL
        assert r["summary"]["inconclusive"] == 1


def test_a_real_failure_elsewhere_is_a_fail_and_errors_stay_errors():
    shared, rules = record(0.5, 0.1, "inconclusive", 500, 5, True, wid="cache-rndrd-t1")
    clean = record(0.0, 0.1, "inconclusive", None, 5, True, wid="cache-rndrd-t64")[0]
    rules = [{"id": "cache-rndrd-t64", "min_iops": 10 ** 9}]
    r = judge([shared, clean], rules, expected_ids=["cache-rndrd-t1", "cache-rndrd-t64"])
    assert r["verdict"] == "FAIL"
    assert r["reasons"][0].startswith("cache-rndrd-t64") and "shared window" in r["reasons"][-1]
    r = judge([shared], [], expected_ids=["cache-rndrd-t1", "cache-rndrd-t64"])     # one missing: ERROR
    assert r["verdict"] == "ERROR"


def test_target_verdicts_count_inconclusive_apart():
    a = record(0.5, 0.1, "inconclusive", 500, 5, True, target="data1")[0]
    b = record(0.0, 0.1, "inconclusive", None, 5, True, target="data2")[0]
    r = judge([a, b], [])
    assert r["verdict"] == "INCONCLUSIVE"
    tv = target_verdicts(r)
    assert tv["data1"]["verdict"] == "INCONCLUSIVE" and tv["data2"]["verdict"] == "PASS"


def test_a_guard_stop_is_inconclusive_not_an_interrupted_error():
    rec = record(0.3, 0.5, "inconclusive", 50, 5, True)[0]
    rec["result"]["bench"]["interrupted"] = True
    rec["result"]["foreign"]["guard"] = {"stopped": True, "reason": "stopped: the other I/O's await was 80.0 ms"}
    r = judge([rec], [])
    assert r["verdict"] == "INCONCLUSIVE"
    assert not [c for c in r["checks"] if c["rule"] == "interrupted"]
    assert "await was 80.0 ms" in r["reasons"][0]


HOST = {"verdict": "INCONCLUSIVE", "reasons": ["cache-rndrd-t1: shared window"], "workloads": [{"id": "w"}]}


def test_final_verdict_keeps_inconclusive_and_never_reads_shared_numbers():
    v = verdictmod.final_verdict(HOST, options={"outliers": "fail", "regressions": "fail", "drives": "fail"},
                                 outliers=[{"worse": True, "text": "slow"}], regressions=[{"text": "p99 up"}],
                                 drive_findings=[{"severity": "fail", "kind": "result", "message": "slower"}])
    assert v["verdict"] == "INCONCLUSIVE" and v["record_verdict"] == "INCONCLUSIVE"
    # a drive that is not the fleet's (firmware) is no shared number: it fails the host
    v = verdictmod.final_verdict(HOST, options={"drives": "fail"},
                                 drive_findings=[{"severity": "fail", "kind": "firmware", "message": "GDC5603Q"}])
    assert v["verdict"] == "FAIL"
    v = verdictmod.final_verdict(HOST, failed={"task": "Store", "msg": "disk full"})
    assert v["verdict"] == "ERROR" and "INCONCLUSIVE" in v["reasons"][-1]
    v = verdictmod.final_verdict(dict(HOST, workloads=[]))
    assert v["verdict"] == "ERROR"


def test_counts_and_the_exit_code_policy():
    c = verdictmod.counts(["PASS", "INCONCLUSIVE", "INCONCLUSIVE", "FAIL"])
    assert c == {"PASS": 1, "FAIL": 1, "UNREACHABLE": 0, "ERROR": 0, "INCONCLUSIVE": 2}
    assert verdictmod.exit_fails("INCONCLUSIVE") is True
    assert verdictmod.exit_fails("INCONCLUSIVE", {"inconclusive": "warn"}) is False
    assert verdictmod.exit_fails("FAIL", {"inconclusive": "warn"}) is True
    assert verdictmod.exit_fails("PASS") is False


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(__import__(
    "ansible_collections.fleetqual.storage.plugins.module_utils.collect.foreign_settings", fromlist=["x"]).FOREIGN_DEFAULTS)),
    cut=st.integers(0, 1))
def test_settings_errors_name_the_host_the_variable_and_the_closest_key(key, cut):
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect.foreign_settings import settings_errors
    typo = key[:-1] if cut else key + "x"
    errs = settings_errors({typo: 1}, {}, "db01")
    assert len(errs) == 1 and errs[0].startswith("host db01: fleetqual_foreign_io.%s: unknown key" % typo)
    assert "did you mean %s?" % key in errs[0] or len(key) <= 4
    assert settings_errors({"max_share": 0.2, "on_busy": "warn"}, {"ioprio": "idle", "nice": 10}, "db01") == []
    assert "between 0 and 1" in settings_errors({"max_share": 1.5}, {}, "db01")[0]


def test_job_params_carry_the_settings_and_bound_the_wait_by_budget_and_deadline():
    from ansible_collections.fleetqual.storage.plugins.module_utils.collect.foreign import job_params
    spec = {"deadline_s": 1000, "planned": [100, 200, 300], "foreign_io": {"max_share": 0.2}}
    assert job_params({}, {"mode": "rndrd"}, 0.0) == {"mode": "rndrd"}          # nothing asked: unchanged
    p = job_params(spec, {}, 5000.0, {"impact": {"budget_s": 900}}, 1)
    assert p["foreign_io"] == {"max_share": 0.2} and p["impact"] == {"budget_s": 900}
    # the rest of the plan (200 + 300 s) must still fit before the deadline: 5000 + 1000 - 500 - 30
    assert p["budget_end_epoch"] == 5470.0
    p = job_params(spec, {}, 5000.0, {"foreign_io": {"max_share": 0.3}, "impact": {"budget_s": 100}}, 0)
    assert p["foreign_io"] == {"max_share": 0.3} and p["budget_end_epoch"] == 5100.0   # the workload's own win


def test_a_workload_not_run_is_inconclusive_and_its_rules_are_not_said_to_match_nothing():
    rec = {"id": "cache-rndrd-t1", "workload": "cache", "mode": "rndrd", "threads": 1,
           "result": {"foreign": dict(foreign_section([]), skipped="the device never got quiet: %util 97 > 10 %")}}
    r = judge([rec], [{"workload": "cache", "min_iops": 10}], expected_ids=[rec["id"]])
    assert r["verdict"] == "INCONCLUSIVE" and "never got quiet" in r["reasons"][0]
    assert not any("matched no workload" in w for w in r["warnings"])
    assert [c["rule"] for c in r["checks"]] == ["foreign_io"]


# --------------------------------------------------------------------------- the gate's policy (action)

def _gate_records():
    import os
    import sys
    sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
    import report_synth as synth
    small = [("cache", "rndrd", 1)]
    shared = "cache-rndrd-t1: shared window: foreign share 0.35 > limit 0.1"
    return {"db1": synth.make_record("db1", matrix=small, samples=4, seed=1),
            "db2": synth.make_record("db2", matrix=small, samples=4, seed=2, verdict="INCONCLUSIVE", reasons=[shared]),
            "db3": synth.make_record("db3", matrix=small, samples=4, seed=3, verdict="INCONCLUSIVE", reasons=[shared]),
            "db4": synth.make_record("db4", matrix=small, samples=4, seed=4, verdict="FAIL", reasons=["iops low"])}


def _report_option(key):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
    return dict(fleet.DEFAULT_OPTIONS, history=False).get(key)


def test_the_gate_action_says_per_host_whether_the_gate_fails_it():
    """fleet_verdicts' ``fails``: every verdict but PASS fails; INCONCLUSIVE only with the
    policy fail (the default), per host when the policy is a mapping."""
    from ansible_collections.fleetqual.storage.plugins.action.fleet_verdicts import final_verdicts
    recs = _gate_records()
    warnings = []

    def fails(policy):
        out = final_verdicts(recs, _report_option, warnings.append, policy)
        assert {h: v["verdict"] for h, v in out.items()} == {"db1": "PASS", "db2": "INCONCLUSIVE",
                                                             "db3": "INCONCLUSIVE", "db4": "FAIL"}
        assert out["db2"]["reasons"] == ["cache-rndrd-t1: shared window: foreign share 0.35 > limit 0.1"]
        return {h: v["fails"] for h, v in out.items()}

    everyone = {"db1": False, "db2": True, "db3": True, "db4": True}
    assert fails(None) == everyone and fails("fail") == everyone
    assert fails("warn") == {"db1": False, "db2": False, "db3": False, "db4": True}
    # one host's own policy: the others keep the default (fail); a FAIL host is failed whatever its policy
    assert fails({"db2": "warn", "db4": "warn", "db3": None}) == {"db1": False, "db2": False, "db3": True, "db4": True}
    assert warnings == []


def test_the_gate_action_refuses_a_policy_that_is_none_naming_host_and_closest():
    import pytest
    from ansible.errors import AnsibleActionFail
    from ansible_collections.fleetqual.storage.plugins.action.fleet_verdicts import (
        final_verdicts,
        inconclusive_policies,
    )
    with pytest.raises(AnsibleActionFail) as exc:
        final_verdicts(_gate_records(), _report_option, [].append, {"db1": "fail", "db3": "wran"})
    assert "host db3: fleetqual_inconclusive must be fail or warn, got 'wran' (did you mean warn?)" in str(exc.value)
    assert "db1" not in str(exc.value)
    with pytest.raises(AnsibleActionFail, match="inconclusive: must be fail or warn or a mapping"):
        inconclusive_policies(["warn"], ["db1"])
    assert inconclusive_policies("warn", ["db1", "db2"]) == {"db1": "warn", "db2": "warn"}


def test_the_gate_action_takes_the_argument_and_no_other(monkeypatch):
    """ActionModule.run: ``inconclusive`` is a valid argument, passed to final_verdicts with
    the play hosts' records; an unknown argument or a bad policy fails the task."""
    from unittest import mock

    import pytest
    from ansible.errors import AnsibleActionFail
    from ansible.playbook.play_context import PlayContext
    from ansible_collections.fleetqual.storage.plugins.action import fleet_verdicts as action
    recs = _gate_records()
    monkeypatch.setattr(action, "report_settings", lambda: _report_option)

    def run(args):
        task = mock.MagicMock(args=args, async_val=0, check_mode=False, diff=False)
        task.action = "fleetqual.storage.fleet_verdicts"
        conn = mock.MagicMock()
        conn._shell.tmpdir = "/tmp/x"
        plugin = action.ActionModule(task, conn, PlayContext(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
        hostvars = {h: {"_fleetqual_result": {"record": r}} for h, r in recs.items()}
        return plugin.run(task_vars={"ansible_play_hosts_all": sorted(recs), "hostvars": hostvars})

    res = run({"inconclusive": {"db3": "warn"}})
    assert {h: v["fails"] for h, v in res["verdicts"].items()} == {"db1": False, "db2": True, "db3": False, "db4": True}
    assert run({})["verdicts"]["db3"]["fails"] is True
    with pytest.raises(AnsibleActionFail, match="did you mean warn"):
        run({"inconclusive": "warm"})
    with pytest.raises(AnsibleActionFail, match="inconclusiv"):
        run({"inconclusiv": "warn"})


# --------------------------------------------------------------------------- validation of the settings

def _profiles_yml():
    import os

    import yaml
    path = os.path.join(unitpaths.ROOT,
                        "roles", "qualify", "defaults", "main", "profiles.yml")
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _safety():
    return _profiles_yml()["fleetqual_profile_safety"]


def _checked(**inputs):
    """validate_inputs with the role's defaults (profile quick) under ``inputs``."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs
    base = {"fleetqual_foreign_io": {}, "fleetqual_impact": {}, "fleetqual_profile_safety": _safety(),
            "fleetqual_profile": "quick", "fleetqual_profiles": _profiles_yml()["fleetqual_profiles"]}
    base.update(inputs)
    return validate_inputs(base, host="db01")


def test_validate_inputs_checks_foreign_io_and_impact_after_the_profiles_safety():
    assert _checked() == [] and _checked(fleetqual_profile_safety={}) == []
    assert _checked(fleetqual_profile="compliance") == []          # the shipped safety settings are valid
    errs = _checked(fleetqual_foreign_io={"max_shar": 0.2})
    assert len(errs) == 1
    assert errs[0].startswith("host db01: fleetqual_foreign_io.max_shar: unknown key (did you mean max_share?)")
    assert _checked(fleetqual_foreign_io={"on_busy": "maybe"}) == [
        "host db01: fleetqual_foreign_io.on_busy must be one of inconclusive, fail, warn, got 'maybe'"]
    assert _checked(fleetqual_impact={"nice": 30, "max_iops": "lots"}) == [
        "host db01: fleetqual_impact.max_iops: must be a number, got 'lots' (default 0.0)",
        "host db01: fleetqual_impact.nice must be between -20 and 19, got 30"]
    assert _checked(fleetqual_foreign_io="quiet") == ["host db01: fleetqual_foreign_io must be a mapping, got str"]
    assert _checked(fleetqual_foreign_io={"enabled": "yes"}) == [
        "host db01: fleetqual_foreign_io.enabled: must be true or false, got 'yes'"]


def test_the_merge_is_run_yml_s_the_users_keys_over_the_chosen_profiles():
    """A bad value in the chosen profile's safety is an error unless the user's key replaces
    it; another profile's safety does not matter; a malformed safety names its path."""
    safety = _safety()
    safety["compliance"]["foreign_io"]["max_share"] = 7
    assert any("fleetqual_foreign_io.max_share must be between 0 and 1, got 7" in e
               for e in _checked(fleetqual_profile="compliance", fleetqual_profile_safety=safety))
    assert _checked(fleetqual_profile="compliance", fleetqual_profile_safety=safety,
                    fleetqual_foreign_io={"max_share": 0.2}) == []
    assert _checked(fleetqual_profile="quick", fleetqual_profile_safety=safety) == []
    assert _checked(fleetqual_profile="compliance", fleetqual_profile_safety={"compliance": {"foreign": {}}}) == [
        "host db01: fleetqual_profile_safety.compliance.foreign: unknown key (did you mean foreign_io?); "
        "valid: foreign_io, impact"]


def test_validate_inputs_checks_the_exit_code_policy():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs
    assert validate_inputs({"fleetqual_inconclusive": "warn"}) == []
    assert validate_inputs({"fleetqual_inconclusive": "fail"}) == []
    assert validate_inputs({"fleetqual_inconclusive": "wran"}, host="db01") == [
        "host db01: fleetqual_inconclusive: must be fail or warn, got 'wran' (did you mean warn?)"]
