"""Signals, I/O errors, sanitizers, C unit tests."""
import json
import os
import signal
import subprocess

import pytest

from iobench_helpers import fill_filesystem, measured_for, signal_mid_run, BIN, SMALL, make, mounted, run


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
@pytest.mark.parametrize("engine", ["sync", "io_uring"])
def test_signal_mid_run(iobench, prepared, sig, name, engine, tmp_path):
    live = str(tmp_path / "live.jsonl")
    args = [iobench, "run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--time", "30", "--threads", "2",
            "--engine", engine, "--live-log", live, "--report-interval", "0.1"]
    if engine == "io_uring":
        args += ["--iodepth", "8"]
    rc, out, err = signal_mid_run(args, sig, when=measured_for(live, 0.6))
    assert rc == 5, err
    j = json.loads(out)
    assert j["interrupted"] is True and j["signal"] == name and j["exit_code"] == 5
    assert 0.5 < j["elapsed_s"] < 10
    assert j["total"]["count"] > 0 and j["errors"]["total"] == 0
    assert j["intervals"]


def test_enospc_during_run_counted_exit_4(iobench):
    with mounted("tmpfs", "size=100m") as mnt:
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        r = run(iobench, "prepare", "--dir", d, "--file-num", "2", "--total-size", "16M")
        assert r.rc == 0, r
        # free the files' pages (size unchanged), then fill the filesystem from outside
        for i in range(2):
            subprocess.run(["fallocate", "--punch-hole", "--offset", "0", "--length", "8M",
                            os.path.join(d, "test_file.%d" % i)], check=True)
        fill_filesystem(mnt)
        r = run(iobench, "run", "--dir", d, "--file-num", "2", "--total-size", "16M", "--mode", "seqwr",
                "--requests", "1024", "--threads", "2")
        assert r.rc == 4, r
        j = r.json
        assert j["exit_code"] == 4
        assert j["errors"]["by_kind"].get("ENOSPC", 0) >= 1
        assert j["errors"]["total"] == sum(j["errors"]["by_kind"].values())
        assert j["errors"]["first"]["kind"] == "ENOSPC"
        assert "iobench: error: I/O errors" in r.err


def test_c_unit_tests():
    r = make("test")
    assert "all C unit tests passed" in r.stdout
    assert "hist_test: ok" in r.stdout


SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=0"}


def test_tsan_64_threads(prepared):
    make("tsan")
    binary = BIN + "-tsan"
    for extra in (["--mode", "rndrw", "--threads", "64", "--time", "1"],
                  ["--mode", "seqwr", "--threads", "64", "--time", "1", "--fsync-freq", "4"],
                  ["--mode", "rndrd", "--threads", "8", "--engine", "io_uring", "--iodepth", "8", "--time", "1"],
                  ["--mode", "rndrw", "--threads", "8", "--steady-state", "--ss-round-time", "0.3", "--ss-window", "2",
                   "--ss-max-rounds", "2", "--report-interval", "0.1", "--fsync-freq", "3"],
                  ["--mode", "rndrw", "--threads", "4", "--time", "0.5", "--warmup", "0.2", "--devstat", "loop0,vda"]):
        r = run(binary, "run", "--dir", prepared, *SMALL, *extra, env=SAN_ENV)
        assert "WARNING: ThreadSanitizer" not in r.err, r.err[:4000]
        assert r.rc == 0, r
        assert r.json["threads"]["count"] == int(extra[3])


@pytest.mark.parametrize("extra", [
    ["--mode", "rndrd", "--requests", "2000"],
    ["--mode", "rndrw", "--threads", "4", "--requests", "2000", "--direct"],
    ["--mode", "seqwr", "--requests", "1000", "--fsync-all", "--format", "text"],
    ["--mode", "rndwr", "--engine", "io_uring", "--iodepth", "8", "--threads", "2", "--requests", "2000"],
    ["--mode", "seqrd", "--engine", "io_uring", "--iodepth", "16", "--direct", "--requests", "2000"],
    ["--mode", "rndrw", "--time", "0.5", "--warmup", "0.2", "--report-interval", "0.1"],
    ["--mode", "rndrd", "--requests", "500", "--warmup", "0.1", "--devstat", "loop0,no-such-dev"],
    ["--mode", "rndwr", "--engine", "io_uring", "--iodepth", "4", "--fsync-freq", "3", "--requests", "600"],
    ["--mode", "seqwr", "--threads", "2", "--steady-state", "--ss-round-time", "0.2", "--report-interval", "0.1",
     "--ss-window", "2", "--ss-max-rounds", "3", "--warmup", "0.1", "--devstat", "loop0", "--format", "text"],
    ["--mode", "rndrd", "--rate-iops", "500", "--time", "0.3", "--threads", "2"],
], ids=["rndrd", "rndrw-direct", "seqwr-text", "uring-rndwr", "uring-seqrd-direct", "warmup", "devstat",
        "uring-commit", "steady-state", "rate-iops"])
def test_asan_ubsan(prepared, extra):
    make("asan")
    r = run(BIN + "-asan", "run", "--dir", prepared, *SMALL, *extra, env=SAN_ENV)
    assert "AddressSanitizer" not in r.err and "runtime error" not in r.err and "LeakSanitizer" not in r.err, r.err
    assert r.rc == 0, r


def test_asan_prepare_cleanup_and_errors(tmp_path):
    make("asan")
    d = tmp_path / "a"
    d.mkdir()
    r = run(BIN + "-asan", "run", "--prepare", "--cleanup", "--dir", d, "--file-num", "3", "--total-size", "3M",
            "--mode", "rndrw", "--requests", "300", env=SAN_ENV)
    assert r.rc == 0, r
    r = run(BIN + "-asan", "run", "--dir", d, "--mode", "rndrw", env=SAN_ENV)
    assert r.rc == 3 and "AddressSanitizer" not in r.err


def test_static_build():
    make("static")
    out = subprocess.run(["file", BIN + "-static"], capture_output=True, text=True, check=False).stdout
    assert "statically linked" in out or "static-pie" in out, out
    r = run(BIN + "-static", "--version")
    assert r.rc == 0
