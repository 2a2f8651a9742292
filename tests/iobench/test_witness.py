"""--witness and `iobench witness-check` (docs/durability.md, docs/iobench.md "Witness"): a
writer records every write acknowledged as durable; the check reads those blocks back and
finds the ones the drive lost, tore or put elsewhere. The losses here are made by the test
itself between the two processes (the data files put back as they were before the run, a
4 KiB half overwritten, a block copied over another), the way a power cut would leave them;
the VM tier's drives with a volatile cache lose them for real (tests/vm/test_vm_durability.py)."""
import os
import shutil
import struct
import subprocess
import threading

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from iobench_helpers import BIN, loop_device, make, need_root, run

SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=1"}
SAN_MARKS = ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer", "runtime error:", "ERROR: LeakSanitizer")
HDR = 4096
GEOM = ["--file-num", "2", "--total-size", "4M"]
WRITER = ["--mode", "rndwr", "--verify", "--open-flags", "dsync,direct", "--threads", "3"]


def entries(path):
    """(gen, ack_ms, seq, check) of every block of a witness file, read by the test itself."""
    with open(path, "rb") as fh:
        data = fh.read()
    return [struct.unpack_from("<4I", data, HDR + 16 * i) for i in range((len(data) - HDR) // 16)]


def acked_blocks(path):
    return {i for i, e in enumerate(entries(path)) if e[0]}


@pytest.fixture
def shm(tmp_path):
    """A directory in shared memory for witness files (removed afterwards)."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else str(tmp_path)
    d = os.path.join(base, "fq-witness-test-%d-%s" % (os.getpid(), tmp_path.name))
    os.mkdir(d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def stamped(iobench, tmp_path):
    d = tmp_path / "bench"
    d.mkdir()
    r = run(iobench, "prepare", "--dir", d, *GEOM, "--block-size", "4K", "--verify")
    assert r.rc == 0, r
    return str(d)


def write(iobench, d, witness, *extra, block="4K", time_s=1):
    r = run(iobench, "run", "--dir", d, *GEOM, "--block-size", block, *WRITER, "--time", time_s,
            "--witness", witness, *extra)
    assert r.rc == 0, r
    return r


def check(iobench, witness, *target):
    r = run(iobench, "witness-check", "--witness", witness, *target)
    assert r.rc in (0, 4), r
    return r, r.json


def test_every_acknowledged_write_is_found_and_copies_taken_while_writing_hold(iobench, stamped, shm):
    """Copies taken while the writer runs (as the controller takes its copy before the cut)
    hold only acknowledged generations: read back after the writer ended, every block they
    name holds that generation or a later one."""
    w = os.path.join(shm, "w")
    copies, stop = [], threading.Event()

    def copier():
        while not stop.is_set():
            if os.path.exists(w):
                try:
                    with open(w, "rb") as fh:
                        copies.append(fh.read())
                except FileNotFoundError:
                    pass
            stop.wait(0.05)

    t = threading.Thread(target=copier)
    t.start()
    try:
        r = write(iobench, stamped, w, time_s=2)
    finally:
        stop.set()
        t.join()
    assert r.json["verify"]["stale"] == 0
    final, fj = check(iobench, w, "--dir", stamped)
    assert final.rc == 0 and fj["acked"] == len(acked_blocks(w)) > 0, fj
    assert (fj["lost"], fj["torn"], fj["misplaced"], fj["unreadable_entries"]) == (0, 0, 0, 0), fj
    assert fj["intact"] == fj["acked"]
    assert len([c for c in copies if len(c) > HDR]) >= 5, "the copier saw the witness too rarely"
    for i, c in enumerate(copies[:: max(1, len(copies) // 8)]):
        cp = os.path.join(shm, "copy%d" % i)
        with open(cp, "wb") as fh:
            fh.write(c)
        if len(c) < HDR or not c.startswith(b'{"format": "iobench-witness"'):
            continue            # taken before the header was written
        _r, cj = check(iobench, cp, "--dir", stamped)
        assert (cj["lost"], cj["torn"], cj["misplaced"], cj["read_errors"]) == (0, 0, 0, 0), cj
        assert cj["acked"] <= fj["acked"] and cj["unreadable_entries"] <= 3, cj


def test_writes_the_drive_lost_are_counted_with_when_they_were_acknowledged(iobench, stamped, shm, tmp_path):
    old = tmp_path / "before"
    shutil.copy(os.path.join(stamped, "test_file.0"), old)
    w = os.path.join(shm, "w")
    write(iobench, stamped, w)
    shutil.copy(old, os.path.join(stamped, "test_file.0"))      # the drive kept nothing of file 0
    r, j = check(iobench, w, "--dir", stamped)
    acked = acked_blocks(w)
    in_file0 = {b for b in acked if b < 512}       # 2 MiB files of 4 KiB blocks
    assert r.rc == 4 and j["acked"] == len(acked)
    assert (j["lost"], j["torn"], j["intact"]) == (len(in_file0), 0, len(acked) - len(in_file0)), j
    times = [entries(w)[b][1] + j["witness"]["epoch_ms"] for b in in_file0]
    assert j["lost_acked_ms"] == {"first": min(times), "last": max(times)}
    s = j["samples"][0]
    assert s["kind"] == "lost" and s["file"] == 0 and s["block"] in in_file0
    assert s["found_run_id"] != j["witness"]["run_id"], s       # the data of before the run
    assert s["acked_gen"] == entries(w)[s["block"]][0] and s["acked_seq"] == entries(w)[s["block"]][2]


def test_a_block_the_drive_never_wrote_is_lost_not_torn(iobench, stamped, shm):
    """Zeros (a drive that kept nothing, not even the prepared data) carry no header: older
    data, so the block is lost; a header whose CRC fails is what makes a block torn."""
    w = os.path.join(shm, "w")
    write(iobench, stamped, w)
    blk = max(acked_blocks(w))
    fd = os.open(os.path.join(stamped, "test_file.1"), os.O_RDWR)
    try:
        os.pwrite(fd, b"\0" * 4096, (blk - 512) * 4096)
    finally:
        os.close(fd)
    r, j = check(iobench, w, "--dir", stamped)
    assert r.rc == 4 and (j["lost"], j["torn"]) == (1, 0), j
    assert j["samples"][0]["block"] == blk and j["samples"][0]["found_gen"] is None


def test_torn_and_misplaced_blocks(iobench, tmp_path, shm):
    d = tmp_path / "bench"
    d.mkdir()
    assert run(iobench, "prepare", "--dir", d, *GEOM, "--block-size", "8K", "--verify").rc == 0
    d = str(d)
    old = tmp_path / "before"
    shutil.copy(os.path.join(d, "test_file.1"), old)
    w = os.path.join(shm, "w")
    write(iobench, d, w, block="8K")
    acked = sorted(b for b in acked_blocks(w) if b >= 256)       # file 1: blocks 256..511 of 8 KiB
    half_old, sector, moved, dest = acked[:4]
    f1 = os.path.join(d, "test_file.1")
    with open(old, "rb") as fh:
        before = fh.read()
    fd = os.open(f1, os.O_RDWR)
    try:
        o = (half_old - 256) * 8192 + 4096                     # the second 4 KiB as before the run
        os.pwrite(fd, before[o:o + 4096], o)
        os.pwrite(fd, b"\xa5" * 512, (sector - 256) * 8192 + 1024)   # half a 4 KiB: bad CRC
        os.pwrite(fd, os.pread(fd, 8192, (moved - 256) * 8192), (dest - 256) * 8192)
    finally:
        os.close(fd)
    r, j = check(iobench, w, "--dir", d)
    assert r.rc == 4 and (j["torn"], j["misplaced"], j["lost"]) == (2, 1, 0), j
    kinds = {s["block"]: s["kind"] for s in j["samples"]}
    assert kinds == {half_old: "torn", sector: "torn", dest: "misplaced"}, j["samples"]
    assert {s["file"] for s in j["samples"]} == {1}


def test_an_entry_copied_in_the_middle_of_its_update_is_never_read_as_acknowledged(iobench, stamped, shm):
    w = os.path.join(shm, "w")
    write(iobench, stamped, w)
    blk = min(acked_blocks(w))
    with open(w, "r+b") as fh:        # the new generation with the old check: a copy between the stores
        fh.seek(HDR + 16 * blk)
        gen, ms, seq, chk = struct.unpack("<4I", fh.read(16))
        fh.seek(HDR + 16 * blk)
        fh.write(struct.pack("<4I", gen + 1, ms, seq, chk))
    _r, j = check(iobench, w, "--dir", stamped)
    assert j["unreadable_entries"] == 1 and j["lost"] == 0 and j["acked"] == len(acked_blocks(w)) - 1, j


def test_on_a_raw_device(iobench, shm):
    need_root()
    with loop_device(8) as (dev, _name, _backing, _mnt):
        w = os.path.join(shm, "w")
        r = run(iobench, "run", "--device", dev, "--size", "4M", "--block-size", "4K", *WRITER, "--time", 1,
                "--prepare", "--witness", w)
        assert r.rc == 0, r
        _r, j = check(iobench, w, "--device", dev)
        assert j["acked"] == len(acked_blocks(w)) > 0 and j["intact"] == j["acked"], j
        r = run(iobench, "witness-check", "--witness", w, "--dir", shm)
        assert r.rc == 2 and "give --device" in r.err, r


def test_the_witness_is_always_a_new_file(iobench, stamped, shm):
    w = os.path.join(shm, "mine")
    with open(w, "w") as fh:
        fh.write("a user's file")
    r = run(iobench, "run", "--dir", stamped, *GEOM, "--block-size", "4K", *WRITER, "--time", 1, "--witness", w)
    assert r.rc == 3 and "--witness" in r.err and "always a new file" in r.err, r
    with open(w) as fh:
        assert fh.read() == "a user's file"


def test_not_a_witness(iobench, stamped, shm):
    w = os.path.join(shm, "x")
    with open(w, "wb") as fh:
        fh.write(b"{}" + b"\0" * 5000)
    r = run(iobench, "witness-check", "--witness", w, "--dir", stamped)
    assert r.rc == 2 and "not an iobench witness" in r.err, r


def witness_rule(mode, engine, flags, fsync_all, verify, command):
    """The reason `--witness` is refused, or None (docs/iobench.md "Witness")."""
    if command != "run":
        return "only valid with the run command"
    if not verify:
        return "needs --verify"
    if mode in ("seqrd", "rndrd", "dbpattern"):
        return "needs a mode that writes"
    if engine != "sync":
        return "needs --engine sync"
    if not ({"dsync", "sync"} & set(flags)) and not fsync_all:
        return "must be durable when it is acknowledged"
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw", "dbpattern"]),
       engine=st.sampled_from(["sync", "io_uring"]),
       flags=st.lists(st.sampled_from(["sync", "dsync", "direct"]), unique=True),
       fsync_all=st.booleans(), verify=st.booleans(), command=st.sampled_from(["run", "prepare", "precondition"]))
def test_when_a_witness_is_refused(iobench, tmp_path, mode, engine, flags, fsync_all, verify, command):
    args = [command, "--dir", tmp_path, "--check"]
    if command == "run":
        args += ["--mode", mode, "--engine", engine]
    if flags:
        args += ["--open-flags", ",".join(flags)]
    args += ["--fsync-all"] * fsync_all + ["--verify"] * verify
    assume(run(iobench, *args).rc == 0)        # refused for another reason without --witness
    r = run(iobench, *args, "--witness", "/dev/shm/never-made")
    why = witness_rule(mode, engine, flags, fsync_all, verify, command)
    if why:
        assert r.rc == 2 and "--witness" in r.err and why in r.err, (why, r)
    else:
        assert r.rc == 0, r
    assert not os.path.exists("/dev/shm/never-made")


@pytest.mark.parametrize("build", ["asan", "tsan"])
def test_sanitizers(stamped, shm, build):
    make(build)
    w = os.path.join(shm, "w")
    r = run(BIN + "-" + build, "run", "--dir", stamped, *GEOM, "--block-size", "4K", *WRITER, "--requests", 3000,
            "--time", 0, "--witness", w, env=SAN_ENV, timeout=600)
    assert r.rc == 0 and not any(m in r.err for m in SAN_MARKS), r.err[-3000:]
    r = run(BIN + "-" + build, "witness-check", "--witness", w, "--dir", stamped, env=SAN_ENV, timeout=600)
    assert r.rc == 0 and not any(m in r.err for m in SAN_MARKS), r.err[-3000:]
    assert r.json["intact"] == r.json["acked"] == len(acked_blocks(w)) > 0


def test_a_writer_stopped_by_sigterm_leaves_its_witness_whole(iobench, stamped, shm):
    """A writer stopped by SIGTERM leaves its witness whole (the controller may copy it after)."""
    w = os.path.join(shm, "w")
    p = subprocess.Popen([iobench, "run", "--dir", stamped, *GEOM, "--block-size", "4K", *WRITER, "--time", "30",
                          "--witness", w], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = 100
        while deadline and not (os.path.exists(w) and acked_blocks(w)):
            threading.Event().wait(0.05)
            deadline -= 1
    finally:
        p.terminate()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 5, err
    _r, j = check(iobench, w, "--dir", stamped)
    assert j["acked"] == len(acked_blocks(w)) > 0 and j["intact"] == j["acked"], j
