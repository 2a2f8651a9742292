"""The report option ``table_max_hosts``: past that many hosts the terminal lists
only the hosts that did not pass (each in full), one line counting the PASS hosts, the
flagged drives and the diagnostics of the hosts that did not pass; unset, every host.
Driven through the qualify_report callback's own options and report.publish, as the
callback and the fleet_report action print the report."""
from __future__ import annotations

import configparser
import os
import re

import pytest

from test_report_render import NOW, ROOT, SMALL, FakeDisplay, _callback, synth

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleetmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import config as report_config


def _fleet(n, fail=()):
    """n hosts h01.. with the same figures (PASS, no outlier), each with a diagnostic and a
    drive; the hosts in ``fail`` fail a rule (their NVMe drive failed too)."""
    recs = {}
    for i in range(1, n + 1):
        name = "h%02d" % i
        recs[name] = synth.make_record(name, matrix=SMALL, samples=2, seed=1)
        if name in fail:
            recs[name]["verdict"] = "FAIL"
            recs[name]["checks"].append(synth.failing_check("over_cache-rndwr-t64"))
            recs[name]["reasons"] = ["over_cache-rndwr-t64: iops 850 below 5000 (device vda: %util 99.8)"]
    f = fleetmod.aggregate(recs, now=NOW)
    f["drives"] = []
    for h in f["hosts"]:
        bad = h["host"] in fail
        h["diagnostics"] = {"cache_proof": {"status": "warn" if bad else "pass", "conclusion": "x",
                                            "sentence": "the disk served the over-cache reads of %s" % h["host"]}}
        f["drives"].append({"host": h["host"], "drive": "nvme0n1", "model": "PM9A3", "serial": "S%s" % h["host"],
                            "firmware": "GDC5602Q", "health": "FAILED" if bad else "PASSED",
                            "verdict": "FAIL" if bad else "PASS", "reasons": ["media errors"] if bad else []})
    return f


def _printed(tmp_path, f, **options):
    """The lines publish puts on the terminal with the callback's options (format table only)."""
    display = FakeDisplay()
    cb = _callback(display, output_dir=str(tmp_path), formats=["table"], history=False, **options)
    report.publish(f, str(tmp_path), str(tmp_path / f["run_id"]), cb.get_option, display, history=False)
    return display.lines, display.warnings


def _shape(lines):
    return [re.sub(r"(host)s\b", r"\1", re.sub(r"\d+", "N", ln)) for ln in lines]


def test_one_and_fifty_passing_hosts_print_the_same_lines_with_table_max_hosts_0(tmp_path):
    one, _w = _printed(tmp_path / "1", _fleet(1), table_max_hosts=0)
    fifty, _w = _printed(tmp_path / "50", _fleet(50), table_max_hosts=0)
    assert len(one) == len(fifty), "\n".join(one) + "\n----\n" + "\n".join(fifty)
    assert _shape(one) == _shape(fifty)
    text = "\n".join(fifty)
    # no host is named; what was left out is counted
    assert not re.search(r"\bh\d\d\b", text), text
    assert "... 50 PASS hosts not listed (table_max_hosts 0: only the hosts that did not pass)" in fifty
    assert "... 1 PASS host not listed (table_max_hosts 0: only the hosts that did not pass)" in one
    assert "... 50 more drives without findings (see fleet.json)" in fifty
    assert any(ln.startswith("... diagnostics of 50 PASS hosts (0 with a warning or failure)") for ln in fifty)
    assert fifty[-1] == "fleet: 50/50 hosts passed (PASS 50, FAIL 0, UNREACHABLE 0, ERROR 0)"
    # a group too small to judge: one line however many groups and hosts, as for a judged one
    assert not any(ln.startswith("note: group") for ln in one)
    assert any(ln.startswith("outliers (warn): 0 of 1 group judged (a group needs 3 hosts") for ln in one)
    assert any(ln.startswith("outliers (warn): 1 of 1 group judged (a group needs 3 hosts") for ln in fifty)
    # the table itself: its header, its rule and the count line, whatever the size
    start = next(i for i, ln in enumerate(fifty) if ln.startswith("host "))
    assert fifty[start + 2].startswith("... 50 PASS hosts")


@pytest.mark.parametrize("max_hosts", [0, 10])
def test_a_failing_host_is_printed_in_full_among_fifty(tmp_path, max_hosts):
    f = _fleet(50, fail=("h17",))
    lines, _w = _printed(tmp_path, f, table_max_hosts=max_hosts)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("host "))
    table = lines[start:start + 2 + len(SMALL) + 1]
    rows = table[2:2 + len(SMALL)]
    # every workload row of h17, the first with its host, verdict and failing rule, none cut short
    assert rows[0].startswith("h17 ") and " FAIL " in rows[0]
    want = [w["id"] for w in f["hosts"][16]["workloads"]]
    assert [r.split()[0] for r in rows[1:]] == want[1:] and want[0] in rows[0]
    assert any(r.endswith("min_iops") for r in rows)
    assert not any("\u2026" in r for r in rows)
    assert table[-1].startswith("... 49 PASS hosts not listed (table_max_hosts %d" % max_hosts)
    text = "\n".join(lines)
    assert "FAIL h17: over_cache-rndwr-t64: iops 850 below 5000 (device vda: %util 99.8)" in lines
    # the drive table: the failed drive, the others counted; the diagnostics of h17 only
    assert re.search(r"^h17 +nvme0n1 .* FAILED +FAIL +media errors$", text, re.M), text
    assert "... 49 more drives without findings (see fleet.json)" in lines
    assert "diagnostics h17:" in lines and "[warn] the disk served the over-cache reads of h17" in text
    assert "... diagnostics of 49 PASS hosts (0 with a warning or failure) in report.html, report.md and fleet.json" in lines
    for other in ("h01", "h16", "h18", "h50"):
        assert other not in text


def test_unset_or_not_exceeded_lists_every_host_as_before(tmp_path):
    f = _fleet(12, fail=("h03",))
    width = 110
    before = [render_text.render_table(f, width=width), "drives (%s):" % f["options"]["drives"],
              render_text.render_drive_table(f, width=width)] + render_text.detail_lines(f, width=width)
    before = "\n".join(before).splitlines()
    unset, _w = _printed(tmp_path / "unset", f)
    assert unset[1:1 + len(before)] == before            # after the banner
    for max_hosts in (12, 100):                         # not more hosts than that: every host
        lines, _w = _printed(tmp_path / str(max_hosts), f, table_max_hosts=max_hosts)
        assert lines == unset
    bounded, _w = _printed(tmp_path / "11", f, table_max_hosts=11)
    assert bounded != unset and "h04" in "\n".join(unset) and "h04" not in "\n".join(bounded)


def test_no_hosts_and_only_failing_hosts(tmp_path):
    empty = fleetmod.aggregate({}, now=NOW)
    assert "(no hosts)" in render_text.render_table(empty, max_hosts=0)
    f = _fleet(2, fail=("h01", "h02"))
    text = render_text.render_table(f, max_hosts=0)
    assert "PASS host" not in text and text.count(" FAIL ") == 2      # nothing left out: no count line


def test_the_option_is_read_from_the_environment_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETQUAL_REPORT_TABLE_MAX_HOSTS", "7")
    cb = _callback(FakeDisplay())
    assert report_config.table_max_hosts(cb.get_option) == 7
    monkeypatch.delenv("FLEETQUAL_REPORT_TABLE_MAX_HOSTS")
    assert report_config.table_max_hosts(_callback(FakeDisplay()).get_option) is None

    def opts(value):
        return lambda key: {"table_max_hosts": value}[key]
    assert report_config.table_max_hosts(opts(None)) is None and report_config.table_max_hosts(opts("")) is None
    assert report_config.table_max_hosts(opts("3")) == 3 and report_config.table_max_hosts(opts(0)) == 0
    assert report_config.table_max_hosts(lambda key: {}[key]) is None     # a plugin without the option
    for bad in (-1, "x", 1.5, True):
        with pytest.raises(ValueError):
            report_config.table_max_hosts(opts(bad))
    # a bad value: said once, every host listed
    f = _fleet(3)
    lines, warnings = _printed(tmp_path, f, table_max_hosts=-1)
    assert any("table_max_hosts" in w for w in warnings)
    assert sum(1 for ln in lines if re.match(r"h0[123] +cache-rndrd-t1 ", ln)) == 3


def test_the_example_config_prints_the_bounded_table():
    cfg = configparser.ConfigParser(inline_comment_prefixes=None)
    cfg.read(os.path.join(ROOT, "examples", "ansible.cfg"))
    section = cfg["fleetqual_report"]
    assert "table" in [x.strip() for x in section["formats"].split(",")]
    assert section["table_max_hosts"] == "0"


def test_warnings_of_passing_hosts_are_counted_not_listed_past_the_bound(tmp_path):
    """Warn-mode outliers of PASS hosts grow with the fleet (8 loopback hosts gave 3): past
    the bound one line counts them, so 1 and 8 passing hosts print the same lines; without
    the bound each is listed as before."""
    def with_outliers(f, hosts):
        f["outliers"] = [{"host": h, "group": "db", "metric": "iops", "direction": "high", "pct_from_median": 30.0,
                          "score": 5.0, "workload": "w", "worse": False} for h in hosts]
        return f

    one, _w = _printed(tmp_path / "1", with_outliers(_fleet(1), []), table_max_hosts=0)
    eight, _w = _printed(tmp_path / "8", with_outliers(_fleet(8), ["h02", "h05", "h07"]), table_max_hosts=0)
    assert len(one) == len(eight) and _shape(one) == _shape(eight), "\n".join(one) + "\n----\n" + "\n".join(eight)
    assert "passing hosts with warnings: 3 with outliers, 0 with history findings (see report.md, fleet.json)" in eight
    assert not any(ln.startswith("outlier (warn)") for ln in eight)
    listed, _w = _printed(tmp_path / "all", with_outliers(_fleet(8), ["h02", "h05", "h07"]))
    assert sum(ln.startswith("outlier (warn) h0") for ln in listed) == 3
    assert not any(ln.startswith("passing hosts with warnings") for ln in listed)
