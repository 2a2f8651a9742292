"""--verify (docs/iobench.md "Data verification") and described I/O errors ("Signals and
errors"), on real files, a real loop device and the fault-injecting drive
(tests/faultdrive): clean runs of every mode, engine and thread count report blocks checked
and no mismatch; data the test itself corrupts between two iobench processes is found and
classified (corrupt at the flipped offset, misplaced with the offset found); writes the drive
drops are found stale; read errors are described and --max-errors stops the workload."""
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from iobench_helpers import BIN, SMALL, loop_device, make, run

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=1"}
SAN_MARKS = ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer", "runtime error:", "ERROR: LeakSanitizer")
WRITES = ("seqwr", "seqrewr", "rndwr", "rndrw")
FILE_SIZE = 4 << 20       # SMALL: 4 files of 4 MiB


def mismatches(v):
    return v["corrupt"] + v["misplaced"] + v["stale"]


def assert_clean(r, mode):
    assert r.rc == 0, r
    j = r.json
    v = j["verify"]
    assert v["enabled"] and v["reason"] is None, v
    assert v["checked"] > 0 and mismatches(v) == 0 and v["first"] == [], v
    assert v["generation_map"]["tracked"] and v["generation_map"]["reason"] is None
    if mode in WRITES:
        assert v["pass"] is not None and v["pass"]["blocks"] * j["config"]["block_size"] == v["pass"]["bytes"]
        assert v["pass"]["bytes"] == j["config"]["total_size"]
    else:
        assert v["pass"] is None
    assert j["errors"]["total"] == 0 and j["errors"]["samples"] == [] and j["errors"]["stopped"] is None
    return v


@pytest.fixture(scope="module")
def stamped(iobench, tmp_path_factory):
    """4 files of 4 MiB prepared with --verify (its marker says so)."""
    d = tmp_path_factory.mktemp("stamped") / "bench"
    d.mkdir()
    r = run(iobench, "prepare", "--dir", d, *SMALL, "--verify")
    assert r.rc == 0, r
    assert "verify=iobv-4k" in (d / ".iobench-marker").read_text()
    yield str(d)
    run(iobench, "cleanup", "--dir", d)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.sampled_from(["seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"]),
       engine=st.sampled_from(["sync", "io_uring"]), threads=st.integers(1, 4), iodepth=st.integers(2, 16),
       block=st.sampled_from(["4K", "8K", "16K", "64K"]), direct=st.booleans())
def test_clean_runs_have_no_mismatch(stamped, mode, engine, threads, iodepth, block, direct):
    """Every mode x engine (io_uring with iodepth > 1) x threads > 1: blocks checked, none
    mismatched; writing modes read the whole set back (--verify-pass) and find it intact,
    so no two threads or in-flight requests ever raced on a block."""
    extra = ["--engine", "io_uring", "--iodepth", iodepth] if engine == "io_uring" else []
    if direct:
        extra.append("--direct")
    r = run(BIN, "run", "--dir", stamped, *SMALL, "--mode", mode, "--threads", threads, "--block-size", block,
            "--requests", 1500, "--verify", "--verify-pass", "--report-interval", 0, *extra)
    v = assert_clean(r, mode)
    if mode in ("seqrd", "rndrd", "rndrw"):
        assert v["checked"] >= r.json["ops"]["read"]["count"] > 0


def test_every_mode_with_threads_and_io_uring(stamped):
    """The combinations the property may not draw, each once: 3 threads, io_uring at depth 32."""
    for mode in ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"):
        for extra in (["--engine", "sync"], ["--engine", "io_uring", "--iodepth", "32"]):
            r = run(BIN, "run", "--dir", stamped, *SMALL, "--mode", mode, "--threads", 3, "--requests", 3000,
                    "--verify", "--verify-pass", "--report-interval", 0, *extra)
            assert_clean(r, mode)


def test_a_small_working_set_with_deep_queues(iobench, tmp_path):
    """Fewer blocks per thread than requests in flight: a request whose block is busy waits,
    nothing races, the run completes all its requests."""
    d = tmp_path / "b"
    d.mkdir()
    r = run(iobench, "run", "--prepare", "--cleanup", "--dir", d, "--file-num", 1, "--total-size", "64K",
            "--block-size", "4K", "--mode", "rndrw", "--threads", 2, "--engine", "io_uring", "--iodepth", 32,
            "--requests", 4000, "--verify", "--verify-pass", "--report-interval", 0)
    assert_clean(r, "rndrw")
    assert r.json["total"]["count"] == 4000


def test_clean_on_a_loop_device(iobench):
    """A real block device (O_DIRECT, O_EXCL): prepare stamps it, threads and io_uring write
    and read it, the verify pass reads it all back intact."""
    with loop_device(48) as (dev, _name, _backing, _mnt):
        r = run(iobench, "run", "--prepare", "--cleanup", "--device", dev, "--size", "32M", "--mode", "rndrw",
                "--threads", 2, "--engine", "io_uring", "--iodepth", 8, "--requests", 4000, "--verify",
                "--verify-pass", "--report-interval", 0)
        v = assert_clean(r, "rndrw")
        assert r.json["verify"]["pass"]["bytes"] == 32 << 20
        r = run(iobench, "run", "--prepare", "--device", dev, "--size", "32M", "--mode", "seqwr", "--threads", 2,
                "--requests", 2048, "--verify", "--verify-pass", "--block-size", "8K", "--report-interval", 0)
        assert_clean(r, "seqwr")
        r = run(iobench, "run", "--cleanup", "--device", dev, "--size", "32M", "--mode", "rndrd", "--threads", 3,
                "--requests", 3000, "--verify", "--report-interval", 0)
        v = assert_clean(r, "rndrd")
        assert v["checked"] == 3000


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


def test_corruption_made_between_two_processes_is_found_and_classified(iobench, tmp_path):
    """The test flips a byte at a known offset (corrupt, reported at that 4 KiB) and copies
    one block over another (misplaced, with the offset the data claims); exit 4."""
    d = tmp_path / "b"
    d.mkdir()
    r = run(iobench, "prepare", "--dir", d, *SMALL, "--verify")
    assert r.rc == 0, r
    flip(d / "test_file.1", 81920 + 4096 + 77)                     # block 5 of 16 KiB, its 2nd 4 KiB
    with open(d / "test_file.2", "r+b") as f:                     # block 0 copied over block 10
        a = f.read(16384)
        f.seek(10 * 16384)
        f.write(a)
    r = run(iobench, "run", "--dir", d, *SMALL, "--mode", "seqrd", "--threads", 2,
            "--requests", 4 * FILE_SIZE // 16384, "--verify", "--report-interval", 0)
    assert r.rc == 4, r
    assert "--verify: 2 of 1024 blocks" in r.err
    v = r.json["verify"]
    assert (v["checked"], v["corrupt"], v["misplaced"], v["stale"]) == (1024, 1, 1, 0), v
    first = {x["kind"]: x for x in v["first"]}
    c = first["corrupt"]
    assert (c["op"], c["file"], c["device"], c["offset"]) == ("read", str(d / "test_file.1"), None, 81920 + 4096)
    assert c["expected"].startswith("crc32c 0x") and c["found"].startswith("0x") and c["found_offset"] is None
    m = first["misplaced"]
    assert (m["file"], m["offset"], m["found_offset"]) == (str(d / "test_file.2"), 10 * 16384, 0)
    assert m["expected"] == "offset 163840 target 2" and m["found"] == "offset 0 target 2"
    assert r.json["errors"]["total"] == 0 and r.json["exit_code"] == 4      # a mismatch is not an I/O error


def test_zeros_and_another_files_block_are_told_apart(iobench, tmp_path):
    """A 4 KiB of zeros (a drive that returns nothing) is corrupt (no magic); a block of file 0
    put in file 3 at the same offset is misplaced (the target differs)."""
    d = tmp_path / "b"
    d.mkdir()
    assert run(iobench, "prepare", "--dir", d, *SMALL, "--verify").rc == 0
    with open(d / "test_file.0", "r+b") as f:
        f.seek(65536)
        f.write(bytes(4096))
        f.seek(0)
        a = f.read(16384)
    with open(d / "test_file.3", "r+b") as f:
        f.write(a)
    r = run(iobench, "run", "--dir", d, *SMALL, "--mode", "seqrd", "--requests", 1024, "--verify", "--format", "text")
    assert r.rc == 4, r
    assert "corrupt at offset 65536 of %s/test_file.0" % d in r.out
    assert "expected magic 0x56424f49, found magic 0x00000000" in r.out
    assert "misplaced at offset 0 of %s/test_file.3 (read): expected offset 0 target 3, found offset 0 target 0" % d in r.out


def test_verify_is_off_with_a_reason_where_it_cannot_be_sound(iobench, prepared, tmp_path):
    """Unstamped files, dbpattern, a block size that is not a multiple of 4 KiB: the run goes on
    without verification and says why; without --verify the reason says it was not asked."""
    r = run(iobench, "run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", 200, "--verify")
    assert r.rc == 0, r
    v = r.json["verify"]
    assert not v["enabled"] and "not prepared with --verify" in v["reason"] and v["checked"] == 0
    r = run(iobench, "run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", 200)
    assert r.json["verify"]["reason"] == "not requested (--verify off)" and r.json["config"]["verify"] is False
    d = tmp_path / "b"
    d.mkdir()
    r = run(iobench, "run", "--prepare", "--cleanup", "--dir", d, *SMALL, "--mode", "dbpattern", "--time", "0.5",
            "--verify")
    assert r.rc == 0, r
    assert not r.json["verify"]["enabled"] and r.json["verify"]["reason"].startswith("dbpattern")
    r = run(iobench, "run", "--prepare", "--cleanup", "--dir", d, *SMALL, "--mode", "rndrw", "--block-size", "2K",
            "--requests", 200, "--verify")
    assert r.rc == 0, r
    assert "not a multiple of 4 KiB" in r.json["verify"]["reason"]


def test_a_write_without_verify_unstamps_the_marker(iobench, tmp_path):
    """Files stamped by prepare, then rewritten by a run without --verify: the marker stops
    saying "stamped" before that run writes, so a later --verify run turns itself off with
    the reason instead of calling the new data corrupt."""
    d = tmp_path / "b"
    d.mkdir()
    assert run(iobench, "prepare", "--dir", d, *SMALL, "--verify").rc == 0
    r = run(iobench, "run", "--dir", d, *SMALL, "--mode", "rndrd", "--requests", 100)   # reads: marker kept
    assert r.rc == 0 and "verify=iobv-4k" in (d / ".iobench-marker").read_text()
    r = run(iobench, "run", "--dir", d, *SMALL, "--mode", "rndwr", "--requests", 500)
    assert r.rc == 0 and "verify=iobv-4k" not in (d / ".iobench-marker").read_text()
    r = run(iobench, "run", "--dir", d, *SMALL, "--mode", "seqrd", "--requests", 1024, "--verify")
    assert r.rc == 0, r
    assert not r.json["verify"]["enabled"] and "not prepared with --verify" in r.json["verify"]["reason"]


def test_a_generation_map_over_its_bound_checks_without_stale_detection(stamped):
    r = run(BIN, "run", "--dir", stamped, *SMALL, "--mode", "rndrw", "--requests", 1000, "--verify",
            "--verify-map-max", "1K", "--verify-pass", "--block-size", "4K")
    assert r.rc == 0, r
    g = r.json["verify"]["generation_map"]
    assert not g["tracked"] and g["bytes"] == 0 and "--verify-map-max 1024" in g["reason"] and "no stale" in g["reason"]
    assert r.json["verify"]["checked"] > 0 and mismatches(r.json["verify"]) == 0


def test_json_contract_of_verify_and_errors(stamped):
    r = run(BIN, "run", "--dir", stamped, *SMALL, "--mode", "rndrd", "--requests", 100, "--verify")
    j = r.json
    assert set(j["verify"]) >= {"enabled", "reason", "checked", "corrupt", "misplaced", "stale", "generation_map",
                                "pass", "first"}
    assert set(j["verify"]["generation_map"]) == {"tracked", "blocks", "bytes", "reason"}
    assert j["verify"]["generation_map"]["bytes"] == 4 * j["verify"]["generation_map"]["blocks"] == 4 * 1024
    e = j["errors"]
    assert set(e) == {"total", "by_kind", "first", "samples", "ok_after_first", "max_errors", "stopped", "policy"}
    assert (e["max_errors"], e["ok_after_first"], e["first"]) == (64, 0, None)
    assert j["config"]["verify"] is True and j["config"]["max_errors"] == 64


# ---- the fault-injecting drive (tests/faultdrive): lost writes, read errors ----

def faultdrive_or_skip(tmp_path, size):
    try:
        from faultdrive import FaultDrive, faultdrive_available
    except ImportError as e:     # pragma: no cover - the drive is part of the tree
        pytest.skip("tests/faultdrive not importable: %s" % e)
    ok, reason = faultdrive_available()
    if not ok:
        pytest.skip(reason)
    return FaultDrive(size=size, workdir=tmp_path, name="vfy")


def test_writes_the_drive_drops_are_found_stale(iobench, tmp_path):
    """Prepared by one process; the drive then drops every write to its first MiB; a second
    process writes there and reads it back: stale (its generation is missing), never corrupt."""
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        r = run(iobench, "prepare", "--device", fd.device, "--size", "8M", "--verify")
        assert r.rc == 0, r
        fd.set([{"kind": "drop", "start": 0, "length": 1 << 20}])
        r = run(iobench, "run", "--device", fd.device, "--size", "8M", "--mode", "rndwr", "--requests", 1500,
                "--verify", "--verify-pass", "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        v = r.json["verify"]
        assert v["stale"] > 0 and v["corrupt"] == 0 and v["misplaced"] == 0, v
        s = [x for x in v["first"] if x["kind"] == "stale"]
        assert s and all(x["op"] == "verify_pass" and x["device"] == fd.device and x["file"] is None for x in s)
        assert all(x["offset"] < 1 << 20 for x in s)
        assert all(x["expected"].startswith("gen ") and x["found"].startswith("gen 0 run ") for x in s)
        assert r.json["errors"]["total"] == 0


@pytest.mark.kernel_errors
def test_read_errors_are_described_and_max_errors_stops(iobench, tmp_path):
    """Reads of a bad region fail with EIO: each described (op, device, offset inside the
    region, errno), the workload goes on past them (successes after the first error are
    counted), and --max-errors stops it."""
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        r = run(iobench, "prepare", "--device", fd.device, "--size", "8M", "--verify")
        assert r.rc == 0, r
        fd.set([{"kind": "eio", "start": 1 << 20, "length": 64 << 10, "ops": "read"}])
        r = run(iobench, "run", "--device", fd.device, "--size", "8M", "--mode", "seqrd", "--requests", 512,
                "--verify", "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        e = r.json["errors"]
        assert e["total"] == 4 and e["by_kind"] == {"EIO": 4} and e["stopped"] is None, e
        assert [s["offset"] for s in e["samples"]] == [(1 << 20) + i * 16384 for i in range(4)]
        for s in e["samples"]:
            assert (s["op"], s["device"], s["file"], s["errno"], s["errno_name"]) == ("read", fd.device, None, 5, "EIO")
            assert s["t_s"] >= 0 and "Input/output error" in s["message"]
        assert e["first"]["kind"] == "EIO" and e["first"]["offset"] == 1 << 20
        assert e["ok_after_first"] == 512 - 64, e       # the pass went on past the region (and wrapped)
        assert r.json["verify"]["checked"] == 512 and mismatches(r.json["verify"]) == 0
        r = run(iobench, "run", "--device", fd.device, "--size", "8M", "--mode", "seqrd", "--requests", 512,
                "--max-errors", 2, "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        e = r.json["errors"]
        assert (e["total"], e["stopped"], e["max_errors"]) == (2, "max_errors", 2), e
        assert "stopped at --max-errors" in r.err


@pytest.mark.kernel_errors
def test_the_verify_pass_maps_a_bad_region_and_goes_on(iobench, tmp_path):
    """The read-back pass meets a 1 MiB region whose reads fail: one error at the region's first
    block, the rest of that chunk skipped (as ddrescue skips ahead), every later chunk read and
    counted as served after the first error: a bad region, not a drive gone, and --max-errors
    (64, the region's 16K blocks) is never reached inside it."""
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        assert run(iobench, "prepare", "--device", fd.device, "--size", "8M", "--verify").rc == 0
        fd.set([{"kind": "eio", "start": 2 << 20, "length": 1 << 20, "ops": "read"}])
        r = run(iobench, "run", "--device", fd.device, "--size", "8M", "--mode", "rndwr", "--requests", 200,
                "--verify", "--verify-pass", "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        e, v = r.json["errors"], r.json["verify"]
        assert (e["total"], e["stopped"]) == (1, None), e
        assert [(x["op"], x["offset"], x["errno_name"]) for x in e["samples"]] == [("verify_pass", 2 << 20, "EIO")]
        assert e["ok_after_first"] == 5, e          # the chunks 3..7 MiB, read after the first error
        assert v["pass"]["blocks"] == (8 << 20) // 16384 - 64 and mismatches(v) == 0, v


@pytest.mark.kernel_errors
def test_a_prepare_write_the_drive_refuses_is_a_described_error(iobench, tmp_path):
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        fd.set([{"kind": "eio", "start": 1 << 20, "length": 4096, "ops": "write"}])
        r = run(iobench, "run", "--device", fd.device, "--size", "4M", "--prepare", "--mode", "rndrd",
                "--requests", 10, "--verify", "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        e = r.json["errors"]
        assert e["total"] == 1 and e["ok_after_first"] == 0, e
        assert (e["first"]["op"], e["first"]["offset"], e["first"]["errno_name"]) == ("prepare write", 1 << 20, "EIO")


@pytest.mark.kernel_errors
def test_write_errors_are_described_and_cause_no_false_mismatch(iobench, tmp_path):
    """Writes to a bad region fail with EIO: described as writes, the workload goes on, and the
    verify pass accepts what the drive holds there (the failed writes never landed) instead
    of calling it stale."""
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        assert run(iobench, "prepare", "--device", fd.device, "--size", "4M", "--verify").rc == 0
        fd.set([{"kind": "eio", "start": 0, "length": 256 << 10, "ops": "write"}])
        r = run(iobench, "run", "--device", fd.device, "--size", "4M", "--mode", "rndrw", "--requests", 1500,
                "--threads", 2, "--engine", "io_uring", "--iodepth", 4, "--verify", "--verify-pass",
                "--max-errors", 100000, "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        e, v = r.json["errors"], r.json["verify"]
        assert e["total"] > 0 and set(e["by_kind"]) == {"EIO"} and e["stopped"] is None
        assert all(s["op"] == "write" and s["offset"] < 256 << 10 for s in e["samples"])
        assert e["ok_after_first"] > 0
        assert v["pass"]["blocks"] == 256 and mismatches(v) == 0, v


def test_misdirected_and_flipped_reads_from_the_drive(iobench, tmp_path):
    """The drive answers reads of one region with another region's data (misplaced, with the
    offset the data claims) and flips bits in another (corrupt)."""
    with faultdrive_or_skip(tmp_path, 16 << 20) as fd:
        assert run(iobench, "prepare", "--device", fd.device, "--size", "4M", "--verify").rc == 0
        fd.set([{"kind": "misplace", "start": 1 << 20, "length": 16384, "shift": 1 << 20},
                {"kind": "flip", "start": 3 << 20, "length": 4096, "every": 4096}])
        r = run(iobench, "run", "--device", fd.device, "--size", "4M", "--mode", "seqrd", "--requests", 256,
                "--verify", "--report-interval", 0, timeout=300)
        assert r.rc == 4, r
        v = r.json["verify"]
        assert (v["checked"], v["corrupt"], v["misplaced"], v["stale"]) == (256, 1, 1, 0), v
        first = {x["kind"]: x for x in v["first"]}
        assert (first["misplaced"]["offset"], first["misplaced"]["found_offset"]) == (1 << 20, 2 << 20)
        assert first["corrupt"]["offset"] == 3 << 20 and first["corrupt"]["device"] == fd.device


# ---- sanitizers ----

@pytest.mark.parametrize("build", ["asan", "tsan"])
def test_sanitizers_on_a_verify_workload(stamped, build):
    make(build)
    r = run(BIN + "-" + build, "run", "--dir", stamped, *SMALL, "--mode", "rndrw", "--threads", 4, "--engine",
            "io_uring", "--iodepth", 8, "--requests", 4000, "--verify", "--verify-pass", env=SAN_ENV, timeout=600)
    assert not any(m in r.err for m in SAN_MARKS), r.err[-3000:]
    assert_clean(r, "rndrw")
    r = run(BIN + "-" + build, "run", "--dir", stamped, *SMALL, "--mode", "rndrw", "--threads", 3,
            "--requests", 3000, "--verify", "--verify-pass", env=SAN_ENV, timeout=600)
    assert not any(m in r.err for m in SAN_MARKS), r.err[-3000:]
    assert_clean(r, "rndrw")
