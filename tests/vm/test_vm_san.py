"""SAN LUN targets through the real playbook, on the SAN lab (tests/vm/san.py, docs/testing.md
"The SAN lab"): this machine's tgt exports two file-backed LUNs on two portals; two guests of
the VM tier are iSCSI initiators whose dm-multipath groups each LUN's paths by WWID.

* ``vm-nvme`` logs in to LUN 1 on both portals (``no_path_retry queue``) and qualifies it,
  named by its WWID (``fleetqual_targets: [{wwid: ..., expected_paths: 2}]``): PASS; its record
  says which map, which paths, their portals and states; every block it read was verified; the
  paths' own counters (the devices under the map, read at the measured window's edges) equal
  what iobench did within 5 %; the LUN is blank again afterwards;
* ``vm-crit`` logs in to LUN 2 on one portal only and names it by its multipath alias with
  ``expected_paths: 2``: refused before anything is written (ERROR naming its one path, its
  portal and the fix), LUN 2 still blank.

Both hosts in one ``ansible-playbook`` run (the guests are the compliance tests' and the exit
path tests', booted once). The lab starts after the guests are up and logs them out before
they go on."""
import os

import pytest

import fleetrun
import san
from conftest import host_entry

pytestmark = [pytest.mark.vm("vm-nvme", "vm-crit"), pytest.mark.slow]

FULL, HALF = "vm-nvme", "vm-crit"
LUN_SIZE = 96 << 20
REGION = "64M"
TOLERANCE = 0.05
# writes and reads, every block written verified when read back
PLAN = {"fleetqual_profile": "quick", "fleetqual_matrix": [
    {"workload": "san", "mode": "rndrw", "threads": 2, "total_size": "32M", "block_size": "16K", "direct": True,
     "time": 6, "warmup": 1}]}


def _blank(path):
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                return True
            if chunk.count(0) != len(chunk):
                return False


@pytest.fixture(scope="module")
def lab(vm_guest, tmp_path_factory):
    why = san.missing()
    if why:
        pytest.skip("the SAN lab cannot run here: %s" % ", ".join(why))
    full, half = vm_guest(FULL), vm_guest(HALF)
    base = str(tmp_path_factory.mktemp("san"))
    tgt = san.Tgt(base).start()
    try:
        luns = [tgt.lun("lun%d" % i, os.path.join(base, "lun%d.img" % i), LUN_SIZE) for i in (1, 2)]
        san.make_initiator(full, "queue")
        san.make_initiator(half, "queue")
        maps = {FULL: san.login(full, luns[0], tgt.portals()), HALF: san.login(half, luns[1], tgt.portals()[:1])}
        yield {"tgt": tgt, "maps": maps, "files": [os.path.join(base, "lun%d.img" % i) for i in (1, 2)],
               "guests": {FULL: full, HALF: half}}
    finally:
        for g in (full, half):
            san.logout(g)
        tgt.stop()


@pytest.fixture(scope="module")
def san_run(lab, vm_fleet, tmp_path_factory):
    lun = {"name": "lun", "destroy_data": True, "expected_paths": 2, "size": REGION}
    full = host_entry(lab["guests"][FULL], None, PLAN, target=dict(lun, wwid=lab["maps"][FULL]["wwid"]))
    half = host_entry(lab["guests"][HALF], None, PLAN, target=dict(lun, alias=lab["maps"][HALF]["name"]))
    base = str(tmp_path_factory.mktemp("vm-san-run"))
    inv = vm_fleet.inventory(os.path.join(base, "inventory"), [full, half])
    run = fleetrun.run_playbook(vm_fleet, inv, base, "vm-san", args=["--forks", "2"], timeout=1200)
    run.lab = lab
    return run


def test_a_lun_named_by_its_wwid_is_qualified_through_its_multipath_map(san_run):
    lab = san_run.lab
    rec = san_run.record(FULL)
    assert rec["verdict"] == "PASS", (rec.get("reasons"), san_run.out[-3000:])
    wwid = lab["maps"][FULL]["wwid"]
    target = rec["targets"][0]
    assert (target["wwid"], target["device"]) == (wwid, "/dev/disk/by-id/dm-uuid-mpath-" + wwid)
    mp = target["multipath"]
    assert (mp["wwid"], mp["alias"], mp["status_source"]) == (wwid, lab["maps"][FULL]["name"], "dmsetup status")
    # two paths, one a portal, each an iSCSI session to LUN 1's target, both carrying I/O
    assert sorted(p["portal"] for p in mp["paths"]) == sorted(lab["tgt"].portals()), mp
    assert {(p["transport"], p["target"], p["dm_state"], p["scsi_state"], p["session_state"]) for p in mp["paths"]} == {
        ("iscsi", "%s:lun1" % san.IQN_PREFIX, "active", "running", "LOGGED_IN")}, mp
    for w in rec["workloads"]:
        m = w["metrics"]
        assert w["target_device"] == target["device"] and w["target_wwid"] == wwid
        bad = ("verify_corrupt", "verify_misplaced", "verify_stale", "errors")
        assert m["verify_checked"] > 0 and not any(m.get(k) for k in bad), m


def test_the_paths_counted_what_iobench_did(san_run):
    """What iobench completed in its measured window against what the devices under the map
    completed in it (iobench's --devstat: each path's /sys/block/<dev>/stat at the window's
    edges): the same requests, within 5 %."""
    rec = san_run.record(FULL)
    paths = {p["name"] for p in rec["targets"][0]["multipath"]["paths"]}
    for w in rec["workloads"]:
        window = w["result"]["bench"]["window"]
        devstat = window.get("devstat") or {}
        assert set(devstat) == paths, (devstat.keys(), paths, window.get("devstat_error"))
        device = sum((d["end"][0] - d["start"][0]) + (d["end"][4] - d["start"][4]) for d in devstat.values())
        bench = (w["metrics"]["read_count"] or 0) + (w["metrics"]["write_count"] or 0)
        assert bench > 0 and abs(device - bench) <= TOLERANCE * bench, (device, bench, devstat)


def test_the_drive_table_says_which_paths_of_which_lun(san_run):
    fleet = san_run.fleet()
    rows = {r["drive"]: r for r in fleet["drives"] if r["host"] == FULL and r.get("lun")}
    mp = san_run.record(FULL)["targets"][0]["multipath"]
    assert sorted(rows) == sorted(p["name"] for p in mp["paths"]), fleet["drives"]
    for name, row in rows.items():
        assert row["lun"]["wwid"] == mp["wwid"] and row["lun"]["usable"] == row["lun"]["paths"] == 2, row
        assert row["lun"]["portal"] in san_run.lab["tgt"].portals() and row["transport"] == "iscsi", row
    with open(os.path.join(san_run.results_dir(), "report.md")) as fh:
        md = fh.read()
    assert "of LUN %s (WWID %s) on target lun: iscsi" % (mp["alias"], mp["wwid"]) in md


def test_a_lun_with_fewer_paths_than_expected_is_refused_before_any_write(san_run):
    lab = san_run.lab
    rec = san_run.record(HALF)
    reasons = "\n".join(rec.get("reasons") or [])
    assert rec["verdict"] == "ERROR", reasons
    alias, wwid = lab["maps"][HALF]["name"], lab["maps"][HALF]["wwid"]
    assert "/dev/mapper/%s" % alias in reasons, reasons
    assert "the LUN %s (WWID %s) has 1 usable path of the 2 expected (expected_paths)" % (alias, wwid) in reasons
    assert "iscsi %s active/running" % lab["tgt"].portals()[0] in reasons and "iscsiadm" in reasons, reasons
    # refused before anything was written: LUN 2 is as blank as it was made; LUN 1 is blank
    # again (the run zeroes what it wrote)
    assert _blank(lab["files"][1]) and _blank(lab["files"][0])
    # the gate failed the run for it
    assert san_run.rc != 0
