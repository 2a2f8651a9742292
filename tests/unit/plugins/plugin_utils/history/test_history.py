# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host against its own history: the baseline found in the results
directory, drift rules citing both runs, trends, wear, drive identity, validation."""
from __future__ import annotations

import json
import os

from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as history_store

from history_records import drive, make_record, run_id, store
import unitpaths


def _drift(root, rec, **kw):
    return history.host_drift(str(root), rec, settings=history.drift_settings(kw or None, rec.get("profile")))


def test_third_run_drifted_fails_and_cites_both_runs(tmp_path):
    store(tmp_path, make_record("db01", run_id(0)))
    store(tmp_path, make_record("db01", run_id(1), iops=1.02))
    third = make_record("db01", run_id(2), iops=0.6, p99=1.1)
    store(tmp_path, third)
    out = _drift(tmp_path, third)
    drift = [f for f in out["findings"] if f["kind"] == "drift"]
    assert drift and {f["metric"] for f in drift} == {"iops"}
    assert all(f["severity"] == "fail" for f in drift)          # compliance profile: auto -> fail
    f = drift[0]
    assert f["run_id"] == run_id(2) and f["baseline_run_id"] == run_id(1)
    assert run_id(1) in f["message"] and run_id(2) in f["message"]
    assert abs(f["change_pct"] - (0.6 / 1.02 - 1) * 100) < 0.01
    # both values quoted
    assert history._fmt(f["value"]) in f["message"] and history._fmt(f["baseline"]) in f["message"]
    assert out["baselines"] == {"": {"run_id": run_id(1), "time": history_store.run_time(run_id(1))}}


def test_other_profile_warns_and_mode_off_is_silent(tmp_path):
    store(tmp_path, make_record("db01", run_id(0), profile="standard"))
    cur = make_record("db01", run_id(1), profile="standard", iops=0.5)
    out = history.host_drift(str(tmp_path), cur)
    assert {f["severity"] for f in out["findings"] if f["kind"] == "drift"} == {"warn"}
    assert not [f for f in _drift(tmp_path, cur, mode="off")["findings"] if f["kind"] == "drift"]


def test_baseline_is_the_last_accepted_run_of_the_same_plan(tmp_path):
    store(tmp_path, make_record("db01", run_id(0), iops=1.0))                 # accepted
    store(tmp_path, make_record("db01", run_id(1), iops=0.3, verdict="FAIL"))  # not accepted
    store(tmp_path, make_record("db01", run_id(2), iops=0.3, verdict="INCONCLUSIVE"))
    store(tmp_path, make_record("db01", run_id(3), iops=2.0, block_size=4096))  # another plan
    store(tmp_path, make_record("db02", run_id(4), iops=5.0))                 # another host
    cur = make_record("db01", run_id(5), iops=0.95)
    out = _drift(tmp_path, cur)
    assert out["baselines"][""]["run_id"] == run_id(0)
    assert not [f for f in out["findings"] if f["kind"] == "drift"]
    # a run made after this one never serves as its baseline
    store(tmp_path, make_record("db01", run_id(9), iops=3.0))
    assert _drift(tmp_path, cur)["baselines"][""]["run_id"] == run_id(0)


def test_final_verdict_in_the_summary_decides_acceptance(tmp_path):
    rec = make_record("db01", run_id(0))
    store(tmp_path, rec)
    # the report judged it FAIL (a drift finding): its record's PASS is not an acceptance
    history_store.store_summary(str(tmp_path / run_id(0)), rec, verdict="FAIL")
    assert _drift(tmp_path, make_record("db01", run_id(1)))["baselines"][""] is None
    # fleetqual_drift.accept on a run whose record passed: accepted after a planned change
    rec2 = dict(make_record("db01", run_id(1), iops=0.5), drift={"accept": True})
    store(tmp_path, rec2)
    history_store.store_summary(str(tmp_path / run_id(1)), rec2, verdict="FAIL")
    out = _drift(tmp_path, make_record("db01", run_id(2), iops=0.5))
    assert out["baselines"][""]["run_id"] == run_id(1)
    assert not [f for f in out["findings"] if f["kind"] == "drift"]


def test_replaced_drive_is_reported_not_healed(tmp_path):
    store(tmp_path, make_record("db01", run_id(0)))
    store(tmp_path, make_record("db01", run_id(1), iops=0.4, verdict="FAIL"))      # the disk went bad
    new = make_record("db01", run_id(2), drives=[drive(serial="S64GNE0R699999")])  # replaced, fast again
    out = _drift(tmp_path, new)
    ident = [f for f in out["findings"] if f["kind"] == "identity"]
    assert [f["change"] for f in ident] == ["replaced"]
    assert "S64GNE0R600001" in ident[0]["message"] and "S64GNE0R699999" in ident[0]["message"]
    assert run_id(1) in ident[0]["message"] and run_id(2) in ident[0]["message"]
    # the replacement's first run fails: the next drift is against the old disk's baseline,
    # and says it is not the same disk
    store(tmp_path, dict(new, verdict="FAIL"))
    slow = make_record("db01", run_id(3), iops=0.5, drives=[drive(serial="S64GNE0R699999")])
    out = _drift(tmp_path, slow)
    msgs = [f["message"] for f in out["findings"] if f["kind"] == "drift"]
    assert out["baselines"][""]["run_id"] == run_id(0)
    assert msgs and all("not the same disk" in m and "replaced" in m for m in msgs)


def test_firmware_capacity_and_count_changes(tmp_path):
    store(tmp_path, make_record("db01", run_id(0), drives=[drive(), drive("nvme1n1", serial="B")]))
    cur = make_record("db01", run_id(1), drives=[drive(firmware="GDC5603Q", size=960197124096)])
    changes = {f["change"]: f for f in _drift(tmp_path, cur)["identity"]}
    assert set(changes) == {"firmware", "capacity", "drive_count"}
    assert changes["firmware"]["before"] == "GDC5602Q" and changes["firmware"]["after"] == "GDC5603Q"
    assert changes["drive_count"]["before"] == 2 and changes["drive_count"]["after"] == 1
    same = make_record("db01", run_id(2), drives=[drive(firmware="GDC5603Q", size=960197124096)])
    store(tmp_path, cur)
    assert _drift(tmp_path, same)["identity"] == []


def test_trend_of_a_slow_decline_within_the_drift_limit(tmp_path):
    # 4 % less per run: each run within 20 % of the last accepted, but a trend
    for day in range(6):
        store(tmp_path, make_record("db01", run_id(day), iops=1.0 - 0.04 * day, p99=1.0 + 0.02 * day))
    cur = make_record("db01", run_id(6), iops=1.0 - 0.04 * 6, p99=1.12)
    out = _drift(tmp_path, cur)
    trends = [f for f in out["findings"] if f["kind"] == "trend"]
    assert trends and {f["metric"] for f in trends} == {"iops"}
    assert all(f["slope_pct_per_run"] < -3.0 for f in trends)
    assert len(trends[0]["run_ids"]) == 7 and trends[0]["severity"] == "warn"
    assert not [f for f in out["findings"] if f["kind"] == "drift"]


@settings(max_examples=40, deadline=None)
@given(scales=st.lists(st.floats(min_value=0.97, max_value=1.03), min_size=2, max_size=12))
def test_steady_noise_is_no_drift_and_no_trend(tmp_path_factory, scales):
    """Within +-3 % of the same level, run after run: no drift, no trend, whatever the order."""
    root = tmp_path_factory.mktemp("steady")
    for i, s in enumerate(scales[:-1]):
        store(root, make_record("db01", run_id(i), iops=s, p99=2 - s))
    out = _drift(root, make_record("db01", run_id(len(scales)), iops=scales[-1], p99=2 - scales[-1]))
    assert [f for f in out["findings"] if f["kind"] in ("drift", "trend")] == []


@settings(max_examples=40, deadline=None)
@given(slope=st.floats(min_value=-0.08, max_value=0.08), runs=st.integers(min_value=4, max_value=10))
def test_trend_found_exactly_when_the_slope_passes_the_limit(slope, runs):
    """A straight line of IOPS: flagged when its slope per run is below -3 % of its start."""
    limit = history.DRIFT_DEFAULTS["trend_iops_pct_per_run"]
    if abs(abs(slope * 100) - limit) < 0.05:
        return
    cfg = history.drift_settings({"trend_runs": runs, "mode": "off"}, "compliance")
    series = [{"host": "h", "run_id": str(i), "workloads": {"w": {"iops": 1000 * (1 + slope * i), "p99_ms": 1.0}}}
              for i in range(runs)]
    found = [f for f in history._trends(series, cfg) if f["metric"] == "iops"]
    assert bool(found) == (slope * 100 < -limit)


def test_wear_and_rising_health_counters(tmp_path):
    store(tmp_path, make_record("db01", run_id(0), drives=[drive(used=78, media_errors=0, pending=0)]))
    store(tmp_path, make_record("db01", run_id(1), drives=[drive(used=80, media_errors=1, pending=0)]))
    cur = make_record("db01", run_id(2), drives=[drive(used=81, media_errors=3, pending=0)])
    wear = {f["metric"]: f for f in _drift(tmp_path, cur)["findings"] if f["kind"] == "wear"}
    assert set(wear) == {"percentage_used", "media_errors"}
    assert wear["media_errors"]["first"] == 0 and wear["media_errors"]["value"] == 3
    assert run_id(0) in wear["media_errors"]["message"] and run_id(2) in wear["media_errors"]["message"]
    calm = make_record("db01", run_id(3), drives=[drive(used=10, media_errors=0)])
    assert not [f for f in _drift(tmp_path / "empty", calm)["findings"] if f["kind"] == "wear"]


def test_inconclusive_streak(tmp_path):
    for day, v in enumerate(["PASS", "INCONCLUSIVE", "INCONCLUSIVE"]):
        store(tmp_path, make_record("db01", run_id(day), verdict=v))
    cur = make_record("db01", run_id(3), verdict="INCONCLUSIVE")
    assert _drift(tmp_path, cur)["inconclusive_streak"] == 3
    assert _drift(tmp_path, make_record("db01", run_id(3)))["inconclusive_streak"] == 0


def test_reads_only_the_hosts_files_of_the_runs_it_needs(tmp_path):
    """Newest first, it stops once it has trend_runs summaries and a baseline: older runs
    are not opened (no summary is cached there), other hosts' files never."""
    for day in range(12):
        store(tmp_path, make_record("db01", run_id(day)))
        store(tmp_path, make_record("db02", run_id(day)))
    _drift(tmp_path, make_record("db01", run_id(12)), trend_runs=4)
    read = sorted(d for d in os.listdir(tmp_path) if os.path.exists(tmp_path / d / "history.d" / "db01.json"))
    assert read == [run_id(d) for d in range(8, 12)]
    assert not any(os.path.exists(tmp_path / d / "history.d" / "db02.json") for d in os.listdir(tmp_path))


def test_validation_names_host_variable_and_closest_key():
    errs = history.validate_drift({"iops_drop_pc": 10, "mode": "fial", "trend_runs": 1}, host="db01")
    assert any("host db01: fleetqual_drift.iops_drop_pc: unknown key (did you mean iops_drop_pct?)" in e for e in errs)
    assert any("fleetqual_drift.mode" in e and "did you mean fail?" in e for e in errs)
    assert any("fleetqual_drift.trend_runs" in e and "closest: 2" in e for e in errs)
    assert history.validate_drift({"iops_drop_pct": 15, "mode": "warn"}, host="db01") == []
    assert "must be a mapping" in history.validate_drift([1], host="db01")[0]


def test_final_verdict_fails_a_pass_host_on_a_failing_drift_only(tmp_path):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.verdict import final_verdict
    store(tmp_path, make_record("db01", run_id(0), drives=[drive(used=70)]))
    cur = make_record("db01", run_id(1), iops=0.5, drives=[drive(used=90)])
    found = _drift(tmp_path, cur, trend="fail")["findings"]
    v = final_verdict(cur, history_findings=found)
    assert v["verdict"] == "FAIL" and v["first_failing_rule"] == "history drift"
    assert any(r.startswith("history drift: ") and run_id(0) in r and run_id(1) in r for r in v["reasons"])
    warned = _drift(tmp_path, cur, mode="warn")["findings"]
    assert final_verdict(cur, history_findings=warned)["verdict"] == "PASS"
    # INCONCLUSIVE: the shared numbers' drift does not judge it, the drive's own wear does
    inc = dict(cur, verdict="INCONCLUSIVE")
    assert final_verdict(inc, history_findings=[f for f in found if f["kind"] != "wear"])["verdict"] == "INCONCLUSIVE"
    assert final_verdict(inc, history_findings=found)["verdict"] == "FAIL"


def test_report_time_entry_judged_stored_with_its_final_verdict_and_rendered(tmp_path):
    store(tmp_path, make_record("db01", run_id(0)))
    cur = make_record("db01", run_id(1), iops=0.5)
    store(tmp_path, cur)
    h = {"host": "db01", "group": "db", "verdict": "PASS"}
    hist = history.judge_entry(h, cur, str(tmp_path))
    assert hist is h["history"] and [f["kind"] for f in history.findings_of(h)] == ["drift"] * 3
    assert {c["metric"] for c in hist["compared"]} == {"iops", "p99"}
    assert all(abs(c["ratio"] - 0.5) < 1e-6 for c in hist["compared"] if c["metric"] == "iops")
    lines = history.text_lines(h)
    assert lines[0] == "history baseline: run %s" % run_id(0)
    assert any(line.startswith("[fail] drift: db01 ") for line in lines)
    # the final verdict FAIL is stored: this run is no baseline for the next one
    h["verdict"] = "FAIL"
    path = history.store_entry(h, str(tmp_path))
    assert path == str(tmp_path / run_id(1) / "history.d" / "db01.json")
    nxt = make_record("db01", run_id(2), iops=0.5)
    assert history.host_drift(str(tmp_path), nxt)["baselines"][""]["run_id"] == run_id(0)
    # a report of records not stored under that root judges nothing
    assert history.judge_entry({}, cur, str(tmp_path / "elsewhere")) is None
    assert history.judge_entry({}, cur, None) is None


def test_the_fleet_report_fails_the_drifted_host_and_prunes_by_retention(tmp_path):
    """Through the real report step: three stored runs, the third drifted on db01; the
    aggregation judges each host against its history, the final verdict fails db01 citing
    both runs, the series and the Markdown say so, and the report step applies the hosts'
    fleetqual_retention (records carry drift and retention as the role stores them)."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report
    root = tmp_path / "results"
    for day in range(3):
        for host in ("db01", "db02"):
            rec = make_record(host, run_id(day), iops=0.6 if (host, day) == ("db01", 2) else 1.0)
            rec.update(drift={}, retention={"keep_runs": 2, "keep_days": None},
                       results_file=str(root / run_id(day) / ("%s.json" % host)))
            store(root, rec)
    records = {h: json.loads((root / run_id(2) / ("%s.json" % h)).read_text()) for h in ("db01", "db02")}
    f = fleet.aggregate(records, run_id=run_id(2))
    db01, db02 = f["hosts"]
    assert db01["verdict"] == "FAIL" and db02["verdict"] == "PASS"
    drift = [r for r in db01["reasons"] if r.startswith("history drift: ")]
    assert drift and all(run_id(1) in r and run_id(2) in r for r in drift)
    assert db02["history"]["baselines"][""]["run_id"] == run_id(1)
    # this run's summaries hold the final verdicts: db01's run 3 is no baseline
    saved = json.loads((root / run_id(2) / "history.d" / "db01.json").read_text())
    assert saved["verdict"] == "FAIL" and saved["accepted"] is False
    prom = prometheus.prometheus_text(f)
    assert 'fleetqual_host_drift_findings{group="db",host="db01",kind="drift"} 3.0' in prom
    report.write_reports(f, str(root / run_id(2)), formats=("json", "md", "html", "junit"))
    md = (root / run_id(2) / "report.md").read_text()
    assert "## History" in md and "[fail] drift: db01" in md
    html = (root / run_id(2) / "report.html").read_text()
    assert 'id="history"' in html and "<li>[fail] drift: db01 " in html
    assert "history [fail] drift: db01 " in (root / run_id(2) / "junit.xml").read_text()
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_text import detail_lines
    assert any(line.startswith("history [fail] drift: db01 ") for line in detail_lines(f, width=400))
    # keep_runs 2: run 0 goes; run 1 stays as the newest-but-one (and db01's baseline)
    assert sorted(os.listdir(root)) == [run_id(1), run_id(2)]


def test_the_hosts_own_textfile_carries_its_history_series(tmp_path):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
    store(tmp_path, make_record("db01", run_id(0), drives=[drive(used=40)]))
    cur = make_record("db01", run_id(1), iops=0.5, verdict="INCONCLUSIVE", drives=[drive(used=41)])
    cur["results_file"] = store(tmp_path, cur)
    text = prometheus.host_prometheus_text(cur)
    assert 'fleetqual_host_drift_ratio{metric="iops",workload="cache-rndrd-t1"} 0.5' in text
    assert 'fleetqual_drive_wear_ratio{drive="nvme0n1",serial="S64GNE0R600001"} 0.41' in text
    assert "fleetqual_host_inconclusive_streak_runs 1.0" in text
    # a record outside a results directory: the series it always had, nothing more
    cur["results_file"] = str(tmp_path / "nowhere" / "x" / "db01.json")
    assert "fleetqual_host_drift" not in prometheus.host_prometheus_text(cur)


@settings(max_examples=60, deadline=None)
@given(iops=st.floats(min_value=0.3, max_value=1.5), p99=st.floats(min_value=0.5, max_value=2.5),
       drop=st.sampled_from([5.0, 20.0, 40.0]), rise=st.sampled_from([10.0, 50.0, 100.0]))
def test_drift_rule_fires_exactly_beyond_its_limits(iops, p99, drop, rise):
    """Against an accepted baseline, a workload drifts exactly when its IOPS fell by more
    than iops_drop_pct or its p99 rose by more than p99_rise_pct, and says both runs."""
    if min(abs((1 - iops) * 100 - drop), abs((p99 - 1) * 100 - rise)) < 1e-6:
        return
    base = history.summarize(make_record("h", run_id(0), slim=True))
    cur = history.summarize(make_record("h", run_id(1), slim=True, iops=iops, p99=p99))
    cfg = history.drift_settings({"iops_drop_pct": drop, "p99_rise_pct": rise}, "compliance")
    found = [f for f in history.drift_findings(cur, [dict(base, time=0)], cfg)["findings"] if f["kind"] == "drift"]
    n = len(cur["workloads"])
    assert len([f for f in found if f["metric"] == "iops"]) == (n if (1 - iops) * 100 > drop else 0)
    assert len([f for f in found if f["metric"] == "p99_ms"]) == (n if (p99 - 1) * 100 > rise else 0)
    assert all(run_id(0) in f["message"] and run_id(1) in f["message"] for f in found)


def test_a_malformed_summary_or_bad_settings_never_lose_the_report(tmp_path):
    store(tmp_path, make_record("db01", run_id(0)))
    bad = tmp_path / run_id(0) / "history.d"
    bad.mkdir()
    (bad / "db01.json").write_text(json.dumps({"schema": "fleetqual.history", "host": "db01", "run_id": run_id(0),
                                               "accepted": True, "plan": {"": "x"}, "workloads": [1, 2],
                                               "drives": "nvme"}))
    os.utime(bad / "db01.json", (2e9, 2e9))                     # newer than the record: it is read
    cur = make_record("db01", run_id(1))
    store(tmp_path, cur)
    h = {"host": "db01", "verdict": "PASS"}
    hist = history.judge_entry(h, cur, str(tmp_path))
    assert hist["findings"] == [] and hist["error"].startswith(("AttributeError", "TypeError"))
    assert history.text_lines(h)[0].startswith("history not judged: ")
    cur2 = dict(cur, drift={"iops_drop_pc": 5})
    assert "did you mean iops_drop_pct" in history.judge_entry({}, cur2, str(tmp_path))["error"]


# --------------------------------------------------------------------------- validation before any host

def test_validate_inputs_checks_fleetqual_drift_and_fleetqual_retention():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs
    errors = validate_inputs({"fleetqual_drift": {"iops_drop_pc": 10}, "fleetqual_retention": {"keep_run": 3}}, host="db01")
    assert errors == ["host db01: fleetqual_drift.iops_drop_pc: unknown key (did you mean iops_drop_pct?); valid: %s"
                      % ", ".join(history.DRIFT_DEFAULTS),
                      "host db01: fleetqual_retention.keep_run: unknown key (did you mean keep_runs?); valid: keep_runs, keep_days"]
    assert validate_inputs({"fleetqual_drift": {"iops_drop_pct": 10, "mode": "warn"},
                            "fleetqual_retention": {"keep_runs": 3, "keep_days": None}}, host="db01") == []
    # the role's defaults are valid
    assert validate_inputs({"fleetqual_drift": {}, "fleetqual_retention": {"keep_runs": None, "keep_days": None}}) == []


def test_the_playbook_refuses_a_drift_typo_before_any_host_is_contacted(tmp_path):
    """playbooks/qualify.yml on hosts that do not exist (TEST-NET addresses): db01's
    fleetqual_drift says iops_drop_pc; the validation play refuses it, naming the host, the
    variable and the closest key, and the qualify play never starts (no fact gathering, no
    connection, no results directory)."""
    import subprocess
    import sys

    import yaml
    root = unitpaths.ROOT
    results = tmp_path / "results"
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"fleetqual_results_dir": str(results), "ansible_connection": "ssh", "ansible_user": "nobody"},
        "hosts": {"db01": {"ansible_host": "192.0.2.1", "fleetqual_drift": {"iops_drop_pc": 10}},
                  "db02": {"ansible_host": "192.0.2.2", "fleetqual_drift": {"iops_drop_pct": 10, "mode": "warn"}}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml",
                          os.path.join(root, "playbooks", "qualify.yml")],
                         env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "db01: fleetqual_drift.iops_drop_pc: unknown key (did you mean iops_drop_pct?)" in text, text
    assert "db02: fleetqual_drift" not in text
    assert "Gather facts" not in text and "UNREACHABLE" not in text and "192.0.2" not in text
    assert not results.exists()
