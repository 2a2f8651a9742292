"""Fleet timing with the detached measurement job: N hosts at F forks against one
host, side by side in one run, the controller's CPU seconds per host per workload, and a
projection for 100 / 1000 / 10000 hosts at forks 50.

    .venv/bin/python bench/bench_fleet.py [--hosts 8] [--forks 2] [--repeat 2] [--variants issue] [--table FILE]

Variants (same fleet, same build cache, warmed up by one untimed run):
  issue           the issue's matrix: 3 workloads of 4 s (+1 s warm-up) on 8 MiB, O_DIRECT
  quick           the quick profile as shipped
  short           2 workloads of 1 s on 4 MiB: Ansible overhead dominates

For each repeat, the 1-host run and the N-host run follow each other (same machine load).
"Controller CPU" is the CPU time of ansible-playbook and every process it waited for
(its forks, ssh clients): ``getrusage(RUSAGE_CHILDREN)`` around the run. It leaves out
the ssh ControlPersist masters (daemonized), which are small. The hosts' side (sshd,
python modules, iobench) is on this machine too, so the *machine* busy CPU is also shown.

Projection: wall(N) = wall(1) + (N - 1) x t_fork / F, bounded below by the controller's
CPU, N x cpu_host / cores; t_fork (fork-seconds per extra host: start, poll, store) and
cpu_host (controller CPU seconds per host) are the measured terms.
Needs root and openssh-server (like the fleet tests).
"""
import argparse
import json
import os
import resource
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
MATRICES = {
    "issue": [{"workload": "w%d" % i, "mode": "rndrd", "threads": 1, "file_num": 2, "total_size": "8M",
               "block_size": "16K", "direct": True, "time": 4, "warmup": 1} for i in range(3)],
    "short": [{"workload": "short", "mode": m, "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "16K",
               "direct": True, "time": 1, "warmup": 0} for m in ("rndrd", "rndwr")],
    "quick": None,
}


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


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(fleet, base, n_hosts, forks, variant, cache, tag):
    hosts = [{"name": "fq%d" % (11 + i), "inst": fleet.host(11 + i)} for i in range(n_hosts)]
    inv_dir = os.path.join(base, tag)
    gv = {"fleetqual_progress_interval": 5}
    if MATRICES.get(variant):
        gv["fleetqual_matrix"] = MATRICES[variant]
    else:
        gv["fleetqual_profile"] = variant
    inv = fleet.inventory(inv_dir, hosts, group_vars={"db": gv})
    ev = {"fleetqual_results_dir": os.path.join(inv_dir, "results"), "fleetqual_build_cache_dir": cache,
          "fleetqual_run_id": tag}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS=str(forks), PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               FLEETQUAL_REPORT_DIR=os.path.join(inv_dir, "results"), **fleet.ansible_env())
    t0, c0, k0 = time.monotonic(), cpu_busy_s(), children_cpu_s()
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
                           "-i", inv, "-e", json.dumps(ev)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.monotonic() - t0
    cpu = cpu_busy_s() - c0
    ctl = children_cpu_s() - k0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-2000:])
        raise SystemExit("run %s failed (exit %d)" % (tag, proc.returncode))
    recs = [json.load(open(os.path.join(inv_dir, "results", tag, h["name"] + ".json"))) for h in hosts]
    assert all(r["verdict"] == "PASS" for r in recs), [r["reasons"] for r in recs]
    btimes = [bench_time(r) for r in recs]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("fleetqual: workload")]
    return {"wall": wall, "bench": statistics.mean(btimes), "workloads": len(recs[0]["workloads"]),
            "cpu": cpu, "ctl": ctl, "progress_lines": len(lines)}


def medians(runs):
    """Per key, the median over the repeats of one run shape."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def dur(s):
    if s < 120:
        return "%.0f s" % s
    if s < 7200:
        return "%.0f min" % (s / 60)
    return "%.1f h" % (s / 3600)


def projected_s(wall1, t_fork, cpu_host, hosts, forks, cores):
    """The fleet benches' projection: wall(N) = max(wall(1) + (N - 1) x t_fork / F, N x cpu_host / C)."""
    return max(wall1 + (hosts - 1) * t_fork / forks, hosts * cpu_host / cores)


def emit(table, path=None):
    """Print a bench's Markdown table, and write it to ``path`` when given."""
    print(table)
    if path:
        with open(path, "w") as fh:
            fh.write(table + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="issue")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--forks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--project-forks", type=int, default=50)
    ap.add_argument("--project-cores", type=int, default=8, help="controller cores assumed in the projection")
    ap.add_argument("--table", help="also write the Markdown tables to this file")
    args = ap.parse_args()
    why = fleetlib.available()
    if why:
        raise SystemExit("cannot build the fleet: " + why)
    base = tempfile.mkdtemp(prefix="fq-bench-")
    fleet = fleetlib.Fleet(os.path.join(base, "fleet"))
    cache = os.path.join(base, "cache")
    rows = []
    try:
        run(fleet, base, 1, args.forks, "short", cache, "warmup")        # builds iobench once, untimed
        for variant in args.variants.split(","):
            one, many = [], []
            for i in range(args.repeat):
                for n, out in ((1, one), (args.hosts, many)):
                    r = run(fleet, base, n, args.forks, variant, cache, "%s-%d-%d" % (variant, n, i))
                    out.append(r)
                    print("%-6s %d host(s) @ forks %d: wall %.1f s, benchmark %.1f s/host, controller CPU %.1f s, "
                          "machine CPU %.0f s, %d progress lines"
                          % (variant, n, args.forks, r["wall"], r["bench"], r["ctl"], r["cpu"], r["progress_lines"]),
                          flush=True)
            rows.append((variant, medians(one), medians(many)))
    finally:
        fleet.close()
        shutil.rmtree(base, ignore_errors=True)
    n, f = args.hosts, args.forks
    lines = ["| variant | hosts @ forks | workloads/host | wall s | ratio vs 1 host | controller CPU s | "
             "controller CPU s per host per workload | machine CPU busy s | progress lines |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    proj = []
    for variant, a, b in rows:
        w = a["workloads"]
        per_host = max(0.0, (b["ctl"] - a["ctl"]) / (n - 1))
        for label, r in (("1 @ %d" % f, a), ("%d @ %d" % (n, f), b)):
            lines.append("| %s | %s | %d | %.1f | %.2f | %.1f | %s | %.0f | %d |" % (
                variant, label, w, r["wall"], r["wall"] / a["wall"], r["ctl"],
                "%.2f" % (per_host / w) if r is b else "", r["cpu"], r["progress_lines"]))
        t_fork = max(0.0, (b["wall"] - a["wall"]) * f / (n - 1))
        proj.append((variant, a["wall"], t_fork, per_host))
    lines += ["", "Projection at forks %d, controller with %d cores (wall(N) = max(wall(1) + (N-1) x t_fork / F, "
                  "N x cpu_host / cores)):" % (args.project_forks, args.project_cores), "",
              "| variant | wall(1) s | t_fork s | cpu_host s | 100 hosts | 1000 hosts | 10000 hosts |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for variant, w1, t_fork, cpu_host in proj:
        cells = []
        for hosts in (100, 1000, 10000):
            cells.append(dur(projected_s(w1, t_fork, cpu_host, hosts, args.project_forks, args.project_cores)))
        lines.append("| %s | %.1f | %.2f | %.2f | %s |" % (variant, w1, t_fork, cpu_host, " | ".join(cells)))
    emit("\n".join(lines), args.table)


if __name__ == "__main__":
    main()
