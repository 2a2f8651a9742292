"""The validation play at fleet scale: the first play of playbooks/qualify.yml alone,
which checks every targeted host's variables on the controller before any host is contacted,
over N inventory hosts that are never contacted (a valid matrix for all of them), measured as
controller CPU (ansible-playbook and its workers: getrusage(RUSAGE_CHILDREN)) and wall time.

    .venv/bin/python bench/bench_validate_scale.py [--sizes 32,320,1000] [--repeat 1]
                                                   [--other DIR [--other-label NAME]]

``--other DIR``: a second checkout (for example ``git archive`` of an older commit, with
``DIR/build/collections/ansible_collections/fleetqual/storage`` linking to DIR) measured the
same way, runs interleaved, so the two trees are compared in one invocation on the same
machine. Prints a Markdown table; per host = CPU / hosts.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
MATRIX = [{"workload": "w", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "8M", "block_size": "16K",
           "direct": True, "time": 4, "warmup": 1}]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def prepare(work, tree, sizes):
    """The validation play of ``tree`` and one inventory per size."""
    with open(os.path.join(tree, "playbooks", "qualify.yml")) as fh:
        plays = yaml.safe_load(fh)
    play = os.path.join(work, "validate-%d.yml" % abs(hash(tree)))
    with open(play, "w") as fh:
        yaml.safe_dump([plays[0]], fh, sort_keys=False)
    for n in sizes:
        with open(os.path.join(work, "inv%d.yml" % n), "w") as fh:
            yaml.safe_dump({"all": {"children": {"db": {"hosts": {"db%05d" % i: {"ansible_host": "192.0.2.1"}
                                                                  for i in range(n)}}}}}, fh)
    return play


def run(work, tree, play, n):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(tree, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(tree, "build", "collections"),
               FLEETQUAL_REPORT_DIR=os.path.join(work, "results"))
    c0, t0 = children_cpu(), time.monotonic()
    p = subprocess.run([os.path.join(BIN, "ansible-playbook"), play, "-i", os.path.join(work, "inv%d.yml" % n),
                        "-e", yaml.safe_dump({"fleetqual_matrix": MATRIX}, default_flow_style=True).strip()],
                       capture_output=True, text=True, env=env, cwd=work, check=False)
    wall, cpu = time.monotonic() - t0, children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit("%s, %d hosts: exit %d\n%s" % (tree, n, p.returncode, (p.stdout + p.stderr)[-3000:]))
    return cpu, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--sizes", default="32,320,1000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--other", help="a second checkout to measure the same way")
    ap.add_argument("--other-label", default="other")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    trees = [("this tree", ROOT)] + ([(args.other_label, os.path.abspath(args.other))] if args.other else [])
    work = tempfile.mkdtemp(prefix="fq-validate-")
    plays = {label: prepare(work, tree, sizes) for label, tree in trees}
    out = {}
    print("bench_validate_scale: %s UTC, %d cores, load %.1f, sizes %s, %d repeat(s)" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count(), os.getloadavg()[0], sizes, args.repeat))
    for i in range(args.repeat):
        for label, tree in (trees if i % 2 == 0 else trees[::-1]):
            for n in sizes:
                cpu, wall = run(work, tree, plays[label], n)
                out.setdefault((label, n), []).append((cpu, wall))
                print("%s, %d hosts: CPU %.2f s, wall %.2f s" % (label, n, cpu, wall), flush=True)
    print("\n| tree | hosts | controller CPU s | per host ms | wall s |\n|---|---:|---:|---:|---:|")
    for label, _tree in trees:
        for n in sizes:
            cpu = statistics.median(c for c, _w in out[(label, n)])
            wall = statistics.median(w for _c, w in out[(label, n)])
            print("| %s | %d | %.2f | %.1f | %.2f |" % (label, n, cpu, 1000 * cpu / n, wall))


if __name__ == "__main__":
    main()
