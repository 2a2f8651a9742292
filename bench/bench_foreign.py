"""Cost of the foreign-I/O accounting (issue 17) on a quiet disk: the same workload with and
without it, side by side.

"with": ``workload.run_workload`` with ``foreign_io`` (the benchmark in a blkio/io cgroup of
its own with the device's throttling activated, ``iobench --live-log``, the sampler thread
reading the device's and the cgroup's counters on every live-log line); the quiet wait
before it is left out of the comparison (``sample_s`` is a wait, not a cost to the I/O).
"without": the same call without ``foreign_io``. Runs alternate (with, without, without,
with, ...) on an ext4 on a loop device this script creates over a file in /var/tmp and
detaches at the end. Reports the median IOPS of --reps runs per side and their ratio, and
writes bench/RESULTS-compliance.md with --results.

usage: python3 bench/bench_foreign.py [--reps 7] [--time 5] [--results bench/RESULTS-compliance.md]
(root; ANSIBLE_COLLECTIONS_PATH or PYTHONPATH exposing the collection, as the Makefile does)
"""
import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.fleetqual.storage.plugins.module_utils import workload  # noqa: E402

IOBENCH = os.path.join(ROOT, "roles", "iobench", "files", "src", "iobench")
MARKER = "<!-- analysis below is hand-written and kept across reruns -->"
KINDS = [
    ("rndrd-direct-t2", {"mode": "rndrd", "threads": 2, "direct": True}),
    ("rndwr-direct-t1", {"mode": "rndwr", "threads": 1, "direct": True}),
    ("log-fdatasync-t1", {"mode": "seqwr", "threads": 1, "direct": False, "fsync_freq": 1,
                          "fsync_mode": "fdatasync", "file_num": 1, "total_size": "16M"}),
]


def sh(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def one(dirpath, secs, kind, accounted):
    p = workload.defaults()
    p.update(dir=dirpath, file_num=4, total_size="64M", block_size="16K", time=secs, warmup=1, prepare=True,
             cleanup=True, binary=IOBENCH, collect="procfs", seed=42)
    p.update(kind)
    if accounted:
        p["foreign_io"] = {"sample_s": 0.2, "quiet_util_pct": 100}
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    res, failed, msg, _w = workload.run_workload(p)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if failed:
        raise RuntimeError(msg)
    iops = res["bench"]["total"]["iops"]
    samples = len((res.get("foreign") or {}).get("samples") or [])
    # CPU of this process (the runner: collector, sampler) per second of the run
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / max(1e-6, res["bench"]["elapsed_s"] + 1)
    return iops, samples, (res.get("foreign") or {}).get("source"), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--results")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (losetup, cgroup)")
    base = tempfile.mkdtemp(prefix="fq-bench-foreign-", dir="/var/tmp")
    img, mnt = os.path.join(base, "disk.img"), os.path.join(base, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as fh:
        fh.truncate(512 << 20)
    dev = sh(["losetup", "--find", "--show", "--direct-io=on", img])
    rows = []
    load_before = os.getloadavg()
    try:
        sh(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        sh(["mount", dev, mnt])
        d = os.path.join(mnt, "ds")
        os.mkdir(d)
        for name, kind in KINDS:
            runs = {True: [], False: []}
            pairs = []
            cpu = {True: [], False: []}
            source = None
            nsamples = []
            for i in range(a.reps):
                order = (True, False) if i % 2 == 0 else (False, True)
                got = {}
                for acc in order:
                    iops, ns, src, c = one(d, a.time, kind, acc)
                    runs[acc].append(iops)
                    cpu[acc].append(c)
                    got[acc] = iops
                    if acc:
                        source = src
                        nsamples.append(ns)
                pairs.append(got[True] / got[False])
            w, wo = statistics.median(runs[True]), statistics.median(runs[False])
            pr = statistics.median(pairs)
            cw, cwo = statistics.median(cpu[True]) * 100, statistics.median(cpu[False]) * 100
            rows.append((name, w, wo, w / wo, runs[True], runs[False], source, statistics.median(nsamples), pr, cw, cwo))
            print("%-18s with %9.0f  without %9.0f  ratio %.3f  paired %.3f (%s, %d samples) runner CPU %.2f %% vs %.2f %%"
                  % (name, w, wo, w / wo, pr, source, statistics.median(nsamples), cw, cwo))
    finally:
        subprocess.run(["umount", mnt], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)
        shutil.rmtree(base, ignore_errors=True)
    if a.results:
        lines = ["# Cost of the foreign-I/O accounting (issue 17)", "",
                 "Generated by `bench/bench_foreign.py --reps %d --time %d --results %s` on %s UTC." % (
                     a.reps, a.time, a.results, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())), "",
                 "Machine: %d CPUs, kernel %s, ext4 on a loop device (`--direct-io=on`) over a file in /var/tmp. "
                 "Load average before %.2f %.2f %.2f, after %.2f %.2f %.2f (the machine is shared with other "
                 "work: runs alternate with/without so drift hits both sides)." % (
                     os.cpu_count(), platform.release(), *load_before, *os.getloadavg()), "",
                 "Each figure is the median IOPS of %d runs of %d s (+1 s warm-up). *with*: `run_workload` with "
                 "`foreign_io` (own cgroup, device throttling activated, `--live-log`, the sampler); *without*: "
                 "the same call without it." % (a.reps, a.time), "",
                 "*paired*: the median of the ratios of each with/without pair run back to back (drift of "
                 "the machine's load between pairs cancels).", "",
                 "*runner CPU*: CPU time of the Python process that runs the workload (collector and, with the "
                 "accounting, the sampler thread), in % of one core over the run.", "",
                 "| workload | with | without | with/without (medians) | paired ratio | attribution | samples per run "
                 "| runner CPU with | runner CPU without |",
                 "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        for name, w, wo, r, _rw, _ro, src, ns, pr, cw, cwo in rows:
            lines.append("| %s | %.0f | %.0f | %.3f | %.3f | %s | %d | %.2f %% | %.2f %% |"
                         % (name, w, wo, r, pr, src, ns, cw, cwo))
        lines += ["", "All runs (IOPS):", ""]
        for name, _w, _wo, _r, rw, ro, _s, _n, _p, _cw, _cwo in rows:
            with_runs, without_runs = ", ".join("%.0f" % x for x in rw), ", ".join("%.0f" % x for x in ro)
            lines.append("- %s: with %s; without %s" % (name, with_runs, without_runs))
        kept = ""
        if os.path.exists(a.results):
            with open(a.results) as fh:
                old = fh.read()
            if MARKER in old:
                kept = old[old.index(MARKER):]
        with open(a.results, "w") as fh:
            fh.write("\n".join(lines) + "\n\n" + (kept or MARKER + "\n"))


if __name__ == "__main__":
    main()
