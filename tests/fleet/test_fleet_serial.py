"""A fleet qualified in batches (``fleetqual_serial``): a batch in which every host fails,
and a batch in which every host is unreachable, must not stop the batches after them, and the
hosts of later batches are still judged.

One playbook run (module fixture ``batches``) of six hosts, ``-e fleetqual_serial=2`` ->
batches [fq11, fq12], [fq01, fq02], [fq13, fq14] (inventory order). Every live host runs a
one-workload matrix of 2 s: the batch behaviour is what is tested.

* ``test_batch_of_failed_hosts``: batch 1 = one host failing its thresholds (FAIL) and one
  whose preflight refuses its test directory (ERROR). Both are recorded by the role's
  block/rescue rather than failed, so the next batches run.
* ``test_batch_of_unreachable_hosts``: batch 2 = two inventory hosts with no sshd. Ansible
  ends a play when *every* host of a serial batch failed or was unreachable
  (PlaybookExecutor: ``len(batch) == failed_hosts_count`` -> break), which would skip
  batch 3 and the verdict gate. The playbook therefore gathers facts itself with
  ``ignore_unreachable`` and ends an unreachable host with ``meta: end_host`` (see
  playbooks/qualify.yml), so the host is reported UNREACHABLE and later batches run.
* Both: batch 3 runs and passes after them.
"""
import os

import pytest

import fleetlib

from fleetrun import run_playbook

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

MATRIX = [{"workload": "batch", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
           "block_size": "16K", "direct": True, "time": 2, "warmup": 1, **fleetlib.PACE}]


def batches_started(out):
    return out.count("PLAY [Qualify storage]")


def inventory(fleet, path, first_batches):
    hosts = list(first_batches) + [{"name": "fq13", "inst": fleet.host(13)}, {"name": "fq14", "inst": fleet.host(14)}]
    return fleet.inventory(path, hosts, group_vars={"all": {"fleetqual_matrix": MATRIX}})


@pytest.fixture(scope="module")
def batches(fleet, tmp_path_factory):
    """The run of the three batches, and the foreign directory fq12 was pointed at."""
    base = tmp_path_factory.mktemp("serial")
    foreign = base / "someone"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n")
    addr, port = fleet.dead_address()
    path = inventory(fleet, str(base / "inventory"), [
        {"name": "fq11", "inst": fleet.host(11),
         "vars": {"fleetqual_thresholds": [{"workload": "batch", "min_iops": 1e12}]}},
        {"name": "fq12", "inst": fleet.host(12), "vars": {"fleetqual_test_dir": str(foreign)}},
        {"name": "fq01", "addr": addr, "port": port},
        {"name": "fq02", "addr": addr, "port": port},
    ])
    run = run_playbook(fleet, path, str(base), "serial", extra_vars={"fleetqual_serial": 2})
    return run, foreign


def check_last_batch(run):
    for name in ("fq13", "fq14"):
        rec = run.record(name)
        assert rec["verdict"] == "PASS", (name, rec["reasons"])
        assert len(rec["workloads"]) == 1 and rec["workloads"][0]["metrics"]["iops"] > 0
    assert batches_started(run.out) == 3, run.out[-3000:]
    assert run.rc == 4, run.out[-3000:]         # unreachable hosts: exit 4, before failed hosts' 2
    assert run.summary() == (2, 6, 2, 1, 2, 1), run.out[-3000:]
    assert run.fleet()["summary"]["by_verdict"] == {"PASS": 2, "FAIL": 1, "UNREACHABLE": 2, "ERROR": 1, "INCONCLUSIVE": 0}


def test_batch_of_failed_hosts(batches):
    run, foreign = batches
    assert run.record("fq11")["verdict"] == "FAIL"
    assert run.record("fq12")["verdict"] == "ERROR"
    check_last_batch(run)
    assert (foreign / "keep.txt").read_text() == "mine\n"


def test_batch_of_unreachable_hosts(batches):
    run, _foreign = batches
    check_last_batch(run)
    fj = run.fleet()
    for name in ("fq01", "fq02"):
        h = next(h for h in fj["hosts"] if h["host"] == name)
        assert h["verdict"] == "UNREACHABLE" and h["record_verdict"] is None
        assert not run.has_record(name)
    # the verdict gate still ran and failed the unreachable hosts too (exit code)
    assert "Gate on the verdict" in run.out


def test_unreachable_host_in_a_mixed_batch(fleet, tmp_path):
    """Without serial: one dead host among live ones is UNREACHABLE, the others PASS."""
    addr, port = fleet.dead_address()
    path = inventory(fleet, str(tmp_path / "inventory"), [{"name": "fq01", "addr": addr, "port": port}])
    run = run_playbook(fleet, path, str(tmp_path), "mixed")
    assert run.rc != 0
    assert run.summary() == (2, 3, 2, 0, 1, 0), run.out[-3000:]
    assert batches_started(run.out) == 1
    assert not os.path.exists(os.path.join(run.results_dir(), "fq01.json"))
