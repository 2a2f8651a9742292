"""Fleet scale, measured: 1, 8 and 32 loopback SSH hosts at forks 8 in ONE invocation,
side by side, with the collection's examples/ansible.cfg (stdout callback
fleetqual.storage.bounded, the qualify_report callback), and the projection for 1,000 and 10,000
hosts from the measured terms.

    .venv/bin/python bench/bench_fleet_scale.py [--sizes 1,8,32] [--forks 8] [--repeat 1]
                                                [--matrix issue] [--table FILE] [--keep DIR]

Runs (repeats interleaved: 1, 8, 32, 1, 8, 32, ...) after one untimed warm-up run over the
largest fleet with a 2 x 1 s matrix: it builds iobench into the build cache and deploys it to
every host, so every timed run is the steady state of a re-qualification (each host's binary
directory is kept across runs, so the binary is found, not transferred). Test targets are
directories in each host's own working directory (no loop devices: the bench measures the
controller's cost, not the drives; all hosts share this machine's one disk).

Measured per run:

* **wall**: ansible-playbook's wall time;
* **controller CPU**: ``getrusage(RUSAGE_CHILDREN)`` delta around the run: ansible-playbook and
  every process it waited for (its workers, their ssh clients), plus the CPU of the run's ssh
  ControlPersist masters (daemonized, so not in RUSAGE_CHILDREN; found by their ControlPath
  in /proc, read before they are told to exit). Nothing subtracted;
* **host side (sshd)**: the loopback hosts run on this machine too, and their work is NOT
  controller CPU: CPU of every fleet sshd daemon and its descendants, live and reaped
  (``/proc/<pid>/stat`` utime+stime+cutime+cstime over the trees), before and after the run:
  the sessions, the hosts' module Pythons, the counters' wrappers. The detached measurement
  jobs (iobench) are reparented away from sshd and are in neither figure;
* **machine CPU busy** (/proc/stat, all cores): includes the jobs and whatever else runs on
  the (shared) machine; load averages before/after each run are printed;
* **fork-seconds per host** (bench/callback_plugins/fork_seconds.py): per host, the sum over its
  task results of start-to-result time; the part in the job's wait (the polls, a fork held
  while the job measures) is shown apart; delegated/run_once and localhost tasks are not
  per-host and are left out;
* **module executions per host** and **SSH sessions per host** (tests/fleet/module_counter.py:
  each host's interpreter is a wrapper logging every AnsiballZ run; each host's sshd logs every
  session through a forced command);
* **output lines**: lines ansible-playbook printed (stdout).

Marginal terms (32 hosts against 1): cpu_host = (cpu(32) - cpu(1)) / 31, likewise the fork-
seconds; t_fork_wall = (wall(32) - wall(1)) x F / 31 (the per-host fork time the wall clock
shows). Projection: wall(N) = max(wall(1) + (N - 1) x t_fork / F, N x cpu_host / C), forks F,
C controller cores, with t_fork = max(fork-s per host outside the wait, t_fork_wall).

Needs root and openssh-server (like the fleet tests); 32 sshd daemons on 127.0.0.11-42, each
with its own MaxStartups 200 (tests/fleet/fleetlib.py), so bursts of connections are not
refused; the open file limit is checked.
"""
import argparse
import datetime
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

import fleetlib  # noqa: E402
from module_counter import ModuleCounter  # noqa: E402
from bench_fleet import children_cpu_s, cpu_busy_s, dur, emit, projected_s  # noqa: E402 - shared by the fleet benches

BIN = os.path.dirname(sys.executable)
EXAMPLE_CFG = os.path.join(ROOT, "examples", "ansible.cfg")
CALLBACKS = os.path.join(ROOT, "bench", "callback_plugins")
MATRICES = {
    # the matrix (bench/bench_fleet.py "issue"): 3 workloads of 4 s (+1 s warm-up), 8 MiB, O_DIRECT
    "issue": [{"workload": "w%d" % i, "mode": "rndrd", "threads": 1, "file_num": 2, "total_size": "8M",
               "block_size": "16K", "direct": True, "time": 4, "warmup": 1} for i in range(3)],
    # each host paced to 100 random reads/s (iobench --rate-iops): 32 loopback "hosts" share this
    # machine's cores and disk, which 32 real hosts would not; paced, their measuring stays
    # one host's measuring, and what grows with the fleet is the controller's and Ansible's work
    "paced": [{"workload": "p%d" % i, "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "8M",
               "block_size": "16K", "direct": True, "time": 4, "warmup": 1, "rate_iops": 100} for i in range(3)],
    "short": [{"workload": "short", "mode": m, "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "16K",
               "direct": True, "time": 1, "warmup": 0} for m in ("rndrd", "rndwr")],
}
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """utime + stime + cutime + cstime of a live process (its own and its reaped children's)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(x) for x in rest[11:15]) / TICK


def sshd_cpu_s(fleet):
    """CPU of every fleet sshd and everything below it, live and reaped."""
    total = 0.0
    for inst in fleet.instances.values():
        if inst.running():
            for pid in [inst.pid] + fleetlib.descendants(inst.pid):
                total += proc_cpu_s(pid)
    return total


def ssh_masters(control_dir):
    """PIDs of the live processes whose command line names this run's ControlPath directory
    (after the run: the ssh ControlPersist masters)."""
    pids = []
    needle = control_dir.encode()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as fh:
                    if needle in fh.read():
                        pids.append(int(name))
            except OSError:
                pass
    return pids


def exit_masters(control_dir):
    for sock in os.listdir(control_dir):
        subprocess.run(["ssh", "-o", "ControlPath=" + os.path.join(control_dir, sock), "-O", "exit", "x"],
                       capture_output=True, timeout=20, check=False)


def loadavg():
    return "%.1f/%.1f/%.1f" % os.getloadavg()


class Bench:
    def __init__(self, base, max_hosts, counters=True):
        self.base = base
        self.fleet = fleetlib.Fleet(os.path.join(base, "fleet"))
        self.counter = ModuleCounter(os.path.join(base, "counter"), python=self.fleet.python) if counters else None
        self.cache = os.path.join(base, "cache")
        self.hostdirs = os.path.join(base, "hostdirs")     # kept across runs: the binary is found
        self.names = ["fq%d" % (11 + i) for i in range(max_hosts)]
        self.insts = {}
        for i, name in enumerate(self.names):
            opts = self.counter.key_options(name) if self.counter else ""
            self.insts[name] = self.fleet.host(11 + i, key_options=opts)

    def run(self, n_hosts, forks, matrix, tag):
        names = self.names[:n_hosts]
        hosts = [{"name": h, "inst": self.insts[h], "vars": self.counter.host_vars(h) if self.counter else {}}
                 for h in names]
        inv_dir = os.path.join(self.base, "runs", tag)
        results = os.path.join(inv_dir, "results")
        inv = self.fleet.inventory(os.path.join(inv_dir, "inventory"), hosts, dirs_root=self.hostdirs,
                                   group_vars={"all": {"fleetqual_matrix": MATRICES[matrix],
                                                       "fleetqual_progress_interval": 5}})
        ev = {"fleetqual_results_dir": results, "fleetqual_build_cache_dir": self.cache, "fleetqual_run_id": tag}
        fork_file = os.path.join(inv_dir, "fork_seconds.json")
        aenv = self.fleet.ansible_env()
        control_dir = aenv["ANSIBLE_SSH_CONTROL_PATH_DIR"]
        env = dict(os.environ, ANSIBLE_CONFIG=EXAMPLE_CFG,
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_FORKS=str(forks),
                   ANSIBLE_CALLBACK_PLUGINS=CALLBACKS,
                   ANSIBLE_CALLBACKS_ENABLED="fleetqual.storage.qualify_report,fork_seconds",
                   FQ_FORK_SECONDS_FILE=fork_file, FLEETQUAL_REPORT_DIR=results,
                   PATH=BIN + os.pathsep + os.environ.get("PATH", ""), **aenv)
        mark = self.counter.mark(names) if self.counter else None
        load0 = loadavg()
        s0, m0, k0, t0 = sshd_cpu_s(self.fleet), cpu_busy_s(), children_cpu_s(), time.monotonic()
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
                               "-i", inv, "-e", json.dumps(ev)], capture_output=True, text=True, env=env, cwd=ROOT,
                              check=False)
        wall = time.monotonic() - t0
        ctl = children_cpu_s() - k0
        machine = cpu_busy_s() - m0
        masters = ssh_masters(control_dir)
        masters_cpu = sum(proc_cpu_s(p) for p in masters)
        exit_masters(control_dir)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % p) for p in masters):
            time.sleep(0.1)
        sshd = sshd_cpu_s(self.fleet) - s0
        load1 = loadavg()
        with open(os.path.join(inv_dir, "output.txt"), "w") as fh:
            fh.write(proc.stdout + proc.stderr)
        r = {"hosts": n_hosts, "tag": tag, "rc": proc.returncode, "wall": wall, "ctl_children": ctl,
             "ctl_masters": masters_cpu, "ctl": ctl + masters_cpu, "sshd": sshd, "machine": machine,
             "lines": len(proc.stdout.splitlines()), "stderr_lines": len(proc.stderr.splitlines()),
             "load": "%s -> %s" % (load0, load1)}
        verdicts = {}
        for h in names:
            try:
                with open(os.path.join(results, tag, h + ".json")) as fh:
                    verdicts[h] = json.load(fh)["verdict"]
            except (OSError, ValueError, KeyError):
                verdicts[h] = "none"
        r["pass"] = sum(v == "PASS" for v in verdicts.values())
        try:
            with open(fork_file) as fh:
                fs = json.load(fh)
        except (OSError, ValueError):
            fs = {"hosts": {}, "by_task": {}, "_delegated": {}}
        per = [fs["hosts"].get(h, {"fork_s": 0.0, "wait_s": 0.0}) for h in names]
        r["fork_s"] = sum(p["fork_s"] for p in per)
        r["wait_s"] = sum(p["wait_s"] for p in per)
        r["delegated_s"] = sum(fs["_delegated"].values())
        r["by_task"] = fs["by_task"]
        if self.counter:
            mods = [len(self.counter.modules(h, mark)) for h in names]
            r["modules_mean"], r["modules_max"] = statistics.mean(mods), max(mods)
            kinds = [self.counter.session_kinds(h, mark) for h in names]
            r["sessions_mean"] = statistics.mean(sum(k.values()) for k in kinds)
            r["polls_raw_mean"] = statistics.mean(k.get("poll", 0) for k in kinds)
            # every read of the job's status: raw polls and job(status) module runs (today's polls)
            r["polls_mean"] = r["polls_raw_mean"] + statistics.mean(
                len([m for m in self.counter.modules(h, mark) if m.name.endswith(".job") and m.state == "status"])
                for h in names)
            r["module_names"] = [i.label for i in self.counter.modules(names[0], mark)]
        if proc.returncode != 0 or r["pass"] != n_hosts:
            sys.stderr.write("run %s: exit %d, %d/%d PASS %s\n%s\n" % (
                tag, proc.returncode, r["pass"], n_hosts, verdicts, (proc.stdout + proc.stderr)[-3000:]))
        return r

    def close(self):
        self.fleet.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--sizes", default="1,8,32")
    ap.add_argument("--forks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--matrix", default="issue", choices=sorted(MATRICES))
    ap.add_argument("--no-counters", action="store_true", help="no module/session counters on the hosts")
    ap.add_argument("--project-forks", type=int, default=50)
    ap.add_argument("--project-cores", type=int, default=8, help="controller cores assumed in the projection")
    ap.add_argument("--table", help="also write the Markdown tables to this file")
    ap.add_argument("--keep", help="keep the run directories (outputs, records, counters) under this directory")
    ap.add_argument("--summarize", metavar="RUNS_JSON", help="only print the tables of a kept run (<keep>/runs.json)")
    args = ap.parse_args()
    if args.summarize:
        with open(args.summarize) as fh:
            doc = json.load(fh)
        summarize(args, {int(k): v for k, v in doc["runs"].items()},
                  datetime.datetime.fromisoformat(doc["started"]), doc["elapsed"])
        return
    why = fleetlib.available()
    if why:
        raise SystemExit("cannot build the fleet: " + why)
    sizes = [int(x) for x in args.sizes.split(",")]
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile < 64 * max(sizes):
        raise SystemExit("open file limit %d is low for %d hosts (ulimit -n)" % (nofile, max(sizes)))
    started = datetime.datetime.now(datetime.timezone.utc)
    t_start = time.monotonic()
    print("bench_fleet_scale: %s UTC, %d cores, load %s, sizes %s at forks %d, matrix %s, %d repeat(s), tree %s"
          % (started.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), loadavg(), sizes, args.forks, args.matrix,
             args.repeat, ROOT), flush=True)
    base = args.keep or tempfile.mkdtemp(prefix="fq-scale-")
    os.makedirs(base, exist_ok=True)
    bench = Bench(base, max(sizes), counters=not args.no_counters)
    runs = {n: [] for n in sizes}
    try:
        w = bench.run(max(sizes), args.forks, "short", "warmup")     # builds iobench, deploys it everywhere
        print("warm-up (untimed, %d hosts, short matrix): wall %.1f s, %d/%d PASS, load %s"
              % (w["hosts"], w["wall"], w["pass"], w["hosts"], w["load"]), flush=True)
        for i in range(args.repeat):
            for n in sizes:
                r = bench.run(n, args.forks, args.matrix, "%s-%d-%d" % (args.matrix, n, i))
                runs[n].append(r)
                print("%3d host(s) @ forks %d: wall %.1f s, controller CPU %.1f s (+ ssh masters %.1f s), "
                      "host side (sshd) %.1f s, machine %.0f s, fork-s %.1f (wait %.1f), modules/host %s, "
                      "sessions/host %s, %d output lines, %d/%d PASS, load %s"
                      % (n, args.forks, r["wall"], r["ctl_children"], r["ctl_masters"], r["sshd"], r["machine"],
                         r["fork_s"], r["wait_s"], "%.1f" % r["modules_mean"] if "modules_mean" in r else "-",
                         "%.1f" % r["sessions_mean"] if "sessions_mean" in r else "-", r["lines"], r["pass"], n,
                         r["load"]), flush=True)
    finally:
        bench.close()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    elapsed = time.monotonic() - t_start
    if args.keep:
        with open(os.path.join(base, "runs.json"), "w") as fh:
            json.dump({"started": started.isoformat(), "elapsed": elapsed, "runs": runs}, fh, indent=1)
    summarize(args, runs, started, elapsed)


def summarize(args, runs, started, elapsed):
    """The Markdown tables from the runs ({hosts: [run, ...]})."""
    sizes = sorted(runs)
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], (int, float))}
           for n, rs in runs.items()}
    one, big = min(sizes), max(sizes)
    a, b = med[one], med[big]
    span = big - one
    f = args.forks
    head = "Measured %s UTC, %d-core machine, forks %d, matrix `%s` (%d workloads), examples/ansible.cfg, " \
           "medians of %d repeat(s); the bench took %s." % (
               started.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), f, args.matrix, len(MATRICES[args.matrix]),
               args.repeat, dur(elapsed))
    lines = [head, "",
             "| hosts @ forks | wall s | ratio vs %d | controller CPU s (workers+ssh / masters) | controller CPU s per host "
             "| host side sshd CPU s | machine CPU busy s | fork-s per host (in wait) | module executions per host "
             "(max) | status polls per host (raw, no Python) | SSH sessions per host | output lines | PASS | load before -> after |" % one,
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in sizes:
        r = med[n]
        lines.append("| %d @ %d | %.1f | %.2f | %.1f (%.1f / %.1f) | %.2f | %.1f | %.0f | %.2f (%.2f) | %s | %s | %s | %d | %d/%d | %s |" % (
            n, f, r["wall"], r["wall"] / a["wall"], r["ctl"], r["ctl_children"], r["ctl_masters"], r["ctl"] / n,
            r["sshd"], r["machine"], r["fork_s"] / n, r["wait_s"] / n,
            "%.1f (%d)" % (r["modules_mean"], r["modules_max"]) if "modules_mean" in r else "-",
            "%.1f (%.1f)" % (r["polls_mean"], r["polls_raw_mean"]) if "polls_mean" in r else "-",
            "%.1f" % r["sessions_mean"] if "sessions_mean" in r else "-", r["lines"], r["pass"], n,
            "; ".join(x["load"] for x in runs[n])))
    cpu_host = (b["ctl"] - a["ctl"]) / span
    fork_host = (b["fork_s"] - a["fork_s"]) / span
    fork_host_nowait = ((b["fork_s"] - b["wait_s"]) - (a["fork_s"] - a["wait_s"])) / span
    t_fork_wall = (b["wall"] - a["wall"]) * f / span
    sshd_host = (b["sshd"] - a["sshd"]) / span
    ratios = ", ".join("%d/%d: %.2fx" % (n, one, med[n]["wall"] / a["wall"]) for n in sizes if n != one)
    lines += ["", "Ratios of wall time: %s (aim for %d/%d: at most 1.3x)." % (ratios, big, one), "",
              "Marginal terms (%d hosts against %d, per extra host):" % (big, one), "",
              "| term | measured | aim |", "|---|---:|---:|",
              "| controller CPU s per host, cpu_host = (cpu(%d) - cpu(%d)) / %d | %.2f | 0.25 |" % (big, one, span, cpu_host),
              "| fork-s per host, all tasks | %.2f | |" % fork_host,
              "| fork-s per host outside the job's wait | %.2f | 1 |" % fork_host_nowait,
              "| fork-s per host from the wall clock, t_fork_wall = (wall(%d) - wall(%d)) x %d / %d | %.2f | 1 |"
              % (big, one, f, span, t_fork_wall),
              "| host side (sshd trees) CPU s per host, not controller | %.2f | |" % sshd_host]
    # the projection's fork term: the callback's fork-seconds per extra host outside the job's wait
    # (measured directly; the wall-clock t_fork_wall is shown as a cross-check)
    t_fork = max(fork_host_nowait, 0.0)
    pf, pc = args.project_forks, args.project_cores
    lines += ["", "Projection for a controller whose hosts are elsewhere, wall(N) = max(wall(1) + (N - 1) x t_fork / F, "
                  "N x cpu_host / C), wall(1) = %.1f s, t_fork = %.2f s (fork-s per host outside the wait), "
                  "cpu_host = %.2f s:" % (a["wall"], t_fork, max(cpu_host, 0.0)), "",
              "| forks F, controller cores C | 100 hosts | 1,000 hosts | 10,000 hosts |", "|---|---:|---:|---:|"]
    for pf_, pc_ in ((f, os.cpu_count()), (pf, pc)):
        cells = [dur(projected_s(a["wall"], t_fork, max(cpu_host, 0.0), h, pf_, pc_)) for h in (100, 1000, 10000)]
        lines.append("| F %d, C %d | %s |" % (pf_, pc_, " | ".join(cells)))
    # on this machine the hosts' side shares the cores: its CPU counts in the CPU bound of the check
    local = max(cpu_host + sshd_host, 0.0)
    model = ["%d hosts: model %.0f s, measured %.0f s" % (
        n, max(a["wall"] + (n - one) * t_fork / f, a["wall"] + (n - one) * local / os.cpu_count()), med[n]["wall"])
        for n in sizes if n != one]
    lines += ["", "Check of the model at forks %d on this machine, whose %d cores also run the hosts' side "
                  "(CPU bound wall(1) + (N - 1) x (cpu_host + sshd_host) / cores): %s." % (
                      f, os.cpu_count(), "; ".join(model))]
    top = sorted(runs[big][0]["by_task"].items(), key=lambda kv: -kv[1])[:8]
    lines += ["", "Fork-seconds of the %d-host run by task (largest first): %s." % (
        big, "; ".join("%s %.1f s" % (k, v) for k, v in top))]
    if runs[big][0].get("module_names"):
        lines += ["", "Module executions of one host (%d-host run, in order): %s." % (
            big, ", ".join(runs[big][0]["module_names"]))]
    emit("\n".join(lines), args.table)


if __name__ == "__main__":
    main()
