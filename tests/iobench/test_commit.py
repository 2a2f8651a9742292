"""ops.commit: what a committing transaction waits, from the start of the oldest write an fsync
makes durable to the end of that fsync; commit_op names the operation."""
import pytest

from iobench_helpers import SMALL


def pct(op, p):
    return op["latency_us"][p]


def test_log_like_commit_dominates_fsync_and_write(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "seqwr", "--block-size", "16K", "--fsync-freq", "1",
           "--fsync-mode", "fdatasync", "--requests", "400")
    assert r.rc == 0, r
    j = r.json
    ops = j["ops"]
    assert j["commit_op"] == "commit"
    c = ops["commit"]
    assert c["count"] == ops["fsync"]["count"] == ops["write"]["count"] == 400
    assert c["bytes"] == 0 and c["histogram"]["buckets"]
    for p in ("p50", "p99", "p99.9"):
        assert pct(c, p) >= pct(ops["fsync"], p), p
        assert pct(c, p) >= pct(ops["write"], p), p
    # each sample holds a write and its fsync: the sum bounds the total from below
    assert c["latency_us"]["sum"] >= ops["fsync"]["latency_us"]["sum"] + ops["write"]["latency_us"]["sum"] * 0.999


def test_commit_groups_writes_per_fsync(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndwr", "--fsync-freq", "8", "--fsync-end=off",
           "--requests", "800")
    assert r.rc == 0, r
    ops = r.json["ops"]
    assert ops["commit"]["count"] == ops["fsync"]["count"] > 0
    assert ops["commit"]["count"] < ops["write"]["count"]
    # a commit spans at least 8 writes of its file and the fsync
    assert pct(ops["commit"], "p50") >= pct(ops["fsync"], "p50")


def test_commit_io_uring(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndwr", "--engine", "io_uring", "--iodepth", "8",
           "--fsync-freq", "4", "--requests", "800")
    assert r.rc == 0, r
    ops = r.json["ops"]
    assert ops["commit"]["count"] == ops["fsync"]["count"] > 0
    assert ops["commit"]["latency_us"]["max"] >= ops["fsync"]["latency_us"]["max"]


@pytest.mark.parametrize("extra,commit_op", [
    (["--mode", "rndwr", "--fsync-freq", "0", "--open-flags", "dsync"], "write"),
    (["--mode", "seqwr", "--fsync-freq", "0", "--open-flags", "sync"], "write"),
    (["--mode", "rndwr", "--fsync-freq", "0"], None),
    (["--mode", "rndrd"], None),
], ids=["dsync", "sync", "no-durability", "read"])
def test_no_commit_histogram_without_fsync(ib, prepared, extra, commit_op):
    r = ib("run", "--dir", prepared, *SMALL, *extra, "--requests", "200", "--fsync-end=off")
    assert r.rc == 0, r
    assert "commit" not in r.json["ops"]
    assert r.json["commit_op"] == commit_op


def test_text_output_shows_commit(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "seqwr", "--fsync-all", "--requests", "100", "--format", "text")
    assert r.rc == 0, r
    assert "Commit (oldest write's start to its fsync's end) latency (ms):" in r.out
