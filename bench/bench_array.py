"""Array mode's lock-step windows over SSH: how close together the hosts' measured
windows open, across 8 and 16 loopback hosts, and what the controller spends per step.

    .venv/bin/python bench/bench_array.py [--hosts 8,16] [--forks 5] [--table FILE]

Each run is the qualify playbook over N loopback sshd hosts (tests/fleet/fleetlib.py), all in
one array (``fleetqual_array``), every step with every host active, steps of 2 s (+1 s
warm-up), 1 thread of 4K O_DIRECT random I/O on 8 MiB per host (each host's own test
directory), a one-workload host plan after the array.

* **Start spread** of a step: the latest minus the earliest host's measured-window start,
  each converted to the controller's clock with the host's measured offset
  (``plugin_utils/arrays.build_array`` over the stored records: the hosts' own iobench
  timestamps). Median and max over the steps; also the offsets' uncertainty (half the
  smallest round trip of the exchanges) and iobench's own lateness at ``--start-at``.
* **Controller time per step**: the same N hosts run S and 3 x S steps back to back (after
  one untimed run that fills the build cache); compared: the commands the controller ran on
  each host (its sshd's "Starting session" lines: every module call, poll and clock exchange
  is one), the controller's time outside the schedule (playbook wall time minus T0 -> last
  window end) and its CPU seconds (``getrusage(RUSAGE_CHILDREN)``: ansible-playbook, its
  forks, ssh clients): (long - short) / (2 x S) is what one more step costs the controller
  beyond its own seconds. The design's aim is none: the schedule is fixed once, no
  controller round trip per step (the wait polls once per progress interval, whatever the
  steps). The session count is exact; the seconds carry the machine's noise.

Both are measured in the same run on the same machine; nothing is compared with a number
from elsewhere. Needs root and openssh-server (like the fleet tests).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fleet"))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fleetlib  # noqa: E402
from bench_fleet import children_cpu_s  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays_mod  # noqa: E402

BIN = os.path.dirname(sys.executable)
TINY = [{"workload": "cache", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "4K",
         "direct": True, "time": 1, "warmup": 0}]


def array_cfg(modes):
    return {"threads": [1, 2], "modes": modes, "time": 2, "warmup": 1, "block_size": "4K", "total_size": "8M"}


def run(fleet, base, n_hosts, forks, cfg, cache, tag):
    hosts = [{"name": "fq%d" % (101 + i), "inst": fleet.host(101 + i)} for i in range(n_hosts)]
    inv_dir = os.path.join(base, tag)
    gv = {"fleetqual_progress_interval": 30, "fleetqual_matrix": TINY, "fleetqual_array": "bench",
          "fleetqual_arrays": {"bench": cfg}}
    inv = fleet.inventory(inv_dir, hosts, group_vars={"db": gv})
    ev = {"fleetqual_results_dir": os.path.join(inv_dir, "results"), "fleetqual_build_cache_dir": cache,
          "fleetqual_run_id": tag}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS=str(forks), PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               FLEETQUAL_REPORT_DIR=os.path.join(inv_dir, "results"), **fleet.ansible_env())
    s0 = sessions([h["inst"] for h in hosts])
    t0, k0 = time.monotonic(), children_cpu_s()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
                           "-i", inv, "-e", json.dumps(ev)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.monotonic() - t0
    ctl = children_cpu_s() - k0
    per_host = (sessions([h["inst"] for h in hosts]) - s0) / float(n_hosts)
    recs = {}
    for h in hosts:
        path = os.path.join(inv_dir, "results", tag, h["name"] + ".json")
        if os.path.exists(path):
            with open(path) as fh:
                recs[h["name"]] = json.load(fh)
    runs = {h: r.get("array_run") for h, r in recs.items() if r.get("array_run")}
    if len(runs) != n_hosts:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit("run %s: %d of %d hosts stored an array_run (exit %d)" % (tag, len(runs), n_hosts, proc.returncode))
    arr = arrays_mod.build_array("bench", runs)
    steps = arr["steps"]
    spreads = [s["window"]["start_spread_ms"] for s in steps if s["window"]["start_spread_ms"] is not None]
    ends = [e["window_end"] for r in runs.values() for e in r["steps"] if e.get("window_end")]
    t0_ctl = next(iter(runs.values()))["t0"]
    unc = [r["clock"]["uncertainty_s"] * 1000.0 for r in runs.values()]
    late = [e["start_late_ms"] for r in runs.values() for e in r["steps"] if e.get("start_late_ms") is not None]
    schedule = max(ends) - t0_ctl
    return {"hosts": n_hosts, "forks": forks, "steps": len(steps), "complete": sum(1 for s in steps if s["complete"]),
            "spread_median_ms": statistics.median(spreads) if spreads else None,
            "spread_max_ms": max(spreads) if spreads else None,
            "uncertainty_median_ms": statistics.median(unc), "uncertainty_max_ms": max(unc),
            "late_median_ms": statistics.median(late) if late else None,
            "lead_s": next(iter(runs.values())).get("lead_s"),
            "wall": wall, "schedule": schedule, "outside": wall - schedule, "ctl_cpu": ctl, "rc": proc.returncode,
            "sessions_per_host": per_host}


def sessions(insts):
    """Commands the controller has run on these hosts so far (sshd's per-channel log line)."""
    return sum(i.read_log().count("Starting session:") for i in insts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="8,16")
    ap.add_argument("--forks", type=int, default=5)
    ap.add_argument("--table", help="also write the Markdown tables to this file")
    args = ap.parse_args()
    reason = fleetlib.available()
    if reason:
        raise SystemExit("cannot build the loopback fleet: %s" % reason)
    base = tempfile.mkdtemp(prefix="fq-bench-array-", dir="/var/tmp")
    cache = os.path.join(base, "build-cache")
    os.makedirs(cache)
    fleet = fleetlib.Fleet(os.path.join(base, "fleet"))
    rows = []
    try:
        sizes = [int(x) for x in args.hosts.split(",")]
        run(fleet, base, min(sizes), args.forks, array_cfg(["rndrd"]), cache, "warmup")   # fills the build cache
        for n in sizes:
            short = run(fleet, base, n, args.forks, array_cfg(["rndrd"]), cache, "h%d-short" % n)
            rows.append(short)
            print(json.dumps(short), flush=True)
            if n == min(sizes):
                long_ = run(fleet, base, n, args.forks, array_cfg(["rndrd", "rndwr", "rndrw"]), cache, "h%d-long" % n)
                rows.append(long_)
                print(json.dumps(long_), flush=True)
    finally:
        fleet.close()
        shutil.rmtree(base, ignore_errors=True)
    out = ["| hosts @ forks | steps (complete) | start spread median ms | max ms | offset uncertainty median / max ms "
           "| iobench late median ms | lead s | wall s | schedule s | controller time outside the schedule s "
           "| controller CPU s | commands per host |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %d @ %d | %d (%d) | %.2f | %.2f | %.2f / %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
            r["hosts"], r["forks"], r["steps"], r["complete"], r["spread_median_ms"], r["spread_max_ms"],
            r["uncertainty_median_ms"], r["uncertainty_max_ms"], r["late_median_ms"], r["lead_s"], r["wall"],
            r["schedule"], r["outside"], r["ctl_cpu"], r["sessions_per_host"]))
    pairs = [(a, b) for a in rows for b in rows if a["hosts"] == b["hosts"] and b["steps"] > a["steps"]]
    for a, b in pairs:
        extra = b["steps"] - a["steps"]
        out.append("")
        out.append("%d hosts, %d -> %d steps: commands per host %+.2f per extra step (%.1f -> %.1f), controller time "
                   "outside the schedule %+.2f s per extra step (%.1f -> %.1f s), controller CPU %+.2f s per extra step "
                   "(%.1f -> %.1f s)"
                   % (a["hosts"], a["steps"], b["steps"], (b["sessions_per_host"] - a["sessions_per_host"]) / extra,
                      a["sessions_per_host"], b["sessions_per_host"], (b["outside"] - a["outside"]) / extra,
                      a["outside"], b["outside"], (b["ctl_cpu"] - a["ctl_cpu"]) / extra, a["ctl_cpu"], b["ctl_cpu"]))
    text = "\n".join(out)
    print(text)
    if args.table:
        with open(args.table, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
