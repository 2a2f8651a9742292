"""Side-by-side: iobench vs fio vs sysbench fileio on the same file and workload.

All three tools use the same prepared file (iobench prepare, --file-num 1 -> test_file.0,
which is sysbench's name too; fio gets --filename=DIR/test_file.0). Each measurement is
repeated --reps times with the tools interleaved (A B C A B C ...) and the median is
reported. Prints a table and, with --results, writes bench/RESULTS-iobench.md.

usage: python3 bench/iobench_vs_fio.py [--dir /var/tmp/iobench-bench] [--time 5] [--reps 3]
                                       [--quick] [--results bench/RESULTS-iobench.md]
       python3 bench/iobench_vs_fio.py --clat [--reps 5] [--time 3]   # io_uring latency vs fio's clat

--verify-cost compares the cost of data verification on one page-cache workload (16K random
writes each followed by a read, 1 thread): iobench --verify (rndrw --rw-ratio 1, CRC-32C in
every 4 KiB written and read) against fio verify=crc32c (randwrite, do_verify=1,
verify_backlog=1: every write read back and checked), and both without verification; with
--old BINARY also that iobench build without --verify (the change's "no cost when off").
Figure: read+write requests per second, median of --reps interleaved runs.

--clat compares iobench's io_uring latency percentiles (defined as fio's completion latency,
docs/iobench.md "io_uring latency") with fio's clat percentiles on the same O_DIRECT file,
16K random reads, one thread, iodepth 32, runs interleaved; prints a Markdown table of the
medians and the ratios.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IOBENCH = os.path.join(ROOT, "roles", "iobench", "files", "src", "iobench")
MARKER = "<!-- analysis below is hand-written and kept across reruns -->"


def sh(cmd, cwd=None, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=dict(os.environ, **(env or {})), check=False)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p.stdout


class Workload:
    def __init__(self, name, mode, bs, threads, direct, engine="sync", iodepth=1, cached=False, tools=None):
        self.name, self.mode, self.bs, self.threads = name, mode, bs, threads
        self.direct, self.engine, self.iodepth, self.cached = direct, engine, iodepth, cached
        self.tools = tools or ["iobench", "fio", "sysbench"]


def iobench_cmd(w, d, size, t):
    cmd = [IOBENCH, "run", "--dir", d, "--file-num", "1", "--total-size", str(size), "--block-size", str(w.bs),
           "--mode", w.mode, "--threads", str(w.threads), "--time", "%g" % t, "--fsync-freq", "0",
           "--fsync-end=off", "--report-interval", "0"]
    if w.direct:
        cmd.append("--direct")
    if w.engine == "io_uring":
        cmd += ["--engine", "io_uring", "--iodepth", str(w.iodepth)]
    if w.cached:
        cmd.append("--keep-cache")
    return cmd


def fio_cmd(w, d, size, t):
    rw = {"rndrd": "randread", "rndwr": "randwrite", "seqrd": "read", "seqwr": "write"}[w.mode]
    cmd = ["fio", "--name=cmp", "--filename=%s/test_file.0" % d, "--rw=%s" % rw, "--bs=%d" % w.bs,
           "--size=%d" % size, "--numjobs=%d" % w.threads, "--thread", "--group_reporting",
           "--time_based", "--runtime=%g" % t, "--norandommap", "--randrepeat=0",
           "--output-format=json", "--invalidate=%d" % (0 if w.cached else 1),
           "--direct=%d" % (1 if w.direct else 0)]
    if w.engine == "io_uring":
        cmd += ["--ioengine=io_uring", "--iodepth=%d" % w.iodepth]
    else:
        cmd += ["--ioengine=psync"]
    return cmd


def sysbench_cmd(w, d, size, t):
    return ["sysbench", "fileio", "--file-num=1", "--file-total-size=%d" % size, "--file-block-size=%d" % w.bs,
            "--file-test-mode=%s" % w.mode, "--file-io-mode=sync", "--file-fsync-freq=0",
            "--file-fsync-end=off", "--threads=%d" % w.threads, "--time=%d" % max(1, round(t)),
            "--file-extra-flags=%s" % ("direct" if w.direct else ""), "--percentile=99", "run"]


def measure(tool, w, d, size, t):
    """-> (iops, mean latency us)"""
    if tool == "iobench":
        j = json.loads(sh(iobench_cmd(w, d, size, t)))
        op = j["ops"]["read" if "rd" in w.mode else "write"]
        return j["total"]["iops"], op["latency_us"]["mean"]
    if tool == "fio":
        j = json.loads(sh(fio_cmd(w, d, size, t)))
        job = j["jobs"][0]
        side = job["read"] if "rd" in w.mode else job["write"]
        return side["iops"], side["lat_ns"]["mean"] / 1000.0
    out = sh(sysbench_cmd(w, d, size, t), cwd=d)
    key = "reads/s" if "rd" in w.mode else "writes/s"
    iops = float(re.search(key + r":\s+([\d.]+)", out).group(1))
    avg = float(re.search(r"avg:\s+([\d.]+)", out).group(1)) * 1000.0
    return iops, avg


CLAT_PCTS = (("p50", "50.000000"), ("p90", "90.000000"), ("p99", "99.000000"))
# fio's buffers are plain pages: the same for iobench, so that both tools send the device the same
# DMA segments and the device serves both at the same pace (bench/RESULTS-iobench.md, change 2)
CLAT_ENV = {"IOBENCH_NO_HUGE_BUFFERS": "1"}


def clat_sample(tool, w, d, size, t):
    """-> {"iops", "mean", "p50", "p90", "p99"}: latency in us (iobench: its latency; fio: clat)"""
    if tool == "iobench":
        j = json.loads(sh(iobench_cmd(w, d, size, t), env=CLAT_ENV))
        lat = j["ops"]["read"]["latency_us"]
        return dict(iops=j["total"]["iops"], mean=lat["mean"], **{k: lat[k] for k, _fio_key in CLAT_PCTS})
    j = json.loads(sh(fio_cmd(w, d, size, t)))
    side = j["jobs"][0]["read"]
    clat = side["clat_ns"]
    return dict(iops=side["iops"], mean=clat["mean"] / 1e3,
                **{k: clat["percentile"][fk] / 1e3 for k, fk in CLAT_PCTS})


def clat_compare(a):
    w = Workload("uring-16k-rndrd-qd32", "rndrd", 16384, 1, True, "io_uring", 32, tools=["iobench", "fio"])
    d = os.path.join(a.dir, "disk")
    os.makedirs(d, exist_ok=True)
    size = json.loads(sh([IOBENCH, "prepare", "--dir", d, "--file-num", "1", "--total-size", a.disk_size]))
    size = size["config"]["total_size"]
    res = {"iobench": [], "fio": []}
    for rep in range(a.reps):
        for tool in (("iobench", "fio") if rep % 2 == 0 else ("fio", "iobench")):
            res[tool].append(clat_sample(tool, w, d, size, a.time))
    keys = ["iops", "mean"] + [k for k, _fio_key in CLAT_PCTS]
    med = {t: {k: statistics.median(s[k] for s in v) for k in keys} for t, v in res.items()}
    print("Median of %d interleaved runs of %gs each, %s, kernel %s, load %s." % (
        a.reps, a.time, w.name, os.uname().release, " ".join(loadavg())))
    print()
    print("| figure | iobench | fio (clat) | iobench/fio |")
    print("|---|---:|---:|---:|")
    for k in keys:
        print("| %s | %.1f | %.1f | %.3f |" % (k if k == "iops" else k + " us", med["iobench"][k], med["fio"][k],
                                               med["iobench"][k] / med["fio"][k]))
    # Little's law: with iodepth requests always in flight, IOPS x mean latency / iodepth is the share
    # of each request's time in flight that the latency covers (1.0 = all of it), whatever the device
    cov = {t: statistics.median(s["iops"] * s["mean"] / 1e6 / w.iodepth for s in v) for t, v in res.items()}
    print("| in-flight time covered (iops x mean / iodepth) | %.3f | %.3f | %.3f |" % (
        cov["iobench"], cov["fio"], cov["iobench"] / cov["fio"]))
    print()
    for t, v in res.items():
        for k in ("iops", "p50", "p99"):
            print("- %s %s: %s" % (t, k, ", ".join("%.0f" % s[k] for s in v)))
    print()
    print("```")
    print(" ".join(["IOBENCH_NO_HUGE_BUFFERS=1"] + iobench_cmd(w, d, size, a.time)))
    print(" ".join(fio_cmd(w, d, size, a.time)))
    print("```")


def vc_iobench(binary, d, size, t, verify, engine):
    cmd = [binary, "run", "--dir", d, "--file-num", "1", "--total-size", str(size), "--block-size", "16384",
           "--mode", "rndrw", "--rw-ratio", "1", "--time", "%g" % t, "--fsync-freq", "0", "--fsync-end=off",
           "--report-interval", "0", "--keep-cache"]
    if engine == "io_uring":
        cmd += ["--engine", "io_uring", "--iodepth", "8"]
    return cmd + (["--verify"] if verify else [])


def vc_fio(d, size, t, verify, engine):
    cmd = ["fio", "--name=vc", "--filename=%s-fio/test_file.0" % d, "--bs=16k", "--size=%d" % size, "--thread",
           "--time_based", "--runtime=%g" % t, "--output-format=json", "--invalidate=0", "--randrepeat=0",
           "--ioengine=%s" % ("io_uring" if engine == "io_uring" else "psync"), "--iodepth=%d" % (8 if engine == "io_uring" else 1)]
    if verify:
        return cmd + ["--rw=randwrite", "--verify=crc32c", "--do_verify=1", "--verify_backlog=1", "--verify_state_save=0"]
    return cmd + ["--rw=randrw", "--rwmixread=50", "--norandommap"]


def vc_measure(cmd, fio):
    """-> (requests per wall second, requests per CPU second of the tool's process). The second
    is what a busy machine cannot blur: on a page-cache workload the work is CPU, and another
    process taking the CPU stretches the wall time, not the CPU time of each request."""
    os.sync()                            # no dirty pages of the previous run to throttle this one
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime - vc_measure.cpu
    vc_measure.cpu = ru.ru_utime + ru.ru_stime
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, err[-2000:]))
    j = json.loads(out)
    if not fio:
        v = j.get("verify") or {}        # an iobench from before --verify has none
        assert not v.get("enabled") or v["checked"] > 0
        return j["total"]["iops"], j["total"]["count"] / cpu
    job = j["jobs"][0]
    # verification reads are counted in read.total_ios but not in read.iops: take the count over the runtime
    n = job["read"]["total_ios"] + job["write"]["total_ios"]
    return n / (job["job_runtime"] / 1000.0), n / cpu


vc_measure.cpu = 0.0


def verify_cost(a):
    d = os.path.join(a.dir, "verify")
    os.makedirs(d, exist_ok=True)
    size = json.loads(sh([IOBENCH, "prepare", "--dir", d, "--file-num", "1", "--total-size", a.cache_size,
                          "--verify"]))["config"]["total_size"]
    # fio's file: made exactly as iobench's (same size, same writes), so both start from the same state
    os.makedirs(d + "-fio", exist_ok=True)
    sh([IOBENCH, "prepare", "--dir", d + "-fio", "--file-num", "1", "--total-size", a.cache_size])
    for path in (d, d + "-fio"):                  # both files in the page cache
        with open(os.path.join(path, "test_file.0"), "rb") as f:
            while f.read(1 << 20):
                pass
    variants = []
    for engine in ("sync", "io_uring"):
        variants += [("iobench --verify", engine, vc_iobench(IOBENCH, d, size, a.time, True, engine), False),
                     ("fio verify=crc32c", engine, vc_fio(d, size, a.time, True, engine), True),
                     ("iobench", engine, vc_iobench(IOBENCH, d, size, a.time, False, engine), False),
                     ("fio", engine, vc_fio(d, size, a.time, False, engine), True)]
        if a.old:
            variants.append(("iobench before --verify existed", engine, vc_iobench(a.old, d, size, a.time, False, engine), False))
    res = {(n, e): [] for n, e, _c, _f in variants}
    for rep in range(a.reps):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]
        for n, e, cmd, fio in order:
            res[(n, e)].append(vc_measure(cmd, fio))
    med = {k: statistics.median(x[0] for x in v) for k, v in res.items()}
    cpu = {k: statistics.median(x[1] for x in v) for k, v in res.items()}
    print("Median of %d interleaved runs of %gs each; 16K random writes + reads 1:1 over a %d MiB file in the page "
          "cache, 1 thread; %d CPUs, kernel %s, load %s, CRC-32C of iobench: %s." % (
              a.reps, a.time, size >> 20, os.cpu_count(), os.uname().release, " ".join(loadavg()),
              json.loads(sh(vc_iobench(IOBENCH, d, size, 0.2, True, "sync")))["verify"]["crc32c"]))
    print()
    print("| engine | tool | requests per CPU second | vs fio verify=crc32c | requests/s (wall) | all runs, per CPU s |")
    print("|---|---|---:|---:|---:|---|")
    for n, e, _c, _f in variants:
        print("| %s | %s | %.0f | %.3f | %.0f | %s |" % (
            e, n, cpu[(n, e)], cpu[(n, e)] / cpu[("fio verify=crc32c", e)], med[(n, e)],
            ", ".join("%.0f" % x[1] for x in res[(n, e)])))
    print()
    for e in ("sync", "io_uring"):
        print("- %s, per CPU second: iobench/fio without verification %.3f, with %.3f; verification costs iobench "
              "%.1f %%, fio %.1f %%%s" % (
                  e, cpu[("iobench", e)] / cpu[("fio", e)], cpu[("iobench --verify", e)] / cpu[("fio verify=crc32c", e)],
                  100 * (1 - cpu[("iobench --verify", e)] / cpu[("iobench", e)]),
                  100 * (1 - cpu[("fio verify=crc32c", e)] / cpu[("fio", e)]),
                  "; iobench without --verify vs the build before it: %.3f" % (
                      cpu[("iobench", e)] / cpu[("iobench before --verify existed", e)]) if a.old else ""))
    print()
    print("```")
    for n, e, cmd, _f in variants:
        print(" ".join(cmd))
    print("```")


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/iobench-bench")
    ap.add_argument("--time", type=float, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cache-size", default="256M", help="working set of the page-cache tests")
    ap.add_argument("--disk-size", default="1G", help="working set of the O_DIRECT tests")
    ap.add_argument("--quick", action="store_true", help="time 2, reps 2 (smoke test)")
    ap.add_argument("--only", default="", help="comma list of workload names")
    ap.add_argument("--results", help="write a markdown report to this file")
    ap.add_argument("--clat", action="store_true", help="only: io_uring latency vs fio's clat (Markdown on stdout)")
    ap.add_argument("--verify-cost", action="store_true",
                    help="only: iobench --verify vs fio verify=crc32c on a page-cache workload (Markdown on stdout)")
    ap.add_argument("--old", help="with --verify-cost: an iobench built before --verify, measured without it")
    a = ap.parse_args()
    if a.quick:
        a.time, a.reps = 2, 2
    if a.verify_cost:
        if not os.path.exists(IOBENCH):
            sh(["make", "-C", os.path.dirname(IOBENCH), "iobench"])
        return verify_cost(a)
    if a.clat:
        if not os.path.exists(IOBENCH):
            sh(["make", "-C", os.path.dirname(IOBENCH), "iobench"])
        return clat_compare(a)
    if not os.path.exists(IOBENCH):
        sh(["make", "-C", os.path.dirname(IOBENCH), "iobench"])
    for t in ("fio", "sysbench"):
        if not shutil.which(t):
            sys.exit("%s not installed" % t)

    workloads = [
        Workload("cache-4k-rndrd-t1", "rndrd", 4096, 1, False, cached=True),
        Workload("cache-4k-rndrd-t2", "rndrd", 4096, 2, False, cached=True),
        Workload("direct-16k-rndrd-t1", "rndrd", 16384, 1, True),
        Workload("direct-16k-rndrd-t64", "rndrd", 16384, 64, True),
        Workload("direct-16k-rndwr-t1", "rndwr", 16384, 1, True),
        Workload("direct-16k-rndwr-t64", "rndwr", 16384, 64, True),
        Workload("uring-16k-rndrd-qd32", "rndrd", 16384, 1, True, "io_uring", 32, tools=["iobench", "fio"]),
    ]
    if a.only:
        keep = set(a.only.split(","))
        workloads = [w for w in workloads if w.name in keep]

    os.makedirs(a.dir, exist_ok=True)
    sizes = {}
    for label, size in (("cache", a.cache_size), ("disk", a.disk_size)):
        d = os.path.join(a.dir, label)
        os.makedirs(d, exist_ok=True)
        j = json.loads(sh([IOBENCH, "prepare", "--dir", d, "--file-num", "1", "--total-size", size]))
        sizes[label] = (d, j["config"]["total_size"])

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = loadavg()
    rows = []
    for w in workloads:
        d, size = sizes["cache" if w.cached else "disk"]
        if w.cached:  # warm the page cache once for everybody
            with open(os.path.join(d, "test_file.0"), "rb") as f:
                while f.read(1 << 20):
                    pass
        res = {t: [] for t in w.tools}
        for rep in range(a.reps):
            order = w.tools[rep % len(w.tools):] + w.tools[:rep % len(w.tools)]   # rotate who goes first
            for tool in order:
                res[tool].append(measure(tool, w, d, size, a.time))
        med = {t: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for t, v in res.items()}
        row = {"name": w.name, "med": med, "all": res}
        row["vs_fio"] = med["iobench"][0] / med["fio"][0]
        row["vs_sysbench"] = med["iobench"][0] / med["sysbench"][0] if "sysbench" in med else None
        rows.append(row)
        print("%-24s iobench %10.0f  fio %10.0f  sysbench %10s  iobench/fio %.3f  iobench/sysbench %s" % (
            w.name, med["iobench"][0], med["fio"][0],
            "%.0f" % med["sysbench"][0] if "sysbench" in med else "-", row["vs_fio"],
            "%.3f" % row["vs_sysbench"] if row["vs_sysbench"] else "-"), flush=True)
    load_after = loadavg()

    if a.results:
        example = workloads[0]
        d0, s0 = sizes["cache" if example.cached else "disk"]
        lines = [
            "# iobench vs fio vs sysbench fileio",
            "",
            "Generated by `%s` on %s." % (" ".join(["python3", "bench/iobench_vs_fio.py"] + sys.argv[1:]), started),
            "",
            "Machine: %d CPUs, kernel %s, test dir %s (%s). Load average before %s, after %s."
            % (os.cpu_count(), os.uname().release, a.dir,
               json.loads(sh([IOBENCH, "run", "--dir", sizes["disk"][0], "--file-num", "1", "--total-size",
                              str(sizes["disk"][1]), "--mode", "rndrd", "--requests", "1"]))["environment"]["filesystem"],
               " ".join(load_before), " ".join(load_after)),
            "Each figure is the median of %d runs of %gs, tools interleaved (order rotated every repetition). IOPS; mean latency in us."
            % (a.reps, a.time),
            "",
            "| workload | iobench IOPS | fio IOPS | sysbench IOPS | iobench/fio | iobench/sysbench | mean lat us iobench / fio / sysbench |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in rows:
            m = r["med"]
            lines.append("| %s | %.0f | %.0f | %s | %.3f | %s | %.1f / %.1f / %s |" % (
                r["name"], m["iobench"][0], m["fio"][0],
                "%.0f" % m["sysbench"][0] if "sysbench" in m else "-", r["vs_fio"],
                "%.3f" % r["vs_sysbench"] if r["vs_sysbench"] else "-",
                m["iobench"][1], m["fio"][1], "%.1f" % m["sysbench"][1] if "sysbench" in m else "-"))
        lines += ["", "All runs (IOPS):", ""]
        for r in rows:
            lines.append("- %s: %s" % (r["name"], "; ".join(
                "%s %s" % (t, ", ".join("%.0f" % x[0] for x in v)) for t, v in r["all"].items())))
        lines += ["", "Exact commands (first workload; the others differ in mode, block size, threads, flags):", "",
                  "```", " ".join(iobench_cmd(example, d0, s0, a.time)), " ".join(fio_cmd(example, d0, s0, a.time)),
                  "(cd %s && %s)" % (d0, " ".join(sysbench_cmd(example, d0, s0, a.time))), "```", ""]
        manual = ""
        if os.path.exists(a.results):   # keep the hand-written analysis below the marker
            with open(a.results) as f:
                old = f.read()
            if MARKER in old:
                manual = old[old.index(MARKER):]
        with open(a.results, "w") as f:
            f.write("\n".join(lines) + "\n" + (manual or MARKER + "\n"))
        print("wrote %s" % a.results)


if __name__ == "__main__":
    main()
