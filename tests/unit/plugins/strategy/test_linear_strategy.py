"""The strategy fleetqual.storage.linear (plugins/strategy/linear.py): ansible-core's linear
strategy whose wait for a free fork sleeps between its looks. What it must keep is linear's
order: every host's task before the next task, never more hosts at once than forks. What it
saves (the controller's CPU while every fork is busy) is measured in bench/, not asserted."""
import json
import os
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, strategies as st

import unitpaths

from ansible_collections.fleetqual.storage.plugins.strategy import linear

ROOT = unitpaths.ROOT


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10), st.none(), st.text(max_size=5)))
def test_the_pause_between_looks_is_the_setting_but_never_under_the_floor(value):
    pause = linear.fork_poll_s(value)
    assert pause >= linear.MIN_FORK_POLL_S
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is not None and number >= linear.MIN_FORK_POLL_S:
        assert pause == number
    else:
        assert pause == linear.MIN_FORK_POLL_S


class Worker:
    def __init__(self, alive):
        self.alive = alive

    def is_alive(self):
        return self.alive


@given(st.lists(st.sampled_from(["never used", "running", "ended"]), min_size=1, max_size=60))
def test_a_fork_is_free_when_one_slot_was_never_used_or_its_worker_ended(slots):
    workers = [None if s == "never used" else Worker(s == "running") for s in slots]
    assert linear.has_free_fork(workers) == any(s != "running" for s in slots)


def playbook(tmp_path, tasks, hosts, forks):
    """``ansible-playbook`` of one play of ``tasks`` under fleetqual.storage.linear over
    ``hosts`` local-connection hosts h0, h1, ... at ``forks`` forks: the completed process."""
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False,
                                                      "strategy": "fleetqual.storage.linear", "tasks": tasks}]))
    inv = {"all": {"hosts": {"h%d" % i: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                             for i in range(hosts)}}}
    (tmp_path / "inv.yml").write_text(json.dumps(inv))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml", "pb.yml",
                           "--forks", str(forks)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), check=False)


def run_play(tmp_path, hosts, forks, tasks=2, seconds=0.6):
    """Each host runs ``tasks`` tasks that append their start and end (ns since the epoch) to a
    log; returns (rc, output, the log's entries in time order)."""
    log = tmp_path / "steps.log"
    steps = [{"name": "step %d" % i, "ansible.builtin.shell": (
        "echo \"$(date +%%s%%N) start %d {{ inventory_hostname }}\" >> %s; sleep %s; "
        "echo \"$(date +%%s%%N) end %d {{ inventory_hostname }}\" >> %s" % (i, log, seconds, i, log)),
        "changed_when": False} for i in range(tasks)]
    p = playbook(tmp_path, steps, hosts, forks)
    entries = []
    if log.exists():
        for line in log.read_text().splitlines():
            t, what, task, host = line.split()
            entries.append((int(t), what, int(task), host))
    return p.returncode, p.stdout + p.stderr, sorted(entries)


@pytest.mark.slow
@pytest.mark.parametrize("hosts,forks", [(5, 2), (3, 1)])
def test_more_hosts_than_forks_run_in_linear_order_never_more_at_once_than_forks(tmp_path, hosts, forks):
    rc, out, entries = run_play(tmp_path, hosts, forks)
    assert rc == 0, out[-3000:]
    names = {"h%d" % i for i in range(hosts)}
    for task in (0, 1):
        assert {h for _t, w, k, h in entries if w == "start" and k == task} == names, entries
    # lock-step: every host's step 0 ended before any host's step 1 began
    last_end_0 = max(t for t, w, k, _h in entries if w == "end" and k == 0)
    first_start_1 = min(t for t, w, k, _h in entries if w == "start" and k == 1)
    assert last_end_0 < first_start_1, entries
    # never more than `forks` hosts inside a task at any instant (how many were, at most, is the
    # machine's: a loaded one may start the second fork's task after the first ended)
    running, most = 0, 0
    for _t, what, _k, _h in entries:
        running += 1 if what == "start" else -1
        most = max(most, running)
    assert 1 <= most <= forks, (most, entries)


@pytest.mark.slow
def test_a_failing_host_is_failed_and_the_others_go_on_as_with_linear(tmp_path):
    """A host whose first task fails does not run the second; the others run both (linear's
    rule), and the recap says so."""
    log = tmp_path / "fail.log"
    steps = [{"name": "first", "ansible.builtin.command": "test {{ inventory_hostname }} != h1", "changed_when": False},
             {"name": "second", "ansible.builtin.shell": "echo {{ inventory_hostname }} >> %s" % log,
              "changed_when": False}]
    p = playbook(tmp_path, steps, 4, 2)
    assert p.returncode == 2, p.stdout[-3000:]
    assert sorted(log.read_text().split()) == ["h0", "h2", "h3"]
    assert "h1                         : ok=0    changed=0    unreachable=0    failed=1" in p.stdout, p.stdout[-2000:]
