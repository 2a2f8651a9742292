"""Two round trips per host: the remote module executions of each host on the measuring
path are counted from the hosts themselves (tests/fleet/module_counter.py: each host's
``ansible_python_interpreter`` is a wrapper that logs every AnsiballZ run, and each host's sshd
logs every SSH session through a forced command), not from the playbook's task list.

Three loopback hosts fq91-fq93 at forks 2 (fewer forks than hosts), a tiny matrix (2 workloads of
2 s + 1 s warm-up), the playbook run twice with the same inventory and the same binary
directories: the first run deploys the binary (one more module execution, the transfer), the
second finds it. Per host: at most 2 module executions in the second run and 3 in the first,
plus the polls, which start no Python on the host (a raw read of the job's status file).
Before the one-run measuring path (5a9f027) the hosts ran 9-12 module executions each (setup,
stat, copy or file + stat, drives, bench_dir, job started, a job status per poll, bench_dir
absent); with it, 3 in the first run (qualify_host started twice: the binary differs, it is
sent, the host starts again; then the cleanup) and 2 in the second.
"""
import json
import os

import pytest

import fleetlib

from fleetrun import run_playbook
from module_counter import ModuleCounter

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOSTS = {"fq91": 91, "fq92": 92, "fq93": 93}
FORKS = 2
MATRIX = [{"workload": "rt%d" % i, "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
           "block_size": "16K", "direct": True, "time": 2, "warmup": 1, **fleetlib.PACE} for i in range(2)]
MAX_MODULES_FIRST = 3      # check + deploy + preflight + start in one, the transfer of the binary, collect + cleanup
MAX_MODULES_SECOND = 2     # the binary is found: check + preflight + start, collect + cleanup


@pytest.fixture(scope="module")
def two_runs(fleet, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("round-trips"))
    counter = ModuleCounter(os.path.join(base, "counter"), python=fleet.python)
    # binary directories of their own, empty: the first run's deploy is this test's subject (the
    # fleet's shared one holds the binary an earlier test deployed)
    hosts = [{"name": name, "inst": fleet.host(n, key_options=counter.key_options(name)),
              "vars": dict(counter.host_vars(name), fleetqual_bin_dir=os.path.join(base, "bin", name))}
             for name, n in HOSTS.items()]
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts,
                          group_vars={"all": {"fleetqual_matrix": MATRIX, "fleetqual_progress_interval": 2}})
    runs = []
    for run_id in ("first", "second"):
        mark = counter.mark(HOSTS)
        run = run_playbook(fleet, inv, base, run_id, args=("--forks", str(FORKS)))
        run.window = (mark, counter.mark(HOSTS))
        runs.append(run)
        print("\n%s run:\n%s" % (run_id, report(counter, run)))     # shown with -s / -rP
    return counter, runs


def _progress(run, host):
    with open(os.path.join(run.results_dir(), ".progress", host + ".json")) as fh:
        return json.load(fh)


def report(counter, run):
    return "\n".join(counter.summary(h, *run.window) for h in HOSTS)


def test_both_runs_pass(two_runs):
    counter, runs = two_runs
    for run in runs:
        assert run.rc == 0, run.out[-4000:]
        assert run.summary() == (3, 3, 3, 0, 0, 0), run.out[-4000:]


def test_the_counter_saw_every_host(two_runs):
    """The wrapper is really the interpreter of each host: every host ran modules through it, and
    every module execution came over the host's own sshd."""
    counter, runs = two_runs
    for run in runs:
        for host in HOSTS:
            mods = counter.modules(host, *run.window)
            assert mods and all(m.name != "?" for m in mods), report(counter, run)
            kinds = counter.session_kinds(host, *run.window)
            assert kinds.get("module", 0) >= len(mods), report(counter, run)


def test_second_run_at_most_two_module_executions_per_host(two_runs):
    counter, runs = two_runs
    second = runs[1]
    counts = counter.counts(HOSTS, *second.window)
    assert all(n <= MAX_MODULES_SECOND for n in counts.values()), report(counter, second)


def test_first_run_at_most_three_module_executions_per_host(two_runs):
    """One more than the second run: the binary's checksum differs, so it is transferred."""
    counter, runs = two_runs
    first = runs[0]
    counts = counter.counts(HOSTS, *first.window)
    assert all(n <= MAX_MODULES_FIRST for n in counts.values()), report(counter, first)
    # the first run transferred the binary (an sftp session) to every host, the second to none
    for host in HOSTS:
        assert counter.session_kinds(host, *first.window).get("transfer", 0) >= 1, report(counter, first)
        assert counter.session_kinds(host, *runs[1].window).get("transfer", 0) == 0, report(counter, runs[1])


def test_the_jobs_were_polled_without_starting_python(two_runs):
    """The polls happened and are cheap: raw reads of the job's status file over SSH
    (module_counter.Session kind "poll": a session that names .fleetqual-job or status.json and
    starts no Python on the host)."""
    counter, runs = two_runs
    for run in runs:
        polls = {h: counter.session_kinds(h, *run.window).get("poll", 0) for h in HOSTS}
        # the wait counts its own raw reads (<results>/<run_id>/.progress/<host>.json "polls"): each
        # was one SSH session the host saw as a poll. How many depends on how soon the controller
        # got to each host (a job may be over by its first poll), so the count is the wait's own.
        made = {h: _progress(run, h).get("polls") for h in HOSTS}
        assert all(isinstance(n, int) and n >= 1 for n in made.values()), made
        assert polls == made, (polls, made, report(counter, run))
        # no poll starts the job module on the host (today's polls do: job(status) executions)
        status_runs = {h: len([m for m in counter.modules(h, *run.window)
                               if m.name.endswith(".job") and m.state == "status"]) for h in HOSTS}
        assert not any(status_runs.values()), (status_runs, report(counter, run))
