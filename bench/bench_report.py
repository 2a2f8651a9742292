"""Benchmark of the fleet report over a results directory.

Writes N host records of 16 workloads each into ``<dir>/<run_id>/<host>.json`` first
(synthetic records from tests/unit/fixtures/report/report_synth.py with 10 iostat samples
per workload, plus the real latency histogram of a fixture workload, shifted per host,
and a drive inventory of ``--drives`` drives per host with the judge's drive checks),
not timed.  Then, in a fresh child process, exactly what ``playbooks/report.yml`` makes
its action (fleetqual.storage.fleet_report) do: stream every record from the directory (run_store.aggregate_run), merge
the histograms, judge outliers and drives over the whole fleet, write fleet.json, junit.xml,
report.html, report.md, not-passed.limit and the Prometheus textfile (history.jsonl is
appended by each qualify run, not by the merge).  Reported: the child's CPU and wall seconds, its peak RSS (the whole report
process: interpreter, libraries, everything it holds), and the file sizes.

    .venv/bin/python bench/bench_report.py --hosts 10000 [--keep DIR] [--repeat 3] [--drives 8]

Results are recorded in bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = os.path.join(ROOT, "build", "collections", "ansible_collections", "fleetqual", "storage")
if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "report"))

RUN_ID = "20261122T120000Z"
FIXTURE = os.path.join(ROOT, "tests", "unit", "fixtures", "controller", "nvme_over_cache-rndrd-t64.json")


def host_drives(i, n_drives, test_dir):
    """The drives module's ``drives`` of host i: n_drives like NVMe drives (the first holds
    the test directory), health collected and passed; every 500th host has one drive on
    another firmware (a drive finding)."""
    out = []
    for d in range(n_drives):
        out.append({"name": "nvme%dn1" % d, "path": "/dev/nvme%dn1" % d,
                    "id_path": "/dev/disk/by-id/nvme-eui.%012x%02d" % (i, d), "model": "SAMSUNG MZQL21T9HCJR-00A07",
                    "serial": "S64GNE0R%06d%02d" % (i, d), "firmware": "GDC5603Q" if i % 500 == 11 and d == 1
                    else "GDC5602Q", "size_bytes": 1920383410176, "rotational": False, "transport": "nvme",
                    "targets": [test_dir] if d == 0 else [],
                    "health": {"collected": True, "tool": "smartctl", "reason": None, "protocol": "NVMe",
                               "passed": True, "critical_warning": 0, "media_errors": 0, "percentage_used": 2,
                               "temperature_c": 34, "power_on_hours": 8123, "problems": []}})
    return out


def write_records(root, n_hosts, samples, n_drives=8):
    """The input: n_hosts records in root/RUN_ID (as store.yml writes them), each with a
    drive inventory of n_drives drives and the judge's drive_health checks."""
    import report_synth as synth  # noqa: E402

    with open(FIXTURE, encoding="utf-8") as f:
        hist = json.load(f)["result"]["bench"]["ops"]["read"]["histogram"]
    run_dir = os.path.join(root, RUN_ID)
    os.makedirs(run_dir, exist_ok=True)
    groups = ("db", "web", "batch")
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics import diagnose as diagnostics

    templates = {g: synth.make_record("tmpl", group=g, samples=samples, seed=i, results_dir=root, run_id=RUN_ID)
                 for i, g in enumerate(groups)}
    for t in templates.values():          # the role stores each host's diagnostics in its record
        t["diagnostics"] = diagnostics.diagnose(t["workloads"])
    for i in range(n_hosts):
        g = groups[i % len(groups)]
        host = "%s%05d" % (g, i + 1)
        rec = copy.deepcopy(templates[g])
        rec["host"] = host
        rec["results_file"] = os.path.join(run_dir, host + ".json")
        scale = 1.0 + ((i * 7919) % 97 - 48) / 1000.0          # +-5 %
        if i % 100 == 7:
            scale *= 0.5                                      # every 100th host slow: outliers
        shift = i % 5 + (20 if i % 100 == 7 else 0)
        for w in rec["workloads"]:
            m = w["metrics"]
            m["iops"] *= scale
            m["latency_op"] = "read" if w["mode"] in ("rndrd", "seqrd", "rndrw") else "write"
            w["result"]["bench"]["ops"] = {m["latency_op"]: {"histogram": {
                "unit": "ns", "sub_bucket_bits": hist["sub_bucket_bits"],
                "buckets": [[b + shift, c] for b, c in hist["buckets"]]}}}
        if n_drives:
            rec["drives"] = host_drives(i, n_drives, rec["test_dir"])
            rec["checks"] = rec["checks"] + [
                {"workload": None, "rule": "drive_health", "metric": "health.passed", "value": True, "limit": True,
                 "op": "==", "passed": True, "status": "pass", "kind": "drive", "drive": d["name"],
                 "serial": d["serial"], "model": d["model"], "firmware": d["firmware"], "evidence": "smartctl",
                 "message": "drive %s (%s, serial %s): the drive's own health verdict is PASSED"
                            % (d["name"], d["model"], d["serial"])} for d in rec["drives"]]
        if i % 250 == 3:
            rec["verdict"] = "FAIL"
            rec["checks"].append(synth.failing_check(rec["workloads"][5]["id"]))
            rec["reasons"] = ["%s: iops 850 below 5000" % rec["workloads"][5]["id"]]
        with open(rec["results_file"], "w", encoding="utf-8") as f:
            # store.yml writes to_nice_json(indent=1); compact here only to build the
            # input faster (the pure-Python indenting encoder is ~10x slower)
            f.write(json.dumps(rec))
    return run_dir


def store_entries(run_dir):
    """What the qualify run's callback leaves beside the records: every host's summary in
    fleet.d/ (here built from the stored records, as a run's callback builds them from
    the records set_stats handed over)."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store

    sink = run_store.EntryWriter(run_dir, "run")
    t0 = time.process_time()
    fleet.aggregate(run_store.iter_run_records(run_dir), run_id=RUN_ID, detail_hosts=0, entry_sink=sink)
    sink.close()
    return time.process_time() - t0


def child(run_dir, out_dir):
    """The report, as playbooks/report.yml's action (fleet_report) runs it; prints one JSON
    line of measurements."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import rows as report_rows
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import run_store

    w0, c0 = time.perf_counter(), time.process_time()
    steps = {}

    def step(name, fn):
        s0 = time.process_time()
        r = fn()
        steps[name] = round(time.process_time() - s0, 3)
        return r

    f = step("aggregate_run", lambda: run_store.aggregate_run(run_dir, detail_hosts=100))
    rows = step("table_rows", lambda: report_rows.table_rows(f))
    step("terminal", lambda: (render_text.render_table(f, rows=rows), render_text.detail_lines(f)))
    written = {}
    for fmt in ("json", "junit", "html", "md"):
        written.update(step(fmt, lambda: report.write_reports(f, out_dir, [fmt], rows=rows)))
    # no history.jsonl: the merge does not append it (each qualify run appended its hosts)
    written["prometheus"] = step("prometheus", lambda: prometheus.write_prometheus(
        os.path.join(out_dir, "fleetqual.prom"), f))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"wall": wall, "cpu": cpu, "steps": steps,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "sizes": {k: os.path.getsize(p) for k, p in written.items()},
                      "verdicts": f["summary"]["by_verdict"], "outliers": f["summary"]["outliers"],
                      "detail_hosts": f["summary"]["detail_hosts"], "hosts": f["summary"]["hosts"],
                      "drives": f["summary"].get("drives"), "drive_findings": f["summary"].get("drive_findings"),
                      "workloads": f["summary"]["workloads"]}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--samples", type=int, default=10, help="iostat samples per workload")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drives", type=int, default=8, help="drives per host (drive inventory and findings)")
    ap.add_argument("--keep", help="results directory to reuse (records written once)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return

    root = args.keep or tempfile.mkdtemp(prefix="bench-report-")
    try:
        run_dir = os.path.join(root, RUN_ID)
        t0 = time.perf_counter()
        have = len([n for n in os.listdir(run_dir) if n.endswith(".json")]) if os.path.isdir(run_dir) else 0
        entries_cpu = None
        if have < args.hosts:
            shutil.rmtree(run_dir, ignore_errors=True)
            write_records(root, args.hosts, args.samples, args.drives)
            entries_cpu = store_entries(run_dir)
        build_s = time.perf_counter() - t0
        records = [os.path.join(run_dir, n) for n in os.listdir(run_dir) if n.endswith(".json")
                   and n not in ("fleet.json",)]
        input_mb = sum(os.path.getsize(p) for p in records) / 1e6
        edir = os.path.join(run_dir, "fleet.d")
        entries_mb = sum(os.path.getsize(os.path.join(edir, n)) for n in os.listdir(edir)) / 1e6
        runs = []
        for _repeat in range(args.repeat):
            out = tempfile.mkdtemp(prefix="bench-report-out-")
            try:
                proc = subprocess.run([sys.executable, __file__, "--child", run_dir, out], capture_output=True,
                                      text=True, check=True)
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            finally:
                shutil.rmtree(out, ignore_errors=True)
        best = min(runs, key=lambda r: r["cpu"])
        print("python %s on %s, %d CPUs, load average %s"
              % (platform.python_version(), platform.machine(), os.cpu_count(),
                 " ".join("%.1f" % x for x in os.getloadavg())))
        print("input: %d host records of %d workloads in %s: %.0f MB of JSON records, %.0f MB of host "
              "summaries in fleet.d/ (written in %.1f s, not timed%s)"
              % (best["hosts"], best["workloads"] // max(1, best["hosts"]), run_dir, input_mb, entries_mb, build_s,
                 "" if entries_cpu is None else "; the run's callback part that writes fleet.d/: %.1f s CPU"
                 % entries_cpu))
        print("report (fresh process, stream + merge + judge + every format): best of %d: %.2f s CPU, %.2f s wall;"
              " all runs CPU %s, wall %s"
              % (args.repeat, best["cpu"], best["wall"], ", ".join("%.2f" % r["cpu"] for r in runs),
                 ", ".join("%.2f" % r["wall"] for r in runs)))
        print("peak RSS of the report process: %.0f MiB (max over runs %.0f MiB)"
              % (best["rss_mib"], max(r["rss_mib"] for r in runs)))
        print("steps, CPU s: " + ", ".join("%s %.3f" % kv for kv in best["steps"].items()))
        print("output sizes (KiB): " + ", ".join("%s %.0f" % (k, v / 1024.0) for k, v in best["sizes"].items()))
        print("verdicts: %s; outliers %d; hosts drawn in detail %d; drives %s, drive findings %s"
              % (best["verdicts"], best["outliers"], best["detail_hosts"], best["drives"], best["drive_findings"]))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
