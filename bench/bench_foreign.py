"""Cost of the foreign-I/O attribution on a quiet disk (docs/compliance.md, "What the
attribution costs"): the same workload with and without it, side by side, and where a cost
comes from.

Part 1, ``--variants``: each workload kind of the profiles through ``workload.run_workload``
(the code the detached job runs) in three variants, interleaved round by round (the order
rotates each round, so drift of the machine's load hits every variant alike):

* ``none``: without ``foreign_io``;
* ``cgroup-off``: ``foreign_io`` with ``cgroup: off`` (``iobench --live-log`` and the
  sampler thread, no cgroup: the attribution by iobench's own counts);
* ``attribution``: ``foreign_io`` as the compliance profile runs it (the benchmark in a blkio
  / io child group of the job's own, the sampler reading its counters).

Part 2, ``--hook``: the throttle-hook hypothesis alone, without Python in the loop. On cgroup
v1 a group's counters only run once blk-throttle is activated on the device, which the job
does with a no-limit rule (``<maj:min> 0``). Two fresh loop devices A and B (never configured
before), iobench run directly (log workload, fdatasync after every write) on A and B
alternately, in a group of this script's own: phase 1 with no rule anywhere (B/A = the two
devices' own difference), then the no-limit rule is written for B only and phase 2 runs the
same alternation: (B/A in phase 2) / (B/A in phase 1) is the cost of the activated hook.

Every loop device is an ext4 over a file in /var/tmp (``tests/unit/loopdev.py``), detached at
the end; every group is removed at the end (its processes moved out first).

usage: python3 bench/bench_foreign.py [--rounds 7] [--time 4] [--hook-rounds 9] [--only variants|hook]
                                      [--results bench/RESULTS-compliance.md]
(root; the repository's build/collections exposes the collection, as the Makefile does)
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import cgroups  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload  # noqa: E402
import loopdev  # noqa: E402  (tests/unit/loopdev.py: the one place of the loop device's setup)

IOBENCH = os.environ.get("FLEETQUAL_BENCH_IOBENCH") or os.path.join(ROOT, "roles", "iobench", "files", "src", "iobench")
MARKER = "<!-- analysis below is hand-written and kept across reruns -->"
# the workload kinds of the profiles (compliance's matrix: random reads at 1 and 4 threads,
# random writes (fsync every 100 writes) at 1 and 4, the log workload)
KINDS = [
    ("rndrd-direct-t4", {"mode": "rndrd", "threads": 4, "direct": True}),
    ("rndwr-direct-t1", {"mode": "rndwr", "threads": 1, "direct": True}),
    ("rndwr-direct-t4", {"mode": "rndwr", "threads": 4, "direct": True}),
    ("log-fdatasync-t1", {"mode": "seqwr", "threads": 1, "direct": False, "fsync_freq": 1,
                          "fsync_mode": "fdatasync", "file_num": 1, "total_size": "16M"}),
]
LOG = KINDS[-1][1]
VARIANTS = ("none", "cgroup-off", "attribution")


def leave_group(procs, group):
    """Move this process back into ``procs``'s group and remove ``group`` (retried while the
    kernel still counts a process in it)."""
    with open(procs, "w") as fh:
        fh.write(str(os.getpid()))
    for _i in range(50):
        try:
            os.rmdir(group)
            return
        except OSError:
            time.sleep(0.1)


def params(dirpath, secs, kind, prepare=False):
    """A run over the data set prepared once per kind (``prepare``: that preparation), so the
    runs compared are the workload alone."""
    p = workload.defaults()
    p.update(dir=dirpath, file_num=4, total_size="64M", block_size="16K", time=secs, warmup=1, prepare=prepare,
             cleanup=False, binary=IOBENCH, collect="procfs", seed=42)
    p.update(kind)
    return p


def prepared(dirpath, kind):
    """Write the kind's data set (a 1 s run with --prepare, kept for the runs compared)."""
    for name in os.listdir(dirpath):
        os.unlink(os.path.join(dirpath, name))
    res, failed, msg, _w = workload.run_workload(params(dirpath, 1, kind, prepare=True))
    if failed:
        raise RuntimeError(msg)


def one(dirpath, secs, kind, variant):
    p = params(dirpath, secs, kind)
    if variant != "none":
        p["foreign_io"] = {"sample_s": 0.2, "quiet_util_pct": 100, "cgroup": "off" if variant == "cgroup-off" else "auto"}
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    res, failed, msg, _w = workload.run_workload(p)
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    if failed:
        raise RuntimeError(msg)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / max(1e-6, res["bench"]["elapsed_s"] + 1)
    return (res["bench"]["total"]["iops"], (res.get("foreign") or {}).get("source"), cpu,
            cpu_per_request(c0, c1, res["bench"]))


def cpu_per_request(c0, c1, bench):
    """iobench's own CPU (user + system: the block layer's hooks run in the submitting
    thread) per request, in microseconds: far less sensitive to a busy machine than IOPS
    (other work takes wall time, not this process's CPU time). Its run: prepare, warm-up and
    the measured window; the requests: the window's reads, writes and fsyncs, scaled to the
    whole run by time (the same configuration on both sides)."""
    ops = bench.get("ops") or {}
    n = sum(int((ops.get(op) or {}).get("count") or 0) for op in ("read", "write", "fsync"))
    el = float(bench.get("elapsed_s") or 0)
    warm = float((bench.get("config") or {}).get("warmup_s") or 0)
    if not n or el <= 0:
        return None
    cpu = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
    return cpu / (n * (el + warm) / el) * 1e6


def variants(a, d):
    rows = []
    for name, kind in KINDS:
        runs = {v: [] for v in VARIANTS}
        cpu = {v: [] for v in VARIANTS}
        per = {v: [] for v in VARIANTS}
        pairs = {v: [] for v in VARIANTS}
        source = None
        prepared(d, kind)
        for i in range(a.rounds):
            order = VARIANTS[i % 3:] + VARIANTS[:i % 3]
            got = {}
            for v in order:
                iops, src, c, us = one(d, a.time, kind, v)
                runs[v].append(iops)
                cpu[v].append(c)
                if us is not None:
                    per[v].append(us)
                got[v] = iops
                if v == "attribution":
                    source = src
            for v in VARIANTS:
                pairs[v].append(got[v] / got["none"])
        med = {v: statistics.median(runs[v]) for v in VARIANTS}
        rows.append({"name": name, "median": med, "runs": runs, "source": source,
                     "paired": {v: statistics.median(pairs[v]) for v in VARIANTS},
                     "cpu": {v: statistics.median(cpu[v]) * 100 for v in VARIANTS},
                     "us": {v: statistics.median(per[v]) if per[v] else float("nan") for v in VARIANTS}})
        us = rows[-1]["us"]
        print("%-18s none %8.0f  cgroup-off %8.0f (%.3f)  attribution %8.0f (%.3f, %s)  iobench CPU us/request %.1f %.1f %.1f"
              % (name, med["none"], med["cgroup-off"], rows[-1]["paired"]["cgroup-off"], med["attribution"],
                 rows[-1]["paired"]["attribution"], source, us["none"], us["cgroup-off"], us["attribution"]), flush=True)
    return rows


def run_iobench(dirpath, secs, kind=None):
    """iobench alone (by default the log workload) in this process's current group: its IOPS
    and CPU per request."""
    p = params(dirpath, secs, kind or LOG)
    errors, sizes, _info, _src, _tools = workload.prepare(p)
    if errors:
        raise RuntimeError(errors[0])
    out = os.path.join(os.path.dirname(dirpath), "result.json")
    argv = workload.build_argv(dict(p, devstat=None), sizes, out)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out) as fh:
        bench = json.load(fh)
    os.unlink(out)
    return bench["total"]["iops"], cpu_per_request(c0, c1, bench)


def join(group):
    with open(os.path.join(group, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))


def hook(a):
    """Part 2: (B/A with B's throttling activated) / (B/A before)."""
    group = os.path.join(cgroups.BLKIO_V1, "fq-bench-hook-%d" % os.getpid())
    os.mkdir(group)
    phases = {}
    try:
        with loopdev.loop_ext4(256, prefix="fq-bench-hookA-", where="/var/tmp") as la, \
                loopdev.loop_ext4(256, prefix="fq-bench-hookB-", where="/var/tmp") as lb:
            dirs = {}
            for key, lp in (("A", la), ("B", lb)):
                dirs[key] = os.path.join(lp["mnt"], "ds")
                os.mkdir(dirs[key])
                prepared(dirs[key], LOG)
            join(group)
            for phase in ("no rule", "no-limit rule on B"):
                if phase != "no rule":
                    with open("/sys/block/%s/dev" % lb["name"]) as fh:
                        num = fh.read().strip()
                    with open(os.path.join(group, "blkio.throttle.read_iops_device"), "w") as fh:
                        fh.write("%s 0" % num)
                runs = {"A": [], "B": []}
                us = {"A": [], "B": []}
                ratios, us_ratios = [], []
                for i in range(a.hook_rounds):
                    got, got_us = {}, {}
                    for key in (("A", "B") if i % 2 == 0 else ("B", "A")):
                        got[key], got_us[key] = run_iobench(dirs[key], a.time)
                        runs[key].append(got[key])
                        us[key].append(got_us[key])
                    ratios.append(got["B"] / got["A"])
                    us_ratios.append(got_us["B"] / got_us["A"])
                phases[phase] = {"runs": runs, "ratio": statistics.median(ratios),
                                 "A": statistics.median(runs["A"]), "B": statistics.median(runs["B"]),
                                 "us": us, "us_A": statistics.median(us["A"]), "us_B": statistics.median(us["B"]),
                                 "us_ratio": statistics.median(us_ratios)}
                ph = phases[phase]
                print("hook: %-20s A %8.0f  B %8.0f  B/A %.3f  CPU us/request A %.1f B %.1f B/A %.3f"
                      % (phase, ph["A"], ph["B"], ph["ratio"], ph["us_A"], ph["us_B"], ph["us_ratio"]), flush=True)
    finally:
        leave_group(os.path.join(cgroups.BLKIO_V1, "cgroup.procs"), group)
    return phases


RNDRD = KINDS[0][1]


def membership(a):
    """Part 3: the cost of being in a non-root group alone: iobench (random O_DIRECT reads,
    4 threads) run directly on a fresh loop device whose throttling is never activated, in
    the root group and in a child group with no rule, alternately."""
    group = os.path.join(cgroups.BLKIO_V1, "fq-bench-member-%d" % os.getpid())
    os.mkdir(group)
    root = os.path.join(cgroups.BLKIO_V1, "cgroup.procs")
    runs = {"root": [], "child": []}
    us = {"root": [], "child": []}
    ratios, us_ratios = [], []
    try:
        with loopdev.loop_ext4(256, prefix="fq-bench-member-", where="/var/tmp") as lp:
            d = os.path.join(lp["mnt"], "ds")
            os.mkdir(d)
            prepared(d, RNDRD)
            for i in range(a.hook_rounds):
                got, got_us = {}, {}
                for where in (("root", "child") if i % 2 == 0 else ("child", "root")):
                    join(group if where == "child" else cgroups.BLKIO_V1)
                    got[where], got_us[where] = run_iobench(d, a.time, RNDRD)
                    runs[where].append(got[where])
                    us[where].append(got_us[where])
                ratios.append(got["child"] / got["root"])
                us_ratios.append(got_us["child"] / got_us["root"])
    finally:
        leave_group(root, group)
    out = {"runs": runs, "us": us, "ratio": statistics.median(ratios), "us_ratio": statistics.median(us_ratios),
           "root": statistics.median(runs["root"]), "child": statistics.median(runs["child"]),
           "us_root": statistics.median(us["root"]), "us_child": statistics.median(us["child"])}
    print("membership: root %8.0f  child %8.0f  child/root %.3f  CPU us/request root %.1f child %.1f child/root %.3f"
          % (out["root"], out["child"], out["ratio"], out["us_root"], out["us_child"], out["us_ratio"]), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--hook-rounds", type=int, default=9)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--only", choices=("variants", "hook", "membership"))
    ap.add_argument("--results")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (losetup, cgroup)")
    load_before = os.getloadavg()
    began = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    rows, phases, member = [], {}, None
    if a.only in (None, "variants"):
        with loopdev.loop_ext4(512, prefix="fq-bench-foreign-", where="/var/tmp") as loop:
            d = os.path.join(loop["mnt"], "ds")
            os.mkdir(d)
            rows = variants(a, d)
    v1 = os.path.isfile(os.path.join(cgroups.BLKIO_V1, "blkio.throttle.io_serviced"))
    if a.only in (None, "hook") and v1:
        phases = hook(a)
    if a.only in (None, "membership") and v1:
        member = membership(a)
    if not a.results:
        return
    cmd = "bench/bench_foreign.py --rounds %d --hook-rounds %d --time %d%s --results %s" % (
        a.rounds, a.hook_rounds, a.time, " --only %s" % a.only if a.only else "", a.results)
    lines = ["# Cost of the foreign-I/O attribution", "",
             "Generated by `%s` from %s to %s UTC." % (cmd, began, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())), "",
             "Machine: %d CPUs, kernel %s, ext4 on loop devices (`--direct-io=on`) over files in /var/tmp. "
             "Load average before %.2f %.2f %.2f, after %.2f %.2f %.2f." % (
                 os.cpu_count(), platform.release(), *load_before, *os.getloadavg()), ""]
    if rows:
        lines += ["## Per workload kind (median IOPS of %d rounds of %d s + 1 s warm-up, the variants interleaved)"
                  % (a.rounds, a.time), "",
                  "*paired*: the median over the rounds of each variant's IOPS / the same round's `none` IOPS.", "",
                  "*iobench CPU per request*: iobench's own user + system CPU time (the block layer's hooks run "
                  "in the thread that submits) per request, microseconds, median of the rounds: what the "
                  "attribution costs the benchmark, robust to a busy machine where IOPS are not.", "",
                  "| workload | none | cgroup-off | attribution | cgroup-off / none (paired) | attribution / none "
                  "(paired) | attribution source | iobench CPU us/request none / off / attribution "
                  "| runner CPU none / off / attribution |",
                  "|---|---:|---:|---:|---:|---:|---|---|---|"]
        for r in rows:
            m, p, c, u = r["median"], r["paired"], r["cpu"], r["us"]
            lines.append("| %s | %.0f | %.0f | %.0f | %.3f | %.3f | %s | %.1f / %.1f / %.1f | %.2f / %.2f / %.2f %% |"
                         % (r["name"], m["none"], m["cgroup-off"], m["attribution"], p["cgroup-off"], p["attribution"],
                            r["source"], u["none"], u["cgroup-off"], u["attribution"], c["none"], c["cgroup-off"],
                            c["attribution"]))
        lines += ["", "All runs (IOPS):", ""]
        for r in rows:
            lines.append("- %s: %s" % (r["name"], "; ".join("%s %s" % (v, ", ".join("%.0f" % x for x in r["runs"][v]))
                                                            for v in VARIANTS)))
        lines.append("")
    if phases:
        lines += ["## The throttle hook alone (log workload, iobench run directly, %d rounds of %d s per phase)"
                  % (a.hook_rounds, a.time), "",
                  "| phase | A (median IOPS) | B (median IOPS) | B/A IOPS (paired median) | iobench CPU us/request A "
                  "| B | B/A CPU per request (paired median) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, ph in phases.items():
            lines.append("| %s | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f |"
                         % (name, ph["A"], ph["B"], ph["ratio"], ph["us_A"], ph["us_B"], ph["us_ratio"]))
        names = list(phases)
        lines += ["", "The activated hook on B: IOPS x%.3f, CPU per request x%.3f (phase 2 B/A over phase 1 B/A)."
                  % (phases[names[1]]["ratio"] / phases[names[0]]["ratio"],
                     phases[names[1]]["us_ratio"] / phases[names[0]]["us_ratio"]), ""]
        for name, ph in phases.items():
            lines.append("- %s: A %s; B %s" % (name, ", ".join("%.0f" % x for x in ph["runs"]["A"]),
                                               ", ".join("%.0f" % x for x in ph["runs"]["B"])))
        lines.append("")
    if member:
        lines += ["## Being in a group of its own (random O_DIRECT reads, 4 threads, iobench run directly, a device "
                  "whose throttling is never activated, %d rounds of %d s)" % (a.hook_rounds, a.time), "",
                  "| group | median IOPS | iobench CPU us/request |", "|---|---:|---:|",
                  "| root | %.0f | %.1f |" % (member["root"], member["us_root"]),
                  "| child, no rule | %.0f | %.1f |" % (member["child"], member["us_child"]), "",
                  "child/root (paired medians): IOPS x%.3f, CPU per request x%.3f." % (member["ratio"], member["us_ratio"]),
                  "", "- root: %s" % ", ".join("%.0f" % x for x in member["runs"]["root"]),
                  "- child: %s" % ", ".join("%.0f" % x for x in member["runs"]["child"]), ""]
    kept = ""
    if os.path.exists(a.results):
        with open(a.results) as fh:
            old = fh.read()
        if MARKER in old:
            kept = old[old.index(MARKER):]
    with open(a.results, "w") as fh:
        fh.write("\n".join(lines) + "\n" + (kept or MARKER + "\n"))


if __name__ == "__main__":
    main()
