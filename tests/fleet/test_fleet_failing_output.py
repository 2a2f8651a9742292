"""Output that stays small when hosts fail (docs/report.md, "Where the full record is"): 16
hosts failing in five ways, under the default stdout callback and under the collection's
``bounded`` one, each host printing its verdict and first reasons -- never its record -- in
under 2 KB, and under ``bounded`` on at most 3 lines before the fleet report (its failure and
the recap line). One playbook run per callback (both at once), a tiny matrix, 4 forks for 16 hosts.
The whole module is in the long suite (docs/testing.md, "The long suite"), and within it the
run under the default callback is made only when its test is selected.

| hosts | verdict | how |
|---|---|---|
| fq111-fq112 | ERROR at the start | fleetqual_test_dir below a regular file (not creatable) |
| fq113-fq114 | ERROR at the start | fleetqual_test_dir holds someone's files with long names: the preflight's refusal is longer than what is printed |
| fq115-fq116 | ERROR at the start | fleetqual_bin_dir below a regular file (unusable) |
| fq117-fq118 | ERROR in the wait | fleetqual_workload_timeout_slack 0: the job stops at its deadline (the record is judged and stored by the wait) |
| fq119-fq122 | FAIL | five impossible thresholds: three reasons printed, "(+2 more in <record>)" |
| fq01-fq04 | UNREACHABLE | addresses where nothing listens |
"""
import concurrent.futures
import glob
import os
import re
import time

import pytest

import fleetlib

from fleetlib import load_json
from fleetrun import build_cache_dir, run_playbook

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

MATRIX = [{"workload": "out", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
           "block_size": "16K", "direct": True, "time": 1, "warmup": 0, **fleetlib.PACE}]
IMPOSSIBLE = [{"workload": "out", "min_iops": 1e12}, {"workload": "out", "min_mibps": 1e9},
              {"workload": "out", "max_read_p99_ms": 1e-9}, {"workload": "out", "max_read_p95_ms": 1e-9},
              {"workload": "out", "max_read_p50_ms": 1e-9}]
BOUNDED = "fleetqual.storage.bounded"
# the default callback's run in the long suite (docs/testing.md, "The long suite"): a second
# 16-host run beside the bounded one's, 5-10 minutes of the loaded machine
CALLBACKS = ("ansible.builtin.default", BOUNDED)
PER_HOST_BYTES = 2048
RECORD_KEYS = ('"ansible_stats"', '"checks"', '"diagnostics"', '"drives"', '"workloads"', '"plan"', '"ansible_facts"')


def hosts_of(fleet, base):
    afile = os.path.join(base, "a-file")
    with open(afile, "w") as fh:
        fh.write("not a directory\n")
    foreign = os.path.join(base, "foreign")
    os.makedirs(foreign)
    for i in range(5):
        with open(os.path.join(foreign, "someone-elses-file-with-a-long-name-%s-%d" % ("x" * 60, i)), "w") as fh:
            fh.write("mine\n")

    def up(n, **vars_):
        return {"name": "fq%d" % n, "inst": fleet.host(n), "vars": vars_}

    hosts = [up(n, fleetqual_test_dir=os.path.join(afile, "fq%d" % n)) for n in (111, 112)]
    hosts += [up(n, fleetqual_test_dir=foreign) for n in (113, 114)]
    hosts += [up(n, fleetqual_bin_dir=os.path.join(afile, "bin%d" % n)) for n in (115, 116)]
    hosts += [up(n, fleetqual_workload_timeout_slack=0) for n in (117, 118)]
    hosts += [up(n, fleetqual_thresholds=IMPOSSIBLE) for n in range(119, 123)]
    for n in range(1, 5):
        addr, port = fleet.dead_address()
        hosts.append({"name": "fq%02d" % n, "addr": addr, "port": port})
    return hosts


def selected_callbacks(items):
    """The callbacks the selected tests need: the bounded one always (the records' test reads
    its run), the default one when its test is selected (the long suite's)."""
    wanted = {item.callspec.params["cb"] for item in items
              if getattr(item, "callspec", None) is not None and "cb" in item.callspec.params
              and item.module.__name__ == __name__}
    return [cb for cb in CALLBACKS if cb in wanted or cb == BOUNDED]


@pytest.fixture(scope="module")
def runs(fleet, tmp_path_factory, request):
    """One run per selected callback over the same 16 hosts, side by side (each its own
    inventory, test and binary directories, results and SSH connections; the foreign
    directory is only read)."""
    callbacks = selected_callbacks(request.session.items)
    base = str(tmp_path_factory.mktemp("failing-output"))
    hosts = hosts_of(fleet, base)

    def run(cb):
        b = os.path.join(base, cb.rsplit(".", 1)[1])
        inv = fleet.inventory(os.path.join(b, "inventory"), hosts, group_vars={"all": {"fleetqual_matrix": MATRIX}})
        # two 16-host runs side by side at 4 forks: 5-10 minutes each on the suite's loaded
        # 2 cores (one reached the default 600 s with its report written), a minute when quiet
        res = run_playbook(fleet, inv, b, "out", extra_vars={"fleetqual_progress_interval": 5},
                           args=("--forks", "4"), env_extra={"ANSIBLE_STDOUT_CALLBACK": cb}, timeout=1200)
        with open(os.path.join(b, "output.txt"), "w") as fh:
            fh.write(res.out)
        return res

    def built():
        return glob.glob(os.path.join(build_cache_dir(), "*", "deploy", "iobench"))

    with concurrent.futures.ThreadPoolExecutor(len(callbacks)) as pool:
        first, others = callbacks[0], callbacks[1:]
        futures = {first: pool.submit(run, first)}
        # a second run starts once the first has built iobench into the session's build cache
        # (two controllers compiling into one cache directory at once would race)
        deadline = time.monotonic() + 300
        while others and not built() and not futures[first].done() and time.monotonic() < deadline:
            time.sleep(0.5)
        for cb in others:
            futures[cb] = pool.submit(run, cb)
        return hosts, {cb: f.result() for cb, f in futures.items()}


def terminal(out):
    """The output but the fleet report (stdout's lines before it, and stderr after it)."""
    start = out.index("FLEET REPORT")
    end = out.index("\n", out.index("\nfleet report: ", start) + 1)
    return out[:start] + out[end:]


def without_origins(text):
    """``text`` without ansible-core 2.19's source context of each failure under the default
    callback (``Origin: <file>:<line>`` and the task's lines: about 300 bytes a failure, which no
    option of the default callback leaves out)."""
    return re.sub(r"^Origin: .*\n(\n(\d+ .*\n)+ *\^ column \d+\n\n)?", "", text, flags=re.M)


def named(text, host):
    return [ln for ln in text.splitlines() if re.search(r"\b%s\b" % host, ln)]


@pytest.mark.parametrize("cb", [pytest.param(cb, marks=[pytest.mark.long] if cb != BOUNDED else [])
                                for cb in CALLBACKS])
def test_each_failing_host_prints_its_verdict_and_first_reasons_in_under_2kb(runs, cb):
    hosts, out = runs
    run = out[cb]
    assert run.rc != 0
    assert run.summary() == (0, 16, 0, 4, 4, 8), run.out[-4000:]
    text = terminal(run.out)
    # no record, no start's plan, drives or facts: they are in the results directory
    for key in RECORD_KEYS:
        assert key not in text, (key, text[:6000])
    if cb.endswith("bounded"):
        assert len(text) < PER_HOST_BYTES // 2 * len(hosts), len(text)
    else:
        assert len(without_origins(text)) < PER_HOST_BYTES * len(hosts), len(text)
    results = run.results_dir()
    for h in hosts:
        host = h["name"]
        lines = named(text, host)
        if cb.endswith("bounded"):
            # its failure(s) and the recap line: the start's (or the wait's) and the gate's
            assert len(lines) <= 3, "\n".join(lines)
        else:
            # the default callback names every host on its ok/skipping lines too, and prints each
            # failure twice (ansible-core's [ERROR] line and the fatal: line): 2 failures, the recap
            lines = [ln for ln in lines if not re.match(r"(ok|changed|skipping|included): ", ln)]
            assert len(lines) <= 5, "\n".join(lines)
        assert sum(len(ln) + 1 for ln in lines) < PER_HOST_BYTES, "\n".join(lines)
        record = os.path.join(results, host + ".json")
        n = int(host[2:])
        if n < 10:
            assert re.search(r"fatal: \[%s\]: UNREACHABLE!" % host, text), text
            continue
        gate = [ln for ln in lines if re.search(r"\b%s: (ERROR|FAIL)\b" % host, ln)]
        assert gate, "\n".join(lines)
        if n >= 119:
            # FAIL: the first three reasons, the other two counted, with the record that holds them
            assert re.search(r"%s: FAIL out-rndrd-t1: IOPS [\d.]+ < limit 1000000000000 .*; .*\(\+2 more in %s\)"
                             % (host, re.escape(record)), gate[-1]), gate[-1]
            assert len(load_json(record)["reasons"]) == 5
        elif n in (113, 114):
            # the preflight's refusal, cut where it is printed (where depends on the test
            # directory's path length), whole in the record
            m = re.search(r"%s: ERROR (task .*?)\u2026.* \(in full in %s\)" % (host, re.escape(record)), gate[-1])
            assert m, gate[-1]
            whole = load_json(record)["reasons"][0]
            assert "already holds 5 entries" in whole and whole.startswith(m.group(1)), (m.group(1), whole)
        elif n in (117, 118):
            assert re.search(r"%s: ERROR task .* stopped by its deadline" % host, gate[-1]), gate[-1]


def test_the_records_hold_what_is_not_printed(runs):
    hosts, out = runs
    run = out[BOUNDED]
    results = run.results_dir()
    for n in (113, 114):
        rec = load_json(os.path.join(results, "fq%d.json" % n))
        # the refused start's facts and drives reached the record through the controller's file
        assert rec["verdict"] == "ERROR" and rec["facts"]["kernel"] and rec["drives"] is not None, rec
        # and its message whole: every one of the five names it lists
        assert all("-%d" % i in rec["error"]["msg"] for i in range(5)), rec["error"]
        assert len(rec["error"]["msg"]) > 600
    for n in (117, 118):
        # the wait judged and stored it (the job's own record), and the rescue handed it to the report
        rec = load_json(os.path.join(results, "fq%d.json" % n))
        assert rec["verdict"] == "ERROR" and "was stopped by its deadline" in rec["error"]["msg"], rec
        # the workload it was measuring when the deadline came, with what it measured; a loaded
        # host may still have been preparing after the deadline of 1 s (no slack), and says so
        assert rec["workloads"] or rec["error"]["msg"].endswith("before its first workload began (preparing)"), rec
        assert run.fleet_host("fq%d" % n)["verdict"] == "ERROR"
    for n in range(111, 123):
        assert run.has_record("fq%d" % n)
