# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped Prometheus alerting rules: valid, tested with
``promtool test rules`` on series that fire and series that do not, shipped in the
collection tarball, and reading only series the collection writes or documents."""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess

import yaml
import unitpaths

ROOT = unitpaths.ROOT
RULES = os.path.join(ROOT, "extensions", "prometheus", "fleetqual-alerts.yml")
RULES_TEST = os.path.join(ROOT, "tests", "prometheus", "fleetqual-alerts.test.yml")
ALERTS = {"FleetqualHostFailing", "FleetqualDrift", "FleetqualTrend", "FleetqualDriveIdentityChanged",
          "FleetqualDriveWear", "FleetqualDriveHealthCountersRising", "FleetqualInconclusive", "FleetqualRunMissing"}


def promtool():
    path = shutil.which("promtool")
    # not a skip: CI installs it (scripts/setup.sh --test installs Debian's prometheus)
    assert path, "promtool not found: install Debian's prometheus package (bash scripts/setup.sh --test)"
    return path


def run(*args, cwd=None):
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd)


def test_rules_file_is_valid_and_holds_every_alert():
    proc = run("check", "rules", RULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(RULES, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    names = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    assert names == ALERTS


def test_promtool_unit_tests_pass():
    proc = run("test", "rules", RULES_TEST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_unit_tests_catch_a_rule_that_fires_too_early(tmp_path):
    """The tests list where each alert must NOT fire: a looser rule fails them."""
    with open(RULES, encoding="utf-8") as f:
        text = f.read()
    loose = text.replace("fleetqual_drive_wear_ratio{host!=\"\"} >= 0.8", "fleetqual_drive_wear_ratio{host!=\"\"} >= 0.1")
    loose = loose.replace("fleetqual_host_inconclusive_streak_runs{host!=\"\"} >= 3",
                          "fleetqual_host_inconclusive_streak_runs{host!=\"\"} >= 1")
    assert loose.count("0.1") > text.count("0.1")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "fleetqual-alerts.yml").write_text(loose, encoding="utf-8")
    with open(RULES_TEST, encoding="utf-8") as f:
        test = f.read().replace("../../extensions/prometheus/fleetqual-alerts.yml", "rules/fleetqual-alerts.yml")
    (tmp_path / "t.yml").write_text(test, encoding="utf-8")
    proc = run("test", "rules", "t.yml", cwd=str(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "FleetqualDriveWear" in out and "db02" in out          # db02's 20 % wear now fires
    assert "FleetqualInconclusive" in out and "db03" in out       # db03's single inconclusive run too


def test_rules_read_only_series_the_collection_writes_or_documents():
    with open(RULES, encoding="utf-8") as f:
        exprs = " ".join(r["expr"] for g in yaml.safe_load(f)["groups"] for r in g["rules"])
    used = set(re.findall(r"\bfleetqual_[a-z_]+\b", exprs))
    written = set()
    pu = os.path.join(ROOT, "plugins", "plugin_utils")
    for dirpath, _dirs, files in os.walk(pu):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    written |= set(re.findall(r"Gauge\(\s*\"(fleetqual_[a-z_]+)\"", f.read()))
    with open(os.path.join(ROOT, "docs", "compliance.md"), encoding="utf-8") as f:
        documented = set(re.findall(r"`(fleetqual_[a-z_]+)(?:\{[^`]*\})?`", f.read()))
    assert {"fleetqual_host_pass", "fleetqual_last_run_timestamp_seconds"} <= written
    assert used - written - documented == set()


def test_rules_file_ships_in_the_collection_tarball():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as f:
        ignore = yaml.safe_load(f)["build_ignore"]
    rel = os.path.relpath(RULES, ROOT)
    parts = rel.split(os.sep)
    prefixes = [os.sep.join(parts[:i]) for i in range(1, len(parts) + 1)]
    assert not [p for p in ignore for x in prefixes if fnmatch.fnmatch(x, p)]


def test_rules_fire_on_the_series_the_collection_writes(tmp_path):
    """End to end: hosts judged against their stored history (history.judge_entry), their
    series written by history.add_prometheus, fed to promtool: the drifted host's IOPS and
    the worn drive alert, the steady host and the healthy drive do not."""
    import sys
    from prometheus_client import CollectorRegistry, Gauge, generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as history
    sys.path.insert(0, unitpaths.UNIT)
    from history_records import drive, make_record, run_id, store

    root = tmp_path / "results"
    hosts = []
    for host, iops, used in (("db01", 0.5, 10), ("db02", 0.98, 10), ("db03", 1.0, 85)):
        store(root, make_record(host, run_id(0), drives=[drive(used=used - 1)]))
        cur = make_record(host, run_id(1), iops=iops, drives=[drive(used=used)])
        store(root, cur)
        h = {"host": host, "group": "db", "verdict": "PASS"}
        history.judge_entry(h, cur, str(root))
        hosts.append(h)
    reg = CollectorRegistry()
    passed = Gauge("fleetqual_host_pass", "pass", ["host", "group"], registry=reg)
    for h in hosts:
        passed.labels(host=h["host"], group="db").set(1)
    history.add_prometheus(reg, hosts)
    series = []
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
            series.append({"series": "%s{%s}" % (s.name, labels), "values": "%rx15" % s.value})
    with open(RULES, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    for g in rules["groups"]:
        for r in g["rules"]:
            r.pop("annotations", None)                   # compare the labels of what fires
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    wear = {"host": "db03", "group": "db", "drive": "nvme0n1", "serial": "S64GNE0R600001", "severity": "warning"}
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "10m", "alertname": "FleetqualDrift", "exp_alerts": [
                {"exp_labels": {"host": "db01", "group": "db", "workload": w, "metric": "iops", "severity": "warning"}}
                for w in ("cache-rndrd-t1", "over_cache-rndrd-t64", "over_cache-rndwr-t64")]},
            {"eval_time": "10m", "alertname": "FleetqualDriveWear", "exp_alerts": [{"exp_labels": wear}]},
            {"eval_time": "10m", "alertname": "FleetqualHostFailing", "exp_alerts": []},
            {"eval_time": "10m", "alertname": "FleetqualInconclusive", "exp_alerts": []}]}]}
    (tmp_path / "t.yml").write_text(yaml.safe_dump(test), encoding="utf-8")
    proc = run("test", "rules", "t.yml", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
