"""The cache proof holds on a busy machine.

The O_DIRECT over-cache random-read workload runs 3 times (short runs) through the module
while CPU hogs (one per core, started here, each bounded in time, ended by PID) load the
machine: whatever else runs, the benchmark competes with a whole machine's worth of spinning
threads (their CPU is what this test costs, so they spin only as long as its runs). The
test directory is on an ext4 in a loop device this test creates, so the only I/O on that
device is the benchmark's. Each time, the workload record's metrics
(``plugin_utils/metrics/workload.py``) and diagnostics (``plugin_utils/diagnostics/diagnose.py``) must never
conclude "cache", and the device bytes over the measured window must be within 5 % of the
benchmark's (exact with ``--devstat``; iostat samples placed by their real timestamps
otherwise)."""
import os
import subprocess
import sys

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.diagnose import diagnose

import loopdev
import test_module_iobench
from test_module_iobench import run_module

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary

pytestmark = pytest.mark.slow
RUNS = 3
HOG_S = 600      # upper bound of every hog's life; they are killed by PID when the test ends


@pytest.fixture
def loop_ext4():
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    with loopdev.loop_ext4(256, prefix="fq-busy-") as loop:
        test_dir = os.path.join(loop["mnt"], "fq")
        os.mkdir(test_dir, 0o700)
        yield test_dir, loop["name"]


@pytest.fixture
def cpu_hogs():
    n = os.cpu_count() or 1
    code = "import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end:\n    pass\n" % HOG_S
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _n in range(n)]
    try:
        yield hogs
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait()


SPEC = {"id": "over_cache-rndrd-t2", "workload": "over_cache", "working_set": "over_cache", "mode": "rndrd",
        "threads": 2, "file_num": 2, "total_size": 96 << 20, "block_size": 16384, "direct": True, "time": 2,
        "warmup": 0, "dataset": "fq"}


def test_over_cache_reads_are_disk_reads_under_cpu_load(iobench_binary, loop_ext4, cpu_hogs):  # noqa: F811
    test_dir, dev = loop_ext4
    ratios = []
    for i in range(RUNS):
        assert all(h.poll() is None for h in cpu_hogs), "a CPU hog ended early"
        args = {k: SPEC[k] for k in ("mode", "threads", "file_num", "total_size", "block_size", "direct", "time",
                                     "warmup")}
        args.update(binary=iobench_binary, dir=test_dir, seed=i + 1, prepare=(i == 0), cleanup=(i == RUNS - 1),
                    timeout=120)
        res = run_module(args)
        assert res.get("failed") is False, res.get("msg")
        assert res["collector"]["devices"] == [dev], res["collector"]
        rec = workload_record(SPEC, res)
        m = rec["metrics"]
        assert m["bench_read_bytes"] and m["dev_read_bytes"] is not None, m
        ratio = m["dev_read_bytes"] / m["bench_read_bytes"]
        ratios.append((m["dev_source"], round(ratio, 4)))
        assert abs(ratio - 1.0) <= 0.05, (i, m["dev_source"], ratio)
        proof = diagnose([rec])["cache_proof"]
        assert proof["conclusion"] == "disk", (i, proof)
    # every run had the exact counters when the binary has --devstat
    if "--devstat" in res["argv"]:
        assert all(src == "devstat" for src, _ratio in ratios), ratios
