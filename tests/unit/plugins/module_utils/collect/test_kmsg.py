# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/collect/kmsg.py, the kernel's word on each drive (docs/kernel-log.md): the parser and
classifier on kernel lines quoted by public reports (fixtures/kmsg_lines.txt), attribution
through a sysfs tree, properties (no input crashes the parser; a sequence number is never
counted twice), and live: records written into the real /dev/kmsg naming a loop device of
the test's own."""
import json
import os
import time
import uuid

import pytest
from hypothesis import given, settings, strategies as st

import loopdev
import test_module_iobench
from faultdrive.fixtures import faultdrive  # noqa: F401  pylint: disable=unused-import
import test_module_job as tj
import unitpaths
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import kmsg, probes

HERE = unitpaths.UNIT
FIXTURE = os.path.join(HERE, "fixtures", "kmsg_lines.txt")


def fixture_lines():
    out, source = [], None
    with open(FIXTURE) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("# source:") or line.startswith("# format:"):
                source = line.split(":", 1)[1].strip()
            if not line or line.startswith("#"):
                continue
            kind, device, text = line.split("|", 2)
            out.append((kind, None if device == "-" else device, text, source))
    return out


LINES = fixture_lines()
iobench_binary = test_module_iobench.iobench_binary   # the fixture (the real binary)


def test_fixture_covers_every_kind_with_a_source():
    kinds = {k for k, _d, _t, _s in LINES}
    assert kinds == set(kmsg.KINDS), set(kmsg.KINDS) ^ kinds
    assert all(s for _k, _d, _t, s in LINES)


@pytest.mark.parametrize("kind,device,text,source", LINES, ids=["%s:%s" % (k, t[:40]) for k, _d, t, _s in LINES])
def test_fixture_line_classified_and_device_extracted(kind, device, text, source):
    found = kmsg.classify(text)
    assert found is not None, "not classified: %r (%s)" % (text, source)
    got_kind, severity, refs = found
    assert got_kind == kind
    assert severity == kmsg.SEVERITY[kind] and severity in (("note",) if kind == probes.PROBE else ("error", "warning"))
    got_device, _disks = kmsg.Resolver("/nonexistent").attribute(refs)
    assert got_device == device


@pytest.mark.parametrize("text", [
    "EXT4-fs (vda): mounted filesystem 00000000-0000-0000-0000-000000000000 r/w without journal.",
    "ata3.00: configured for UDMA/133",
    "ata1: SATA link up 6.0 Gbps (SStatus 133 SControl 300)",
    "sd 0:0:0:0: [sda] Attached SCSI disk",
    "nvme nvme0: 8/0/0 default/read/poll queues",
    "BTRFS info (device sda1): disk space caching is enabled",
    "XFS (sdb1): Mounting V5 Filesystem",
    "md/raid1:md0: active with 2 out of 2 mirrors",
    "device-mapper: uevent: version 1.0.3",
    "e1000e 0000:00:19.0 eth0: Link is Up 1000 Mbps Full Duplex",
])
def test_ordinary_messages_are_not_storage_errors(text):
    assert kmsg.classify(text) is None


def test_parse_record_with_dictionary():
    raw = (b"3,1234,5678901,-,caller=T42;I/O error, dev sdb, sector 2048 op 0x0:(READ) flags 0x0 "
           b"phys_seg 1 prio class 2\n SUBSYSTEM=block\n DEVICE=b8:16\n")
    rec = kmsg.parse_record(raw)
    assert rec["seq"] == 1234 and rec["usec"] == 5678901 and rec["level"] == 3 and rec["facility"] == 0
    assert rec["text"].startswith("I/O error, dev sdb")
    assert rec["fields"] == {"SUBSYSTEM": "block", "DEVICE": "b8:16"}
    assert kmsg.parse_record(b"no record here") is None
    assert kmsg.parse_record(b"x,1,2,-;text") is None


# --------------------------------------------------------------------------- attribution (sysfs tree)

def _link(target, link):
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(target, link)


@pytest.fixture
def tree(tmp_path):
    """A sysfs tree: ata3 port -> host2 -> 2:0:0:0 -> sda (partition sda1); nvme0 with
    namespaces nvme0n1 (partition nvme0n1p1) and nvme0n2; dm-0 on sda1; iSCSI session1 on
    host3 carrying LUN 1 as sdb."""
    root = tmp_path
    dev = root / "devices" / "pci0000:00" / "0000:00:1f.2" / "ata3"
    sda = dev / "host2" / "target2:0:0" / "2:0:0:0" / "block" / "sda"
    (sda / "sda1").mkdir(parents=True)
    (sda / "sda1" / "partition").write_text("1\n")
    (dev / "ata_port" / "ata3").mkdir(parents=True)
    _link(dev / "ata_port" / "ata3", root / "class" / "ata_port" / "ata3")
    os.symlink(dev, dev / "ata_port" / "ata3" / "device")
    _link(dev / "host2" / "target2:0:0" / "2:0:0:0", root / "class" / "scsi_disk" / "2:0:0:0" / "device")
    nvme = root / "devices" / "pci0000:00" / "0000:01:00.0" / "nvme" / "nvme0"
    for ns in ("nvme0n1", "nvme0n2"):
        (nvme / ns).mkdir(parents=True)
        _link(nvme / ns, root / "class" / "block" / ns)
    (nvme / "nvme0n1" / "nvme0n1p1").mkdir()
    (nvme / "nvme0n1" / "nvme0n1p1" / "partition").write_text("1\n")
    _link(nvme, root / "class" / "nvme" / "nvme0")
    dm0 = root / "devices" / "virtual" / "block" / "dm-0"
    (dm0 / "slaves").mkdir(parents=True)
    os.symlink(sda / "sda1", dm0 / "slaves" / "sda1")
    for name, node in (("sda", sda), ("sda1", sda / "sda1"), ("dm-0", dm0),
                       ("nvme0n1p1", nvme / "nvme0n1" / "nvme0n1p1")):
        _link(node, root / "class" / "block" / name)
    _link(sda, root / "dev" / "block" / "8:0")
    _link(dm0, root / "dev" / "block" / "253:0")
    session = root / "devices" / "platform" / "host3" / "session1"
    (session / "target3:0:0" / "3:0:0:1" / "block" / "sdb").mkdir(parents=True)
    (session / "iscsi_session" / "session1").mkdir(parents=True)
    _link(session / "iscsi_session" / "session1", root / "class" / "iscsi_session" / "session1")
    os.symlink(session, session / "iscsi_session" / "session1" / "device")
    return str(root)


@pytest.mark.parametrize("text,fields,device,disks", [
    ("ata3.00: exception Emask 0x0 SAct 0x1 SErr 0x0 action 0x0", None, "ata3", ["sda"]),
    ("sd 2:0:0:0: Unhandled error code", None, "2:0:0:0", ["sda"]),
    ("Buffer I/O error on dev sda1, logical block 0, async page read", None, "sda1", ["sda"]),
    ("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0x10", None, "nvme0",
     ["nvme0n1", "nvme0n2"]),
    ("EXT4-fs error (device nvme0n1p1): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0",
     None, "nvme0n1p1", ["nvme0n1"]),
    ("XFS (dm-0): metadata I/O error in \"xfs_trans_read_buf_map\" at daddr 0x2 len 1 error 5", None, "dm-0",
     ["sda"]),
    ("device-mapper: thin: 253:0: metadata operation 'dm_thin_insert_block' failed: error = -28", None, "253:0",
     ["sda"]),
    # the text names a SCSI address sysfs does not know; the record's DEVICE key gives the disk
    ("sd 9:0:0:0: [unknown] Sense Key : Hardware Error [current]", {"DEVICE": "b8:0"}, "9:0:0:0", ["sda"]),
    ("sd 9:0:0:0: [unknown] Sense Key : Hardware Error [current]", None, "9:0:0:0", []),
    ("Sense Key : Hardware Error [current]", {"DEVICE": "b8:0"}, "8:0", ["sda"]),
    # a bracket name sysfs does not know: the SCSI address
    ("sd 2:0:0:0: [sdz] tag#1 Sense Key : Medium Error [current]", None, "sdz", ["sda"]),
    # an iSCSI session's lines: the disks the session carries (a LUN's path); a session that
    # is gone names itself and no disk
    ("connection1:0: detected conn error (1020)", None, "session1", ["sdb"]),
    ("session1: session recovery timed out after 5 secs", None, "session1", ["sdb"]),
    ("session7: session recovery timed out after 120 secs", None, "session7", []),
    # a disk sysfs no longer knows (dropped off the bus): its name, partition stripped
    ("I/O error, dev sdq3, sector 8 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2", None, "sdq3", ["sdq"]),
])
def test_attribution_to_whole_disks(tree, text, fields, device, disks):
    rec = {"seq": 7, "usec": 1000000, "level": 3, "facility": 0, "text": text, "fields": fields or {}}
    msg = kmsg.message(rec, kmsg.Resolver(tree), workload="w1", clock=(2.0, 1000.0))
    assert msg["device"] == device
    assert kmsg.message_drives(msg) == disks
    assert msg["drive"] == (disks[0] if disks else None)
    assert msg["epoch"] == 999.0 and msg["time_s"] == 1.0 and msg["level"] == "err"


@pytest.mark.parametrize("text,state,map_,path,drive", [
    # drivers/md/dm-mpath.c fail_path / reinstate_path, with the map (v5.x on) and without (older)
    ("device-mapper: multipath: 253:0: Failing path 8:0.", "failed", "253:0", "8:0", "sda"),
    ("device-mapper: multipath: 253:0: Reinstating path 8:0.", "reinstated", "253:0", "8:0", "sda"),
    ("device-mapper: multipath: Reinstating path 8:16.", "reinstated", None, "8:16", None),
    ("device-mapper: multipath: 253:0: Failing path 8:0", None, None, None, None),      # not the kernel's format
    ("sd 2:0:0:0: [sda] Reinstating path", None, None, None, None),
])
def test_multipath_path_states_and_only_a_failure_is_a_storage_message(tree, text, state, map_, path, drive):
    rec = {"seq": 9, "usec": 3000000, "level": 4, "facility": 0, "text": text, "fields": {}}
    got = kmsg.path_state(rec, kmsg.Resolver(tree), clock=(4.0, 1000.0))
    if state is None:
        assert got is None
        return
    assert got == {"seq": 9, "time_s": 3.0, "epoch": 999.0, "state": state, "map": map_, "path": path,
                   "drive": drive, "text": text}
    # a failing path is a dm_error on the path's disk; a reinstated one is no storage message
    msg = kmsg.message(rec, kmsg.Resolver(tree), clock=(4.0, 1000.0))
    assert (msg["kind"], msg["drive"]) == ("dm_error", drive) if state == "failed" else msg is None


def test_ata_port_without_a_device_link_resolves_through_its_parents(tree):
    os.unlink(os.path.join(tree, "devices", "pci0000:00", "0000:00:1f.2", "ata3", "ata_port", "ata3", "device"))
    assert kmsg.Resolver(tree).attribute([("ata", "3")]) == ("ata3", ["sda"])


def test_journal_entry_parsed():
    entry = {"__CURSOR": "s=abc;i=1f4;b=x;m=1;t=2;x=3", "__REALTIME_TIMESTAMP": "1764180000123456",
             "_SOURCE_MONOTONIC_TIMESTAMP": "5000000", "PRIORITY": "3", "_KERNEL_DEVICE": "b7:5",
             "MESSAGE": "I/O error, dev loop5, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2"}
    rec = kmsg.parse_journal_entry(entry)
    assert rec["seq"] == 0x1f4 and rec["usec"] == 5000000 and rec["epoch"] == 1764180000.123
    assert rec["fields"]["DEVICE"] == "b7:5" and rec["cursor"] == entry["__CURSOR"]
    raw = dict(entry, MESSAGE=list(b"Buffer I/O error on dev sdb1, logical block 3"))
    assert kmsg.parse_journal_entry(raw)["text"].startswith("Buffer I/O error on dev sdb1")
    assert kmsg.parse_journal_entry({"MESSAGE": 5}) is None


def test_unreadable_log_is_not_collected_with_its_reason(tmp_path):
    log = kmsg.KernelLog(kmsg_path=str(tmp_path / "no-kmsg"), journalctl=str(tmp_path / "no-journalctl")).start()
    sec = log.section()
    assert sec["collected"] is False and sec["source"] is None
    assert "no-kmsg: not found" in sec["reason"] and "no-journalctl" in sec["reason"]
    assert log.poll() == 0 and sec["messages"] == [] and sec["counts"] == {}


# --------------------------------------------------------------------------- properties

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=300, deadline=None)
@given(head=st.text(max_size=40), text=_TEXT,
       fields=st.lists(st.tuples(st.text(max_size=12), st.text(max_size=30)), max_size=4))
def test_property_arbitrary_records_never_crash(head, text, fields):
    raw = "%s;%s\n%s" % (head, text, "".join(" %s=%s\n" % kv for kv in fields))
    rec = kmsg.parse_record(raw.encode("utf-8", "surrogatepass"))
    if rec is None:
        return
    msg = kmsg.message(rec, kmsg.Resolver("/nonexistent"), clock=(1.0, 1.0))
    if msg is not None:
        assert msg["kind"] in kmsg.KINDS
        json.dumps(msg)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, prefix=st.sampled_from(["", "I/O error, dev ", "Buffer I/O error on dev ", "ata",
                                           "nvme nvme", "sd ", "EXT4-fs error (device ", "XFS (",
                                           "BTRFS error (device ", "md/raid1:", "device-mapper: x: "]))
def test_property_storage_like_texts_never_crash(text, prefix):
    found = kmsg.classify(prefix + text)
    if found is not None:
        kmsg.Resolver("/nonexistent").attribute(found[2], {"DEVICE": text[:10]})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=0, max_value=60), max_size=12), max_size=8))
def test_property_a_sequence_number_is_taken_once(reads):
    """Each read sees records in increasing order from some point (a reader overrun restarts
    at an older record still in the buffer: repeats); every seq is taken at most once and
    ``lost`` counts exactly the numbers skipped between the first and the last taken."""
    tracker = kmsg.SeqTracker()
    taken = []
    for batch in reads:
        for seq in sorted(batch):
            if tracker.take(seq):
                taken.append(seq)
    assert len(taken) == len(set(taken))
    assert taken == sorted(taken)
    if taken:
        assert tracker.lost == (taken[-1] - taken[0] + 1) - len(taken)


# --------------------------------------------------------------------------- live: /dev/kmsg

def _write_kmsg(text, level=3):
    # one open per record: /dev/kmsg rate-limits writers per open file
    with open("/dev/kmsg", "w") as fh:
        fh.write("<%d>%s\n" % (level, text))


def _loop(size_mb):
    if loopdev.missing_tools() or not os.access("/dev/kmsg", os.R_OK | os.W_OK):
        pytest.skip(loopdev.missing_tools() or "needs /dev/kmsg readable and writable (root)")
    return loopdev.loop_ext4(size_mb, prefix="fq-kmsg-")


@pytest.fixture
def loop_dev():
    with _loop(16) as loop:
        yield loop


@pytest.fixture
def loop_big():
    # iobench keeps a 64 MiB free-space margin beside its working set
    with _loop(160) as loop:
        yield loop


def test_live_kmsg_reads_exactly_the_new_records_of_its_loop_device(loop_dev):
    name = loop_dev["name"]
    mark = "fq-kmsg-%s" % uuid.uuid4().hex[:12]
    line = "I/O error, dev %s, sector %%d op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2 %s" % (name, mark)
    _write_kmsg(line % 1)                                 # before the reader's start: context
    log = kmsg.KernelLog().start()
    try:
        assert log.section()["source"] == "kmsg"
        start_seq = log.section()["start_seq"]
        _write_kmsg(line % 2)
        _write_kmsg("fleetqual test note, not a storage message %s" % mark, level=6)
        _write_kmsg("Buffer I/O error on dev %s, logical block 9, async page read %s" % (name, mark))
        log.poll(workload="w1")
        log.poll(workload="w2")                           # nothing new: nothing read twice
        sec = log.section()
    finally:
        log.close()
    mine = [m for m in sec["messages"] if mark in m["text"]]
    assert [(m["kind"], m["before_run"], m["workload"]) for m in mine] == [
        ("io_error", True, None), ("io_error", False, "w1"), ("buffer_io_error", False, "w1")]
    assert all(m["drive"] == name and m["device"] == name for m in mine)
    assert all(m["seq"] > start_seq for m in mine if not m["before_run"])
    assert mine[0]["seq"] <= start_seq
    assert len({m["seq"] for m in sec["messages"]}) == len(sec["messages"])
    # the counts are the run's own: the record before the start is counted as context only
    assert sec["counts"][name]["io_error"] >= 1 and sec["counts"][name]["buffer_io_error"] >= 1
    assert sec["counts_before"][name]["io_error"] >= 1
    assert sec["lost"] == 0 and sec["collected"] is True and sec["reason"] is None


# --------------------------------------------------------------------------- live: the detached job

@pytest.mark.slow
def test_live_job_records_the_kernel_messages_of_each_workload(loop_big, iobench_binary):
    """A real detached job (modules/job.py) on the loop device's filesystem: a record written
    before the job is context, one written while workload w1 runs is w1's, and the module's
    final status carries the kernel section the controller judges."""
    binary, loop_dev = iobench_binary, loop_big
    name = loop_dev["name"]
    mark = "fq-kmsg-job-%s" % uuid.uuid4().hex[:12]
    path = os.path.join(loop_dev["mnt"], "t")
    assert not tj.call(tj.TEST_DIR, {"path": path, "datasets": ["set"]}).get("failed")
    _write_kmsg("I/O error, dev %s, sector 1 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2 %s-before" % (name, mark))
    r = tj.start(binary, path, [tj.wl(1, 4), tj.wl(2, 1)], deadline_s=300)
    assert not r.get("failed"), r
    before = None
    for _attempt in range(600):
        st = tj.call(tj.JOB, {"path": path})["status"]
        if st["state"] != "running" or st.get("index") == 1 and st.get("current") == "w1":
            before = st.get("current") if st["state"] == "running" else None
            break
        time.sleep(0.05)
    _write_kmsg("I/O error, dev %s, sector 2 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2 %s-during" % (name, mark))
    after = tj.call(tj.JOB, {"path": path})["status"].get("current")
    final = tj.wait_final(path)
    kernel = final["kernel"]
    assert kernel["collected"] is True and kernel["source"] == "kmsg"
    mine = dict((m["text"].rsplit("-", 1)[1], m) for m in kernel["messages"] if mark in m["text"])
    assert set(mine) == {"before", "during"}, (before, after, final["state"], final.get("error"), kernel)
    assert mine["before"]["before_run"] is True and mine["before"]["drive"] == name
    assert mine["during"]["before_run"] is False and mine["during"]["drive"] == name
    if before == after == "w1":
        assert mine["during"]["workload"] == "w1"
    assert kernel["counts"][name]["io_error"] >= 1


# --------------------------------------------------------------------------- live: a real EIO

@pytest.mark.kernel_errors   # the kernel rate-limits I/O error lines machine-wide (pytest.ini)
def test_live_eio_on_the_fault_drive_is_a_kernel_io_error_of_its_loop_device(faultdrive):  # noqa: F811
    """A read the fault drive (tests/faultdrive) fails with EIO makes the kernel log a genuine
    block-layer I/O error line; the reader attributes it to the drive's loop device. The block
    layer rate-limits these lines machine-wide (10 per 5 s): after a miss, wait and read again."""
    import subprocess
    fd = faultdrive(size=8 << 20, name="kmsg")
    name = os.path.basename(fd.device)
    fd.set([{"kind": "eio", "start": 1 << 20, "length": 4096, "ops": "read"}])
    log = kmsg.KernelLog().start()
    try:
        found = []
        for _attempt in range(3):
            res = subprocess.run(["dd", "if=" + fd.device, "of=/dev/null", "bs=4096", "count=1", "skip=256",
                                  "iflag=direct"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
            assert res.returncode != 0 and b"Input/output error" in res.stderr
            for _attempt in range(40):
                log.poll(workload="eio-read")
                found = [m for m in log.section()["messages"] if m["drive"] == name and not m["before_run"]
                         and m["kind"] == "io_error"]
                if found:
                    break
                time.sleep(0.05)
            if found:
                break
            time.sleep(5.5)
    finally:
        log.close()
    assert found, "no kernel I/O error line attributed to %s" % name
    m = found[0]
    assert m["device"] == name and m["workload"] == "eio-read" and m["level"] == "err"
    assert "sector %d" % ((1 << 20) // 512) in m["text"] and "(READ)" in m["text"]
    assert log.section()["counts"][name]["io_error"] >= 1


def test_the_job_keeps_the_run_s_path_states_in_order_and_bounded(tree):
    class Source:
        name, lost = "kmsg", 0

        def __init__(self, recs):
            self.recs = recs

        def read(self):
            out, self.recs = self.recs, []
            return out

    texts = ["device-mapper: multipath: 253:0: Failing path 8:0.", "sd 2:0:0:0: [sda] Synchronize Cache failed",
             "device-mapper: multipath: 253:0: Reinstating path 8:0."]
    log = kmsg.KernelLog(sysfs_root=tree)
    log.source = Source([{"seq": i, "usec": (i + 1) * 10 ** 6, "level": 4, "facility": 0, "text": t, "fields": {}}
                         for i, t in enumerate(texts)])
    log.poll("w1")
    section = log.section()
    assert [(p["state"], p["drive"]) for p in section["path_states"]] == [("failed", "sda"), ("reinstated", "sda")]
    assert section["counts"] == {"sda": {"dm_error": 1}} and len(section["messages"]) == 1
    log.source = Source([{"seq": 10 + i, "usec": 1, "level": 4, "facility": 0, "text": texts[0], "fields": {}}
                         for i in range(kmsg.MAX_PATH_STATES)])
    log.poll("w1")
    assert len(log.section()["path_states"]) == kmsg.MAX_PATH_STATES
    assert kmsg.not_collected("x")["path_states"] == []
