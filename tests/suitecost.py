"""What the test suite costs: wall and CPU seconds of each stream of `make test`, of the
whole command, and of the tests that cost the most (docs/testing.md, "What the suite costs").

CPU is read from a control group, so it counts every process a stream started and all
that they started in turn, wherever they were re-parented: the detached measurement jobs of
the loopback hosts, the hosts' sshd sessions, the guests' QEMU, the playbooks. A process's
own rusage cannot (a daemon re-parented to init is charged to nobody). cgroup v1's cpuacct
controller (``cpuacct.usage_user``, ``cpuacct.usage_sys``) where it is mounted, else cgroup v2's
``cpu.stat`` (kernel docs, admin-guide/cgroup-v1/cpuacct and admin-guide/cgroup-v2 "cpu");
without either (not root), the waited-for children's rusage, said in the record as the
method.

    suitecost.py run NAME --out FILE [--cpu-shares N] -- CMD...
                                                 run CMD in a group of its own, below the
                                                 group of the run that started this one (env
                                                 FLEETQUAL_COST_CGROUP), and write its cost;
                                                 with --cpu-shares, also in a cpu group of
                                                 that weight (share_group)
    suitecost.py report DIR                      print and write DIR/cost.json from DIR's
                                                 *.cost.json (streams) and *.tests.*.json
                                                 (per test, written by tests/costplugin.py),
                                                 with the machine's speed then (reference)

Standard library only: it runs before the venv exists (scripts/test.sh wraps the setup too).
"""
import argparse
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ENV_GROUP = "FLEETQUAL_COST_CGROUP"     # the group this process and its children are charged to
ENV_TESTS = "FLEETQUAL_COST_TESTS"      # where a pytest process writes its per-test costs
ENV_T0 = "FLEETQUAL_COST_T0"            # epoch at which the outermost run started
ENV_CPU = "FLEETQUAL_CPU_GROUP"         # the cpu controller's group of the enclosing run (its share)
CPU_V1_ROOT = "/sys/fs/cgroup/cpu"
V1_ROOT = "/sys/fs/cgroup/cpuacct"
V2_ROOT = "/sys/fs/cgroup"
TOP = "fleetqual-tests"
TOP_N = 15
REFERENCE_REPEATS = 5


def _read(path):
    with open(path) as fh:
        return fh.read()


def flavour(group):
    """'v1' or 'v2' for a group directory, by the files it has."""
    return "v1" if os.path.exists(os.path.join(group, "cpuacct.usage")) else "v2"


def group_cpu(group):
    """``(user_s, system_s)`` charged to a group and every group below it so far."""
    if flavour(group) == "v1":
        return (int(_read(os.path.join(group, "cpuacct.usage_user"))) / 1e9,
                int(_read(os.path.join(group, "cpuacct.usage_sys"))) / 1e9)
    stat = dict(line.split() for line in _read(os.path.join(group, "cpu.stat")).splitlines())
    return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6


def make_group(name, parent=None):
    """A new group for ``name`` (below ``parent``, a group directory, or below a top group
    of our own), or None where none can be made (not root, no cgroup filesystem)."""
    if parent is None:
        if os.path.isdir(V1_ROOT) and os.path.exists(os.path.join(V1_ROOT, "cpuacct.usage")):
            parent = os.path.join(V1_ROOT, TOP)
        elif os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers")):
            parent = os.path.join(V2_ROOT, TOP)
        else:
            return None
    path = os.path.join(parent, "%s-%d" % (name, os.getpid()))
    try:
        os.makedirs(path, exist_ok=True)
        return path
    except OSError:
        return None


def share_group(name, shares):
    """A new group of cgroup v1's ``cpu`` controller for ``name`` with ``cpu.shares`` =
    ``shares`` (kernel docs, scheduler/sched-design-CFS "group scheduling"), below the
    enclosing run's (env FLEETQUAL_CPU_GROUP) or a top group of our own; None where there is
    no such controller (cgroup v2 alone: left to the kernel's defaults) or none can be made.
    The streams of make test compete by their shares whatever each runs inside (four guests
    at nice -5 weigh in their stream only), and the whole suite, one group at the top,
    competes with the kernel's own threads as one task would: a loop device's worker is not
    starved by the test processes that wait on it."""
    parent = os.environ.get(ENV_CPU)
    if not parent or not os.path.isdir(parent):
        if not os.path.exists(os.path.join(CPU_V1_ROOT, "cpu.shares")):
            return None
        parent = os.path.join(CPU_V1_ROOT, TOP)
    path = os.path.join(parent, "%s-%d" % (name, os.getpid()))
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cpu.shares"), "w") as fh:
            fh.write(str(int(shares)))
        return path
    except (OSError, ValueError):
        return None


def sub_group(name):
    """A new group for ``name`` below the group this process is charged to (env
    FLEETQUAL_COST_GROUP: a stream's), so what runs in it is counted in both; None outside a
    run or where none can be made."""
    parent = os.environ.get(ENV_GROUP)
    return make_group(name, parent) if parent and os.path.isdir(parent) else None


def join(group, pid):
    with open(os.path.join(group, "cgroup.procs"), "w") as fh:
        fh.write(str(pid))


def remove_group(group):
    """Remove the group, and the groups below it (a guest's, say, whose owner was killed),
    if nothing is left in them; the PIDs still in them otherwise (processes a stream left
    running: said in its record, never killed here)."""
    left = []
    for sub in sorted(os.scandir(group) if os.path.isdir(group) else [], key=lambda e: e.name):
        if sub.is_dir(follow_symlinks=False):
            left += remove_group(sub.path)
    try:
        here = [int(p) for p in _read(os.path.join(group, "cgroup.procs")).split()]
    except OSError:
        return left
    if not here and not left:
        try:
            os.rmdir(group)
        except OSError:
            pass
    return left + here


def run(name, out, argv, shares=None):
    """Run argv in a group of its own, wait for it, write its cost to ``out``; its exit code.
    ``shares``: also in a ``cpu`` group of that weight (:func:`share_group`)."""
    parent = os.environ.get(ENV_GROUP)
    group = make_group(name, parent if parent and os.path.isdir(parent) else None)
    cpu = share_group(name, shares) if shares else None
    env = dict(os.environ)
    env.setdefault(ENV_T0, "%.3f" % time.time())
    t0 = time.monotonic()
    if group:
        env[ENV_GROUP] = group
    if cpu:
        env[ENV_CPU] = cpu

    def enter():
        for g in (group, cpu):
            if g:
                join(g, os.getpid())
    proc = subprocess.Popen(argv, env=env, preexec_fn=enter if group or cpu else None)

    def forward(signum, _frame):
        proc.send_signal(signum)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    status, usage = os.wait4(proc.pid, 0)[1:]
    rc = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    rec = {"name": name, "argv": argv, "rc": rc, "wall_s": round(wall, 1)}
    if group:
        user, system = group_cpu(group)
        rec.update(method="cgroup-" + flavour(group), group=group, left_running=remove_group(group))
    else:
        user, system = usage.ru_utime, usage.ru_stime
        rec.update(method="rusage (no control group could be made: processes re-parented away are not counted)")
    rec.update(user_s=round(user, 1), system_s=round(system, 1), cpu_s=round(user + system, 1))
    if cpu:
        rec.update(cpu_shares=int(shares), left_running=sorted(set(rec.get("left_running", [])) | set(remove_group(cpu))))
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            json.dump(rec, fh, indent=1)
    return rc


def current_cpu():
    """CPU seconds charged so far to this process's cost group (the stream's: every process
    of the stream, its guests and hosts included), or to this process and its waited-for
    children where there is no group; and the method."""
    group = os.environ.get(ENV_GROUP)
    if group and os.path.isdir(group):
        try:
            return sum(group_cpu(group)), "cgroup"
        except (OSError, KeyError, ValueError):
            pass
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system, "rusage"


def load(directory):
    streams, tests = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.cost.json"))):
        with open(path) as fh:
            streams.append(json.load(fh))
    for path in sorted(glob.glob(os.path.join(directory, "*.tests.*.json"))):
        stream = os.path.basename(path).split(".", 1)[0]
        with open(path) as fh:
            tests.extend(dict(t, stream=stream) for t in json.load(fh)["tests"])
    return streams, tests


def summarise(streams, tests, total=None, top=TOP_N):
    """The cost record: each stream, the whole (``total``, when the command ran inside an
    outer group, else the streams' sum), the ``top`` tests by CPU."""
    whole = total or {"name": "streams", "wall_s": None,
                      "cpu_s": round(sum(s["cpu_s"] for s in streams), 1)}
    ranked = sorted(tests, key=lambda t: (-t["cpu_s"], t["nodeid"]))[:top]
    return {"streams": sorted(streams, key=lambda s: -s["cpu_s"]), "total": whole,
            "tests_cpu_s": round(sum(t["cpu_s"] for t in tests), 1), "tests": len(tests), "costliest": ranked}


def outer_total():
    """The enclosing run's cost so far (scripts/test.sh runs setup and make test in one),
    read live, or None outside one."""
    group = os.environ.get(ENV_GROUP)
    if not group or not os.path.isdir(group):
        return None
    user, system = group_cpu(group)
    t0 = float(os.environ.get(ENV_T0, "0") or 0)
    return {"name": os.path.basename(group).rsplit("-", 1)[0], "wall_s": round(time.time() - t0, 1) if t0 else None,
            "cpu_s": round(user + system, 1), "user_s": round(user, 1), "system_s": round(system, 1)}


def render(rec):
    lines = ["suite cost (CPU-s = user + system of every process, guests included):"]
    lines.append("  %-10s %8s %8s" % ("stream", "wall s", "CPU s"))
    for s in rec["streams"]:
        lines.append("  %-10s %8.0f %8.0f%s" % (s["name"], s["wall_s"], s["cpu_s"],
                                                "" if s.get("method", "").startswith("cgroup") else "  (%s)" % s.get("method")))
    t = rec["total"]
    wall = "%.0f" % t["wall_s"] if t["wall_s"] else "-"
    lines.append("  %-10s %8s %8.0f" % ("whole" if t["name"] != "streams" else "streams", wall, t["cpu_s"]))
    lines.append("costliest %d of %d tests (CPU-s of their stream while each ran, wall s):"
                 % (len(rec["costliest"]), rec["tests"]))
    for c in rec["costliest"]:
        lines.append("  %7.1f %7.1f  %-6s %s" % (c["cpu_s"], c["wall_s"], c.get("stream", ""), c["nodeid"]))
    ref = rec.get("reference")
    if ref:
        lines.append("machine speed at the end: %s in %.3f CPU-s; the %s = %s of them"
                     % (ref["work"], ref["cpu_s"], "whole command" if t["name"] != "streams" else "streams",
                        t.get("reference_units", "-")))
    return "\n".join(lines)


def reference(repeats=REFERENCE_REPEATS):
    """The machine's speed as the report is written (the streams have ended): the CPU seconds
    of a fixed piece of single-threaded Python work, the kind the playbooks' controllers and
    modules do (a JSON round trip of a 4,000-entry document, 20 times), the median of
    ``repeats``. On a shared host the same commit's suite cost 2,598 to 3,720 CPU-s from day
    to day: the suite's CPU over this figure (``reference_units``) is its work whatever the
    host's speed was that day."""
    doc = {"host%d" % i: {"iops": i * 1.5, "reasons": ["r%d" % i] * 3, "ok": i % 2 == 0} for i in range(4000)}
    times = []
    for _repeat in range(repeats):
        c0 = time.process_time()
        for _trip in range(20):
            json.loads(json.dumps(doc))
        times.append(time.process_time() - c0)
    return {"work": "20 JSON round trips of a 4,000-entry document, one thread, median of %d" % repeats,
            "cpu_s": round(statistics.median(times), 4)}


def report(directory):
    streams, tests = load(directory)
    rec = summarise(streams, tests, outer_total())
    rec["reference"] = reference()
    if rec["reference"]["cpu_s"] > 0:
        rec["total"]["reference_units"] = round(rec["total"]["cpu_s"] / rec["reference"]["cpu_s"])
    with open(os.path.join(directory, "cost.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    print(render(rec))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        if "--" not in argv:
            sys.exit("usage: suitecost.py run NAME [--out FILE] [--cpu-shares N] -- CMD...")
        cut = argv.index("--")
        p = argparse.ArgumentParser(prog="suitecost.py run")
        p.add_argument("name")
        p.add_argument("--out")
        p.add_argument("--cpu-shares", type=int)
        a = p.parse_args(argv[1:cut])
        return run(a.name, a.out, argv[cut + 1:], a.cpu_shares)
    if argv[:1] == ["report"] and len(argv) == 2:
        return report(argv[1])
    sys.exit("usage: suitecost.py run NAME [--out FILE] -- CMD... | suitecost.py report DIR")


if __name__ == "__main__":
    sys.exit(main())
