"""Drives whose truth the test sets, held to the product through the real playbook (the VM
tier, docs/testing.md): QEMU's device properties are the ground truth a real drive never
gives.

First run (conftest.RUNS, one playbook over the guests at once, the quick profile on one
device target each, opted in by its by-id name):

* ``vm-nvme``: two NVMe drives with the serials FQNVME01 (the target) and FQNVME02: the host
  PASSes; its record's drives and fleet.json's drive table show those serials, QEMU's model
  (``QEMU NVMe Ctrl``) and QEMU's version as the firmware;
* ``vm-crit``: an NVMe drive booted with ``smart_critical_warning`` 0x04: the host FAILs
  citing the drive's critical warning and serial;
* ``vm-hdd``: SCSI disks with ``rotation_rate=7200`` (an HDD), the target with
  ``write-cache=off``; the second run qualifies its twin with ``write-cache=on``. The drive
  is reported rotational, the SSDs are not, and fleet.json's drive rows carry each drive's
  media (``hdd`` / ``ssd``): the HDD is not flagged as an odd model among the SSD hosts of its
  group; the write-cache diagnostic names each drive's cache (or says it cannot tell), never the
  other one.

``make test`` boots vm-nvme alone; vm-crit and vm-hdd are guests of their own, in the long
suite (``make test-long``). The critical warning is raised and cleared through QMP on vm-nvme's
second drive in make test too (test_vm_guests.py).
"""
import re
import subprocess

import pytest

from conftest import CRITICAL_WARNING, HDD

# Each test names its guests: vm-nvme's run is in make test; the drives of other kinds, each
# a guest of its own, are in the long suite (docs/testing.md, "The long suite").
pytestmark = [pytest.mark.slow]

QUICK_IDS = 6
NVME_MODEL = "QEMU NVMe Ctrl"


def qemu_version():
    out = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"version (\d+\.\d+\.\d+)", out).group(1)


def drives_by_serial(record):
    return {d.get("serial"): d for d in record["drives"]}


def fleet_rows(run, host):
    return {row["serial"]: row for row in run.fleet()["drives"] if row["host"] == host}


def brief(rec):
    return (rec.get("verdict"), rec.get("reasons"), rec.get("error"))


@pytest.mark.vm("vm-nvme")
def test_first_run_verdicts(vm_run):
    run = vm_run("first")
    verdicts = {h["host"]: h["verdict"] for h in run.fleet()["hosts"]}
    # the drive tests' guests this session booted (vm-nvme alone in make test)
    expected = {h: v for h, v in {"vm-nvme": "PASS", "vm-crit": "FAIL", "vm-hdd": "PASS"}.items() if h in run.guests}
    assert "vm-nvme" in expected and {h: verdicts.get(h) for h in expected} == expected, run.out[-6000:]
    # the gate fails the run if and only if a host of it FAILed (vm-crit)
    assert (run.rc != 0) == ("FAIL" in expected.values()), (run.rc, run.out[-3000:])


@pytest.mark.vm("vm-nvme")
def test_nvme_serials_model_and_firmware_are_what_qemu_was_given(vm_run):
    run = vm_run("first")
    rec = run.record("vm-nvme")
    assert rec["verdict"] == "PASS", brief(rec)
    drives = drives_by_serial(rec)
    assert {"FQNVME01", "FQNVME02"} <= set(drives), sorted(drives)
    for serial in ("FQNVME01", "FQNVME02"):
        d = drives[serial]
        assert (d["model"], d["transport"], d["rotational"]) == (NVME_MODEL, "nvme", False), d
        assert d["firmware"] == qemu_version(), d          # QEMU reports its version as the firmware
        assert d["size_bytes"] == 256 << 20, d
        assert d["health"]["collected"] and d["health"]["passed"] is True, d["health"]
    # the target is the drive with the serial it was opted in by, and only that one
    assert drives["FQNVME01"]["targets"] and not drives["FQNVME02"]["targets"], drives
    target = run.targets["vm-nvme"]
    assert len(rec["workloads"]) == QUICK_IDS
    for w in rec["workloads"]:
        argv = w["result"]["argv"]
        assert argv[argv.index("--device") + 1] == target["device"], argv
        assert w["metrics"]["iops"] > 0 and w["metrics"]["errors"] == 0, w["key"]
    # fleet.json's drive table: the same serials, model and firmware, the target's drive PASS
    rows = fleet_rows(run, "vm-nvme")
    assert {s: (r["model"], r["firmware"]) for s, r in rows.items() if s.startswith("FQNVME")} == \
        {s: (NVME_MODEL, qemu_version()) for s in ("FQNVME01", "FQNVME02")}, rows
    assert rows["FQNVME01"]["verdict"] == "PASS" and rows["FQNVME01"]["targets"], rows["FQNVME01"]


@pytest.mark.vm("vm-crit")
@pytest.mark.long
def test_nvme_critical_warning_fails_the_host_citing_it(vm_run):
    run = vm_run("first")
    assert run.rc != 0, "the gate passed a run with a FAILed host"
    rec = run.record("vm-crit")
    assert rec["verdict"] == "FAIL", brief(rec)
    d = drives_by_serial(rec)["FQNVME03"]
    assert d["health"]["critical_warning"] == CRITICAL_WARNING and d["health"]["passed"] is False, d["health"]
    # drive nvme0n1 (QEMU NVMe Ctrl, serial FQNVME03): the drive's own health verdict is FAILED (...;
    # critical_warning 0x04 (NVM subsystem reliability degraded))
    cited = [r for r in rec["reasons"] if "(%s, serial FQNVME03): the drive's own health verdict is FAILED" % NVME_MODEL
             in r and "critical_warning 0x%02x" % CRITICAL_WARNING in r]
    assert cited, rec["reasons"]
    # the only reason: the drive's data and speed were fine
    assert all("FQNVME03" in r for r in rec["reasons"]), rec["reasons"]
    row = fleet_rows(run, "vm-crit")["FQNVME03"]
    assert (row["health"], row["verdict"]) == ("FAILED", "FAIL"), row
    assert cited[0] in row["reasons"], row


@pytest.mark.vm("vm-hdd", "vm-nvme")
@pytest.mark.long
def test_scsi_disk_at_7200_rpm_is_rotational_and_reports_its_identity(vm_run):
    run = vm_run("first")
    rec = run.record("vm-hdd")
    drives = drives_by_serial(rec)
    for serial, cache in (("FQHDD01", "write through"), ("FQHDD02", "write back")):
        d = drives[serial]
        # a SCSI disk (sd*) behind QEMU's virtio-scsi HBA: the transport is that bus
        assert (d["rotational"], d["transport"], d["model"], d["vendor"]) == \
            (True, "virtio", HDD["product"], HDD["vendor"]), d
        # udev's own link, and sg3-utils' (scsi-S..., with the SAN initiator's packages in the image)
        assert d["name"].startswith("sd") and "/dev/disk/by-id/scsi-0%s_%s_%s" % (
            HDD["vendor"], HDD["product"], serial) in d["by_id"], d
        assert all(serial in link for link in d["by_id"]), d
        assert d["write_cache"] == cache, d       # what the guest's kernel was told
    nvme = drives_by_serial(run.record("vm-nvme"))
    assert nvme["FQNVME01"]["rotational"] is False


@pytest.mark.vm("vm-hdd", "vm-nvme")
@pytest.mark.long
def test_fleet_json_groups_the_hdd_apart_from_the_ssds(vm_run):
    run = vm_run("first")
    fj = run.fleet()
    media = {r["serial"]: (r.get("rotational"), r.get("media")) for r in fj["drives"]}
    assert (media["FQHDD01"], media["FQNVME01"]) == ((True, "hdd"), (False, "ssd")), fj["drives"]
    # an HDD among SSD hosts is another kind of drive, not an odd model of theirs
    odd = [f["message"] for f in fj["drive_findings"] if f["kind"] == "model" and f["serial"] == "FQHDD01"]
    assert not odd, odd


@pytest.mark.vm("vm-hdd")
@pytest.mark.long
@pytest.mark.parametrize("run_name,serial,truth", [("first", "FQHDD01", "write-through"),
                                                   ("second", "FQHDD02", "write-back")])
def test_write_cache_diagnostic_names_the_drives_cache_or_says_it_cannot_tell(vm_run, run_name, serial, truth):
    run = vm_run(run_name)
    rec = run.record("vm-hdd")
    assert rec["verdict"] == "PASS", brief(rec)
    assert [t["device"] for t in rec["targets"]] == [run.targets["vm-hdd"]["device"]]
    assert run.targets["vm-hdd"]["serial"] == serial
    wc = rec["diagnostics"]["write_cache"]
    print("write_cache of %s (%s): %s %s" % (serial, truth, wc["conclusion"], wc["sentence"]))
    # the drive's own declaration first, whatever the TCG guest's timing says of it
    assert wc["conclusion"] == truth and wc["evidence"]["declared"] == truth, wc["sentence"]
    assert wc["sentence"].startswith("Write cache: %s (the kernel's queue/write_cache for sd" % truth), wc["sentence"]
    assert "probably" not in wc["sentence"], wc["sentence"]
    assert wc["workloads"] and all(w.endswith("@" + serial.lower()) or "@" not in w for w in wc["workloads"]), wc
