"""Drive inventory and health: recorded smartctl / nvme-cli outputs (tests/unit/fixtures/drives),
a fake sysfs tree for identity, and the module run as Ansible runs it."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import loopdev
import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import drives as dr

HERE = unitpaths.UNIT
FIX = os.path.join(HERE, "fixtures", "drives")
COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "collections")
MOD = "ansible_collections.fleetqual.storage.plugins.modules.drives"


def load(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------- health parsing

SMARTCTL_CASES = [
    # file, protocol, passed, critical_warning, media_errors, pct_used, realloc, pending, temp, poh
    ("smartctl-nvme-healthy.json", "NVMe", True, 0, 0, 2, None, None, 34, 8123),
    ("smartctl-nvme-failing.json", "NVMe", False, 4, 37, 91, None, None, 47, 29871),
    ("smartctl-sata-ssd-healthy.json", "ATA", True, None, None, None, 0, 0, 31, 4321),
    ("smartctl-sata-ssd-failing.json", "ATA", False, None, None, None, 1240, 0, 31, 17654),
    ("smartctl-hdd-healthy.json", "ATA", True, None, None, None, 0, 0, 33, 21034),
    ("smartctl-hdd-failing.json", "ATA", True, None, None, None, 0, 48, 38, 39876),
    ("smartctl-sas-hdd-defects.json", "SCSI", True, None, 2, None, 56, None, 36, 41230),
]


@pytest.mark.parametrize("name,protocol,passed,cw,media,pct,realloc,pending,temp,poh", SMARTCTL_CASES)
def test_parse_smartctl_fixtures(name, protocol, passed, cw, media, pct, realloc, pending, temp, poh):
    h = dr.parse_smartctl(load(name))
    assert h["collected"] is True and h["tool"] == "smartctl" and h["reason"] is None
    assert h["protocol"] == protocol
    assert h["passed"] is passed
    assert h["critical_warning"] == cw
    assert h["media_errors"] == media
    assert h["percentage_used"] == pct
    assert h["reallocated_sectors"] == realloc
    assert h["pending_sectors"] == pending
    assert h["temperature_c"] == temp
    assert h["power_on_hours"] == poh
    assert set(dr.HEALTH_KEYS) <= set(h)


def test_smartctl_problems_name_what_failed():
    nv = dr.parse_smartctl(load("smartctl-nvme-failing.json"))
    assert "overall health self-assessment FAILED" in nv["problems"]
    assert "critical_warning 0x04 (NVM subsystem reliability degraded)" in nv["problems"]
    assert "37 media errors" in nv["problems"]
    assert nv["exit_status"] == 72
    assert "SMART status check returned DISK FAILING" in nv["exit_status_text"]
    ssd = dr.parse_smartctl(load("smartctl-sata-ssd-failing.json"))
    assert ssd["problems"] == ["overall health self-assessment FAILED", "1240 reallocated sectors"]
    hdd = dr.parse_smartctl(load("smartctl-hdd-failing.json"))
    # passes its own verdict, but the pending sectors are reported for the threshold rules
    assert hdd["passed"] is True and hdd["problems"] == ["48 pending sectors"]
    for healthy in ("smartctl-nvme-healthy.json", "smartctl-sata-ssd-healthy.json", "smartctl-hdd-healthy.json"):
        h = dr.parse_smartctl(load(healthy))
        assert h["problems"] == [] and "exit_status" not in h


def test_smartctl_identity_is_kept_for_the_drive():
    h = dr.parse_smartctl(load("smartctl-sata-ssd-healthy.json"))
    assert h["identity"] == {"model": "Samsung SSD 870 EVO 1TB", "serial": "S6PUNX0T123456A",
                             "firmware": "SVT02B6Q"}
    sas = dr.parse_smartctl(load("smartctl-sas-hdd-defects.json"))
    assert sas["identity"]["firmware"] == "DT31"


def test_smartctl_unsupported_device_is_not_collected_with_its_message():
    # recorded on this project's CI VM: smartctl 7.3 on a virtio disk
    h = dr.parse_smartctl(load("smartctl-virtio-unsupported.json"))
    assert h["collected"] is False
    assert h["reason"] == "smartctl: /dev/vda: Unable to detect device type (exit status 1)"
    assert all(h[k] is None for k in dr.HEALTH_KEYS)


def test_smartctl_failing_status_without_smart_status_uses_exit_bit():
    d = load("smartctl-hdd-healthy.json")
    del d["smart_status"]
    d["smartctl"]["exit_status"] = 8
    assert dr.parse_smartctl(d)["passed"] is False
    d["smartctl"]["exit_status"] = 0
    assert dr.parse_smartctl(d)["passed"] is None


def test_smartctl_unknown_format_version_refused():
    d = load("smartctl-nvme-healthy.json")
    d["json_format_version"] = [2, 0]
    h = dr.parse_smartctl(d)
    assert h["collected"] is False and "json_format_version" in h["reason"]


@pytest.mark.parametrize("name,cw,passed,media,pct,spare,temp,poh,problems", [
    ("nvme-cli-smart-log-healthy.json", 0, True, 0, 2, 100, 34, 8123, []),
    ("nvme-cli-smart-log-failing.json", 5, False, 37, 103, 6, 75, 29871,
     ["critical_warning 0x05 (available spare below threshold; NVM subsystem reliability degraded)",
      "37 media errors", "percentage_used 103% (rated endurance used up)"]),
    ("nvme-cli-smart-log-failing-human.json", 5, False, 37, 103, 6, 75, 29871, None),
])
def test_parse_nvme_cli_fixtures(name, cw, passed, media, pct, spare, temp, poh, problems):
    h = dr.parse_nvme_smart_log(load(name))
    assert h["collected"] is True and h["tool"] == "nvme-cli" and h["protocol"] == "NVMe"
    assert h["critical_warning"] == cw
    assert h["passed"] is passed
    assert h["media_errors"] == media
    assert h["percentage_used"] == pct
    assert h["available_spare"] == spare
    assert h["temperature_c"] == temp  # kelvin in the log
    assert h["power_on_hours"] == poh
    assert h["reallocated_sectors"] is None and h["pending_sectors"] is None
    if problems is not None:
        assert h["problems"] == problems


def test_nvme_cli_garbage_not_collected():
    h = dr.parse_nvme_smart_log({"error": "x"})
    assert h["collected"] is False and "no SMART log" in h["reason"]


class Tools:
    """A host's tools as recorded outputs: which() answers from ``present``, run() from ``outputs``."""

    def __init__(self, present, outputs):
        self.present = present
        self.outputs = outputs
        self.calls = []

    def which(self, name):
        return "/usr/sbin/" + name if name in self.present else None

    def run(self, argv):
        self.calls.append(argv)
        return self.outputs[os.path.basename(argv[0])]


def _text(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as f:
        return f.read()


NVME = {"name": "nvme0n1", "path": "/dev/nvme0n1", "transport": "nvme"}
SATA = {"name": "sda", "path": "/dev/sda", "transport": "sata"}


def test_collect_prefers_smartctl():
    t = Tools({"smartctl", "nvme"}, {"smartctl": (0, _text("smartctl-nvme-healthy.json"), "")})
    h = dr.collect_health(NVME, t.run, t.which)
    assert h["tool"] == "smartctl" and h["collected"]
    assert t.calls == [["/usr/sbin/smartctl", "--json", "-a", "/dev/nvme0n1"]]


def test_collect_falls_back_to_nvme_cli_when_smartctl_cannot():
    t = Tools({"smartctl", "nvme"}, {"smartctl": (1, _text("smartctl-virtio-unsupported.json"), ""),
                                     "nvme": (0, _text("nvme-cli-smart-log-failing.json"), "")})
    h = dr.collect_health(NVME, t.run, t.which)
    assert h["tool"] == "nvme-cli" and h["critical_warning"] == 5
    assert t.calls[1] == ["/usr/sbin/nvme", "smart-log", "/dev/nvme0n1", "-o", "json"]


def test_collect_failing_exit_status_still_parsed():
    # smartctl exits 24 (bits 3, 4) for a failing disk but prints the whole report
    t = Tools({"smartctl"}, {"smartctl": (88, _text("smartctl-sata-ssd-failing.json"), "")})
    h = dr.collect_health(SATA, t.run, t.which)
    assert h["collected"] and h["passed"] is False


@pytest.mark.parametrize("present,drive,reason", [
    (set(), NVME, "smartctl (smartmontools) or nvme (nvme-cli) not installed"),
    ({"nvme"}, SATA, "smartctl (smartmontools) not installed"),
    ({"smartctl"}, {"name": "loop3", "path": "/dev/loop3", "transport": "loop"}, "loop device: no SMART"),
])
def test_collect_not_collected_reasons(present, drive, reason):
    t = Tools(present, {})
    h = dr.collect_health(drive, t.run, t.which)
    assert h["collected"] is False and h["reason"].startswith(reason)
    assert t.calls == []


def test_collect_tool_errors_are_reasons():
    t = Tools({"smartctl", "nvme"}, {"smartctl": (2, "", "Permission denied"),
                                     "nvme": (1, "", "/dev/nvme0n1: Operation not permitted\nUsage: ...")})
    h = dr.collect_health(NVME, t.run, t.which)
    assert h["collected"] is False
    assert h["reason"] == ("smartctl exit 2 printed no JSON: Permission denied; "
                           "nvme smart-log exit 1: /dev/nvme0n1: Operation not permitted")


def test_collect_nvme_without_nvme_cli_says_so():
    t = Tools({"smartctl"}, {"smartctl": (1, _text("smartctl-virtio-unsupported.json"), "")})
    h = dr.collect_health(NVME, t.run, t.which)
    assert h["collected"] is False
    assert h["reason"].endswith("(exit status 1); nvme (nvme-cli) not installed")


# --------------------------------------------------------------------------- fake sysfs identity

def _mk(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode) as f:
        f.write(content)


def _link(target, d, name):
    os.makedirs(d, exist_ok=True)
    os.symlink(os.path.relpath(target, d), os.path.join(d, name))


def build_fake_sysfs(root, spec=None, overrides=None):
    """Build ``<root>/sys`` and ``<root>/dev`` from a spec (default: fixtures/drives/sysfs-host.json)
    as the kernel lays them out: device nodes under sys/devices with dev/size/queue/device files,
    and the block/NAME, class/block/NAME, dev/block/MAJ:MIN links; partitions, slaves/holders
    stacks, and /dev/disk/by-id, by-path links. ``overrides`` = {name: {file: content}} changes
    single files (a different firmware on one host). Returns (sysfs_root, dev_root)."""
    if spec is None:
        spec = load("sysfs-host.json")
    s = os.path.join(root, "sys")
    dev = os.path.join(root, "dev")
    nodes = {}
    for disk in spec["disks"]:
        node = os.path.join(s, "devices", disk["rel"])
        name = os.path.basename(disk["rel"])
        nodes[name] = node
        files = dict(disk.get("files", {}))
        files.update((overrides or {}).get(name, {}))
        _mk(os.path.join(node, "dev"), disk["dev"] + "\n")
        for sub in ("holders", "slaves"):
            os.makedirs(os.path.join(node, sub), exist_ok=True)
        for k, v in files.items():
            if k.endswith(":hex"):
                _mk(os.path.join(node, k[:-4]), bytes.fromhex(v))
            else:
                _mk(os.path.join(node, k), v + "\n")
        for k, v in disk.get("queue", {}).items():
            _mk(os.path.join(node, "queue", k), v + "\n")
        _link(node, os.path.join(s, "block"), name)
        _link(node, os.path.join(s, "class", "block"), name)
        _link(node, os.path.join(s, "dev", "block"), disk["dev"])
        for i, (pname, pdev) in enumerate(disk.get("partitions", [])):
            pn = os.path.join(node, pname)
            nodes[pname] = pn
            _mk(os.path.join(pn, "dev"), pdev + "\n")
            _mk(os.path.join(pn, "partition"), "%d\n" % (i + 1))
            os.makedirs(os.path.join(pn, "holders"))
            _link(pn, os.path.join(s, "class", "block"), pname)
            _link(pn, os.path.join(s, "dev", "block"), pdev)
    for holder, slave in spec.get("stacks", []):
        _link(nodes[slave], os.path.join(nodes[holder], "slaves"), slave)
        _link(nodes[holder], os.path.join(nodes[slave], "holders"), holder)
    for sub, links in spec.get("links", {}).items():
        d = os.path.join(dev, "disk", sub)
        os.makedirs(d, exist_ok=True)
        for link, target in links.items():
            os.symlink("../../" + target, os.path.join(d, link))
    return s, dev


VPD80 = b"\x00\x80\x00\x14" + b"WD-WX12A3456789".rjust(20)


@pytest.fixture
def fake_host(tmp_path):
    return build_fake_sysfs(str(tmp_path))


def test_fake_sysfs_inventory(fake_host):
    sysfs, dev = fake_host
    inv = dr.inventory(sysfs_root=sysfs, dev_root=dev)
    by = {d["name"]: d for d in inv["drives"]}
    assert sorted(by) == ["loop0", "nvme0n1", "sda", "sdb", "sdc", "vda"]
    assert sorted(v["name"] for v in inv["virtual"]) == ["dm-0", "loop1", "md0", "nvme0c0n1", "zram0"]
    virt = {v["name"]: v for v in inv["virtual"]}
    assert virt["md0"]["slaves"] == ["nvme0n1p1", "sda1"] and virt["md0"]["holders"] == ["dm-0"]
    assert virt["loop1"]["reason"] == "loop device not attached"
    assert virt["nvme0c0n1"]["kind"] == "hidden" and virt["zram0"]["kind"] == "zram"

    nv = by["nvme0n1"]
    assert nv["model"] == "SAMSUNG MZQL21T9HCJR-00A07"
    assert nv["serial"] == "S64GNE0R601234"
    assert nv["firmware"] == "GDC5602Q"
    assert nv["transport"] == "nvme"
    assert nv["size_bytes"] == 3750748848 * 512
    assert nv["rotational"] is False
    assert nv["write_cache"] == "write through"
    assert nv["wwid"] == "eui.0025388b71c0a1b2"
    assert nv["id_path"] == os.path.join(dev, "disk", "by-id", "nvme-eui.0025388b71c0a1b2")
    assert len(nv["by_id"]) == 2  # the -part1 link points at the partition, not the disk
    assert nv["by_path"] == [os.path.join(dev, "disk", "by-path", "pci-0000:3b:00.0-nvme-1")]
    assert nv["partitions"] == ["nvme0n1p1"]

    sda = by["sda"]
    assert sda["serial"] == "WD-WX12A3456789"  # from VPD page 0x80
    assert sda["firmware"] == "2B6Q" and sda["vendor"] == "ATA"
    assert sda["transport"] == "sata"
    assert sda["id_path"].endswith("/wwn-0x5002538e40a22954")
    assert sda["write_cache"] == "write back"

    sdb = by["sdb"]
    assert (sdb["transport"], sdb["rotational"], sdb["logical_sector_size"], sdb["physical_sector_size"]) == \
        ("sas", True, 512, 4096)
    assert sdb["serial"] is None and sdb["id_path"] is None
    assert by["sdc"]["transport"] == "usb" and by["sdc"]["removable"] is True
    assert by["vda"]["transport"] == "virtio" and by["vda"]["serial"] == "overlayblk"
    assert by["loop0"]["transport"] == "loop" and by["loop0"]["backing_file"] == "/var/tmp/disk.img"
    assert by["loop0"]["size_bytes"] == 64 * 1024 * 1024


def test_fake_sysfs_media_and_declared_write_cache(fake_host):
    """Each drive's media from the kernel's queue/rotational (the SAS HDD and the virtio disk say 1)
    and its cache as the kernel declares it, with where it was read."""
    sysfs, dev = fake_host
    by = {d["name"]: d for d in dr.inventory(sysfs_root=sysfs, dev_root=dev)["drives"]}
    assert {n: (d["rotational"], d["media"]) for n, d in by.items()} == {
        "nvme0n1": (False, "ssd"), "sda": (False, "ssd"), "sdb": (True, "hdd"), "sdc": (False, "ssd"),
        "vda": (True, "hdd"), "loop0": (False, "ssd")}
    assert {n: (d["write_cache"], d["write_cache_source"]) for n, d in by.items()} == {
        "nvme0n1": ("write through", "queue/write_cache"), "sda": ("write back", "queue/write_cache"),
        "sdb": ("write back", "queue/write_cache"), "sdc": ("write through", "queue/write_cache"),
        "vda": ("write back", "queue/write_cache"), "loop0": ("write through", "queue/write_cache")}
    assert {n: dr.declared_write_cache(d) for n, d in by.items()} == {
        "nvme0n1": "write-through", "sda": "write-back", "sdb": "write-back", "sdc": "write-through",
        "vda": "write-back", "loop0": "write-through"}


@pytest.mark.parametrize("cache_type,declared", [
    ("write back", "write-back"), ("write back, no read (daddy)", "write-back"),
    ("write through", "write-through"), ("none", "write-through"), ("bogus", None)])
def test_scsi_cache_type_when_the_kernel_has_no_queue_write_cache(tmp_path, cache_type, declared):
    """A kernel without queue/write_cache (before 4.7): a SCSI disk's scsi_disk/*/cache_type (its WCE bit)."""
    spec = load("sysfs-host.json")
    sdb = next(d for d in spec["disks"] if d["rel"].endswith("/sdb"))
    del sdb["queue"]["write_cache"]
    sdb["files"]["device/scsi_disk/2:0:0:0/cache_type"] = cache_type
    sysfs, dev = build_fake_sysfs(str(tmp_path), spec)
    d = dr.identity("sdb", sysfs, dev)
    assert dr.declared_write_cache(d) == declared
    assert (d["write_cache"] is None) == (declared is None)
    assert d["write_cache_source"] == (None if declared is None else "scsi_disk/cache_type")


def test_media_of_a_drive_the_kernel_says_nothing_of():
    """No queue/rotational read: an NVMe namespace is an SSD, anything else unknown; the kernel's word wins."""
    assert dr.drive_media({"transport": "nvme", "rotational": None}) == "ssd"
    assert dr.drive_media({"transport": "sas", "rotational": None}) is None
    assert dr.drive_media({"transport": "sas"}) is None and dr.drive_media(None) is None
    assert dr.drive_media({"transport": "virtio", "rotational": True}) == "hdd"
    assert dr.drive_media({"transport": "nvme", "rotational": False}) == "ssd"
    # lsblk's transport makes an NVMe drive of an unknown one
    d = {"model": None, "serial": None, "firmware": None, "transport": None, "vendor": None, "wwid": None,
         "rotational": None, "media": None, "sources": ["sysfs"]}
    dr.merge_lsblk(d, {"tran": "nvme"})
    assert (d["transport"], d["media"]) == ("nvme", "ssd")


NAMES = {"nvme0n1", "sda", "sdb", "sdc", "vda", "loop0"}


@pytest.mark.parametrize("devnum,drives,not_drives,chain", [
    ((253, 0), ["nvme0n1", "sda"], [], ["dm-0", "md0", "nvme0n1p1", "nvme0n1", "sda1", "sda"]),
    ((8, 1), ["sda"], [], ["sda1", "sda"]),
    ((252, 0), [], ["zram0"], ["zram0"]),
])
def test_fake_sysfs_device_targets_through_stacks(fake_host, tmp_path, devnum, drives, not_drives, chain):
    """A device node with the given rdev, resolved on the fake tree: dm -> md -> two partitions."""
    if os.geteuid() != 0:
        pytest.skip("mknod of a block device node needs root")
    sysfs, _dev = fake_host
    node = str(tmp_path / "node")
    os.mknod(node, 0o600 | 0o060000, os.makedev(*devnum))
    t = dr.target_drives(node, NAMES, sysfs_root=sysfs)
    assert (t["drives"], t["not_drives"], t["chain"]) == (drives, not_drives, chain)
    if not drives:
        assert t["reason"] == "%s sits on zram0, which is not a drive" % node


def test_missing_target_says_why(fake_host, tmp_path):
    sysfs, _dev = fake_host
    missing = dr.target_drives(str(tmp_path / "nope"), NAMES, sysfs_root=sysfs)
    assert missing["drives"] == [] and missing["reason"].startswith("cannot stat %s" % (tmp_path / "nope"))


def test_real_host_root_target():
    inv = dr.inventory(targets=["/"])
    st = os.stat("/")
    if os.major(st.st_dev) == 0:
        pytest.skip("root fs has no block device here")
    t = inv["targets"][0]
    assert t["drives"], t
    names = [d["name"] for d in inv["drives"]]
    assert set(t["drives"]) <= set(names)
    root_drive = [d for d in inv["drives"] if d["name"] == t["drives"][0]][0]
    assert "/" in root_drive["targets"]
    assert root_drive["size_bytes"] > 0


def test_lsblk_fills_only_what_sysfs_lacks():
    d = {"model": "X", "serial": None, "firmware": None, "transport": None, "vendor": None, "wwid": None,
         "sources": ["sysfs"]}
    dr.merge_lsblk(d, {"model": "Y", "serial": "SER1 ", "rev": "FW1", "tran": "sata", "vendor": None, "wwn": None})
    assert d["model"] == "X" and d["serial"] == "SER1" and d["firmware"] == "FW1" and d["transport"] == "sata"
    assert d["sources"] == ["sysfs", "lsblk"]
    parsed = dr.parse_lsblk('{"blockdevices": [{"name": "sda", "kname": "sda"}]}')
    assert parsed == {"sda": {"name": "sda", "kname": "sda"}}
    assert dr.parse_lsblk("not json") == {}


def test_smartctl_completes_libata_truncated_identity():
    # libata shows a SATA disk's firmware SVT02B6Q as SCSI rev "2B6Q" and cuts the model to 16 characters
    d = {"model": "Samsung SSD 870", "serial": None, "firmware": "2B6Q", "sources": ["sysfs"]}
    h = dr.parse_smartctl(load("smartctl-sata-ssd-healthy.json"))
    dr.apply_tool_identity(d, h)
    assert d == {"model": "Samsung SSD 870 EVO 1TB", "serial": "S6PUNX0T123456A", "firmware": "SVT02B6Q",
                 "sources": ["sysfs", "smartctl"]}
    assert "identity" not in h
    # a value the kernel shows that smartctl's does not contain is kept; a known serial is never replaced
    d2 = {"model": "Other", "serial": "S", "firmware": "ZZZZ", "sources": ["sysfs"]}
    dr.apply_tool_identity(d2, dr.parse_smartctl(load("smartctl-sata-ssd-healthy.json")))
    assert d2 == {"model": "Other", "serial": "S", "firmware": "ZZZZ", "sources": ["sysfs"]}


def test_vpd_pg80():
    assert dr.vpd_pg80_serial(VPD80) == "WD-WX12A3456789"
    assert dr.vpd_pg80_serial(b"\x00\x83\x00\x04abcd") is None
    assert dr.vpd_pg80_serial(b"") is None


# --------------------------------------------------------------------------- the module

def run_module(tmp_path, **args):
    argsfile = tmp_path / ("args-%d.json" % len(list(tmp_path.glob("args-*.json"))))
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, "-m", MOD, str(argsfile)], capture_output=True, text=True,
                          cwd=COLLECTIONS, timeout=300, check=False)
    return json.loads(proc.stdout)


def test_module_on_fake_sysfs(tmp_path, fake_host):
    sysfs, dev = fake_host
    r = run_module(tmp_path, sysfs_root=sysfs, dev_root=dev, _ansible_check_mode=True)
    assert r["changed"] is False and not r.get("failed")
    by = {d["name"]: d for d in r["drives"]}
    assert by["nvme0n1"]["firmware"] == "GDC5602Q"
    assert by["sda"]["serial"] == "WD-WX12A3456789"
    assert by["nvme0n1"]["health"]["collected"] is False
    assert "fake sysfs" in by["nvme0n1"]["health"]["reason"]
    assert {n["name"] for n in r["not_collected"]} == set(by)


def test_module_live_says_what_it_collected(tmp_path):
    r = run_module(tmp_path, targets=["/"])
    assert not r.get("failed"), r
    assert set(r["tools"]) == {"smartctl", "nvme", "lsblk"}
    for d in r["drives"]:
        h = d["health"]
        assert h["collected"] in (True, False)
        if not h["collected"]:
            assert h["reason"] and {"name": d["name"], "reason": h["reason"]} in r["not_collected"]


def test_module_guard_refusal_fails_before_anything(tmp_path):
    f = tmp_path / "plain-file"
    f.write_bytes(b"x" * 4096)
    r = run_module(tmp_path, health=False, check_devices=[{"device": str(f), "destroy_data": True}])
    assert r["failed"] is True
    assert r["msg"] == "raw device target %s refused: %s is not a block device" % (f, f)
    assert r["guard"][0]["ok"] is False
    assert f.read_bytes() == b"x" * 4096
    r = run_module(tmp_path, health=False, fail_on_refusal=False,
                   check_devices=[{"device": str(f)}])
    assert not r.get("failed") and r["guard"][0]["reasons"][0].startswith("destroy_data is False")


def test_module_firmware_override_shows_on_one_host(tmp_path):
    """What the fleet test does: one host's fake sysfs carries another firmware."""
    a = build_fake_sysfs(str(tmp_path / "a"))
    b = build_fake_sysfs(str(tmp_path / "b"), overrides={"nvme0n1": {"device/firmware_rev": "GDC5302Q"}})
    fw = []
    for sysfs, dev in (a, b):
        r = run_module(tmp_path, sysfs_root=sysfs, dev_root=dev, health=False)
        fw.append({d["name"]: d["firmware"] for d in r["drives"]}["nvme0n1"])
        assert "not_collected" not in r and "health" not in r["drives"][0]
    assert fw == ["GDC5602Q", "GDC5302Q"]


def test_module_guard_on_real_loop_devices(tmp_path):
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root, losetup and mkfs.ext4")
    imgs, devs = [], []
    try:
        for i in range(2):
            img = str(tmp_path / ("d%d.img" % i))
            with open(img, "wb") as f:
                f.truncate(32 * 1024 * 1024)
            devs.append(loopdev.attach_or_skip(img))
            imgs.append(img)
        subprocess.run(["mkfs.ext4", "-q", "-F", devs[1]], check=True, capture_output=True, timeout=300)
        before = [hashlib.sha256(open(i, "rb").read()).hexdigest() for i in imgs]
        r = run_module(tmp_path, health=False, check_devices=[
            {"device": devs[0], "destroy_data": True}, {"device": devs[1], "destroy_data": True}])
        assert r["failed"] is True
        assert [g["ok"] for g in r["guard"]] == [True, False]
        assert r["msg"].startswith("raw device target %s refused: %s holds a signature: " % (devs[1], devs[1]))
        assert devs[0] not in r["msg"]
        assert {d["name"]: d["transport"] for d in r["drives"]}[os.path.basename(devs[0])] == "loop"
        assert [hashlib.sha256(open(i, "rb").read()).hexdigest() for i in imgs] == before
    finally:
        for d, img in zip(devs, imgs):
            loopdev.detach(d, img)
