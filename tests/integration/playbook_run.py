"""Helpers for running the qualify playbook in tests (imported by conftest and tests)."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

# The suite's runs share this machine's disk with its other streams (the VM tier's guests, whose
# emulators run at a higher priority, tests/vm/guests.py; the image's and the chroots'
# debootstraps) and its CPUs. In full runs the disk (or a loop device's worker) held a host's
# requests for 1.0-1.9 s: a real stall of the machine's disk, which is not what a fault or
# detached-job fleet, a package step or a build on the host is about; even a loop device over
# a tmpfs completed nothing for 2 s when its fsync waited on a loaded machine's CPUs (jbd2, the
# loop worker). Such runs carry this rule (docs/thresholds.md, "Stall limit"); a stall within
# it is still said in a warning, and the stall-judging fleet (test_fleet_integrity) keeps the
# built-in limit.
SHARED_DISK_STALL_RULE = {"name": "suite-shared-disk", "max_stall_s": 5}

# The pace of the workloads of runs whose subject is not the disk's speed or the data (the
# run's output, its batches, round trips, privileges, a build on the host, the package step,
# the kernel's probes): iobench's own rate limit (``rate_iops``, fio's ``rate_iops``), so each
# workload still measures and is judged (the stall rule knows a paced cadence:
# plugin_utils/metrics/stalls.py), at a small part of the CPU. At full speed a 2 s read
# workload on a loop device took 0.5-1.2 CPU-s of iobench, and as much again of the loop
# device's kernel worker; the two capability-probe runs took 37 CPU-s at full speed and 21
# paced.
PACE = {"rate_iops": 200}


def ansible_env(extra=None):
    """Environment for running this checkout's playbook: its ansible.cfg, the collection
    link, the venv's binaries first, no colour."""
    env = dict(os.environ,
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               # the tests read the default callback's lines (ansible.cfg chooses the bounded one)
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra or {})
    return env


class Run:
    def __init__(self, proc, base, run_id):
        self.rc = proc.returncode
        self.out = proc.stdout + proc.stderr
        self.base = base
        self.run_id = run_id

    def record(self, host="localhost"):
        with open(os.path.join(self.base, "results", self.run_id, host + ".json")) as fh:
            return json.load(fh)

    def results_dir(self):
        return os.path.join(self.base, "results", self.run_id)


def tree_snapshot(path):
    """{relative path: (size, mtime_ns)} of every entry under path, for 'nothing touched' checks."""
    snap = {}
    if not os.path.exists(path):
        return snap
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            snap[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
    return snap
