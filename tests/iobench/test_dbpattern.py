"""--mode dbpattern: InnoDB-like readers + group-commit log writer + page flushers
(docs/diagnostics.md section 7)."""
import contextlib
import json
import os
import re
import signal
import subprocess
import time

import pytest

from proctree import poll_until
from iobench_helpers import (assert_usage_error, fill_filesystem, frozen_thread, held_mid_run, measured_for,
                             signal_mid_run, stopped, BIN, SMALL, make, mounted, run, snapshot)

DB_KEYS = {"config", "transactions", "commits", "log_writes", "page_reads", "page_writes"}
DB_CONFIG_KEYS = {"readers", "page_size", "log_block_size", "flusher_threads", "group_commit_max", "working_set"}
COMMIT_LAT = ["min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"]
PAGE_LAT = ["p50", "p90", "p95", "p99", "p99.9", "max"]
LOG = "ib_logfile.iobench"
SAN_ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
           "TSAN_OPTIONS": "halt_on_error=0"}


def dbrun(ib, d, *extra, **kw):
    return ib("run", "--dir", d, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M", *extra, **kw)


def ordered(lat, keys):
    vals = [lat[k] for k in keys]
    return all(a <= b for a, b in zip(vals, vals[1:]))


def test_db_section_shape_and_consistency(ib, prepared):
    r = dbrun(ib, prepared, "--threads", "4", "--direct", "--time", "1.5", "--seed", "3")
    assert r.rc == 0, r
    j = r.json
    db = j["db"]
    assert set(db) == DB_KEYS
    assert DB_CONFIG_KEYS <= set(db["config"])
    c = db["config"]
    assert (c["readers"], c["page_size"], c["log_block_size"], c["flusher_threads"], c["group_commit_max"]) == \
        (4, 16384, 4096, 1, 4)
    assert c["working_set"] == j["config"]["total_size"] == 16 << 20
    assert set(db["transactions"]) == {"count", "per_sec"}
    assert set(db["commits"]) == {"count", "per_sec", "txn_per_commit", "latency_us"}
    assert set(db["commits"]["latency_us"]) == set(COMMIT_LAT)
    assert set(db["log_writes"]) == {"count", "bytes", "per_sec"}
    assert set(db["page_reads"]) == {"count", "per_sec", "latency_us"}
    assert set(db["page_writes"]) == {"count", "per_sec", "slots_dropped", "latency_us"}
    assert db["page_writes"]["slots_dropped"] is None         # unpaced: no slots to keep
    for k in ("page_reads", "page_writes"):
        assert set(db[k]["latency_us"]) == set(PAGE_LAT)

    commits, txns = db["commits"], db["transactions"]
    assert commits["count"] > 0 and txns["count"] >= commits["count"]
    assert 1.0 <= commits["txn_per_commit"] <= 4.0          # at most one pending commit per reader
    assert commits["txn_per_commit"] == pytest.approx(txns["count"] / commits["count"], rel=0.05)
    # every page read belongs to a transaction, except each reader's unfinished one (< 4 reads)
    reads = db["page_reads"]["count"]
    assert 4 * txns["count"] <= reads <= 4 * txns["count"] + 3 * 4
    # ops: page reads, page writes, the log's fdatasyncs
    assert reads == j["ops"]["read"]["count"] > 0
    assert db["page_writes"]["count"] == j["ops"]["write"]["count"] > 0
    assert commits["count"] == db["log_writes"]["count"] == j["ops"]["fsync"]["count"]
    assert db["log_writes"]["bytes"] == 4096 * db["log_writes"]["count"]
    assert j["total"]["count"] == reads + db["page_writes"]["count"]
    # a committing transaction waits at least for its group's fdatasync
    fs = j["ops"]["fsync"]["latency_us"]
    cl = commits["latency_us"]
    assert cl["min"] >= fs["min"] and cl["max"] >= fs["max"] * 0.999
    assert cl["p50"] >= fs["min"]
    assert ordered(cl, COMMIT_LAT[2:]) and cl["min"] <= cl["p50"] and cl["min"] <= cl["mean"] <= cl["max"]
    for k in ("page_reads", "page_writes"):
        lat = db[k]["latency_us"]
        assert ordered(lat, PAGE_LAT) and lat["p50"] > 0, (k, lat)
    el = j["elapsed_s"]
    assert txns["per_sec"] == pytest.approx(txns["count"] / el, rel=1e-3)
    assert commits["per_sec"] == pytest.approx(commits["count"] / el, rel=1e-3)
    # threads: readers, one log writer, flushers
    roles = [t["role"] for t in j["threads"]["per_thread"]]
    assert roles == ["reader"] * 4 + ["log_writer", "flusher"] and j["threads"]["count"] == 6
    assert j["config"]["mode"] == "dbpattern" and j["config"]["threads"] == 4
    assert j["search"] is None and j["exit_code"] == 0 and j["errors"]["total"] == 0
    assert os.path.getsize(os.path.join(prepared, LOG)) == 4 << 20


def test_group_commit_max_one_and_no_flusher(ib, prepared):
    r = dbrun(ib, prepared, "--threads", "4", "--time", "1", "--db-group-commit-max", "1", "--db-flushers", "0",
              "--db-reads-per-txn", "2")
    assert r.rc == 0, r
    db = r.json["db"]
    assert db["commits"]["txn_per_commit"] == 1.0 and db["config"]["group_commit_max"] == 1
    assert db["page_writes"]["count"] == 0 and r.json["ops"]["write"]["count"] == 0
    assert db["transactions"]["count"] == db["commits"]["count"] > 0
    assert [t["role"] for t in r.json["threads"]["per_thread"]] == ["reader"] * 4 + ["log_writer"]


FLUSH_PACED = ["--threads", "2", "--time", "2", "--db-flush-rate", "200", "--db-flushers", "2", "--direct"]


def slots_accounted(j, flushers=2, rate=200, seconds=2):
    """Every slot of the flushers' pace in the window of the run ``j`` (--time ``seconds``, no
    warmup) is a write or dropped: the window's rate x seconds, within one slot per flusher at
    each of its edges (a write issued for the slot before the window that completed in it, a
    write in flight when it closed). On a schedule (--start-at) the window ends at its planned
    instant, so a late start shortens it (a loaded run's: 1.948 s, 390 slots)."""
    if j.get("start_at"):
        seconds = j["start_at"] + seconds - j["window"]["start_epoch"]
    pw = j["db"]["page_writes"]
    return abs(pw["count"] + pw["slots_dropped"] - rate * seconds) <= 2 * flushers


def test_flush_rate_paces_page_writes(ib, prepared):
    r = dbrun(ib, prepared, *FLUSH_PACED)
    assert r.rc == 0, r
    pw = r.json["db"]["page_writes"]
    # never faster than asked (7.5 % for the window's edges), however busy the machine
    assert 0 < pw["per_sec"] <= 215, pw
    # at the rate asked, or the slots the flushers could not keep are in the record: how many
    # a machine lets pass is its own business, the account is the pacer's
    assert slots_accounted(r.json), pw


def test_flushers_held_still_drop_the_slots_they_missed_instead_of_bursting(iobench, prepared):
    """The whole process stopped (SIGSTOP) for 0.5 s of a 2 s window at 200 pages/s over two
    flushers (a slot every 10 ms each): each flusher comes back at least 0.5 s behind, past its
    10-slot limit, so it skips to its next slot instead of writing the 50 it missed in a burst."""
    start = time.time() + 1.0
    rc, out, err, released = held_mid_run(
        [iobench, "run", "--dir", prepared, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M", *FLUSH_PACED,
         "--start-at", "%.3f" % start], start + 0.7, stopped, 0.5)
    assert rc == 0, err
    j = json.loads(out)
    pw = j["db"]["page_writes"]
    assert slots_accounted(j), (pw, j["window"], j["start_at"])
    # the stop held at least [released - 0.5, released]: its slots inside the window (one every
    # 10 ms per flusher), read rather than assumed (a loaded machine may stop the run late)
    held = min(released, j["window"]["end_epoch"]) - max(released - 0.5, j["window"]["start_epoch"])
    missed = int(held * 100)
    assert missed > 12, ("the stop missed the window", released, j["window"])
    # at most one of them a late write, one the rounding of its lag
    assert pw["slots_dropped"] >= 2 * (missed - 2), (pw, missed)
    assert pw["per_sec"] <= 215, pw


def threads_named(pid, name):
    """The ids of the threads of ``pid`` named ``name`` (iobench names each for its role)."""
    tids = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as fh:
                if fh.read().strip() == name:
                    tids.append(int(tid))
        except OSError:
            pass
    return tids


def test_a_flusher_run_late_after_the_release_drops_the_slots_it_missed(iobench, prepared):
    """One flusher frozen alone (cgroup freezer) from 2 s before the release (--start-at) to 0.5 s
    after it, as a loaded host runs a thread long after the others: its pace began at the release,
    so the slots it missed are dropped and accounted, not lost from the record (the schedule once
    began when the thread first ran, and a loaded run's count + slots_dropped fell 36 short)."""
    start = time.time() + 3.5
    began = []

    @contextlib.contextmanager
    def one_flusher_frozen(pid):
        poll_until(lambda: threads_named(pid, "iobench-flusher"), 30)
        with frozen_thread(threads_named(pid, "iobench-flusher")[-1]):
            began.append(time.time())
            yield

    rc, out, err, thawed = held_mid_run(
        [iobench, "run", "--dir", prepared, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M", *FLUSH_PACED,
         "--start-at", "%.3f" % start], start - 2.0, one_flusher_frozen, 2.5)
    assert rc == 0, err
    j = json.loads(out)
    # the flusher frozen before the release (the window's start: no warmup) and thawed at the
    # earliest at ``thawed``: its slots in between, one every 10 ms, read rather than assumed
    # (a loaded machine may release the threads late)
    assert began and began[0] < j["window"]["start_epoch"], ("the hold came after the release", began, j["window"])
    missed = int((thawed - j["window"]["start_epoch"]) * 100)
    assert missed > 12, ("released too late for the hold to matter", thawed, j["window"])
    pw = j["db"]["page_writes"]
    assert slots_accounted(j), (pw, j["window"], j["start_at"])
    # one of them at most written late, one the rounding of its lag
    assert pw["slots_dropped"] >= missed - 2, (pw, missed)


def test_text_format(ib, prepared):
    r = dbrun(ib, prepared, "--threads", "2", "--time", "0.5", "--format", "text")
    assert r.rc == 0, r
    assert "Database pattern (2 readers, 1 flushers" in r.out
    assert "group commits (fdatasync):" in r.out and "commit " in r.out and "page read " in r.out
    assert "paced at" not in r.out
    r = dbrun(ib, prepared, "--threads", "2", "--time", "0.5", "--db-flush-rate", "100", "--format", "text")
    assert r.rc == 0, r
    assert re.search(r"page writes/s: +[0-9.]+ \(paced at 100\.00, [0-9]+ slots dropped\)\n", r.out), r.out


def test_prepare_run_cleanup_leaves_nothing(ib, tmp_path):
    d = tmp_path / "db"
    d.mkdir()
    r = ib("run", "--prepare", "--cleanup", "--dir", d, *SMALL, "--mode", "dbpattern", "--db-log-size", "2M",
           "--threads", "2", "--time", "0.5")
    assert r.rc == 0, r
    assert r.json["cleanup"]["removed_files"] == 5          # 4 test files + the log
    assert os.listdir(str(d)) == []


def test_cleanup_removes_log(ib, tmp_path):
    d = tmp_path / "db"
    d.mkdir()
    assert ib("prepare", "--dir", d, *SMALL).rc == 0
    r = dbrun(ib, d, "--threads", "1", "--time", "0.3")
    assert r.rc == 0, r
    assert (d / LOG).is_file()
    before = (d / LOG).stat().st_mtime_ns
    r = dbrun(ib, d, "--threads", "1", "--time", "0.3")     # reused, not recreated
    assert r.rc == 0 and (d / LOG).stat().st_size == 4 << 20
    assert (d / LOG).stat().st_mtime_ns >= before
    r = ib("cleanup", "--dir", d)
    assert r.rc == 0, r
    assert r.json["cleanup"]["removed_files"] == 5
    assert os.listdir(str(d)) == []


def test_log_symlink_refused(ib, tmp_path):
    d = tmp_path / "db"
    d.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    assert ib("prepare", "--dir", d, *SMALL).rc == 0
    os.symlink(str(victim), str(d / LOG))
    snap = snapshot(str(tmp_path))
    r = dbrun(ib, d, "--threads", "1", "--time", "0.3")
    assert r.rc == 3 and LOG in r.err and "symlink" in r.err, r
    r = ib("cleanup", "--dir", d)
    assert r.rc == 3 and LOG in r.err, r
    assert snapshot(str(tmp_path)) == snap and victim.read_bytes() == b"precious"


def test_log_not_created_without_marker(ib, tmp_path):
    d = tmp_path / "db"
    d.mkdir()
    r = dbrun(ib, d, "--threads", "1", "--time", "0.3")
    assert r.rc == 3 and os.listdir(str(d)) == []


@pytest.mark.parametrize("extra,flag", [
    (["--db-log-block", "1000"], "--db-log-block"),
    (["--db-log-block", "256"], "--db-log-block"),
    (["--db-log-block", "32K"], "--db-log-block"),
    (["--db-log-size", "1K"], "--db-log-size"),
    (["--db-log-size", "1000000000000"], "--db-log-size"),
    (["--db-reads-per-txn", "0"], "--db-reads-per-txn"),
    (["--db-flushers", "65"], "--db-flushers"),
    (["--db-flush-rate", "-1"], "--db-flush-rate"),
    (["--db-group-commit-max", "x"], "--db-group-commit-max"),
    (["--requests", "100"], "--requests"),
    (["--engine", "io_uring"], "--engine io_uring"),
    (["--time", "0"], "--time 0"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_flags_exit_2(ib, tmp_path, extra, flag):
    d = tmp_path / "never-created"
    assert_usage_error(ib("run", "--dir", d, "--mode", "dbpattern", *extra), flag, d)


@pytest.mark.parametrize("flag,val", [("--db-flushers", "1"), ("--db-reads-per-txn", "2"), ("--db-log-block", "4K")])
def test_db_flags_need_dbpattern(ib, tmp_path, flag, val):
    r = ib("run", "--dir", tmp_path, "--mode", "rndrd", flag, val)
    assert r.rc == 2 and flag in r.err and "--mode dbpattern" in r.err, r.err


def test_sigterm_mid_run_gives_valid_json(iobench, prepared, tmp_path):
    live = str(tmp_path / "live.jsonl")
    args = [iobench, "run", "--dir", prepared, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M",
            "--threads", "8", "--time", "30", "--direct", "--live-log", live, "--report-interval", "0.1"]
    rc, out, err = signal_mid_run(args, signal.SIGTERM, when=measured_for(live, 0.5))
    assert rc == 5, err
    j = json.loads(out)
    assert j["interrupted"] is True and j["signal"] == "SIGTERM"
    assert j["db"]["commits"]["count"] > 0 and j["elapsed_s"] < 10


def test_tsan_16_readers(prepared):
    make("tsan")
    for extra in (["--threads", "16", "--db-flushers", "2"],
                  ["--threads", "16", "--db-group-commit-max", "3", "--db-flush-rate", "500"]):
        r = run(BIN + "-tsan", "run", "--dir", prepared, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M",
                "--time", "1", *extra, env=SAN_ENV)
        assert "WARNING: ThreadSanitizer" not in r.err, r.err[:4000]
        assert r.rc == 0, r
        assert r.json["db"]["commits"]["count"] > 0 and r.json["db"]["config"]["readers"] == 16


def test_asan_dbpattern(prepared):
    make("asan")
    for extra in (["--threads", "4", "--direct", "--format", "text"],
                  ["--threads", "3", "--db-flushers", "0", "--warmup", "0.2", "--report-interval", "0.1"]):
        r = run(BIN + "-asan", "run", "--dir", prepared, *SMALL, "--mode", "dbpattern", "--db-log-size", "4M",
                "--time", "0.5", *extra, env=SAN_ENV)
        assert "AddressSanitizer" not in r.err and "runtime error" not in r.err and "LeakSanitizer" not in r.err, r.err
        assert r.rc == 0, r


def test_log_enospc_stops_readers_exit_4(ib):
    """The log writer fails: every reader stops (nothing can commit), the result is written, exit 4."""
    with mounted("tmpfs", "size=100m") as mnt:
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "8M").rc == 0
        r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "8M", "--mode", "dbpattern",
               "--db-log-size", "2M", "--time", "0.2")
        assert r.rc == 0, r
        subprocess.run(["fallocate", "--punch-hole", "--offset", "0", "--length", "2M", os.path.join(d, LOG)],
                       check=True)
        fill_filesystem(mnt)
        t0 = time.time()
        r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "8M", "--mode", "dbpattern",
               "--db-log-size", "2M", "--time", "20", "--threads", "4", "--db-flushers", "0", timeout=30)
        assert time.time() - t0 < 10
        assert r.rc == 4, r
        j = r.json
        assert j["errors"]["by_kind"].get("ENOSPC", 0) >= 1 and LOG in j["errors"]["first"]["message"]
        assert j["db"]["commits"]["count"] == 0
