"""Bad input: exit 2, one 'iobench: error:' line naming the flag, nothing touched."""
import os

import pytest

from iobench_helpers import SMALL, seed_parent, snapshot

BAD = [
    (["--total-size", "16X"], "--total-size"),
    (["--block-size", "4Q"], "--block-size"),
    (["--block-size", "1.5K"], "--block-size"),
    (["--threads", "0"], "--threads"),
    (["--threads", "1025"], "--threads"),
    (["--threads", "many"], "--threads"),
    (["--mode", "randread"], "--mode"),
    (["--bogus-flag", "1"], "--bogus-flag"),
    (["--rw-ratio", "0"], "--rw-ratio"),
    (["--rw-ratio", "-1"], "--rw-ratio"),
    (["--file-num", "0"], "--file-num"),
    (["--file-num", "64", "--total-size", "512K"], "--total-size"),
    (["--direct", "--block-size", "1000"], "--block-size"),
    (["--engine", "aio"], "--engine"),
    (["--iodepth", "8"], "--iodepth"),
    (["--engine", "io_uring", "--iodepth", "0"], "--iodepth"),
    (["--fsync-mode", "sometimes"], "--fsync-mode"),
    (["--open-flags", "sync,nope"], "--open-flags"),
    (["--format", "xml"], "--format"),
    (["--time", "-3"], "--time"),
    (["--warmup", "x"], "--warmup"),
    (["--seed", "-5"], "--seed"),
]


@pytest.mark.parametrize("args,flag", BAD, ids=[" ".join(a) for a, _flag in BAD])
def test_bad_input_exit_2(ib, tmp_path, args, flag):
    parent = tmp_path
    d = parent / "bench"
    d.mkdir()
    seed_parent(str(parent))
    before = snapshot(str(parent))
    base = {"--mode": "rndrd"}
    argv = ["run", "--dir", d] + SMALL + ["--requests", "10"]
    if "--mode" not in args:
        argv += ["--mode", base["--mode"]]
    r = ib(*(argv + args))
    assert r.rc == 2, r
    lines = r.err.strip().splitlines()
    assert lines and lines[-1].startswith("iobench: error: "), r
    assert flag in lines[-1], r
    assert r.out == ""
    assert snapshot(str(parent)) == before


def test_missing_dir_flag(ib):
    r = ib("run", "--mode", "rndrd")
    assert r.rc == 2 and "--dir" in r.err


def test_unknown_command(ib, tmp_path):
    r = ib("bench", "--dir", tmp_path)
    assert r.rc == 2 and "unknown command" in r.err


def test_mode_required_for_run(ib, tmp_path):
    r = ib("run", "--dir", tmp_path)
    assert r.rc == 2 and "--mode" in r.err


def test_help_and_version(ib):
    r = ib("--help")
    assert r.rc == 0 and "prepare|run|cleanup" in r.out
    r = ib("--version")
    assert r.rc == 0 and r.out.startswith("iobench ")


def test_sizes_accept_binary_suffixes(ib, tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    for total in ("16777216", "16M", "16MiB", "16384K", "16384KiB"):
        r = ib("prepare", "--dir", d, "--file-num", "2", "--total-size", total, "--block-size", "4KiB")
        assert r.rc == 0, r
        cfg = r.json["config"]
        assert cfg["total_size"] == 16 << 20 and cfg["block_size"] == 4096 and cfg["file_size"] == 8 << 20


def test_file_size_multiple_of_block(ib, tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    r = ib("prepare", "--dir", d, "--file-num", "3", "--total-size", "1M", "--block-size", "16K")
    assert r.rc == 0, r
    cfg = r.json["config"]
    assert cfg["file_size"] % 16384 == 0 and cfg["file_size"] * 3 <= 1 << 20
    sizes = {os.path.getsize(d / ("test_file.%d" % i)) for i in range(3)}
    assert sizes == {cfg["file_size"]}
