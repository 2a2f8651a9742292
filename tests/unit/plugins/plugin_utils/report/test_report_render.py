"""Unit tests of plugins/plugin_utils/report/publish.py (every renderer) and of the qualify_report
callback driven directly with ansible's real AggregateStats, inventory and play objects."""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml
import unitpaths

FIXTURES = os.path.join(unitpaths.UNIT, "fixtures", "report")
ROOT = unitpaths.ROOT
sys.path.insert(0, FIXTURES)

import report_synth as synth  # noqa: E402
import report_tools as tools  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import baseline
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import fleet_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import fmt
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_svg
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import rows as report_rows  # noqa: E402

NOW = datetime.datetime(2026, 11, 21, 12, 30, 0, tzinfo=datetime.timezone.utc)
SMALL = [("cache", "rndrd", 1), ("cache", "rndrd", 64), ("over_cache", "rndwr", 64), ("log", "seqwr", 1)]


def sample_fleet(**options):
    """db1..db5 (db4 slow and failing a rule), web1 unreachable, web2 failed preflight,
    db6 with NaN / missing metrics, db7 with no workloads."""
    recs = {}
    for i in range(1, 6):
        name = "db%d" % i
        recs[name] = synth.make_record(name, matrix=SMALL, scale=0.45 if i == 4 else 1.0 + 0.02 * i,
                                       samples=6, seed=i)
    recs["db4"]["verdict"] = "FAIL"
    recs["db4"]["checks"].append(synth.failing_check("over_cache-rndwr-t64"))
    recs["db4"]["reasons"] = ["over_cache-rndwr-t64: iops 850 below 5000 (device vda: %util 99.8)"]
    recs["db6"] = synth.make_record("db6", matrix=SMALL, samples=0, seed=6)
    recs["db6"]["workloads"][0]["metrics"]["iops"] = float("nan")
    recs["db6"]["workloads"][1]["metrics"] = {}
    recs["db7"] = synth.make_record("db7", matrix=[], verdict="ERROR", reasons=["workload missing"], checks=[])
    play = {
        "web1": {"counts": {"unreachable": 1},
                 "unreachable": [{"task": "Gathering Facts", "msg": "ssh: connect to host web1 port 22: No route"}]},
        "web2": {"counts": {"failures": 1},
                 "failed": [{"task": "qualify : preflight | O_DIRECT", "msg": "tmpfs refuses O_DIRECT <&>\x01"}]},
    }
    return fleet.aggregate(recs, play=play, inventory={"web1": ["web"], "web2": ["web"]}, options=options,
                           now=NOW), recs


# --------------------------------------------------------------------------- table

def test_number_formats():
    assert fmt.cell_num(None) == "-" and fmt.cell_num(float("nan")) == "-"
    assert fmt.cell_num(812) == "812" and fmt.cell_num(12345) == "12.3k"
    assert fmt.cell_num(812345) == "812k" and fmt.cell_num(1234567) == "1.23M"
    assert fmt.cell_ms(0.1234) == "0.123" and fmt.cell_ms(12.34) == "12.3" and fmt.cell_ms(None) == "-"
    assert fmt.truncate("abcdef", 4) == "abc\u2026" and fmt.truncate(None, 3) == ""


def test_table_contents_and_summary():
    f, _records = sample_fleet()
    text = render_text.render_table(f)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["host", "workload", "thr", "IOPS"]
    for col in ("MiB/s", "p95ms", "p99ms", "%util", "await", "verdict", "first failing rule"):
        assert col in lines[0]
    assert any(line.startswith("db4 ") and "FAIL" in line for line in lines)
    assert any("min_iops" in line for line in lines)
    assert any(line.startswith("web1 ") and "UNREACH" in line and "unreachable: Gathering" in line for line in lines)
    assert any(line.startswith("web2 ") and "ERROR" in line for line in lines)
    db6 = [line for line in lines if "cache-rndrd-t" in line][10:12]
    assert db6 and all(" - " in line for line in db6)
    assert report_rows.summary_line(f) == "fleet: 5/9 hosts passed (PASS 5, FAIL 1, UNREACHABLE 1, ERROR 2)"


@pytest.mark.parametrize("width", [100, 80])
def test_table_width(width):
    recs = {}
    for i in range(3):
        name = "very-long-hostname-number-%d.datacenter-east.example.com" % i
        recs[name] = synth.make_record(name, matrix=[("over_cache_with_a_long_label", "rndrw", 1024)], samples=2)
    recs[name]["verdict"] = "FAIL"
    recs[name]["checks"] = [dict(synth.failing_check("over_cache_with_a_long_label-rndrw-t1024"),
                                 rule="max_read_p99_ms_under_sustained_load_rule_with_long_name")]
    play = {"x" * 80: {"counts": {"failures": 1}, "failed": [{"task": "t" * 200, "msg": "m" * 500}]}}
    f = fleet.aggregate(recs, play=play, now=NOW)
    f["hosts"][0]["workloads"][0]["iops"] = 123456789012.0
    text = render_text.render_table(f, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    for line in render_text.detail_lines(f, width=width):
        assert len(line) <= width
    assert "\u2026" in text


def test_table_empty_fleet():
    f = fleet.aggregate({}, now=NOW)
    text = render_text.render_table(f)
    assert "(no hosts)" in text
    assert report_rows.summary_line(f) == "fleet: 0/0 hosts passed (PASS 0, FAIL 0, UNREACHABLE 0, ERROR 0)"
    assert render_text.detail_lines(f) == []


def test_detail_lines_group_outliers_per_host():
    f, _records = sample_fleet()
    lines = render_text.detail_lines(f)
    assert any(line.startswith("FAIL db4:") for line in lines)
    assert any(line.startswith("UNREACHABLE web1:") for line in lines)
    out = [line for line in lines if line.startswith("outlier")]
    assert len(out) == 1 and "db4" in out[0] and "iops low" in out[0]


# --------------------------------------------------------------------------- JSON

def test_json_roundtrip_no_nan():
    f, _records = sample_fleet()
    text = fleet_json.to_json(f)
    data = json.loads(text)
    assert "NaN" not in text
    assert data["schema"] == "fleetqual.fleet" and data["schema_version"] == fleet_json.SCHEMA_VERSION
    assert {h["host"] for h in data["hosts"]} >= {"db1", "web1", "web2", "db6", "db7"}
    h = next(h for h in data["hosts"] if h["host"] == "db4")
    for key in ("verdict", "record_verdict", "reasons", "checks", "outliers", "regressions", "workloads",
                "group", "play", "first_failing_rule"):
        assert key in h
    for key in ("id", "iops", "mibps", "p95_ms", "p99_ms", "util_pct", "await_ms", "metrics", "baseline"):
        assert key in h["workloads"][0]


# --------------------------------------------------------------------------- JUnit

def _validate_junit(text, tmp_path):
    return tools.xmllint_junit(text)


def test_junit_valid_and_carries_evidence(tmp_path):
    """One test case per host and target, one suite per group; the failure message is the
    first reason, its text the measured value, limit and device evidence (what GitLab and
    Jenkins show); valid against the public junit-10.xsd with xmllint."""
    f, _records = sample_fleet(outliers="fail")
    text = render_junit.render_junit(f)
    root = _validate_junit(text, tmp_path)
    assert "skipped" not in root.attrib                     # not allowed on <testsuites> by junit-10.xsd
    cases = {c.get("name").split(" ")[0]: c for c in root.iter("testcase")}
    assert set(cases) == {h["host"] for h in f["hosts"]}
    assert all(c.get("name").endswith(" /var/tmp/fleetqual") for n, c in cases.items() if n.startswith("db"))
    assert {s.get("name") for s in root.findall("testsuite")} == {"fleetqual.db", "fleetqual.web"}
    db4 = cases["db4"]
    assert db4.get("classname") == "fleetqual.db" and float(db4.get("time")) > 0
    fail = db4.find("failure")
    assert fail.get("type") == "min_iops" and "850" in fail.get("message") and "5000" in fail.get("message")
    assert "%util 99.8" in fail.text and "measured 850" in fail.text
    assert "over_cache-rndwr-t64: iops" in db4.find("system-out").text
    web1 = cases["web1"]
    err = web1.findall("error")
    assert len(err) == 1 and err[0].get("type") == "UNREACHABLE" and "Gathering Facts" in err[0].get("message")
    web2 = cases["web2"].find("error")
    assert web2.get("type") == "ERROR" and "O_DIRECT" in web2.get("message") and "<&>" in web2.get("message")
    assert "\x01" not in text
    assert cases["db1"].find("failure") is None and cases["db1"].find("error") is None
    web_suite = next(s for s in root.findall("testsuite") if s.get("name") == "fleetqual.web")
    assert web_suite.get("errors") == "2" and web_suite.get("tests") == "2"
    # outliers: fail -> db4's text carries the outlier too
    assert "fleet outlier (fail)" in fail.text


def test_junit_empty_fleet_is_valid(tmp_path):
    root = _validate_junit(render_junit.render_junit(fleet.aggregate({}, now=NOW)), tmp_path)
    assert root.get("tests") == "0"


def test_the_schema_rejects_what_jenkins_would_skip():
    """xmllint with the public schema catches a missing attribute and ``skipped`` on
    <testsuites> (Jenkins skips such a file), so a valid report means something."""
    assert tools.xmllint_rejects('<testsuites><testsuite name="a" tests="1"><testcase name="x"/></testsuite>'
                                 '</testsuites>')
    good = render_junit.render_junit(sample_fleet()[0])
    assert not tools.xmllint_rejects(good)
    assert tools.xmllint_rejects(good.replace("<testsuites ", '<testsuites skipped="0" ', 1))


# --------------------------------------------------------------------------- HTML, Markdown

def test_html_self_contained_with_charts():
    f, recs = sample_fleet()
    text = render_html.render_html(f, recs)
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text)
    assert "@import" not in text and "url(" not in text
    assert text.count("<svg") >= 2 * 4 + 1
    assert "IOPS by threads" in text and "p99 latency by threads" in text
    assert 'class="outlier"' in text
    assert "polygon class=\"utilarea\"" in text and "awline" in text
    assert "no iostat samples" in text         # db6 has none
    assert "fleet: 5/9 hosts passed" in text
    assert "&lt;&amp;&gt;" in text              # messages escaped
    ET.fromstring(re.search(r"<svg.*?</svg>", text, re.S).group(0))   # SVG well-formed


def test_each_fleet_distribution_chart_is_titled_with_the_metric_it_draws():
    """Read back from report.html: each strip chart of the fleet distribution draws one
    figure of one workload (its dots' values are the hosts' IOPS, p50 or p99 of that
    workload, found from the fleet, not from the renderer's table), and its title and axis
    name exactly that figure."""
    f, recs = sample_fleet()
    text = render_html.render_html(f, recs)
    section = text[text.index("<h2>Fleet distribution</h2>"):]
    section = section[:section.index("<h2>", 1)]
    shown = {}      # workload id -> figure -> {host: the value as a chart's dot shows it}
    for h in f["hosts"]:
        for w in h["workloads"]:
            for figure in ("iops", "p50_ms", "p99_ms"):
                if w.get(figure) is not None:
                    shown.setdefault(w["id"], {}).setdefault(figure, {})[h["host"]] = render_svg._axis_label(w[figure])
    names = {"iops": "IOPS", "p50_ms": "p50 latency, ms", "p99_ms": "p99 latency, ms"}
    ns = {"s": "http://www.w3.org/2000/svg"}
    drawn = []
    for svg in re.findall(r"<svg\b.*?</svg>", section, re.S):
        root = ET.fromstring(svg)
        wid, _sep, label = root.find("s:text[@class='ct']", ns).text.partition(": ")
        axis = root.find("s:text[@class='al']", ns).text
        dots = dict(t.text.replace(" (outlier)", "").rsplit(": ", 1) for t in root.iter("{%s}title" % ns["s"])
                    if "(outlier)" in t.text or t.text.count(": ") == 1)
        assert dots, svg[:300]
        figures = [fig for fig, by_host in shown[wid].items() if all(by_host.get(hh) == v for hh, v in dots.items())]
        assert len(figures) == 1, (wid, label, dots, figures)
        assert label == axis == names[figures[0]], (wid, label, axis, figures[0])
        drawn.append((wid, figures[0]))
    assert sorted(drawn) == sorted((wid, fig) for wid, by_fig in shown.items() for fig in by_fig)
    assert {fig for _wid, fig in drawn} == {"iops", "p50_ms", "p99_ms"}


def test_html_empty_fleet_and_detail_limit():
    text = render_html.render_html(fleet.aggregate({}, now=NOW))
    assert "No hosts in this run." in text and "No measurements to plot." in text
    f, recs = sample_fleet()
    text = render_html.render_html(f, recs, detail_hosts=2)
    assert "not drawn in detail" in text
    assert text.count('IOPS by threads"') == 1      # db4 (FAIL) first, then db7 (ERROR, no workloads)


def test_svg_builders_handle_no_data():
    assert "no data" in render_svg.svg_line_chart("t", [], [], "IOPS")
    assert "no data" in render_svg.svg_strip_chart("t", [], "IOPS")
    assert "no iostat samples" in render_svg.svg_timeseries("t", [])
    one = render_svg.svg_timeseries("t", [(1.0, 50.0, None)])
    assert "utilarea" in one


def test_markdown():
    f, _records = sample_fleet()
    text = render_markdown.render_markdown(f)
    assert "**fleet: 5/9 hosts passed" in text
    assert "| host | workload | threads | IOPS |" in text
    assert "### db4 — FAIL" in text and "### web1 — UNREACHABLE" in text
    assert "## Fleet outliers (warn)" in text and "| db4 | db |" in text
    assert "No baseline given." in text
    empty = render_markdown.render_markdown(fleet.aggregate({}, now=NOW))
    assert "No hosts in this run." in empty and "All hosts passed." in empty


def test_write_reports(tmp_path):
    f, recs = sample_fleet()
    out = report.write_reports(f, str(tmp_path / f["run_id"]), ["table", "json", "junit", "html", "md"], recs)
    assert sorted(out) == ["html", "json", "junit", "limit", "md"]
    assert sorted(os.listdir(tmp_path / f["run_id"])) == ["fleet.json", "junit.xml", "not-passed.limit",
                                                          "report.html", "report.md"]
    # the hosts to run again, one per line, for --limit @file
    assert (tmp_path / f["run_id"] / "not-passed.limit").read_text().split() == \
        [h["host"] for h in f["hosts"] if h["verdict"] != "PASS"] == ["db4", "db7", "web1", "web2"]
    json.loads((tmp_path / f["run_id"] / "fleet.json").read_text())


def test_baseline_sections(tmp_path):
    f0, _records = sample_fleet()
    p = tmp_path / "fleet.json"
    p.write_text(fleet_json.to_json(f0))
    recs = {n: synth.make_record(n, matrix=SMALL, scale=0.5 if n == "db2" else 1.0, samples=2)
            for n in ("db1", "db2", "db3")}
    f = fleet.aggregate(recs, baseline=baseline.load_baseline(str(p)), options={"regressions": "fail"}, now=NOW)
    md = render_markdown.render_markdown(f)
    assert "| db2 | cache-rndrd-t1 | iops |" in md
    html = render_html.render_html(f, recs)
    assert 'id="regressions"' in html
    junit = render_junit.render_junit(f)
    assert 'type="baseline regression"' in junit and "baseline regression (fail): cache-rndrd-t1 iops" in junit
    tools.xmllint_junit(junit)
    assert any("regression" in line for line in render_text.detail_lines(f))


# --------------------------------------------------------------------------- callback

class FakeDisplay:
    verbosity = 0

    def __init__(self):
        self.lines = []
        self.warnings = []

    def display(self, msg, color=None, stderr=False, screen_only=False, log_only=False, newline=True):
        self.lines.extend(str(msg).splitlines())

    def banner(self, msg, color=None, cows=True):
        self.lines.append("*** %s" % msg)

    def warning(self, msg, formatted=False):
        self.warnings.append(msg)

    def vvv(self, msg, host=None):
        self.warnings.append(msg)

    def __getattr__(self, name):           # v, vv, deprecated, ...
        return lambda *a, **k: None


def _callback(display, **options):
    from ansible import constants as C
    from ansible_collections.fleetqual.storage.plugins.callback import qualify_report as mod

    name = "fleetqual.storage.qualify_report"
    C.config.initialize_plugin_configuration_definitions("callback", name,
                                                         yaml.safe_load(mod.DOCUMENTATION)["options"])
    cb = mod.CallbackModule(display=display)
    cb._load_name = name
    cb.set_options(direct=options)
    assert cb.CALLBACK_TYPE == "aggregate" and cb.CALLBACK_NEEDS_ENABLED is True
    assert cb.CALLBACK_NAME == name and cb.CALLBACK_VERSION == 2.0
    return cb


def _play(tmp_path):
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play import Play
    from ansible.vars.manager import VariableManager

    inv = tmp_path / "hosts.ini"
    inv.write_text("[db]\ndb1\ndb2\ndb3\ndb4\n[web]\nweb1\nweb2\nweb3\n")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inv)])
    vm = VariableManager(loader=loader, inventory=inventory)
    play = Play.load({"name": "qualify", "hosts": "all", "gather_facts": False, "tasks": []},
                     variable_manager=vm, loader=loader)
    return play, inventory


def _result(inventory, host, task_name, data):
    from ansible.executor.task_result import CallbackTaskResult
    from ansible.playbook.task import Task

    task = Task.load({"name": task_name, "action": "ansible.builtin.command", "args": {"cmd": "true"}})
    return CallbackTaskResult(inventory.get_host(host), task, data, {"name": task_name})


def test_callback_with_real_aggregate_stats(tmp_path):
    from ansible.executor.stats import AggregateStats

    results = tmp_path / "results"
    play, inventory = _play(tmp_path)
    display = FakeDisplay()
    prom = tmp_path / "textfile" / "fleetqual.prom"
    cb = _callback(display, prometheus_textfile=str(prom))
    cb.v2_playbook_on_play_start(play)

    stats = AggregateStats()
    run_id = "20261121T120000Z"
    for name in ("db1", "db2", "db3", "db4", "web3"):
        rec = synth.make_record(name, group="web" if name.startswith("web") else "db", matrix=SMALL,
                                scale=1.0 + 0.01 * int(name[-1]), samples=4, results_dir=str(results), run_id=run_id)
        if name == "db4":
            rec["verdict"] = "FAIL"
            rec["checks"].append(synth.failing_check("cache-rndrd-t1"))
            rec["reasons"] = ["cache-rndrd-t1: iops 850 below 5000"]
        for _n in range(5):
            stats.increment("ok", name)
        # what ansible.builtin.set_stats (per_host: true, aggregate: false) does
        stats.set_custom_stats("fleetqual_report", rec, name)
    stats.set_custom_stats("global_thing", {"x": 1})            # a '_run' stat must be ignored

    # db4: the final verdict gate fails it -> stays FAIL
    stats.increment("failures", "db4")
    cb.v2_runner_on_failed(_result(inventory, "db4", "fleet verdict gate", {"failed": True, "msg": "FAIL"}))
    # web1: unreachable from the start
    stats.increment("dark", "web1")
    cb.v2_runner_on_unreachable(_result(inventory, "web1", "Gathering Facts",
                                        {"unreachable": True, "msg": "Failed to connect to the host via ssh"}))
    # web2: failed preflight
    stats.increment("ok", "web2")
    stats.increment("failures", "web2")
    cb.v2_runner_on_failed(_result(inventory, "web2", "qualify : preflight | check O_DIRECT",
                                   {"failed": True, "msg": "O_DIRECT refused on tmpfs"}))
    # db3: an ignored failure does not count
    cb.v2_runner_on_failed(_result(inventory, "db3", "optional", {"failed": True, "msg": "meh"}), ignore_errors=True)
    stats.increment("ignored", "db3")
    # web3: record PASS, then the cleanup failed
    stats.increment("failures", "web3")
    cb.v2_runner_on_failed(_result(inventory, "web3", "qualify : cleanup", {"failed": True, "msg": "busy"}))

    cb.v2_playbook_on_stats(stats)
    assert display.warnings == []

    run_dir = results / run_id
    # history.d/: each host's summary of the run for its own history (plugin_utils/history/drift.py)
    assert sorted(os.listdir(run_dir)) == ["fleet.d", "fleet.json", "history.d", "junit.xml", "not-passed.limit",
                                           "report.html", "report.md"]
    # the hosts' summaries for a later merge of the run (playbooks/report.yml): every host,
    # the unreachable and failed ones too
    (entries,) = [n for n in os.listdir(run_dir / "fleet.d") if n.endswith(".jsonl")]
    stored = [json.loads(line) for line in (run_dir / "fleet.d" / entries).read_text().splitlines()]
    assert sorted(e["host"] for e in stored) == ["db1", "db2", "db3", "db4", "web1", "web2", "web3"]
    data = json.loads((run_dir / "fleet.json").read_text())
    verdicts = {h["host"]: h["verdict"] for h in data["hosts"]}
    assert verdicts == {"db1": "PASS", "db2": "PASS", "db3": "PASS", "db4": "FAIL", "web1": "UNREACHABLE",
                        "web2": "ERROR", "web3": "ERROR"}
    hosts = {h["host"]: h for h in data["hosts"]}
    assert "check O_DIRECT" in hosts["web2"]["reasons"][0] and "tmpfs" in hosts["web2"]["reasons"][0]
    assert hosts["web3"]["record_verdict"] == "PASS" and "cleanup" in hosts["web3"]["reasons"][-1]
    assert hosts["web1"]["group"] == "web"

    table = [line for line in display.lines if not line.startswith("***")]
    assert "fleet: 3/7 hosts passed (PASS 3, FAIL 1, UNREACHABLE 1, ERROR 2)" in table
    # the callback's default table_width (110 since the table names each row's latency op)
    from ansible_collections.fleetqual.storage.plugins.callback import qualify_report
    width = yaml.safe_load(qualify_report.DOCUMENTATION)["options"]["table_width"]["default"]
    assert width == 110
    assert max(len(line) for line in table if not line.startswith("fleet report:")) <= width
    assert any(line.startswith("web1 ") and "UNREACH" in line for line in table)
    tools.xmllint_junit((run_dir / "junit.xml").read_text())

    hist = (results / "history.jsonl").read_text().splitlines()
    assert len(hist) == 7 and json.loads(hist[0])["run_id"] == run_id
    assert "fleetqual_host_pass{group=\"db\",host=\"db4\"} 0.0" in prom.read_text()

    # Every format rendered again from the stored fleet.json alone equals what
    # the callback wrote (no host record is read: they are moved away first)
    again = tmp_path / "again"
    written = report.rerender(str(run_dir / "fleet.json"), str(again), formats=("json", "junit", "html", "md"))
    assert sorted(written) == ["html", "json", "junit", "limit", "md"]
    for name in ("fleet.json", "junit.xml", "report.html", "report.md", "not-passed.limit"):
        assert (again / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert "<svg" in (again / "report.html").read_text() and "db4" in (again / "report.html").read_text()


def test_a_host_the_start_could_not_reach_is_unreachable_though_it_answered_the_gate(tmp_path):
    """The role's start ignores an unreachable host (so the rest of its batch goes on) and
    ends it; ansible counts that ok and ignored, and the gate's ping may find it back. It was
    not measured: UNREACHABLE with the start's message, in fleet.json and the table alike. A
    host with a record whose unreachable moment ansible ignored keeps its verdict."""
    from ansible.executor.stats import AggregateStats

    results = tmp_path / "results"
    play, inventory = _play(tmp_path)
    display = FakeDisplay()
    cb = _callback(display)
    cb.v2_playbook_on_play_start(play)
    stats = AggregateStats()
    run_id = "20261130T120000Z"
    for name in ("db1", "db2"):
        rec = synth.make_record(name, group="db", matrix=SMALL, scale=1.0, samples=4, results_dir=str(results),
                                run_id=run_id)
        stats.increment("ok", name)
        stats.set_custom_stats("fleetqual_report", rec, name)
    away = "Data could not be sent to remote host: Connection timed out during banner exchange"
    for name in ("db2", "web1"):            # what the strategy does for ignore_unreachable
        stats.increment("ok", name)
        stats.increment("ignored", name)
        cb.v2_runner_on_unreachable(_result(inventory, name, "qualify : Check, deploy and start",
                                            {"unreachable": True, "msg": away}))
    stats.increment("ok", "web1")           # the gate's ping answered
    cb.v2_playbook_on_stats(stats)

    data = json.loads((results / run_id / "fleet.json").read_text())
    hosts = {h["host"]: h for h in data["hosts"]}
    assert {n: h["verdict"] for n, h in hosts.items() if n in ("db1", "db2", "web1")} == \
        {"db1": "PASS", "db2": "PASS", "web1": "UNREACHABLE"}
    assert hosts["web1"]["reasons"] == ["unreachable at task 'qualify : Check, deploy and start': %s" % away]
    assert hosts["web1"]["play"]["unreachable_task"]["msg"] == away
    assert hosts["db2"]["play"]["unreachable_task"] is None
    assert any(line.startswith("web1 ") and "UNREACH" in line for line in display.lines)


def test_callback_options_formats_and_bad_baseline(tmp_path):
    from ansible.executor.stats import AggregateStats

    display = FakeDisplay()
    out = tmp_path / "out"
    cb = _callback(display, output_dir=str(out), formats=["json", "bogus"], history=False,
                   baseline=str(tmp_path / "missing.json"))
    stats = AggregateStats()
    cb.v2_playbook_on_stats(stats)            # empty fleet: no hosts at all
    assert any("baseline not used" in w for w in display.warnings)
    assert any("unknown formats ignored: bogus" in w for w in display.warnings)
    run_dirs = os.listdir(out)
    assert len(run_dirs) == 1 and re.match(r"^\d{8}T\d{6}Z$", run_dirs[0])
    assert sorted(os.listdir(out / run_dirs[0])) == ["fleet.d", "fleet.json", "not-passed.limit"]
    assert not (out / "history.jsonl").exists()
    assert "fleet: 0/0 hosts passed (PASS 0, FAIL 0, UNREACHABLE 0, ERROR 0)" in display.lines
    assert not any(line.startswith("host ") for line in display.lines), "no table when not asked"
    data = json.loads((out / run_dirs[0] / "fleet.json").read_text())
    assert any("baseline not used" in n for n in data["notes"])


def test_callback_never_raises(tmp_path):
    display = FakeDisplay()
    cb = _callback(display, output_dir=str(tmp_path / "f"))
    (tmp_path / "f").write_text("a file where a directory is needed")

    class Stats:
        custom = {"h": {"fleetqual_report": synth.make_record("h", matrix=SMALL, samples=1)}}
        processed = {"h": 1}

        def summarize(self, host):
            return {"ok": 1, "failures": 0, "unreachable": 0}

    cb.v2_playbook_on_stats(Stats())
    assert any("could not build the fleet report" in w for w in display.warnings)


def test_ansible_doc_renders_the_callback():
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    if not os.path.exists(ansible_doc):
        ansible_doc = shutil.which("ansible-doc")
    if not ansible_doc:
        pytest.skip("ansible-doc not found")
    root = unitpaths.ROOT
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"), ANSIBLE_NOCOLOR="1")
    res = subprocess.run([ansible_doc, "-t", "callback", "fleetqual.storage.qualify_report"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    for option in ("output_dir", "formats", "outliers", "regressions", "baseline", "outlier_mad_score",
                   "outlier_pct_below", "regression_tolerance_pct", "history", "prometheus_textfile"):
        assert option in res.stdout
    assert "FLEETQUAL_REPORT_DIR" in res.stdout and "fleetqual_report" in res.stdout


# --------------------------------------------------------------------------- one column table

def test_a_column_added_to_the_column_table_shows_in_every_format(monkeypatch):
    """report_rows.COLUMNS is the one place the fleet table's columns are defined: a column
    added there is in the terminal table, report.md and report.html, heading and cells."""
    f, _records = sample_fleet()
    before = (render_text.render_table(f, width=200), render_markdown.render_markdown(f), render_html.render_html(f))
    assert not any("queue depth" in text or "qdep" in text for text in before)
    qd = report_rows.Column("qd", "qdep", "queue depth", "queue depth (aqu-sz)", align=">", width=(4, 6),
                            cell=lambda h, w: fmt.cell_num((w.get("metrics") or {}).get("dev_aqu_sz")))
    cols = list(report_rows.COLUMNS)
    cols.insert([c.key for c in cols].index("verdict"), qd)
    monkeypatch.setattr(report_rows, "COLUMNS", cols)

    lines = render_text.render_table(f, width=200).splitlines()
    header = lines[0].split()
    assert header[header.index("await") + 1] == "qdep"
    db1 = [line for line in lines if line.startswith("db1 ")][0].split()
    assert db1[db1.index("PASS") - 1] == "1.00"          # synth's dev_aqu_sz 1.0, left of the verdict

    md = render_markdown.render_markdown(f).splitlines()
    head = [line for line in md if line.startswith("| host | workload")][0]
    assert "| await ms | queue depth | verdict |" in head
    align = md[md.index(head) + 1].strip("|").split("|")
    assert len(align) == head.count("|") - 1 and align[head.strip("|").split("|").index(" queue depth ")] == "---:"
    assert any(line.startswith("| db1 | cache-rndrd-t1 |") and line.endswith("| 1.00 | PASS | - |") for line in md)

    page = render_html.render_html(f)
    assert '<th class="n">await ms</th><th class="n">queue depth (aqu-sz)</th><th>verdict</th>' in page
    row = re.search(r'<tr class="first"><td rowspan="4"><strong>db1</strong></td>.*?</tr>', page).group(0)
    assert '<td class="n">1.00</td><td rowspan="4"><span class="badge PASS">' in row


# --------------------------------------------------------------------------- the callback only observes

def test_the_callback_sets_no_play_variable_and_reports_nothing_for_a_merge_play(tmp_path, monkeypatch):
    """The gate's verdicts come from the action fleet_verdicts and the run's merge from the
    action fleet_report (playbooks/qualify.yml, report.yml): the callback writes no play
    variable when those plays start, and a merge play's own end is no fleet report."""
    from ansible.executor.stats import AggregateStats
    from ansible.playbook.play import Play

    monkeypatch.chdir(tmp_path)
    play, inventory = _play(tmp_path)
    display = FakeDisplay()
    cb = _callback(display)
    for role in ("gate", "merge"):
        p = Play.load({"name": role, "hosts": "all", "gather_facts": False, "tasks": [],
                       "vars": {"_fleetqual_report_play": role}},
                      variable_manager=play.get_variable_manager(), loader=play._loader)
        before = dict(p.vars)
        cb.v2_playbook_on_play_start(p)
        assert p.vars == before
    stats = AggregateStats()
    stats.increment("ok", "db1")
    cb.v2_playbook_on_stats(stats)
    assert cb.last_fleet is None and cb.written == {} and not os.path.exists(tmp_path / "results")
    assert not any("FLEET REPORT" in str(line) for line in display.lines)


def test_the_results_dir_default_is_defined_once(tmp_path, monkeypatch):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import config as report_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLEETQUAL_RESULTS_DIR", raising=False)
    assert report_config.default_results_dir() == os.path.join(str(tmp_path), "results")
    from ansible_collections.fleetqual.storage.plugins.lookup.results_dir import LookupModule
    lookup = LookupModule()          # lookup('fleetqual.storage.results_dir'): for the role's default
    assert lookup.run([]) == [os.path.join(str(tmp_path), "results")]
    monkeypatch.setenv("FLEETQUAL_RESULTS_DIR", "/srv/fleetqual/results")
    assert report_config.default_results_dir() == "/srv/fleetqual/results"
    assert lookup.run([]) == ["/srv/fleetqual/results"]
    # the callback and the report action use it; no other default is written in the plugins
    for path in ("plugins/callback/qualify_report.py", "plugins/action/fleet_report.py",
                 "plugins/plugin_utils/fleet/run_store.py", "plugins/plugin_utils/fleet/aggregate.py"):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        assert not re.search(r'(join\(.*|default=)"results"\)', text), path
        assert 'environ.get("FLEETQUAL_RESULTS_DIR"' not in text, path
