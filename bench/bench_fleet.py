#!/usr/bin/env python3
"""Fleet timing: the qualify playbook over SSH on 1 host and on 8 hosts of the loopback
sshd fleet (tests/fleet/fleetlib.py), wall time of each, the 8/1 ratio, and the time
Ansible spends outside the benchmark per host.

    .venv/bin/python bench/bench_fleet.py [--variants quick,short,short-nopipe] [--sizes 1,8] [--repeat 1] [--table FILE]

Per host, "benchmark time" is what iobench itself reported for each workload: prepare
(``bench.prepare.elapsed_s``) + warm-up (``config.warmup_s``) + measured window
(``elapsed_s``). "Outside" = playbook wall time - the host's benchmark time: fact gathering,
build check, deploy, preflight, per-task SSH round trips, judge, store, report.

Variants (same fleet, same build cache, warmed up by one untimed run):
  quick           the quick profile as shipped
  short           a 2-workload matrix of 1 s (+0 s warm-up) on 4 MiB: Ansible overhead dominates
  *-nopipe        the same without ansible_ssh_pipelining (default in the fleet inventory: on)
Needs root and openssh-server (like the fleet tests).
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

import fleetlib  # noqa: E402

BIN = os.path.dirname(sys.executable)
SHORT = [{"workload": "short", "mode": m, "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "16K",
          "direct": True, "time": 1, "warmup": 0} for m in ("rndrd", "rndwr")]


def bench_time(rec):
    total = 0.0
    for wl in rec["workloads"]:
        b = wl["result"]["bench"]
        total += (b.get("prepare") or {}).get("elapsed_s") or 0.0
        total += b["config"].get("warmup_s") or 0.0
        total += b.get("elapsed_s") or 0.0
    return total


def cpu_busy_s():
    """Busy CPU seconds of the whole machine so far (/proc/stat, all cores)."""
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:]]
    return (f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] if len(f) > 7 else 0)) / os.sysconf("SC_CLK_TCK")


def adhoc_setup(fleet, inv, args):
    """Wall time of `ansible all -m setup` (fact gathering alone) with the given module args."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), **fleet.ansible_env())
    t0, c0 = time.monotonic(), cpu_busy_s()
    subprocess.run([os.path.join(BIN, "ansible"), "all", "-i", inv, "-m", "ansible.builtin.setup"]
                   + (["-a", args] if args else []), capture_output=True, check=True, env=env, cwd=ROOT)
    return time.monotonic() - t0, cpu_busy_s() - c0


def run(fleet, base, n_hosts, variant, cache, tag):
    hosts = [{"name": "fq%d" % (11 + i), "inst": fleet.host(11 + i)} for i in range(n_hosts)]
    inv_dir = os.path.join(base, tag)
    gv = {}
    if variant.startswith("short"):
        gv["fleetqual_matrix"] = SHORT
    if variant.endswith("-nopipe"):
        gv["ansible_ssh_pipelining"] = False
    inv = fleet.inventory(inv_dir, hosts, group_vars={"db": gv})
    ev = {"fleetqual_results_dir": os.path.join(inv_dir, "results"), "fleetqual_build_cache_dir": cache,
          "fleetqual_run_id": tag}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               FLEETQUAL_REPORT_DIR=os.path.join(inv_dir, "results"), **fleet.ansible_env())
    t0, c0 = time.monotonic(), cpu_busy_s()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
                           "-i", inv, "-e", json.dumps(ev)], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.monotonic() - t0
    cpu = cpu_busy_s() - c0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-2000:])
        raise SystemExit("run %s failed (exit %d)" % (tag, proc.returncode))
    recs = [json.load(open(os.path.join(inv_dir, "results", tag, h["name"] + ".json"))) for h in hosts]
    btimes = [bench_time(r) for r in recs]
    return {"wall": wall, "bench": statistics.mean(btimes), "bench_max": max(btimes),
            "outside": statistics.mean(wall - b for b in btimes), "workloads": len(recs[0]["workloads"]),
            "cpu": cpu, "cpu_pct": 100.0 * cpu / wall / os.cpu_count(), "inv": inv}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="quick,short,short-nopipe")
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--table", help="also write the Markdown table to this file (bench/RESULTS-fleet.md is edited by hand)")
    args = ap.parse_args()
    why = fleetlib.available()
    if why:
        raise SystemExit("cannot build the fleet: " + why)
    sizes = [int(s) for s in args.sizes.split(",")]
    base = tempfile.mkdtemp(prefix="fq-bench-")
    fleet = fleetlib.Fleet(os.path.join(base, "fleet"))
    cache = os.path.join(base, "cache")
    rows = []
    try:
        run(fleet, base, 1, "short", cache, "warmup")        # builds iobench once, untimed
        for variant in args.variants.split(","):
            res = {}
            for n in sizes:
                samples = [run(fleet, base, n, variant, cache, "%s-%d-%d" % (variant, n, i)) for i in range(args.repeat)]
                res[n] = {k: statistics.median(s[k] for s in samples) for k in samples[0] if k != "inv"}
                res[n]["inv"] = samples[-1]["inv"]
                print("%-14s %d host(s): wall %.1f s, benchmark %.1f s/host, outside %.1f s/host, CPU %.0f s (%.0f %%)"
                      % (variant, n, res[n]["wall"], res[n]["bench"], res[n]["outside"], res[n]["cpu"],
                         res[n]["cpu_pct"]), flush=True)
            rows.append((variant, res))
        gather = []
        inv8 = rows[-1][1][sizes[-1]]["inv"]
        for label, a in (("setup (all facts, as the playbook)", ""), ("setup gather_subset=!all,hardware", "gather_subset=!all,hardware"),
                         ("setup gather_subset=!all (min)", "gather_subset=!all")):
            w, c = adhoc_setup(fleet, inv8, a)
            gather.append((label, w, c))
            print("%-40s %d hosts: wall %.1f s, CPU %.1f s" % (label, sizes[-1], w, c), flush=True)
    finally:
        fleet.close()
        shutil.rmtree(base, ignore_errors=True)
    lines = ["| variant | hosts | workloads/host | wall s | benchmark s/host (iobench) | outside s/host | machine CPU busy s (% of 2 cores) | ratio vs 1 host |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for variant, res in rows:
        one = res[sizes[0]]["wall"]
        for n in sizes:
            r = res[n]
            lines.append("| %s | %d | %d | %.1f | %.1f | %.1f | %.0f (%.0f %%) | %.2f |" % (
                variant, n, r["workloads"], r["wall"], r["bench"], r["outside"], r["cpu"], r["cpu_pct"], r["wall"] / one))
    lines += ["", "| fact gathering alone, %d hosts | wall s | CPU s |" % sizes[-1], "|---|---:|---:|"]
    lines += ["| %s | %.1f | %.1f |" % g for g in gather]
    table = "\n".join(lines)
    print(table)
    if args.table:
        with open(args.table, "w") as fh:
            fh.write(table + "\n")


if __name__ == "__main__":
    main()
