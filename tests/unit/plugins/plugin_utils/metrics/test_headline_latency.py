"""The headline latency is what ONE request or ONE transaction waits on the device
(``metrics.latency_op``, docs/report.md "The headline latency").

``commit`` heads a workload only where each commit is a transaction's own wait (an fsync
after every write of the thread); a periodic-fsync workload is headed by its write latency,
its fsync percentiles beside it, because its commit span runs from the oldest write since
the file's last fsync and so holds every write, and every pacing pause, between. The slow
test runs the real iobench, paced (``--rate-iops``), with an fsync every 8 writes per file,
on a drive of known write latency (a fault drive's delay: the device's wait, not the host's
scheduling, is what a loaded machine leaves to compare), and compares the headline with the
device's own await from the record's device figures."""
import copy
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as metrics
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import summarize_workload

import faultdrive
import loopdev
import test_module_iobench

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary


# --------------------------------------------------------------------------- the rule

COUNT = st.one_of(st.none(), st.integers(0, 10 ** 6))


@settings(max_examples=300, deadline=None)
@given(COUNT, COUNT, COUNT, st.booleans(), st.one_of(st.none(), st.booleans()))
def test_commit_heads_only_where_each_write_has_its_own_fsync(r, w, f, has_commit, per_write):
    op = metrics.latency_op(r, w, f, has_commit, per_write)
    r0, w0, f0 = r or 0, w or 0, f or 0
    if r0 and r0 >= w0:
        assert op == "read"
    elif w0:
        each = per_write if per_write is not None else f0 >= metrics.PER_WRITE_FSYNCS * w0
        if f0 and each:
            assert op == ("commit" if has_commit else "fsync")
        else:
            assert op == "write"            # plain, O_DSYNC, or periodic fsyncs: the write is the request
    else:
        assert op == ("fsync" if f0 else None)
    # a periodic-fsync workload is never headed by its commit span
    if per_write is False:
        assert op != "commit"


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.integers(0, 1000)), st.one_of(st.none(), st.booleans()),
       st.integers(1, 10 ** 5), st.integers(0, 10 ** 5))
def test_per_write_fsync_follows_the_config_else_the_counts(freq, fsync_all, writes, fsyncs):
    cfg = {}
    if freq is not None:
        cfg["fsync_freq"] = freq
    if fsync_all is not None:
        cfg["fsync_all"] = fsync_all
    got = metrics.per_write_fsync(cfg, writes, fsyncs)
    if fsync_all:
        assert got is True
    elif freq is not None:
        assert got is (freq == 1)
    else:
        assert got is (fsyncs >= metrics.PER_WRITE_FSYNCS * writes)


def _bench(freq, write_p50_us, fsync_p50_us, commit_p50_us, writes=1000):
    def op(count, p50):
        lat = {k: p50 * m for k, m in (("p50", 1), ("p90", 1.5), ("p95", 2), ("p99", 3), ("p99_9", 4), ("mean", 1.2))}
        return {"count": count, "per_sec": count / 10.0, "bytes": count * 16384, "mib_per_sec": 1.0, "latency_us": lat}
    fsyncs = max(1, writes // freq)
    return {"config": {"mode": "rndwr", "fsync_freq": freq, "fsync_all": False, "threads": 4},
            "ops": {"read": op(0, 0), "write": op(writes, write_p50_us), "fsync": op(fsyncs, fsync_p50_us),
                    "commit": op(fsyncs, commit_p50_us)},
            "elapsed_s": 10.0}


def test_a_periodic_fsync_workload_is_headed_by_its_write_with_the_fsync_beside():
    # the compliance profile's over_cache-rndwr-t4 as measured: 0.2 ms writes, 0.16 ms fsyncs, 23 s commit spans
    rec = metrics.workload_record({"id": "over_cache-rndwr-t4", "workload": "over_cache", "mode": "rndwr", "threads": 4},
                                  {"bench": _bench(100, 200, 160, 23e6)})
    m = rec["metrics"]
    assert m["latency_op"] == "write"
    assert m["lat_p50_ms"] == m["write_p50_ms"] == pytest.approx(0.2)
    assert m["lat_p99_ms"] == pytest.approx(0.6)
    assert m["commit_p50_ms"] == pytest.approx(23000.0)          # the spans stay in the record
    assert "every 100 writes" in m["latency_note"] and "p50 0.16 ms" in m["latency_note"]
    # every format reads the row: op write, the write's percentiles
    row = summarize_workload(rec)
    assert row["latency_op"] == "write" and row["p99_ms"] == pytest.approx(0.6) and row["p50_ms"] == pytest.approx(0.2)


def test_each_write_with_its_own_fsync_is_headed_by_the_commit():
    rec = metrics.workload_record({"id": "log-seqwr-t1", "workload": "log", "mode": "seqwr", "threads": 1},
                                  {"bench": _bench(1, 20, 300, 330)})
    m = rec["metrics"]
    assert m["latency_op"] == "commit" and m["lat_p50_ms"] == pytest.approx(0.33) and m["latency_note"] is None


def test_an_older_record_without_config_is_decided_by_its_counts():
    bench = _bench(100, 200, 160, 23e6)
    del bench["config"]
    m = metrics.workload_metrics({"bench": bench})
    assert m["latency_op"] == "write"
    bench = _bench(1, 20, 300, 330)
    del bench["config"]
    assert metrics.workload_metrics({"bench": bench})["latency_op"] == "commit"


def test_drift_never_compares_a_commit_span_with_a_write_latency():
    base = {"run_id": "r1", "workloads": {"w": {"iops": 100.0, "p99_ms": 1.0, "latency_op": "write"}}}
    cur = {"run_id": "r2", "host": "h", "workloads": {"w": {"iops": 100.0, "p99_ms": 25000.0, "latency_op": "commit"}}}
    s = history.drift_settings({}, "compliance")
    compared = []
    assert history._drift(cur, base, s, "", compared) == []
    assert [c["metric"] for c in compared] == ["iops"]
    same = copy.deepcopy(cur)
    same["workloads"]["w"]["latency_op"] = "write"
    found = history._drift(same, base, s, "", [])
    assert [f["metric"] for f in found] == ["p99_ms"] and found[0]["severity"] == "fail"


# --------------------------------------------------------------------------- a real paced run

# every write the drive serves waits this long: a device of known latency, far above what a
# loaded host's scheduling adds to a request (over a plain loop device a write took 40 us, and
# a CI run's iobench measured 178 us for it beside three other test streams)
WRITE_DELAY_MS = 2


@pytest.fixture
def loop(tmp_path):
    """An ext4 on a fault-injecting drive (tests/faultdrive) whose every write waits
    WRITE_DELAY_MS, its backing file in a tmpfs of the test's own."""
    ok, why = faultdrive.faultdrive_available()
    if not ok or loopdev.missing_tools():
        pytest.skip(why or loopdev.missing_tools())
    with loopdev.tmpfs(str(tmp_path / "mem"), 256) as mem:
        with faultdrive.FaultDrive(size=192 << 20, workdir=mem, name="headline") as fd:
            with loopdev.ext4_mounted(fd.device, str(tmp_path / "mnt")) as mnt:
                # the delay from the mount on: the ext4 is made at the drive's own speed
                fd.set([{"kind": "delay", "ms": WRITE_DELAY_MS, "ops": "write"}])
                d = os.path.join(mnt, "ds")
                os.mkdir(d)
                yield {"dev": fd.device, "name": os.path.basename(fd.device), "mnt": mnt, "dir": d}


@pytest.mark.slow
def test_a_paced_periodic_fsync_run_shows_the_devices_latency_not_its_schedule(iobench_binary, loop):
    # fdatasync: overwrites of allocated blocks need no journal commit, so the device's writes
    # are (almost all) the workload's own O_DIRECT writes
    p = workload.defaults()
    p.update(dir=loop["dir"], mode="rndwr", threads=2, file_num=16, total_size="64M", block_size="16K", direct=True,
             fsync_freq=8, fsync_mode="fdatasync", rate_iops=300, time=5, warmup=1, prepare=True, cleanup=True,
             binary=iobench_binary,
             collect="procfs")
    res, failed, msg, _w = workload.run_workload(p)
    assert not failed, msg
    assert res["bench"]["config"]["rate_iops"] == 300
    rec = metrics.workload_record({"id": "over_cache-rndwr-t2", "workload": "over_cache", "mode": "rndwr", "threads": 2},
                                  dict(res, failed=False))
    m = rec["metrics"]
    assert m["dev_source"] == "devstat", m["device_note"]
    await_ms = m["dev_w_await_ms"]
    assert m["latency_op"] == "write"
    assert await_ms and await_ms >= WRITE_DELAY_MS * 0.9, (await_ms, "the drive's delay did not reach its writes")
    # the headline is the device's own wait (O_DIRECT: each write is one device request): the
    # headline op's mean latency (iobench's, over the window) within 2x of the device's await
    # (a mean over the same window, from its own counters), and its median never above 2x of
    # it (on a busy machine the latency has a long tail: the median sits below the mean)
    mean_ms = res["bench"]["ops"][m["latency_op"]]["latency_us"]["mean"] / 1000.0
    assert await_ms / 2 <= mean_ms <= await_ms * 2, (mean_ms, await_ms)
    assert m["lat_p50_ms"] <= await_ms * 2, (m["lat_p50_ms"], await_ms)
    # the commit spans stay in the record; they hold the schedule (8 writes per file at
    # 150 requests/s per thread over 16 files), far beyond any one request
    assert m["commit_count"] and m["commit_p50_ms"] > 10 * m["lat_p50_ms"]
    assert m["fsync_p50_ms"] is not None and "fsync" in m["latency_note"]
