"""Output that stays the same size: with the collection's examples/ansible.cfg
(stdout callback fleetqual.storage.bounded), a passing run over 8 hosts prints as many lines as
one over 1 host, and a failing run prints every failure on its one line: the FAIL host's reasons, the
ERROR host's refused preflight, the unreachable host (tests/fleet/test_fleet_failing_output.py bounds
what a failing host prints).

Hosts fq71-fq78; runs use fewer forks than hosts (8 hosts at forks 2). The progress line is printed once per
round (plugins/action/job.py): how many rounds a run spans depends on its duration, not on the
number of hosts, so those lines are compared with the number of rounds the run's own duration
allows, and every other line is compared one for one.
"""
import math
import os
import re

import pytest

import fleetlib

from fleetrun import ROOT, run_playbook

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

EXAMPLE_CFG = os.path.join(ROOT, "examples", "ansible.cfg")
MATRIX = [{"workload": "out", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
           "block_size": "16K", "direct": True, "time": 2, "warmup": 1, **fleetlib.PACE}]
INTERVAL = 30
ROUND_RE = re.compile(r"^fleetqual: workload \d+/\d+ \| ")


def run_example(fleet, tmp_path, name, hosts, forks=2, extra_vars=None):
    base = str(tmp_path / name)
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts,
                          group_vars={"all": {"fleetqual_matrix": MATRIX}})
    ev = {"fleetqual_progress_interval": INTERVAL}
    ev.update(extra_vars or {})
    return run_playbook(fleet, inv, base, name, extra_vars=ev, args=("--forks", str(forks)),
                        env_extra={"ANSIBLE_CONFIG": EXAMPLE_CFG, "ANSIBLE_STDOUT_CALLBACK": "fleetqual.storage.bounded"})


def split(out):
    lines = out.splitlines()
    rounds = [ln for ln in lines if ROUND_RE.match(ln)]
    return [ln for ln in lines if not ROUND_RE.match(ln)], rounds


@pytest.fixture(scope="module")
def passing(fleet, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("output")
    one = run_example(fleet, tmp, "one", [{"name": "fq71", "inst": fleet.host(71)}])
    eight = run_example(fleet, tmp, "eight", [{"name": "fq%d" % n, "inst": fleet.host(n)} for n in range(71, 79)])
    for run in (one, eight):
        with open(os.path.join(run.base, "output.txt"), "w") as fh:
            fh.write(run.out)
    return one, eight


def test_eight_hosts_print_as_many_lines_as_one(passing):
    one, eight = passing
    assert one.rc == 0, one.out[-4000:]
    assert eight.rc == 0, eight.out[-4000:]
    assert one.summary() == (1, 1, 1, 0, 0, 0) and eight.summary() == (8, 8, 8, 0, 0, 0)
    lines1, rounds1 = split(one.out)
    lines8, rounds8 = split(eight.out)
    pad1 = lines1 + [""] * (len(lines8) - len(lines1))
    pad8 = lines8 + [""] * (len(lines1) - len(lines8))
    assert len(lines1) == len(lines8), "\n".join("%-60.60s | %s" % (a, b) for a, b in zip(pad1, pad8))
    # one progress line per round: at least one, at most the rounds the run's duration spans
    for run, rounds in ((one, rounds1), (eight, rounds8)):
        assert 1 <= len(rounds) <= math.ceil(run.elapsed / INTERVAL) + 1, (len(rounds), run.elapsed)
    # no host is named host by host in a passing run (only the fleet counts)
    for n in range(72, 79):
        assert "fq%d" % n not in eight.out, eight.out
    # what it does print: the validation play's result, each play's count, the fleet summary
    assert re.search(r"^Validate the inputs[^\n]*: 1 host, all ok", eight.out, re.M), eight.out
    assert re.search(r"^Qualify storage: 8 hosts, all ok", eight.out, re.M), eight.out
    # the recap: the 8 hosts and the controller (the validation play) in one line
    assert re.search(r"^9 hosts without a failure : ok=\d+ changed=\d+ unreachable=0 failed=0", eight.out, re.M), eight.out


def test_every_failure_is_printed_on_its_line(fleet, tmp_path):
    foreign = tmp_path / "someone"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n")
    addr, port = fleet.dead_address()
    hosts = [{"name": "fq71", "inst": fleet.host(71)},
             {"name": "fq72", "inst": fleet.host(72),
              "vars": {"fleetqual_thresholds": [{"workload": "out", "min_iops": 1e12}]}},
             {"name": "fq73", "inst": fleet.host(73), "vars": {"fleetqual_test_dir": str(foreign)}},
             {"name": "fq01", "addr": addr, "port": port}]
    run = run_example(fleet, tmp_path, "failing", hosts)
    assert run.rc != 0
    assert run.summary() == (1, 4, 1, 1, 1, 1), run.out[-4000:]
    out = run.out
    # FAIL: the gate's message with the workload, the measured value and the limit
    assert re.search(r"fatal: \[fq72\]: FAILED! => .*fq72: FAIL out-rndrd-t1: IOPS \d+ < limit 1000000000000", out), out
    # ERROR: the refused preflight, its message (the record has it whole), and again at the gate
    assert re.search(r"^fatal: \[fq73\]: FAILED! => preflight of .*%s.* not created by fleetqual\.storage" % re.escape(str(foreign)),
                     out, re.M), out
    assert re.search(r"fatal: \[fq73\]: FAILED! => .*fq73: ERROR", out), out
    # UNREACHABLE: the connection error
    assert re.search(r"fatal: \[fq01\]: UNREACHABLE! =>", out), out
    # the recap: a line per failed host, one for the rest
    for host in ("fq72", "fq73", "fq01"):
        assert re.search(r"^%s : ok=\d+ changed=\d+ unreachable=\d+ failed=\d+" % host, out, re.M), out
    assert re.search(r"^2 hosts without a failure : ", out, re.M), out      # fq71 and the controller
    assert not re.search(r"^fq71 : ", out, re.M)
    assert (foreign / "keep.txt").read_text() == "mine\n"
