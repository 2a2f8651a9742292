"""--device: a raw block device as the target, on loop devices the tests create.
Every test checks the backing file byte for byte (sha256) afterwards."""
import hashlib
import zlib

import pytest

from iobench_helpers import assert_usage_error, loop_device


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def test_run_prepare_cleanup_leaves_a_blank_device_blank(ib):
    with loop_device(64) as (dev, name, backing, _mnt):
        blank = sha(backing)
        r = ib("run", "--prepare", "--cleanup", "--device", dev, "--size", "32M", "--mode", "rndrw",
               "--requests", "2000", "--devstat", name)
        assert r.rc == 0, r
        j = r.json
        c = j["config"]
        assert (c["device"], c["size"], c["dir"], c["file_num"], c["total_size"], c["direct"]) == \
            (dev, 32 << 20, None, 1, 32 << 20, True)
        assert j["environment"]["filesystem"] == "blockdev"
        assert j["prepare"]["bytes"] == 32 << 20
        # a loop device's write zeroes says nothing of its backing file: iobench writes the zeros
        assert j["cleanup"] == {"removed_files": 0, "zeroed_bytes": 32 << 20, "zeroed_by": "writes"}
        assert j["ops"]["read"]["count"] + j["ops"]["write"]["count"] == 2000
        d = j["window"]["devstat"][name]
        assert (d["end"][2] - d["start"][2]) * 512 >= j["ops"]["read"]["bytes"]     # O_DIRECT: every read reached it
        assert sha(backing) == blank


def test_prepare_writes_incompressible_data_only_inside_the_working_set(ib):
    with loop_device(16) as (dev, _name, backing, _mnt):
        blank = sha(backing)
        r = ib("prepare", "--device", dev, "--size", "8M", "--block-size", "64K")
        assert r.rc == 0, r
        with open(backing, "rb") as f:
            head = f.read(8 << 20)
            tail = f.read()
        assert len(zlib.compress(head[:1 << 20])) > 0.99 * (1 << 20)     # real, incompressible data
        assert tail == b"\0" * (8 << 20)                                  # nothing beyond --size
        r = ib("cleanup", "--device", dev, "--size", "8M", "--block-size", "64K")
        assert r.rc == 0 and r.json["cleanup"]["zeroed_bytes"] == 8 << 20, r
        assert sha(backing) == blank


def test_whole_device_and_steady_state(ib):
    with loop_device(16) as (dev, _name, backing, _mnt):
        blank = sha(backing)
        r = ib("run", "--prepare", "--cleanup", "--device", dev, "--mode", "seqwr", "--steady-state",
               "--ss-round-time", "0.2", "--ss-window", "2", "--ss-max-rounds", "2", "--report-interval", "0.1")
        assert r.rc == 0, r
        assert r.json["config"]["total_size"] == 16 << 20 and r.json["cleanup"]["zeroed_bytes"] == 16 << 20
        assert len(r.json["steady_state"]["rounds"]) == 2
        assert sha(backing) == blank


def test_precondition_on_a_device(ib):
    with loop_device(16) as (dev, _name, backing, _mnt):
        blank = sha(backing)
        r = ib("precondition", "--device", dev, "--passes", "2")
        assert r.rc == 0, r
        assert r.json["precondition"]["bytes"] == 2 * (16 << 20)
        assert sha(backing) != blank
        assert ib("cleanup", "--device", dev).rc == 0
        assert sha(backing) == blank


def test_mounted_device_refused_untouched(ib):
    with loop_device(64, fs="ext4") as (dev, _name, backing, mnt):
        before = sha(backing)
        for args in (["prepare"], ["run", "--mode", "rndwr", "--requests", "10"], ["cleanup"]):
            r = ib(*args, "--device", dev)
            assert r.rc == 3 and "in use" in r.err and dev in r.err and r.out == "", r
        assert sha(backing) == before


def test_not_a_block_device_refused(ib, tmp_path):
    f = tmp_path / "disk.img"
    f.write_bytes(b"\xa5" * 65536)
    r = ib("run", "--prepare", "--cleanup", "--device", f, "--mode", "rndwr", "--requests", "10")
    assert r.rc == 3 and "not a block device" in r.err and r.out == "", r
    assert f.read_bytes() == b"\xa5" * 65536


def test_size_larger_than_the_device_refused(ib):
    with loop_device(8) as (dev, _name, backing, _mnt):
        before = sha(backing)
        r = ib("run", "--prepare", "--device", dev, "--size", "16M", "--mode", "rndrd", "--requests", "10")
        assert r.rc == 2 and "--size" in r.err, r
        assert sha(backing) == before


@pytest.mark.parametrize("args,flag", [
    (["--device", "/dev/null", "--dir", "/tmp"], "--device"),
    (["--device", "/dev/null", "--total-size", "1M"], "--total-size"),
    (["--device", "/dev/null", "--file-num", "2"], "--file-num"),
    (["--size", "1M"], "--size"),
    (["--device", "/dev/null", "--mode", "dbpattern"], "--device"),
    (["--device", "/dev/null", "--size", "1000"], "--size"),
], ids=["with-dir", "total-size", "file-num", "size-alone", "dbpattern", "size-unaligned"])
def test_device_usage_errors(ib, tmp_path, args, flag):
    d = tmp_path / "never"
    argv = ["run"] + (["--dir", d] if "--device" not in args else []) + args
    if "--mode" not in args:
        argv += ["--mode", "rndrd"]
    r = ib(*argv)
    assert_usage_error(r, flag, d)


def test_asan_device_run():
    from iobench_helpers import BIN, make, run
    make("asan")
    env = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    with loop_device(16) as (dev, name, backing, _mnt):
        blank = sha(backing)
        r = run(BIN + "-asan", "run", "--prepare", "--cleanup", "--device", dev, "--mode", "rndrw", "--threads", "2",
                "--engine", "io_uring", "--iodepth", "4", "--requests", "1000", "--devstat", name, env=env)
        assert "AddressSanitizer" not in r.err and "runtime error" not in r.err and "LeakSanitizer" not in r.err, r.err
        assert r.rc == 0, r
        assert sha(backing) == blank
