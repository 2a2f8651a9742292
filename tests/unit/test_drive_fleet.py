"""plugin_utils/drive_fleet.py: drive consistency across a group of like hosts (issue 11.4).

Hosts are built as the drives module sees them: identity from a fake sysfs tree
(fixtures/drives/sysfs-host.json, one tree per host, with per-host file overrides such as
another firmware) and health from the recorded smartctl outputs."""
import copy

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils import drives as dr
from ansible_collections.fleetqual.storage.plugins.plugin_utils.drive_fleet import drive_findings, drive_of_record
from test_drives import build_fake_sysfs, load

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
        "the 4 hosts of group db, which have ")
    assert "ST4000NM0295 (1 per host)" in found["model"]["message"]
    assert found["drive_count"]["message"] == ("db04: 5 drives, fewer than group db's median 6; fewer of: ST4000NM0295 "
                                               "(0, peers 1), Samsung SSD 870 (0, peers 1)")
    assert found["drive_count"]["drive"] is None
    assert found["capacity"]["message"].startswith("db04: ") and "less than group db's median" in \
        found["capacity"]["message"]


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
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import robust_scale
    assert robust_scale([1.0, 2.0, 3.0, 4.0, 100.0], 3.0) == (1.4826 * 1.0, "mad", 1.0)
    scale, method, mad = robust_scale([10.0, 10.0, 10.0, 4.0], 10.0)   # MAD 0: one deviating value still scores
    assert (method, mad) == ("meanad", 0.0) and scale == pytest.approx(1.2533 * 1.5)
    assert robust_scale([5.0, 5.0, None], 5.0) == (0.0, "none", 0.0)


def test_drive_table_rows_join_health_judge_checks_and_findings(fleet):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.drive_fleet import drive_rows
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import judge
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
