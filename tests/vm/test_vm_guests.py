"""The guest library itself (tests/vm/guests.py): the QEMU command line a drive spec makes,
the checks of a spec, QMP on a live guest, and the exit paths that must leave no QEMU
process and no file behind.

* A Hypothesis property: for any valid list of drives, :func:`guests.drive_args` gives one
  ``-drive`` and one ``-device`` per drive, and parsing them back with QEMU's option syntax
  (``,`` separates, ``,,`` is a comma) gives every value of the spec, each device on its own
  drive node, ids unique; an invalid spec is refused naming the field. The same for faulty
  drives: an nbdkit drive is the NBD export of the socket its nbdkit serves, a drive with
  read errors is blkdebug over its raw file with a rule for exactly each 4 KiB of its regions.
  (Hanging, power loss and restart on the same disk files are proven by
  ``test_vm_faults.py``.)
* QMP on ``vm-nvme``'s second drive (FQNVME02, not the first run's target): ``qom-get`` reads
  the healthy byte it booted with, ``qom-set`` raises a critical warning at run time, the
  guest's own ``nvme smart-log`` reads it, and clearing it is read back too. (A drive booted
  with the warning FAILs its host through the playbook: ``test_vm_drives.py``, long suite.)
* Exit paths, each in a child process holding a started guest: SIGTERM (the handler stops
  the guest: QEMU gone, its directory removed) and SIGKILL (QEMU dies with its starter,
  ``PR_SET_PDEATHSIG``; the next import's sweep removes the directory).
"""
import json
import os
import signal
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import guests
import proctree
from guests import Drive
from conftest import CRITICAL_WARNING

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_opts(text):
    """QEMU's ``key=value,...``: a single comma separates, a doubled one is a comma; a first
    word without ``=`` (the device model) becomes a key with an empty value."""
    out, buf, i = {}, "", 0
    while i <= len(text):
        if text[i:i + 2] == ",,":
            buf += ","
            i += 2
            continue
        if i == len(text) or text[i] == ",":
            k, eq, v = buf.partition("=")
            assert k not in out and (eq or not out), (k, text)
            out[k] = v
            buf = ""
        else:
            buf += text[i]
        i += 1
    return out


SERIAL = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=20)


@st.composite
def drives(draw):
    out, serials = [], set()
    for n in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(guests.KINDS))
        serial = draw(SERIAL.filter(lambda s: s not in serials), label="serial %d" % n)
        serials.add(serial)
        kw = {"size": draw(st.integers(256, 1 << 20)) * 4096}
        if kind == "scsi":
            kw.update(vendor=draw(st.none() | SERIAL.map(lambda s: s[:8])),
                      product=draw(st.none() | SERIAL.map(lambda s: s[:16])),
                      rotation_rate=draw(st.none() | st.sampled_from([1, 5400, 7200, 15000])))
        if kind in ("scsi", "virtio"):
            kw["write_cache"] = draw(st.none() | st.booleans())
        if kind == "nvme":
            kw["smart_critical_warning"] = draw(st.none() | st.integers(0, 255))
        throttle = {}
        if draw(st.booleans()):
            throttle["iops-total"] = draw(st.integers(1, 100000))
            if draw(st.booleans()):
                throttle["iops-total-max"] = throttle["iops-total"] + draw(st.integers(0, 100000))
                if draw(st.booleans()):
                    throttle["iops-total-max-length"] = draw(st.integers(1, 3600))
        out.append(Drive(kind, serial, throttle=throttle, **kw))
    return out


@settings(max_examples=300, deadline=None)
@given(drives(), st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=12))
def test_drive_args_round_trip(specs, dirname):
    files = ["/tmp/%s/drive-%d.raw" % (dirname, i) for i in range(len(specs))]
    argv = guests.drive_args(specs, files)
    pairs = [(argv[i], argv[i + 1]) for i in range(0, len(argv), 2)]
    assert all(flag in ("-drive", "-device") for flag, value in pairs), argv
    drv = [parse_opts(v) for f, v in pairs if f == "-drive"]
    dev = [parse_opts(v) for f, v in pairs if f == "-device" and not v.startswith("virtio-scsi-pci,")]
    assert len(drv) == len(dev) == len(specs)
    assert any(v == "virtio-scsi-pci,id=scsi0" for flag, v in pairs) == any(d.kind == "scsi" for d in specs)
    ids = [o["id"] for o in drv] + [o["id"] for o in dev]
    assert len(ids) == len(set(ids))
    model = {"nvme": "nvme", "scsi": "scsi-hd", "virtio": "virtio-blk-pci"}
    for d, path, o, v in zip(specs, files, drv, dev):
        assert (o["if"], o["format"], o["file"], o["werror"], o["rerror"]) == ("none", "raw", path, "report", "report")
        assert {k[len("throttling."):]: int(x) for k, x in o.items() if k.startswith("throttling.")} == d.throttle
        assert v[model[d.kind]] == "" and v["drive"] == o["id"] and v["serial"] == d.serial, (d, v)
        assert v["id"] == guests.device_id(d, specs.index(d) + 1)
        for attr, key in (("vendor", "vendor"), ("product", "product"), ("rotation_rate", "rotation_rate"),
                          ("smart_critical_warning", "smart_critical_warning")):
            value = getattr(d, attr)
            assert v.get(key) == (None if value is None else str(value)), (attr, d, v)
        assert v.get("write-cache") == {None: None, True: "on", False: "off"}[d.write_cache]
        if d.kind == "scsi":
            assert v["bus"] == "scsi0.0"


@st.composite
def faulty_drives(draw):
    """Drives of any kind that are served by nbdkit, or whose reads fail in whole 4 KiB regions."""
    out = []
    for n in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(guests.KINDS))
        size = draw(st.integers(256, 4096)) * 4096
        if draw(st.booleans()):
            out.append(Drive(kind, "FQF%02d" % n, size=size, nbdkit=True))
            continue
        regions = []
        for _r in range(draw(st.integers(1, 3))):
            blocks = draw(st.integers(1, 32))
            start = draw(st.integers(0, size // 4096 - blocks))
            regions.append((start * 4096, blocks * 4096))
        out.append(Drive(kind, "FQF%02d" % n, size=size, read_errors=tuple(regions)))
    return out


def blkdebug_rules(text):
    """The ``[inject-error]`` sections of a blkdebug configuration, each a dict of its keys."""
    rules = []
    for line in text.splitlines():
        if line.strip() == "[inject-error]":
            rules.append({})
        elif "=" in line:
            k, _eq, v = line.partition("=")
            rules[-1][k.strip()] = v.strip().strip('"')
    return rules


@settings(max_examples=200, deadline=None)
@given(faulty_drives(), st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=12))
def test_faulty_drive_args_round_trip(specs, dirname):
    """An nbdkit drive is an NBD export on the unix socket its nbdkit serves the raw file on;
    a drive with read errors is blkdebug over its raw file, whose configuration fails exactly
    the sectors of its regions, reads only, every time."""
    files = ["/tmp/%s/drive-%s.raw" % (dirname, d.serial) for d in specs]
    argv = guests.drive_args(specs, files)
    drv = [parse_opts(v) for f, v in zip(argv[::2], argv[1::2]) if f == "-drive"]
    assert len(drv) == len(specs)
    for d, path, o in zip(specs, files, drv):
        assert (o["format"], o["werror"], o["rerror"]) == ("raw", "report", "report")
        assert "file" not in o          # the source is the file.* options, never the raw file itself
        if d.nbdkit:
            assert (o["file.driver"], o["file.server.type"]) == ("nbd", "unix")
            served = guests.nbdkit_args(path)
            assert o["file.server.path"] == served[served.index("--unix") + 1] == guests.aux_path(path, "nbd")
            assert "file=" + path in served and served.index("--filter=pause") < served.index("--filter=error")
            continue
        assert (o["file.driver"], o["file.image.filename"]) == ("blkdebug", path)
        assert o["file.config"] == guests.aux_path(path, "blkdebug")
        rules = blkdebug_rules(guests.blkdebug_config(d))
        assert all((r["event"], r["iotype"], r["errno"], r["once"]) == ("read_aio", "read", "5", "off") for r in rules)
        # one rule per 4 KiB: every 4 KiB block of a region, and no other, holds a rule's sector
        failing = {int(r["sector"]) * 512 // 4096 for r in rules}
        wanted = {b for off, length in d.read_errors for b in range(off // 4096, (off + length) // 4096)}
        assert failing == wanted and len(rules) == sum(length // 4096 for _off, length in d.read_errors)


@pytest.mark.parametrize("spec,field", [
    (dict(kind="nvme", serial="A", nbdkit="yes"), "nbdkit"),
    (dict(kind="nvme", serial="A", read_errors=[(0, 4096)]), "read_errors"),
    (dict(kind="nvme", serial="A", read_errors=((0, 4096),), nbdkit=True), "read_errors"),
    (dict(kind="nvme", serial="A", read_errors=((512, 4096),)), "read_errors"),
    (dict(kind="nvme", serial="A", read_errors=((0, 1000),)), "read_errors"),
    (dict(kind="nvme", serial="A", size=1 << 20, read_errors=((1 << 20, 4096),)), "read_errors"),
    (dict(kind="nvme", serial="A", size=8 << 20, read_errors=((0, 8 << 20),)), "read_errors"),
])
def test_invalid_faulty_drive_refused_naming_the_field(spec, field):
    with pytest.raises(ValueError, match="^" + field):
        guests.check_drive(Drive(**spec))


@pytest.mark.parametrize("spec,field", [
    (dict(kind="sata", serial="A"), "kind"),
    (dict(kind="nvme", serial="has space"), "serial"),
    (dict(kind="nvme", serial="X" * 21), "serial"),
    (dict(kind="nvme", serial="A", size=1000), "size"),
    (dict(kind="nvme", serial="A", rotation_rate=7200), "rotation_rate"),
    (dict(kind="scsi", serial="A", smart_critical_warning=1), "smart_critical_warning"),
    (dict(kind="nvme", serial="A", smart_critical_warning=256), "smart_critical_warning"),
    (dict(kind="scsi", serial="A", vendor="NINECHARS"), "vendor"),
    (dict(kind="virtio", serial="A", throttle={"iops": 5}), "throttle"),
    (dict(kind="virtio", serial="A", throttle={"iops-total": 0}), "throttle.iops-total"),
    (dict(kind="virtio", serial="A", throttle={"iops-total": 9, "iops-total-max-length": 3}),
     "throttle.iops-total-max-length"),
])
def test_invalid_drive_refused_naming_the_field(spec, field):
    with pytest.raises(ValueError, match="^" + field):
        guests.check_drive(Drive(**spec))


@pytest.mark.vm("vm-nvme")
@pytest.mark.slow
def test_qmp_raises_and_clears_a_critical_warning_the_guest_reads(vm_guest):
    g = vm_guest("vm-nvme")
    drive = next(d for d in g.drives if d.serial == "FQNVME02")
    path = g.qom_path(drive)
    # that drive by its serial's by-id link (not by its probe order)
    dev = g.by_id(drive.serial)

    def guest_reads():
        return json.loads(g.ssh("nvme smart-log %s -o json" % dev).stdout)["critical_warning"]
    assert g.qmp("qom-get", path=path, property="smart_critical_warning") == 0
    assert guest_reads() == 0
    try:
        g.qmp("qom-set", path=path, property="smart_critical_warning", value=CRITICAL_WARNING)
        assert g.qmp("qom-get", path=path, property="smart_critical_warning") == CRITICAL_WARNING
        assert guest_reads() == CRITICAL_WARNING
    finally:
        g.qmp("qom-set", path=path, property="smart_critical_warning", value=0)
    assert guest_reads() == 0
    with pytest.raises(guests.QMPError, match="DeviceNotFound|not found"):
        g.qmp("qom-get", path="/machine/peripheral/nvme99", property="smart_critical_warning")


CHILD = r"""
import sys, time
sys.path.insert(0, %(here)r)
import guests
g = guests.Guest("exitpath", drives=[guests.Drive("nvme", "FQEXIT01")], mem_mb=256, snapshot_ok=False).start()
while not __import__("os").path.exists(g.path("qmp.sock")):
    time.sleep(0.1)
g.qmp("query-status")
print(g.pid, g.dir, flush=True)
time.sleep(600)
"""


def _child_guest():
    p = subprocess.Popen([sys.executable, "-c", CHILD % {"here": HERE}], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert len(line) == 2, "the child did not start its guest (exit %s)" % p.poll()
    return p, int(line[0]), line[1]


@pytest.mark.vm
@pytest.mark.slow
@pytest.mark.skipif(guests.vmimage.unavailable() is not None, reason=str(guests.vmimage.unavailable()))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_exit_path_leaves_no_qemu_and_no_files(sig):
    p, pid, gdir = _child_guest()
    with open("/proc/%d/cmdline" % pid, "rb") as fh:
        assert b"qemu-system-x86_64" in fh.read()
    assert os.path.isdir(gdir)
    p.send_signal(sig)
    p.wait(timeout=60)
    assert proctree.wait_gone(pid, timeout=30), "qemu %d outlived its test process (%s)" % (pid, sig.name)
    if sig == signal.SIGTERM:
        assert p.returncode == 128 + sig, p.returncode
        assert not os.path.exists(gdir)
    else:
        # nothing could run in the killed process: the next import's sweep removes its files
        assert os.path.isdir(gdir)
        assert gdir in guests.sweep_stale()
        assert not os.path.exists(gdir)


@pytest.mark.parametrize("rc,stderr,failed", [
    (255, "Connection timed out during banner exchange\r\nConnection to 127.0.0.1 port 40022 timed out", True),
    (255, "kex_exchange_identification: read: Connection reset by peer", True),
    (255, "ssh: connect to host 127.0.0.1 port 40022: Connection refused", True),
    (255, "", False),                      # the command itself exited 255
    (1, "Connection refused", False),      # the command's own words, not ssh's exit
    (0, "", False),
])
def test_only_a_login_that_never_ran_the_command_is_tried_again(rc, stderr, failed):
    r = subprocess.CompletedProcess(["ssh"], rc, "", stderr)
    assert guests.transport_failed(r) is failed
