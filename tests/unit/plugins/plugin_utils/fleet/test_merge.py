"""Slices and controllers merge into one report (parts 2-4).

Host records are built from the real workload records in tests/unit/fixtures/controller
(real iobench JSON with histograms; metrics computed by metrics.workload_record), nine
hosts in two groups, one slow (a fleet outlier), one failing its thresholds.  Three
slices write their records and their own slice reports into one run directory
concurrently (three processes); the report over the run directory must equal, field by
field and byte by byte, the single-run report of the same records.  Then a re-run of
the non-PASS host replaces its record (the old one kept beside it) and the report covers
the union; playbooks/report.yml does the same through ansible-playbook, and through
ansible-runner its stats artifact holds the run's summary."""
from __future__ import annotations

import copy
import datetime
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import fleet_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import verdict  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.module_utils.common import atomic  # noqa: E402

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
import handover  # noqa: E402
import report_tools as tools  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record

ROOT = unitpaths.ROOT
FIX = os.path.join(ROOT, "tests", "unit", "fixtures", "controller")
WORKLOADS = ("nvme_cache-rndrd-t1.json", "nvme_log-seqwr-t1.json", "nvme_mix-rndrw-t64-r90.json",
             "nvme_over_cache-rndrd-t64.json", "nvme_over_cache-rndwr-t64.json")
HOSTS = ["db1", "db2", "db3", "db4", "db5", "db6", "web1", "web2", "web3"]
# web4: in slice 3's inventory, unreachable: it has no record, only its slice's entry
PLAY = {"web4": {"counts": {"unreachable": 1},
                 "unreachable": [{"task": "Gathering Facts", "msg": "ssh: connect to host web4: No route to host"}]}}
ALL = HOSTS + ["web4"]
RUN_ID = "20261122T170000Z"
NOW = datetime.datetime(2026, 11, 22, 17, 30, tzinfo=datetime.timezone.utc)
FORMATS = ("json", "junit", "html", "md")


def _fixture_workloads():
    out = []
    for name in WORKLOADS:
        with open(os.path.join(FIX, name), encoding="utf-8") as f:
            w = json.load(f)
        result = w.pop("result")
        out.append((w, result))
    return out


def host_record(host, index, results_dir, verdict="PASS", slice_=None, base=None):
    """A host record as store.yml writes it, from the real fixture workloads; each host's
    latencies shifted by a few histogram buckets and its IOPS scaled (db5: half, slow)."""
    base = base or _fixture_workloads()
    slow = host == "db5"
    shift = 40 if slow else index % 4
    scale = 0.5 if slow else 1.0 + 0.01 * index
    wls = []
    for spec, result in base:
        result = copy.deepcopy(result)
        for op in ("read", "write", "fsync", "commit"):
            h = histogram.workload_histogram({"result": result}, op)
            if h:
                h["buckets"] = [[i + shift, c] for i, c in h["buckets"]]
        rec = workload_record(spec, result)
        rec["metrics"]["iops"] = rec["metrics"]["iops"] * scale if rec["metrics"]["iops"] else rec["metrics"]["iops"]
        wls.append(rec)
    failing = verdict == "FAIL"
    return {
        "schema_version": 1, "host": host, "run_id": RUN_ID, "profile": "quick",
        "groups": ["db" if host.startswith("db") else "web"],
        "facts": {"architecture": "x86_64", "product_name": "R650", "disk_model": "PM9A3"},
        "test_dir": "/var/tmp/fleetqual", "device": {"devices": ["nvme0n1"], "filesystem": "ext4"},
        "workloads": wls, "verdict": verdict,
        "reasons": ["cache-rndrd-t1: iops 850 below 5000"] if failing else [],
        "checks": [{"workload": "cache-rndrd-t1", "rule": "min_iops", "metric": "iops", "value": 850.0,
                    "limit": 5000.0, "op": ">=", "passed": not failing, "status": "fail" if failing else "pass",
                    "evidence": "device nvme0n1: r/s 851, %util 99.8"}],
        "warnings": [], "diagnostics": {}, "slice": slice_, "targets": ["/var/tmp/fleetqual"],
        "results_file": os.path.join(results_dir, RUN_ID, "%s.json" % host),
    }


def all_records(results_dir):
    base = _fixture_workloads()
    return {h: host_record(h, i, results_dir, verdict="FAIL" if h == "web2" else "PASS",
                           slice_={"number": i % 3 + 1, "count": 3, "job": None}, base=base)
            for i, h in enumerate(HOSTS)}


def _write_record(rec):
    """What store.yml's copy task does (a temporary file renamed into place)."""
    path = rec["results_file"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.write_atomic(path, json.dumps(rec, indent=1) + "\n", mode=0o600)


def run_slice(results_dir, number):
    """One slice on its own controller process: store its hosts' records, then what its
    callback does: the hosts' entries into fleet.d/ and the slice's own report (slice-N/)."""
    recs = {h: r for h, r in all_records(results_dir).items() if r["slice"]["number"] == number}
    for rec in recs.values():
        _write_record(rec)
    play = PLAY if number == 3 else {}
    sink = run_store.EntryWriter(os.path.join(results_dir, RUN_ID), "slice-%d" % number)
    f = fleet.aggregate(recs, play=play, now=NOW, run_id=RUN_ID, entry_sink=sink)
    sink.close()
    report.write_reports(f, os.path.join(results_dir, RUN_ID, "slice-%d" % number), FORMATS)
    return sorted(set(recs) | set(play))


def rendered(f, out_dir):
    written = report.write_reports(f, out_dir, FORMATS)
    return {k: open(p, encoding="utf-8").read() for k, p in written.items()}


@pytest.fixture(scope="module")
def sliced_run(tmp_path_factory):
    results = str(tmp_path_factory.mktemp("merge") / "results")
    with ProcessPoolExecutor(3) as pool:
        done = list(pool.map(run_slice, [results] * 3, [1, 2, 3]))
    assert sorted(h for part in done for h in part) == sorted(ALL)
    return results


def test_three_concurrent_slices_merge_into_the_single_run_report(sliced_run, tmp_path):
    run_dir = os.path.join(sliced_run, RUN_ID)
    merged = run_store.aggregate_run(run_dir, now=NOW)
    single = fleet.aggregate(all_records(sliced_run), play=PLAY, now=NOW, run_id=RUN_ID)

    # field by field: verdicts, outlier set, merged percentiles; then everything
    assert {h["host"]: h["verdict"] for h in merged["hosts"]} == \
        {h["host"]: h["verdict"] for h in single["hosts"]} == \
        dict({h: ("FAIL" if h == "web2" else "PASS") for h in HOSTS}, web4="UNREACHABLE")
    outliers = {(o["host"], o["workload"], o["metric"]) for o in merged["outliers"]}
    assert outliers == {(o["host"], o["workload"], o["metric"]) for o in single["outliers"]}
    assert {o[0] for o in outliers} == {"db5"}        # judged over the whole fleet, not a slice
    assert merged["latency"] == single["latency"]
    assert merged == single
    assert merged["summary"]["slices"] == ["1/3", "2/3", "3/3"]
    # every format is the same text
    assert rendered(merged, str(tmp_path / "a")) == rendered(single, str(tmp_path / "b"))

    # a slice alone judges outliers among its three hosts only: the whole fleet is needed
    slice_fleet = json.load(open(os.path.join(run_dir, "slice-2", "fleet.json"), encoding="utf-8"))
    assert [h["host"] for h in slice_fleet["hosts"]] == ["db2", "db5", "web2"]

    # the same from the records alone (no slice stored its entries: callback disabled)
    bare = str(tmp_path / "bare" / RUN_ID)
    shutil.copytree(run_dir, bare)
    shutil.rmtree(os.path.join(bare, run_store.ENTRIES_DIR))
    from_records = run_store.aggregate_run(bare, now=NOW)
    assert [h["host"] for h in from_records["hosts"]] == HOSTS          # web4 has no record
    assert from_records["outliers"] == merged["outliers"] and from_records["latency"] == merged["latency"]
    # ... and it stored the entries it built: the next merge reads those, same result
    assert len([n for n in os.listdir(os.path.join(bare, run_store.ENTRIES_DIR)) if n.endswith(".jsonl")]) == 1
    assert run_store.aggregate_run(bare, now=NOW) == from_records


def test_merged_percentiles_are_exact_from_the_histograms(sliced_run):
    merged = run_store.aggregate_run(os.path.join(sliced_run, RUN_ID), now=NOW)
    recs = all_records(sliced_run)
    row = next(r for r in merged["latency"]["fleet"] if r["workload"] == "over_cache-rndrd-t64")
    assert row["latency_op"] == "read" and row["hosts"] == 9
    buckets = histogram.merge(*[histogram.workload_histogram(w, "read")["buckets"]
                                for r in recs.values() for w in r["workloads"] if w["id"] == "over_cache-rndrd-t64"])
    assert row["count"] == histogram.count(buckets)
    for pct, p in (("p50", 50), ("p99", 99), ("p999", 99.9)):
        assert row["%s_ms" % pct] == round(histogram.percentile(buckets, p) / 1e6, 6)
    # not the median of the hosts' own p99s: the slow host's tail is in the fleet's p99.9
    per_host = sorted(histogram.percentile(histogram.workload_histogram(w, "read")["buckets"], 99.9)
                      for r in recs.values() for w in r["workloads"] if w["id"] == "over_cache-rndrd-t64")
    assert row["p999_ms"] != round(per_host[4] / 1e6, 6)
    groups = {(g["group"], g["workload"]): g for g in merged["latency"]["groups"]}
    assert groups[("db", "over_cache-rndrd-t64")]["hosts"] == 6 and groups[("web", "over_cache-rndrd-t64")]["hosts"] == 3


def test_rerun_of_the_non_passing_host_lands_in_the_same_report(sliced_run, tmp_path):
    results = str(tmp_path / "results")
    shutil.copytree(sliced_run, results)
    run_dir = os.path.join(results, RUN_ID)
    first = run_store.aggregate_run(run_dir, now=NOW)
    written = report.write_reports(first, run_dir, FORMATS)
    limit = open(written["limit"], encoding="utf-8").read()
    assert limit == "web2\nweb4\n"
    # the re-run (--limit @not-passed.limit, same run id): copy's backup keeps the old record
    old = os.path.join(run_dir, "web2.json")
    kept = old + ".4242.2026-11-22@17:40:00~"
    os.rename(old, kept)
    rerun = {h: host_record(h, 7, results, verdict="PASS", slice_=None) for h in ("web2", "web4")}
    for rec in rerun.values():
        _write_record(rec)
    again = run_store.aggregate_run(run_dir, now=NOW)
    assert [h["host"] for h in again["hosts"]] == ALL
    assert {h["host"]: h["verdict"] for h in again["hosts"]}["web2"] == "PASS"
    assert again["summary"]["by_verdict"] == dict.fromkeys(verdict.VERDICTS, 0) | {"PASS": 10}
    # the replaced host's histograms were taken out of its slice's sum, the new ones added:
    # the fleet percentiles equal those of the union of the newest records
    union = dict(all_records(results), **rerun)
    assert again["latency"] == fleet.aggregate(union, now=NOW, run_id=RUN_ID)["latency"]
    assert again["latency"] != first["latency"]
    # the re-run's own callback stores newer entries: the same union
    sink = run_store.EntryWriter(run_dir, "run")
    fleet.aggregate(rerun, now=NOW, entry_sink=sink)
    sink.close()
    assert run_store.aggregate_run(run_dir, now=NOW) == again
    assert json.load(open(kept, encoding="utf-8"))["verdict"] == "FAIL"      # history kept
    report.write_reports(again, run_dir, FORMATS)
    assert open(written["limit"], encoding="utf-8").read() == ""


def _ansible_env(**extra):
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra)
    return env


def test_report_playbook_renders_the_run_like_the_library(sliced_run, tmp_path):
    results = str(tmp_path / "results")
    shutil.copytree(sliced_run, results)
    run_dir = os.path.join(results, RUN_ID)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           os.path.join(ROOT, "playbooks", "report.yml"), "-i", "localhost,",
                           "-e", "fleetqual_run_id=%s" % RUN_ID, "-e", "fleetqual_results_dir=%s" % results],
                          capture_output=True, text=True, timeout=300, env=_ansible_env(), cwd=str(tmp_path), check=False)
    out = proc.stdout + proc.stderr
    # web2 did not pass: the playbook says how to re-run it and exits non-zero
    assert proc.returncode == 2, out
    assert "2 of 10 hosts did not pass" in out and "--limit @%s/not-passed.limit" % run_dir in out
    assert "fleet: 8/10 hosts passed" in out
    stored = json.load(open(os.path.join(run_dir, "fleet.json"), encoding="utf-8"))
    lib = run_store.aggregate_run(run_dir, now=datetime.datetime.strptime(
        stored["generated_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc))
    assert stored == json.loads(fleet_json.to_json(lib))
    assert open(os.path.join(run_dir, "not-passed.limit"), encoding="utf-8").read() == "web2\nweb4\n"


def test_report_playbook_without_run_id_says_so(tmp_path):
    # by its collection name, as an installed collection is used
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           "fleetqual.storage.report", "-i", "localhost,"],
                          capture_output=True, text=True, timeout=300, env=_ansible_env(), cwd=str(tmp_path), check=False)
    assert proc.returncode != 0
    assert "fleetqual_run_id is not set" in proc.stdout + proc.stderr


def test_ansible_runner_stats_artifact_holds_the_summary(sliced_run, tmp_path):
    ansible_runner = pytest.importorskip("ansible_runner")
    results = str(tmp_path / "results")
    shutil.copytree(sliced_run, results)
    private = tmp_path / "runner"
    (private / "project").mkdir(parents=True)
    r = ansible_runner.run(private_data_dir=str(private), playbook=os.path.join(ROOT, "playbooks", "report.yml"),
                           inventory="localhost ansible_connection=local",
                           extravars={"fleetqual_run_id": RUN_ID, "fleetqual_results_dir": results},
                           envvars={k: v for k, v in _ansible_env().items() if k.startswith("ANSIBLE_") or k == "PATH"},
                           quiet=True, timeout=300)
    stats = [e for e in r.events if e.get("event") == "playbook_on_stats"]
    assert stats, r.stdout.read()
    artifact = stats[-1]["event_data"]["artifact_data"]
    summary = artifact["fleetqual_summary_report"]
    assert summary["run_id"] == RUN_ID and summary["hosts"] == 10
    assert summary["counts"] == dict.fromkeys(verdict.VERDICTS, 0) | {"PASS": 8, "FAIL": 1, "UNREACHABLE": 1}
    assert summary["verdicts"]["web2"] == "FAIL" and summary["not_passed"] == ["web2", "web4"]
    # small: verdicts and counts, no measurements
    assert "latency" not in json.dumps(summary) and len(json.dumps(summary)) < 2000


def _gate_playbook(tmp_path, records_dir):
    """The records handed over as the action qualify_host hands them (handover.py), then
    playbooks/qualify.yml's own gate play (taken verbatim from the playbook)."""
    import yaml

    with open(os.path.join(ROOT, "playbooks", "qualify.yml"), encoding="utf-8") as f:
        gate = yaml.safe_load(f)[-1]
    assert gate["vars"]["_fleetqual_report_play"] == "gate"
    store = handover.store_play("%s/{{ inventory_hostname }}.json" % records_dir)
    path = tmp_path / "gate.yml"
    path.write_text(yaml.safe_dump([store, gate], sort_keys=False))
    inv = tmp_path / "hosts.ini"
    inv.write_text("[db]\n" + "".join("%s ansible_connection=local\n" % h for h in HOSTS[:6]))
    return str(path), str(inv)


@pytest.mark.parametrize("mode", ["fail", "warn"])
def test_gate_report_and_exit_code_agree_on_outliers(tmp_path, mode):
    """outliers: fail -> the slow host is FAIL in the report AND fails the gate (exit 2);
    warn -> listed, PASS everywhere, exit 0.  The gate's own failure is not an ERROR."""
    results = str(tmp_path / "results")
    base = _fixture_workloads()
    for i, h in enumerate(HOSTS[:6]):
        _write_record(host_record(h, i, results, base=base))
    playbook, inv = _gate_playbook(tmp_path, os.path.join(results, RUN_ID))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), playbook, "-i", inv],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                          env=_ansible_env(ANSIBLE_ACTION_PLUGINS=handover.PLUGINS,
                                           FLEETQUAL_REPORT_OUTLIERS=mode, FLEETQUAL_REPORT_HISTORY="false",
                                           ANSIBLE_SHOW_CUSTOM_STATS="1"), check=False)
    out = proc.stdout + proc.stderr
    # the run's summary for AWX: set_stats without per_host, under the slice's key
    custom = out[out.index("CUSTOM STATS"):]
    run_stats = json.loads(custom[custom.index("RUN:") + 4:].strip().splitlines()[0])
    summary = run_stats["fleetqual_summary_local"]
    expect = {h: ("FAIL" if (h == "db5" and mode == "fail") else "PASS") for h in HOSTS[:6]}
    assert summary["verdicts"] == expect and summary["slice"] == "local"
    assert summary["counts"] == {"PASS": list(expect.values()).count("PASS"),
                                 "FAIL": list(expect.values()).count("FAIL"), "ERROR": 0, "UNREACHABLE": 0,
                                 "INCONCLUSIVE": 0}
    stored = json.load(open(os.path.join(results, RUN_ID, "fleet.json"), encoding="utf-8"))
    verdicts = {h["host"]: h["verdict"] for h in stored["hosts"]}
    if mode == "fail":
        assert proc.returncode == 2, out
        assert verdicts == {h: ("FAIL" if h == "db5" else "PASS") for h in HOSTS[:6]}
        assert "db5: FAIL fleet outlier:" in " ".join(out.split())
        db5 = next(h for h in stored["hosts"] if h["host"] == "db5")
        assert db5["record_verdict"] == "PASS" and db5["reasons"][0].startswith("fleet outlier:")
    else:
        assert proc.returncode == 0, out
        assert set(verdicts.values()) == {"PASS"} and stored["outliers"]


def test_large_fleet_shape_detail_for_the_hosts_that_need_it(sliced_run, tmp_path):
    """With fewer detail hosts than hosts (a large fleet): the non-PASS and outlier hosts
    keep every check, metric and iostat series; the others a compact summary (the shared
    workload spec in fleet.workloads, no n/a diagnostics); every format still renders."""
    f = run_store.aggregate_run(os.path.join(sliced_run, RUN_ID), now=NOW, detail_hosts=3)
    detailed = [h["host"] for h in f["hosts"] if h["detail"] is not None]
    assert detailed == ["db5", "web2", "web4"]                 # outlier, FAIL, UNREACHABLE
    db1 = next(h for h in f["hosts"] if h["host"] == "db1")
    assert "mode" not in db1["workloads"][0] and "metrics" not in db1["workloads"][0]
    assert db1["workloads"][0]["iops"] is not None
    assert {w["id"]: w["mode"] for w in f["workloads"]}["over_cache-rndwr-t64"] == "rndwr"
    assert all(d.get("status") != "n/a" for d in db1["diagnostics"].values())
    db5 = next(h for h in f["hosts"] if h["host"] == "db5")
    assert db5["workloads"][0]["mode"] and db5["workloads"][0]["metrics"] and db5["detail"]["iostat"]
    out = rendered(f, str(tmp_path))
    assert '<tr class="first"><td><strong>db1</strong></td><td>db</td><td>5 workloads</td>' in out["html"]
    assert 'id="host-db5"' in out["html"] and 'id="host-db1"' not in out["html"]
    assert "| db1 | 5 workloads |" in out["md"]
    tools.xmllint_junit(out["junit"])
    # the controller's Prometheus textfile: the fleet summary with the merged percentiles
    prom = prometheus.prometheus_text(f)
    assert 'fleetqual_fleet_latency_seconds{op="read",percentile="p99",workload="over_cache-rndrd-t64"} %r' % (
        next(r for r in f["latency"]["fleet"] if r["workload"] == "over_cache-rndrd-t64")["p99_ms"] / 1000.0) in prom
    tools.promtool_check(prom)
    # rendered again from the stored fleet.json alone: the same files
    again = report.rerender(os.path.join(str(tmp_path), "fleet.json"), str(tmp_path / "again"), FORMATS)
    for fmt, path in again.items():
        assert open(path, encoding="utf-8").read() == out[fmt], fmt


def test_store_keeps_drives_and_targets_judges_the_drives_and_writes_a_clean_textfile(tmp_path):
    """What the action qualify_host does after a job (plugins/plugin_utils/judge/record.py judged,
    assemble, store; the textfile by the cleanup's module run, module_utils/host/start.py) with
    two workload records on two targets (one per target of the expanded plan), the resolved
    targets and the drives' inventory. The stored record carries ``drives`` and
    ``targets``, the judge saw the drives (a drive whose SMART verdict failed fails the
    host, citing its serial), and the host's node_exporter textfile is promtool-clean."""
    (spec, result), = [w for w in _fixture_workloads() if w[0]["id"] == "over_cache-rndrd-t64"]
    records = []
    for target, path in (("data1", "/data1/fleetqual"), ("data2", "/data2/fleetqual")):
        s = dict(copy.deepcopy(spec), target=target, target_kind="path", target_path=path)
        records.append(workload_record(s, copy.deepcopy(result)))
    drives = {"changed": False, "drives": [
        {"name": "sda", "path": "/dev/sda", "model": "ST4000NM0295", "serial": "ZA1HDD0001", "firmware": "E004",
         "size_bytes": 4000787030016, "transport": "sata", "targets": ["/data1/fleetqual"],
         "health": {"collected": True, "tool": "smartctl", "reason": None, "passed": True, "problems": []}},
        {"name": "sdb", "path": "/dev/sdb", "model": "ST4000NM0295", "serial": "ZA1HDD0002", "firmware": "E004",
         "size_bytes": 4000787030016, "transport": "sata", "targets": ["/data2/fleetqual"],
         "health": {"collected": True, "tool": "smartctl", "reason": None, "passed": False,
                    "problems": ["overall health self-assessment FAILED"]}}]}
    results, textfile = tmp_path / "results", tmp_path / "textfile"
    textfile.mkdir()
    from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as host_start
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import record as host_record
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters import table
    # what the action qualify_host (state finished) does with what the start returned
    plan = [{"id": r["id"], "key": r["id"] + "@" + r["target"], "target": r["target"]} for r in records]
    started = {"drives": drives, "plan": plan, "facts": {}, "preflight": {},
               "targets": [{"name": "data1", "kind": "path", "path": "/data1/fleetqual"},
                           {"name": "data2", "kind": "path", "path": "/data2/fleetqual"}]}
    inputs = {"run_id": RUN_ID, "profile": "standard", "groups": [], "test_dir": "/var/tmp/fleetqual",
              "results_dir": str(results), "drift": {}, "retention": {}}
    diag, judgement = host_record.judged(records, plan, [], 50, drives=drives["drives"])
    host_record.store(host_record.assemble("localhost", inputs, started, records, diag, judgement))
    # the textfile is written by the second module run (host_start.cleanup), with the judged record
    with open(results / RUN_ID / "localhost.json", encoding="utf-8") as f:
        rec = json.load(f)
    assert [t["name"] for t in rec["targets"]] == ["data1", "data2"]
    assert [d["serial"] for d in rec["drives"]] == ["ZA1HDD0001", "ZA1HDD0002"]
    assert rec["verdict"] == "FAIL"
    assert any("serial ZA1HDD0002" in r and "health verdict is FAILED" in r for r in rec["reasons"])
    assert not any("missing" in r or "no result" in r for r in rec["reasons"])   # expected by <id>@<target>
    test_dir = tmp_path / "test_dir"   # nothing was created there: the cleanup removes nothing
    out = host_start.cleanup({"path": str(test_dir), "binary": None, "datasets": [], "targets": [], "plan": [],
                              "textfile_dir": str(textfile), "textfile": table.FILTERS["host_prometheus"](rec)})
    assert out["textfile"] == str(textfile / "fleetqual.prom") and not test_dir.exists()
    text = (textfile / "fleetqual.prom").read_text()
    assert 'workload="over_cache-rndrd-t64@data1"' in text and 'workload="over_cache-rndrd-t64@data2"' in text
    assert "fleetqual_host_pass 0.0" in text
    tools.promtool_check(text)
    # and the fleet report: the failed drive's target fails, its other target passes
    f = fleet.aggregate({"localhost": rec}, run_id=RUN_ID)
    cases = {c.get("name"): c for c in tools.xmllint_junit(render_junit.render_junit(f)).iter("testcase")}
    assert "serial ZA1HDD0002" in cases["localhost data2"].find("failure").get("message")
    assert cases["localhost data1"].find("failure") is None
