#!/usr/bin/env python3
"""Benchmark of the fleet report: aggregate + render 1000 hosts x 16 workloads.

Synthetic records (tests/unit/fixtures/report/report_synth.py) are built first and not
timed; then fleet.aggregate, every renderer and the file writes are timed, with
tracemalloc's peak of what the report itself allocates and the process's max RSS
(which includes the input records).

    .venv/bin/python bench/bench_report.py [--hosts 1000] [--samples 10] [--repeat 3]

Results are recorded in bench/RESULTS-report.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = os.path.join(ROOT, "build", "collections", "ansible_collections", "fleetqual", "storage")
if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "report"))

import report_synth as synth  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils import report  # noqa: E402


def once(records, play, inventory, out_dir, detail_hosts):
    """What the callback does at v2_playbook_on_stats, step by step (wall, cpu seconds)."""
    t = {}
    sizes = {}

    def step(name, fn):
        w0, c0 = time.perf_counter(), time.process_time()
        r = fn()
        t[name] = (time.perf_counter() - w0, time.process_time() - c0)
        return r

    f = step("aggregate", lambda: fleet.aggregate(records, play=play, inventory=inventory))
    rows = step("table_rows", lambda: report.table_rows(f))
    step("table", lambda: (report.render_table(f, rows=rows), report.detail_lines(f)))
    run_dir = os.path.join(out_dir, f["run_id"])
    for fmt in ("json", "junit", "html", "md"):
        written = step(fmt, lambda: report.write_reports(f, run_dir, [fmt], records, detail_hosts, rows))
        sizes[fmt] = os.path.getsize(written[fmt])
    step("history", lambda: fleet.append_history(os.path.join(out_dir, "history.jsonl"), f))
    prom = os.path.join(out_dir, "fleetqual.prom")
    step("prometheus", lambda: fleet.write_atomic(prom, fleet.prometheus_text(f)))
    sizes["prometheus"] = os.path.getsize(prom)
    return f, t, sizes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10, help="iostat samples per workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--detail-hosts", type=int, default=100)
    args = ap.parse_args()

    t0 = time.perf_counter()
    records = synth.fleet_records(args.hosts, groups=("db", "web", "batch"), samples=args.samples)
    # every 100th host is slow (fleet outliers), every 250th fails a rule
    for i, rec in enumerate(records.values()):
        if i % 100 == 7:
            for w in rec["workloads"]:
                w["metrics"]["iops"] *= 0.5
        if i % 250 == 3:
            rec["verdict"] = "FAIL"
            rec["checks"].append(synth.failing_check(rec["workloads"][5]["id"]))
            rec["reasons"] = ["%s: iops 850 below 5000" % rec["workloads"][5]["id"]]
    n_wl = sum(len(r["workloads"]) for r in records.values())
    # one host slow, one unreachable, one failed preflight
    play = {"lost01": {"counts": {"unreachable": 1}, "unreachable": [{"task": "Gathering Facts", "msg": "timeout"}]},
            "broken01": {"counts": {"failures": 1}, "failed": [{"task": "preflight", "msg": "no space"}]}}
    inventory = {"lost01": ["db"], "broken01": ["web"]}
    build_s = time.perf_counter() - t0
    rss_input = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    out = tempfile.mkdtemp(prefix="bench-report-")
    try:
        runs = []
        for i in range(args.repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            f, t, sizes = once(records, play, inventory, out, args.detail_hosts)
            runs.append((time.perf_counter() - w0, time.process_time() - c0, t, sizes))
        rss_runs = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        # memory: a separate pass under tracemalloc (its bookkeeping slows Python down a lot)
        tracemalloc.start()
        once(records, play, inventory, out, args.detail_hosts)
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        wall, cpu, t, sizes = min(runs, key=lambda r: r[1])
        print("python %s on %s, %d CPUs, load average %s" % (platform.python_version(), platform.machine(),
                                                              os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
        print("input: %d hosts, %d workload records, %d iostat samples each (built in %.2f s, RSS %.0f MiB)"
              % (len(f["hosts"]), n_wl, args.samples, build_s, rss_input))
        print("aggregate + table + all files: best of %d: %.2f s CPU (%.2f s wall); all runs CPU: %s"
              % (args.repeat, cpu, wall, ", ".join("%.2f" % r[1] for r in runs)))
        print("peak memory allocated by the report (tracemalloc): %.1f MiB" % (peak / 1048576.0))
        print("process max RSS: %.0f MiB after the timed runs (input records %.0f MiB of it), "
              "%.0f MiB after the tracemalloc pass" % (rss_runs, rss_input, rss))
        print("steps, CPU s: " + ", ".join("%s %.3f" % (k, v[1]) for k, v in t.items()))
        print("output sizes (KiB): " + ", ".join("%s %.0f" % (k, v / 1024.0) for k, v in sizes.items()))
        print("verdicts: %s; outliers %d" % (f["summary"]["by_verdict"], f["summary"]["outliers"]))
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
