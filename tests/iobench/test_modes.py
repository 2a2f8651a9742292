"""Every mode and flag family on a small prepared directory; JSON fields make sense."""
import json
import math
import os
import re
import zlib

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram as pyhist
from iobench_helpers import SMALL

READS_ONLY = {"rndrd", "seqrd"}
WRITES_ONLY = {"rndwr", "seqwr", "seqrewr"}

CONTRACT_KEYS = ["schema_version", "tool", "version", "command", "config", "environment", "window",
                 "elapsed_s", "interrupted", "signal", "ops", "total", "threads", "intervals",
                 "errors", "exit_code"]
CONFIG_KEYS = ["dir", "file_num", "file_size", "total_size", "block_size", "mode", "rw_ratio", "threads",
               "engine", "iodepth", "direct", "open_flags", "fsync_freq", "fsync_all", "fsync_end",
               "fsync_mode", "time_s", "requests", "warmup_s", "seed", "report_interval_s", "keep_cache"]
LAT_KEYS = ["min", "mean", "stddev", "max", "p50", "p90", "p95", "p99", "p99.9", "p99.99"]


def check_op(op, bs, is_fsync=False):
    assert op["bytes"] == (0 if is_fsync else op["count"] * bs)
    hist = op["histogram"]
    assert hist["unit"] == "ns" and hist["sub_bucket_bits"] == 6
    assert sum(c for _edge, c in hist["buckets"]) == op["count"]
    lat = op["latency_us"]
    assert set(LAT_KEYS) <= set(lat)
    if op["count"]:
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["p99.9"] \
            <= lat["p99.99"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"]
        # the Python twin computes the same percentiles from the buckets
        for key, p in (("p50", 50), ("p99", 99), ("p99.9", 99.9)):
            v = pyhist.percentile(hist["buckets"], p, lo_clamp=lat["min"] * 1000, hi_clamp=lat["max"] * 1000)
            assert abs(v / 1000.0 - lat[key]) <= 0.0011, (key, v, lat[key])


@pytest.mark.parametrize("mode", ["seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"])
def test_mode_requests(ib, prepared, mode):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", mode, "--requests", "400", "--seed", "7")
    assert r.rc == 0, r
    j = r.json
    for k in CONTRACT_KEYS:
        assert k in j
    for k in CONFIG_KEYS:
        assert k in j["config"]
    assert j["schema_version"] == 1 and j["command"] == "run" and j["config"]["mode"] == mode
    assert j["exit_code"] == 0 and j["interrupted"] is False and j["signal"] is None
    assert j["errors"]["total"] == 0
    reads, writes = j["ops"]["read"]["count"], j["ops"]["write"]["count"]
    assert reads + writes == 400 == j["total"]["count"]
    if mode in READS_ONLY:
        assert writes == 0 and j["ops"]["fsync"]["count"] == 0
    elif mode in WRITES_ONLY:
        assert reads == 0
    else:
        assert reads == 240 and writes == 160   # rw_ratio 1.5
    for name in ("read", "write", "fsync"):
        check_op(j["ops"][name], 16384, name == "fsync")
    w = j["window"]
    assert w["end_epoch"] >= w["start_epoch"] > 1.6e9
    assert abs((w["end_epoch"] - w["start_epoch"]) - j["elapsed_s"]) < 1e-3
    assert j["environment"]["page_cache_dropped"] is True
    assert j["environment"]["filesystem"] in ("ext4", "xfs", "btrfs", "tmpfs", "overlay")
    assert j["threads"]["count"] == 1 and j["threads"]["per_thread"][0]["events"] == j["total"]["events"]


def test_rw_ratio(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--rw-ratio", "3", "--requests", "400")
    assert r.rc == 0, r
    assert (r.json["ops"]["read"]["count"], r.json["ops"]["write"]["count"]) == (300, 100)


def test_fsync_freq_counts(ib, prepared):
    # one thread writes sequentially: 256 blocks to test_file.0, then 144 to test_file.1
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "seqwr", "--requests", "400",
           "--fsync-freq", "10", "--fsync-end=off")
    assert r.rc == 0, r
    assert r.json["ops"]["fsync"]["count"] == 25 + 14
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "seqwr", "--requests", "400", "--fsync-freq", "10")
    assert r.json["ops"]["fsync"]["count"] == 25 + 14 + 2   # + fsync at the end of both dirty files
    assert r.json["config"]["fsync_end"] is True


def test_fsync_all_and_mode(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndwr", "--requests", "100", "--fsync-all",
           "--fsync-mode", "fdatasync", "--fsync-end=off")
    assert r.rc == 0, r
    j = r.json
    assert j["ops"]["fsync"]["count"] == 100 and j["config"]["fsync_mode"] == "fdatasync"
    assert j["config"]["fsync_all"] is True
    check_op(j["ops"]["fsync"], 16384, True)


def test_no_fsync(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndwr", "--requests", "300", "--fsync-freq", "0",
           "--fsync-end=off")
    assert r.json["ops"]["fsync"]["count"] == 0


def test_open_flags_and_direct(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--requests", "200", "--direct",
           "--open-flags", "sync,dsync")
    assert r.rc == 0, r
    cfg = r.json["config"]
    assert cfg["direct"] is True and cfg["open_flags"] == ["sync", "dsync"]
    assert r.json["environment"]["logical_block_size"] in (512, 4096)


@pytest.mark.parametrize("mode", ["rndrd", "rndwr", "seqwr", "rndrw"])
def test_io_uring(ib, prepared, mode):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", mode, "--engine", "io_uring", "--iodepth", "8",
           "--threads", "2", "--requests", "1000")
    assert r.rc == 0, r
    j = r.json
    assert j["config"]["engine"] == "io_uring" and j["config"]["iodepth"] == 8
    assert j["total"]["count"] == 1000
    assert sum(t["events"] for t in j["threads"]["per_thread"]) == j["total"]["events"]


def test_io_uring_direct(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--engine", "io_uring", "--iodepth", "8",
           "--direct", "--requests", "500")
    assert r.rc == 0, r
    assert r.json["ops"]["read"]["count"] == 500


def offsets_hashes(ib, prepared, seed, mode="rndrd", threads=2):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", mode, "--requests", "200", "--threads", threads,
           "--seed", seed, "--debug-offsets-hash", "--keep-cache")
    assert r.rc == 0, r
    return [t["offsets_hash"] for t in r.json["threads"]["per_thread"]]


def test_seed_repeatable(ib, prepared):
    a = offsets_hashes(ib, prepared, 42)
    b = offsets_hashes(ib, prepared, 42)
    c = offsets_hashes(ib, prepared, 43)
    assert a == b
    assert a[0] != c[0] and a[1] != c[1]
    assert a[0] != a[1]        # threads have their own streams
    # io_uring uses the same offset sequence
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "200", "--threads", "2",
           "--seed", "42", "--debug-offsets-hash", "--engine", "io_uring", "--iodepth", "4")
    assert [t["offsets_hash"] for t in r.json["threads"]["per_thread"]] == a


def test_seed_echoed_when_not_given(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "10")
    assert isinstance(r.json["config"]["seed"], int)


def test_time_warmup_intervals(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--time", "1", "--warmup", "0.5",
           "--report-interval", "0.25", "--keep-cache")
    assert r.rc == 0, r
    j = r.json
    # the measured window is --time long and is the whole of elapsed_s, the warmup before it
    # apart (a late worker can lengthen it on a loaded machine, never shorten it)
    assert j["elapsed_s"] >= 0.99
    assert abs(j["elapsed_s"] - (j["window"]["end_epoch"] - j["window"]["start_epoch"])) < 1e-3
    assert abs(j["warmup_window"]["end_epoch"] - j["window"]["start_epoch"]) < 1e-6
    assert abs(j["window"]["start_epoch"] - j["warmup_window"]["start_epoch"] - 0.5) < 1e-3
    iv = j["intervals"]
    # one interval per 0.25 s of the window, the last one partial (a descheduled worker may
    # leave an interval empty on a loaded machine: the counts are what the test holds)
    assert 4 <= len(iv) <= math.ceil(j["elapsed_s"] / 0.25 + 1e-6)
    assert sum(i["read_ops"] for i in iv) == j["ops"]["read"]["count"] > 0
    assert all(i["read_p99_us"] > 0 for i in iv if i["read_ops"] > 0)
    assert j["environment"]["page_cache_dropped"] is False
    assert j["config"]["warmup_s"] == 0.5


def test_threads_fairness(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "seqrd", "--threads", "4", "--requests", "400")
    assert r.rc == 0, r
    t = r.json["threads"]
    assert t["count"] == 4 and len(t["per_thread"]) == 4
    assert [p["events"] for p in t["per_thread"]] == [100] * 4
    assert t["events"]["avg"] == 100 and t["events"]["stddev"] == 0
    assert t["exec_time_s"]["avg"] > 0


def test_text_format_like_sysbench(ib, prepared, tmp_path):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--time", "0.5", "--format", "text")
    assert r.rc == 0, r
    for needle in ("File operations:", "reads/s:", "writes/s:", "fsyncs/s:", "Throughput:",
                   "read, MiB/s:", "written, MiB/s:", "General statistics:", "total number of events:",
                   "Latency (ms):", "95th percentile:", "Threads fairness:", "events (avg/stddev):",
                   "execution time (avg/stddev):"):
        assert needle in r.out, needle
    reads = float(re.search(r"reads/s:\s+([\d.]+)", r.out).group(1))
    assert reads > 0


def test_output_file(ib, prepared, tmp_path):
    out = tmp_path / "res.json"
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "50", "--output", out)
    assert r.rc == 0 and r.out == ""
    assert json.loads(out.read_text())["total"]["count"] == 50


def test_prepare_run_cleanup_in_one_call(ib, tmp_path):
    d = tmp_path / "one"
    d.mkdir()
    r = ib("run", "--prepare", "--cleanup", "--dir", d, "--file-num", "2", "--total-size", "8M",
           "--mode", "rndrw", "--requests", "100")
    assert r.rc == 0, r
    j = r.json
    assert j["prepare"]["files"] == 2 and j["prepare"]["bytes"] == 8 << 20
    assert j["cleanup"]["removed_files"] == 2
    assert j["total"]["count"] == 100
    assert os.listdir(d) == []


def test_prepared_data_is_incompressible(ib, tmp_path):
    prepared = str(tmp_path)
    assert ib("prepare", "--dir", prepared, *SMALL).rc == 0
    with open(os.path.join(prepared, "test_file.0"), "rb") as f:
        data = f.read()
    assert len(data) == 4 << 20
    assert len(zlib.compress(data, 1)) > 0.99 * len(data)
    zero = bytes(4096)
    assert all(data[i:i + 4096] != zero for i in range(0, len(data), 4096))
    with open(os.path.join(prepared, "test_file.1"), "rb") as f:
        assert f.read(65536) != data[:65536]


def test_written_blocks_are_random_and_unique(ib, tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    assert ib("prepare", "--dir", d, "--file-num", "1", "--total-size", "1M").rc == 0
    r = ib("run", "--dir", d, "--file-num", "1", "--total-size", "1M", "--mode", "seqwr", "--requests", "64")
    assert r.rc == 0, r
    data = (d / "test_file.0").read_bytes()
    # each block is random; blocks rarely repeat, so even 128 KiB records barely compress
    for i in range(0, len(data), 16384):
        assert len(zlib.compress(data[i:i + 16384], 1)) > 16384
    ratio = sum(len(zlib.compress(data[i:i + 131072], 1)) for i in range(0, len(data), 131072)) / len(data)
    assert ratio > 0.95, ratio
    chunks = {data[i:i + 4096] for i in range(0, len(data), 4096)}
    assert len(chunks) == len(data) // 4096


def test_run_refuses_short_or_missing_files(ib, tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "2M").rc == 0
    os.truncate(d / "test_file.1", 1000)
    r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "2M", "--mode", "rndrd", "--requests", "10")
    assert r.rc == 3 and "test_file.1" in r.err and "prepare" in r.err
    r = ib("run", "--dir", d, "--file-num", "3", "--total-size", "3M", "--mode", "rndrd", "--requests", "10")
    assert r.rc == 3 and "test_file.1" in r.err or "test_file.2" in r.err


def test_output_bad_path_fails_fast(ib, prepared, tmp_path):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--time", "30",
           "--output", tmp_path / "missing" / "x.json")
    assert r.rc == 3 and "--output" in r.err


def test_output_not_left_behind_on_refusal(ib, tmp_path):
    d = tmp_path / "notours"
    d.mkdir()
    (d / "data").write_text("x")
    out = tmp_path / "res.json"
    r = ib("run", "--dir", d, "--mode", "rndrd", "--output", out)
    assert r.rc == 3 and not out.exists()
    out.write_text("previous result\n")
    r = ib("run", "--dir", d, "--mode", "rndrd", "--output", out)
    assert r.rc == 3 and out.read_text() == "previous result\n"
