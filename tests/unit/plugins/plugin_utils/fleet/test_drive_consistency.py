"""plugin_utils/fleet/drive_consistency.py: drive consistency across a group of like hosts.

Hosts are built as the drives module sees them: identity from a fake sysfs tree
(fixtures/drives/sysfs-host.json, one tree per host, with per-host file overrides such as
another firmware) and health from the recorded smartctl outputs."""
import copy

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import drives as dr
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.drive_consistency import (
    drive_findings,
    drive_of_record,
    drive_rows,
)
from test_drives import build_fake_sysfs, load
import unitpaths

HEALTH = {"nvme0n1": "smartctl-nvme-healthy.json", "sda": "smartctl-sata-ssd-healthy.json",
          "sdb": "smartctl-hdd-healthy.json"}


def host_record(tmp_path, host, n, group="db", overrides=None, drop=(), iops=10000.0, lat=1.0):
    """A host record with the drives of the fake host (serials made unique per host) and one
    workload on its NVMe drive as a raw device target."""
    files = {"nvme0n1": {"device/serial": "S64GNE0R6%05d" % n}, "sdb": {"device/serial": "ZA1HDD%04d" % n}}
    for name, changes in (overrides or {}).items():
        files.setdefault(name, {}).update(changes)
    sysfs, dev = build_fake_sysfs(str(tmp_path / host), overrides=files)
    drives = [d for d in dr.inventory(sysfs_root=sysfs, dev_root=dev)["drives"] if d["name"] not in drop]
    for d in drives:
        if d["name"] in HEALTH:
            d["health"] = dr.parse_smartctl(load(HEALTH[d["name"]]))
    nvme = [d for d in drives if d["name"] == "nvme0n1"][0]
    work = {"id": "over_cache-rndrd-t4", "target": "nvme", "target_kind": "device", "target_device": nvme["id_path"],
            "metrics": {"iops": iops, "lat_p99_ms": lat, "latency_op": "read", "errors": 0, "interrupted": False}}
    return {"host": host, "groups": [group], "facts": {}, "test_dir": "/var/tmp/fleetqual", "drives": drives,
            "workloads": [work]}


@pytest.fixture
def fleet(tmp_path):
    """Four like hosts; db04's NVMe drive runs another firmware."""
    hosts = [host_record(tmp_path, "db0%d" % i, i) for i in (1, 2, 3)]
    hosts.append(host_record(tmp_path, "db04", 4, overrides={"nvme0n1": {"device/firmware_rev": "GDC5603Q"}}))
    return hosts


def test_a_like_fleet_has_no_findings(tmp_path):
    hosts = [host_record(tmp_path, "db0%d" % i, i, iops=10000.0 + i) for i in (1, 2, 3, 4)]
    assert drive_findings(hosts) == []


def test_the_drive_with_another_firmware_is_flagged_with_its_serial(fleet):
    (f,) = drive_findings(fleet)
    assert (f["kind"], f["host"], f["group"], f["drive"], f["serial"], f["firmware"], f["severity"]) == (
        "firmware", "db04", "db", "nvme0n1", "S64GNE0R600004", "GDC5603Q", "warn")
    assert f["message"] == (
        "db04 drive nvme0n1 (SAMSUNG MZQL21T9HCJR-00A07, serial S64GNE0R600004, firmware GDC5603Q): firmware "
        "GDC5603Q differs from group db's majority GDC5602Q for model SAMSUNG MZQL21T9HCJR-00A07 (GDC5602Q on 3, "
        "GDC5603Q on 1 drives)")
    assert f["majority"] == "GDC5602Q"
    assert [x["severity"] for x in drive_findings(fleet, {"drives": "fail"})] == ["fail"]
    assert drive_findings(fleet, {"drives": "off"}) == []
    with pytest.raises(ValueError, match="drives: must be one of warn, fail, off, got 'loud'"):
        drive_findings(fleet, {"drives": "loud"})


def test_no_majority_firmware_reports_every_drive_of_the_split(tmp_path):
    hosts = [host_record(tmp_path, "a1", 1),
             host_record(tmp_path, "a2", 2, overrides={"nvme0n1": {"device/firmware_rev": "GDC5603Q"}})]
    found = drive_findings(hosts)
    assert [(f["kind"], f["host"], f["majority"]) for f in found] == [("firmware", "a1", None),
                                                                      ("firmware", "a2", None)]
    assert "with no majority firmware (GDC5602Q on 1, GDC5603Q on 1 drives)" in found[0]["message"]


def test_groups_are_judged_apart(fleet, tmp_path):
    web = host_record(tmp_path, "web01", 9, group="web", overrides={"nvme0n1": {"device/firmware_rev": "OTHER"}})
    found = drive_findings(fleet + [web])
    assert [(f["kind"], f["host"]) for f in found] == [("firmware", "db04")]


def test_odd_model_fewer_drives_and_less_capacity(tmp_path):
    hosts = [host_record(tmp_path, "db0%d" % i, i) for i in (1, 2, 3)]
    hosts.append(host_record(tmp_path, "db04", 4, drop=("sdb",),
                             overrides={"sda": {"device/model": "Micron_5300_MTFD"}}))
    found = {f["kind"]: f for f in drive_findings(hosts)}
    assert sorted(found) == ["capacity", "drive_count", "model"]
    assert found["model"]["host"] == "db04" and found["model"]["drive"] == "sda"
    assert found["model"]["message"].startswith(
        "db04 drive sda (Micron_5300_MTFD, serial WD-WX12A3456789, firmware 2B6Q): model Micron_5300_MTFD is on 1 of "
        "the 4 hosts of group db with SSDs, which have ")
    assert found["model"]["media"] == "ssd"
    # the SSDs of its peers, not their HDD (ST4000NM0295, rotational)
    assert "Samsung SSD 870 (1 per host)" in found["model"]["message"]
    assert "ST4000NM0295" not in found["model"]["message"]
    assert found["drive_count"]["message"] == ("db04: 5 drives, fewer than group db's median 6; fewer of: ST4000NM0295 "
                                               "(0, peers 1), Samsung SSD 870 (0, peers 1)")
    assert found["drive_count"]["drive"] is None
    assert found["capacity"]["message"].startswith("db04: ") and "less than group db's median" in \
        found["capacity"]["message"]


def test_an_hdd_is_compared_only_with_hdds(tmp_path):
    """A mixed fleet: three SSD hosts and one host that also has an HDD (the SAS ST4000NM0295,
    queue/rotational 1). The HDD has no HDD peer in its group, so it is no odd model of the
    SSDs'; the virtio disk every host has says rotational too but has no model, so it is no
    peer. Four hosts with HDDs, one of another model: that one is odd among the HDDs."""
    hosts = [host_record(tmp_path, "db0%d" % i, i, drop=("sdb",)) for i in (1, 2, 3)]
    hosts.append(host_record(tmp_path, "db04", 4))
    assert [f for f in drive_findings(hosts) if f["kind"] == "model"] == []
    hdd = [d for d in hosts[3]["drives"] if d["name"] == "sdb"][0]
    assert (hdd["rotational"], hdd["media"]) == (True, "hdd")

    hosts = [host_record(tmp_path, "h%d" % i, i) for i in (1, 2, 3)]
    hosts.append(host_record(tmp_path, "h4", 4, overrides={"sdb": {"device/model": "ST8000NM000A    "}}))
    (odd,) = [f for f in drive_findings(hosts) if f["kind"] == "model"]
    assert (odd["host"], odd["drive"], odd["media"]) == ("h4", "sdb", "hdd")
    assert odd["message"] == ("h4 drive sdb (ST8000NM000A, serial ZA1HDD0004, firmware DT31): model ST8000NM000A is "
                              "on 1 of the 4 hosts of group db with HDDs, which have ST4000NM0295 (1 per host)")


def test_drive_rows_carry_rotational_and_media_also_of_an_older_record(fleet):
    rows = {(r["host"], r["drive"]): r for r in drive_rows(fleet)}
    assert {d: (r["rotational"], r["media"]) for (h, d), r in rows.items() if h == "db01"} == {
        "nvme0n1": (False, "ssd"), "sda": (False, "ssd"), "sdb": (True, "hdd"), "sdc": (False, "ssd"),
        "vda": (True, "hdd"), "loop0": (False, "ssd")}
    # a record written before the inventory had media: the same media from its rotational
    old = copy.deepcopy(fleet[0])
    for d in old["drives"]:
        del d["media"]
    assert [(r["drive"], r["media"]) for r in drive_rows([old])] == [
        (r["drive"], r["media"]) for r in drive_rows(fleet[:1])]
    assert drive_findings([old] + fleet[1:]) == drive_findings(fleet)


def test_a_drives_results_against_the_same_model_across_the_fleet(fleet, tmp_path):
    fleet = copy.deepcopy(fleet)
    fleet.append(host_record(tmp_path, "db05", 5, iops=4000.0, lat=3.0))
    for i, h in enumerate(fleet[:4]):
        h["workloads"][0]["metrics"]["iops"] = 10000.0 + 50 * i
    found = [f for f in drive_findings(fleet, {"drives": "fail"}) if f["kind"] == "result"]
    assert [(f["host"], f["metric"], f["severity"], f["worse"]) for f in found] == [
        ("db05", "iops", "fail", True), ("db05", "lat_p99_ms", "fail", True)]
    iops = found[0]
    assert iops["serial"] == "S64GNE0R600005" and iops["value"] == 4000.0 and iops["median"] == 10050.0
    assert iops["message"].startswith(
        "db05 drive nvme0n1 (SAMSUNG MZQL21T9HCJR-00A07, serial S64GNE0R600005, firmware GDC5602Q): "
        "over_cache-rndrd-t4 on nvme IOPS 4000 vs median 10050 of 5 SAMSUNG MZQL21T9HCJR-00A07 drives")
    assert found[1]["message"].split(": ", 1)[1].startswith("over_cache-rndrd-t4 on nvme p99 read latency 3 ms vs "
                                                            "median 1 ms")
    # a drive better than its peers is reported, but never fails the fleet
    fleet[4]["workloads"][0]["metrics"].update(iops=30000.0, lat_p99_ms=1.0)
    (better,) = [f for f in drive_findings(fleet, {"drives": "fail"}) if f["kind"] == "result"]
    assert (better["host"], better["worse"], better["severity"]) == ("db05", False, "warn")
    assert better["message"].endswith("better than its peers)")


def test_too_few_drives_of_a_model_and_failed_runs_are_not_judged(fleet):
    fleet = copy.deepcopy(fleet[:2])
    fleet[1]["workloads"][0]["metrics"]["iops"] = 1.0
    assert [f for f in drive_findings(fleet) if f["kind"] == "result"] == []


def test_which_drive_a_record_ran_on():
    drives = [{"name": "sda", "path": "/dev/sda", "by_id": ["/dev/disk/by-id/ata-X"], "targets": ["/data1"]},
              {"name": "sdb", "path": "/dev/sdb", "targets": ["/data2", "/var/tmp/fleetqual"]},
              {"name": "sdc", "path": "/dev/sdc", "targets": ["/data2"]}]
    assert drive_of_record({"target_device": "/dev/disk/by-id/ata-X"}, drives)["name"] == "sda"
    assert drive_of_record({"target": "d1", "target_path": "/data1"}, drives)["name"] == "sda"
    assert drive_of_record({"target": "d2", "target_path": "/data2"}, drives) is None   # on two drives
    assert drive_of_record({"id": "x"}, drives, test_dir="/var/tmp/fleetqual")["name"] == "sdb"  # shorthand
    assert drive_of_record({"target_device": "/dev/nvme0n1"}, drives) is None


def test_robust_scale_is_mad_then_mean_deviation_then_zero():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import robust_scale
    assert robust_scale([1.0, 2.0, 3.0, 4.0, 100.0], 3.0) == (1.4826 * 1.0, "mad", 1.0)
    scale, method, mad = robust_scale([10.0, 10.0, 10.0, 4.0], 10.0)   # MAD 0: one deviating value still scores
    assert (method, mad) == ("meanad", 0.0) and scale == pytest.approx(1.2533 * 1.5)
    assert robust_scale([5.0, 5.0, None], 5.0) == (0.0, "none", 0.0)


def test_drive_table_rows_join_health_judge_checks_and_findings(fleet):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.drive_consistency import drive_rows
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
    fleet = copy.deepcopy(fleet)
    fleet[1]["drives"][1]["health"] = dr.parse_smartctl(load("smartctl-nvme-failing.json"))   # db02 nvme0n1
    for h in fleet:
        h["checks"] = judge([], [{"max_pending_sectors": 0}], drives=h["drives"])["checks"]
    findings = drive_findings(fleet, {"drives": "fail"})
    rows = {(r["host"], r["drive"]): r for r in drive_rows(fleet, findings)}
    assert len(rows) == 4 * 6
    ok = rows[("db01", "nvme0n1")]
    assert (ok["model"], ok["serial"], ok["firmware"], ok["health"], ok["verdict"]) == (
        "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R600001", "GDC5602Q", "PASSED", "PASS")
    sick = rows[("db02", "nvme0n1")]
    assert (sick["health"], sick["verdict"]) == ("FAILED", "FAIL")
    assert sick["reasons"][0].startswith("drive nvme0n1 (SAMSUNG MZQL21T9HCJR-00A07, serial S64GNE0R600002): the "
                                         "drive's own health verdict is FAILED")
    odd = rows[("db04", "nvme0n1")]   # healthy, but its firmware is not the group's: a fail finding
    assert (odd["health"], odd["verdict"]) == ("PASSED", "FAIL") and "differs from group db's majority" in \
        odd["findings"][0]
    usb = rows[("db01", "sdc")]       # no health collected for it in these records
    assert (usb["health"], usb["verdict"]) == ("not collected", "n/a")


# --------------------------------------------------------------------------- the fleet report of drives

import json  # noqa: E402
import os  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleetmod  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import rows as report_rows
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record  # noqa: E402

import sys  # noqa: E402

CONTROLLER = os.path.join(unitpaths.UNIT, "fixtures", "controller")
sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
import report_tools as tools  # noqa: E402
RUN = "20261122T180000Z"


def _measured(target, kind, where, scale=1.0):
    """A real workload record (fixtures/controller: iobench JSON with its histograms) run on
    one target, as the role stores it."""
    with open(os.path.join(CONTROLLER, "nvme_over_cache-rndrd-t64.json"), encoding="utf-8") as f:
        spec = json.load(f)
    result = spec.pop("result")
    spec.update(target=target, target_kind=kind, **{"target_device" if kind == "device" else "target_path": where})
    rec = workload_record(spec, result)
    rec["metrics"]["iops"] *= scale
    return rec


def report_record(tmp_path, host, n, overrides=None, nvme_health=None, data1_scale=1.0):
    """A host record as store.yml writes it with targets and drives: two targets, the NVMe
    drive as a raw device (``nvme``) and a directory on the HDD sdb (``data1``), judged with
    the drives (judge(..., drives=))."""
    base = host_record(tmp_path, host, n, overrides=overrides)
    drives = {d["name"]: d for d in base["drives"]}
    if nvme_health:
        drives["nvme0n1"]["health"] = dr.parse_smartctl(load(nvme_health))
    drives["sdb"]["targets"] = ["/data1/fleetqual"]
    nvme = drives["nvme0n1"]
    workloads = [_measured("nvme", "device", nvme["id_path"]),
                 _measured("data1", "path", "/data1/fleetqual", scale=data1_scale)]
    targets = [{"name": "nvme", "kind": "device", "device": nvme["id_path"], "serial": nvme["serial"]},
               {"name": "data1", "kind": "path", "path": "/data1/fleetqual"}]
    j = judge(workloads, [], expected_ids=workloads, drives=base["drives"])
    return {"schema_version": 1, "host": host, "run_id": RUN, "profile": "quick", "groups": ["db"], "facts": {},
            "test_dir": "/var/tmp/fleetqual", "device": {}, "workloads": workloads, "verdict": j["verdict"],
            "reasons": j["reasons"], "checks": j["checks"], "warnings": j["warnings"], "slice": None,
            "targets": targets, "drives": base["drives"], "diagnostics": {}, "results_file": None}


@pytest.fixture
def report_fleet(tmp_path):
    """db01-db03 alike; db04's NVMe drive runs firmware GDC5603Q."""
    recs = {"db0%d" % i: report_record(tmp_path, "db0%d" % i, i) for i in (1, 2, 3)}
    recs["db04"] = report_record(tmp_path, "db04", 4, overrides={"nvme0n1": {"device/firmware_rev": "GDC5603Q"}})
    return recs


def _cases(junit):
    """The test cases of a JUnit report valid against the public junit-10.xsd."""
    return {c.get("name"): c for c in tools.xmllint_junit(junit).iter("testcase")}


def test_report_rows_and_a_junit_case_per_host_and_target(report_fleet):
    f = fleetmod.aggregate(report_fleet, run_id=RUN)
    assert [h["verdict"] for h in f["hosts"]] == ["PASS"] * 4
    rows = report_rows.table_rows(f)
    assert [r["workload"] for r in rows if r["_host"] == "db01"] == ["over_cache-rndrd-t64@nvme",
                                                                     "over_cache-rndrd-t64@data1"]
    cases = _cases(render_junit.render_junit(f))
    assert sorted(cases) == sorted("db0%d %s" % (i, t) for i in (1, 2, 3, 4) for t in ("nvme", "data1"))
    assert all(c.find("failure") is None and c.find("error") is None for c in cases.values())
    out = cases["db01 nvme"].find("system-out").text
    assert "target nvme on drive nvme0n1" in out and "over_cache-rndrd-t64@nvme: iops" in out
    assert "@data1" not in out
    # the whole-fleet latency percentiles stay per workload id (both targets merged)
    assert [r["workload"] for r in f["latency"]["fleet"]] == ["over_cache-rndrd-t64"]


@pytest.mark.parametrize("mode", ["warn", "fail"])
def test_a_host_whose_drive_firmware_differs_is_flagged_everywhere(report_fleet, tmp_path, mode):
    f = fleetmod.aggregate(report_fleet, run_id=RUN, options={"drives": mode})
    serial = "S64GNE0R600004"
    (finding,) = f["drive_findings"]
    assert (finding["kind"], finding["host"], finding["serial"], finding["severity"]) == (
        "firmware", "db04", serial, mode)
    verdicts = {h["host"]: h["verdict"] for h in f["hosts"]}
    assert verdicts == {"db01": "PASS", "db02": "PASS", "db03": "PASS", "db04": "FAIL" if mode == "fail" else "PASS"}
    # fleet.json: the drive table and the findings
    row = [d for d in f["drives"] if (d["host"], d["drive"]) == ("db04", "nvme0n1")][0]
    assert (row["serial"], row["firmware"], row["health"]) == (serial, "GDC5603Q", "PASSED")
    assert row["verdict"] == ("FAIL" if mode == "fail" else "PASS") and "differs from group db's majority" in \
        row["findings"][0]
    assert f["summary"]["drive_findings"] == 1 and f["summary"]["drives"] == 4 * 6
    # terminal: a drive table with the odd drive and why
    table = render_text.render_drive_table(f, width=500)
    line = [x for x in table.splitlines() if x.startswith("db04") and " nvme0n1 " in x][0]
    assert serial in line and "GDC5603Q" in line and "differs from group db's majority GDC5602Q" in line
    assert all(len(x) <= 100 for x in render_text.render_drive_table(f, width=100).splitlines())
    # HTML: the firmware cell flagged; Markdown: the row
    html = render_html.render_html(f)
    drives_html = html[html.index('<table id="drives">'):]
    drives_html = drives_html[:drives_html.index("</table>")]
    assert '<td>%s</td><td class="flag">GDC5603Q</td>' % serial in drives_html
    assert drives_html.count('class="flag">GDC5602Q') == 0
    md = render_markdown.render_markdown(f)
    assert "## Drives (%s)" % mode in md
    assert [x for x in md.splitlines() if x.startswith("| db04 | nvme0n1 |")][0].startswith(
        "| db04 | nvme0n1 | ssd | SAMSUNG MZQL21T9HCJR-00A07 | %s | GDC5603Q | PASSED |" % serial)
    assert "| host | device | media | model | serial | firmware | health | verdict | reasons |" in md
    # every format says the media: the SAS disk is an HDD
    assert "| db04 | sdb | hdd | ST4000NM0295 |" in md
    assert "<td>db04</td><td>sdb</td><td>hdd</td>" in drives_html and "<th>device</th><th>media</th>" in html
    assert [x for x in table.splitlines() if x.startswith("db04") and " sdb " in x][0].split()[:3] == \
        ["db04", "sdb", "hdd"]
    # JUnit: with drives: fail the case of the target on that drive fails, citing the serial
    cases = _cases(render_junit.render_junit(f))
    failure = cases["db04 nvme"].find("failure")
    if mode == "warn":
        assert failure is None
    else:
        assert serial in failure.get("message") and "firmware GDC5603Q differs" in failure.text
        assert failure.get("type") == "drive firmware"
        assert cases["db04 data1"].find("failure") is None        # the HDD target passed
    assert all(cases["db0%d %s" % (i, t)].find("failure") is None for i in (1, 2, 3) for t in ("nvme", "data1"))
    # every format again from fleet.json alone
    run_dir = tmp_path / mode
    written = report.write_reports(f, str(run_dir))
    first = {k: open(written[k], encoding="utf-8").read() for k in ("junit", "html", "md")}
    report.rerender(written["json"])
    assert {k: open(written[k], encoding="utf-8").read() for k in ("junit", "html", "md")} == first


def test_a_failed_smart_drive_fails_its_host_with_its_serial_in_junit(report_fleet, tmp_path):
    recs = dict(report_fleet)
    recs["db02"] = report_record(tmp_path / "sick", "db02", 2, nvme_health="smartctl-nvme-failing.json")
    assert recs["db02"]["verdict"] == "FAIL"                      # the judge's drive_health check
    f = fleetmod.aggregate(recs, run_id=RUN, options={"drives": "off"})
    assert {h["host"]: h["verdict"] for h in f["hosts"]}["db02"] == "FAIL"
    cases = _cases(render_junit.render_junit(f))
    failure = cases["db02 nvme"].find("failure")
    assert failure is not None and failure.get("type") == "drive_health"
    assert "serial S64GNE0R600002" in failure.get("message")
    assert "serial S64GNE0R600002): the drive's own health verdict is FAILED" in failure.text
    assert "critical_warning 0x04" in failure.text                  # the drive's own problems, from smartctl
    assert cases["db02 data1"].find("failure") is None            # its other target, on a healthy drive
    row = [d for d in f["drives"] if (d["host"], d["drive"]) == ("db02", "nvme0n1")][0]
    assert (row["health"], row["verdict"]) == ("FAILED", "FAIL")
    line = [x for x in render_text.render_drive_table(f, width=300).splitlines() if x.startswith("db02 nvme0n1")][0]
    assert "S64GNE0R600002" in line and " FAILED " in line and " FAIL " in line


def test_the_run_report_judges_drives_over_every_slice(report_fleet, tmp_path):
    """Two slices store their hosts' entries (fleet.d/); the run's report over them (what
    playbooks/report.yml renders) finds what one report of all the records finds, though
    neither slice alone could (db04's firmware is a majority of one in its slice)."""
    run_dir = tmp_path / "results" / RUN
    for label, hosts in (("slice-1", ("db01", "db02")), ("slice-2", ("db03", "db04"))):
        sink = run_store.EntryWriter(str(run_dir), label)
        alone = fleetmod.aggregate({h: report_fleet[h] for h in hosts}, run_id=RUN, entry_sink=sink)
        sink.close()
        assert not [x for x in alone["drive_findings"] if x["host"] == "db04" and x["majority"] == "GDC5602Q"]
    merged = run_store.aggregate_run(str(run_dir), options={"drives": "fail"})
    whole = fleetmod.aggregate(report_fleet, run_id=RUN, options={"drives": "fail"})
    assert merged["drive_findings"] == whole["drive_findings"]
    assert merged["drives"] == whole["drives"]
    assert [(h["host"], h["verdict"]) for h in merged["hosts"]] == [(h["host"], h["verdict"]) for h in whole["hosts"]]
    assert dict((h["host"], h["verdict"]) for h in merged["hosts"])["db04"] == "FAIL"


def test_a_slow_target_is_an_outlier_of_that_target_and_fails_only_its_case(report_fleet, tmp_path):
    recs = dict(report_fleet)
    recs["db03"] = report_record(tmp_path / "slow", "db03", 3, data1_scale=0.5)
    f = fleetmod.aggregate(recs, run_id=RUN, options={"outliers": "fail"})
    (o,) = [o for o in f["outliers"] if o["metric"] == "iops"]
    assert (o["host"], o["workload"], o["target"], o["worse"]) == ("db03", "over_cache-rndrd-t64", "data1", True)
    assert o["text"].startswith("over_cache-rndrd-t64 on data1 iops low")
    db03 = [h for h in f["hosts"] if h["host"] == "db03"][0]
    assert db03["verdict"] == "FAIL"
    assert [w["outliers"] for w in db03["workloads"]] == [[], ["iops"]]
    rows = [r for r in report_rows.table_rows(f) if r["_host"] == "db03"]
    assert [(r["workload"], r["rule"]) for r in rows] == [("over_cache-rndrd-t64@nvme", "-"),
                                                          ("over_cache-rndrd-t64@data1", "outlier: iops")]
    cases = _cases(render_junit.render_junit(f))
    assert cases["db03 nvme"].find("failure") is None
    failure = cases["db03 data1"].find("failure")
    assert failure.get("type") == "fleet outlier" and failure.get("message").startswith("over_cache-rndrd-t64 on data1")
    assert "| db03 | db | over_cache-rndrd-t64@data1 | iops |" in render_markdown.render_markdown(f)
    # the HDD sdb behind data1, against the same model on the other hosts: a drive result finding
    (res,) = [x for x in f["drive_findings"] if x["kind"] == "result" and x["metric"] == "iops"]
    assert (res["host"], res["drive"], res["serial"], res["target"]) == ("db03", "sdb", "ZA1HDD0003", "data1")


def test_the_callback_prints_the_drive_table_and_applies_its_drives_option(report_fleet, tmp_path):
    """The qualify_report callback at the end of a run, its option ``drives: fail``: the
    terminal shows the drive table with the odd drive; fleet.json has db04 FAIL."""
    from test_report_render import FakeDisplay, _callback

    display = FakeDisplay()
    out = tmp_path / "out"
    cb = _callback(display, output_dir=str(out), formats=["table", "json"], history=False, drives="fail",
                   table_width=200)

    class Stats:
        custom = {h: {"fleetqual_report": r} for h, r in report_fleet.items()}
        processed = {h: 1 for h in report_fleet}

        def summarize(self, host):
            return {"ok": 1, "failures": 0, "unreachable": 0}

    cb.v2_playbook_on_stats(Stats())
    assert display.warnings == []
    start = display.lines.index("drives (fail):")
    assert display.lines[start + 1].split() == ["host", "device", "media", "model", "serial", "firmware", "health",
                                                "verdict", "reasons"]
    odd = [x for x in display.lines[start:] if x.startswith("db04 nvme0n1 ssd ")]
    assert len(odd) == 1 and "S64GNE0R600004" in odd[0] and " FAIL " in odd[0]
    data = json.loads((out / RUN / "fleet.json").read_text())
    assert {h["host"]: h["verdict"] for h in data["hosts"]}["db04"] == "FAIL"
    assert data["options"]["drives"] == "fail"
    assert "fleet: 3/4 hosts passed (PASS 3, FAIL 1, UNREACHABLE 0, ERROR 0)" in display.lines
