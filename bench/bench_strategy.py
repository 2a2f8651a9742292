"""The controller's CPU while every fork is busy: ansible-core's linear strategy against the
collection's (plugins/strategy/linear.py), each with the ansible.cfg setting it ships with
(linear: internal_poll_interval 0.001, ansible-core's default; fleetqual.storage.linear:
0.01, as ansible.cfg and examples/ansible.cfg set it).

Each run: ``--hosts`` local-connection hosts at ``--forks`` forks, one task that sleeps
``--seconds`` on each: the hosts past the forks wait for a free fork. The figure is the CPU of
ansible-playbook's main process alone (its workers, which run the tasks, are left out),
read from /proc while it runs; runs of the two strategies interleaved, ``--repeat`` each.

    .venv/bin/python bench/bench_strategy.py [--hosts 3] [--forks 1] [--seconds 10] [--repeat 3]

Prints a Markdown table: the main process's CPU seconds per run and its share of a core, and
the ratio of the collection's to linear's in the same invocation.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
TICK = os.sysconf("SC_CLK_TCK")
VARIANTS = {"ansible.builtin.linear": 0.001, "fleetqual.storage.linear": 0.01}


def own_cpu(pid):
    """User + system seconds of the process ``pid`` itself (its threads; not its children)."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one_run(work, strategy, poll, hosts, forks, seconds):
    cfg = os.path.join(work, "%s.cfg" % strategy)
    with open(cfg, "w") as fh:
        fh.write("[defaults]\ncollections_path = %s\nstrategy = %s\ninternal_poll_interval = %s\n"
                 % (os.path.join(ROOT, "build", "collections"), strategy, poll))
    inv = os.path.join(work, "inv.json")
    with open(inv, "w") as fh:
        json.dump({"all": {"hosts": {"h%d" % i: {"ansible_connection": "local", "ansible_python_interpreter":
                                                 sys.executable} for i in range(hosts)}}}, fh)
    play = os.path.join(work, "play.yml")
    with open(play, "w") as fh:
        json.dump([{"hosts": "all", "gather_facts": False, "tasks": [
            {"ansible.builtin.command": "sleep %s" % seconds, "changed_when": False}]}], fh)
    env = dict(os.environ, ANSIBLE_CONFIG=cfg, ANSIBLE_NOCOLOR="1")
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", inv, play, "--forks", str(forks)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = 0.0
    while p.poll() is None:
        try:
            last = own_cpu(p.pid)
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    err = p.stderr.read()
    if p.returncode:
        raise SystemExit("%s: ansible-playbook exited %s: %s" % (strategy, p.returncode, err[-2000:]))
    return last, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--forks", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    got = {s: [] for s in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="fq-bench-strategy-") as work:
        for _rep in range(a.repeat):
            for strategy, poll in VARIANTS.items():
                got[strategy].append(one_run(work, strategy, poll, a.hosts, a.forks, a.seconds))
    print("%d hosts at forks %d, a %s s task each, %d runs per strategy (median)\n"
          % (a.hosts, a.forks, a.seconds, a.repeat))
    print("| strategy | internal_poll_interval | main process CPU s | of a core | wall s |")
    print("|---|---|---|---|---|")
    med = {}
    for strategy, runs in got.items():
        cpu = statistics.median(c for c, _w in runs)
        wall = statistics.median(w for _c, w in runs)
        med[strategy] = cpu
        print("| %s | %s | %.2f | %.1f %% | %.1f |" % (strategy, VARIANTS[strategy], cpu, 100 * cpu / wall, wall))
    base = med["ansible.builtin.linear"]
    print("\nfleetqual.storage.linear / ansible.builtin.linear: %.3f"
          % (med["fleetqual.storage.linear"] / base if base else float("nan")))


if __name__ == "__main__":
    main()
