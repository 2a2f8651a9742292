# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: linear
short_description: The linear strategy, waiting for a free fork without spinning
version_added: "0.4.0"
description:
  - Runs a play exactly as P(ansible.builtin.linear#strategy) does (task by task, in lock-step
    across the hosts of each C(serial) batch, at most C(forks) hosts at once), and hands each
    task to the same worker processes.
  - The one difference is how the controller waits for a free fork. When a task is still
    running on as many hosts as there are forks, the next host's task waits for one of them
    to end. ansible-core's strategies wait in a loop that checks the forks every 0.1 ms, so
    the controller's main process spends about a sixth of a CPU core on that loop for as long
    as the wait lasts. With this collection, the wait for a host's measurement job keeps a fork
    for the job's whole length, so a fleet larger than C(forks) spends most of the run there.
  - This strategy checks the forks every C(internal_poll_interval) seconds instead (ansible.cfg
    C([defaults]); at least 5 ms, whatever that setting says), and only then queues the task,
    as linear does. A task starts at most that long after a fork comes free.
  - Measured on a 2-core machine, 3 hosts at C(forks = 1), a 15 s task on each - the main
    process used 17 % of a core while it waited with P(ansible.builtin.linear#strategy), and
    0.6 % with this strategy and C(internal_poll_interval = 0.01).
notes:
  - Enable it in ansible.cfg C([defaults]) with C(strategy = fleetqual.storage.linear), as
    C(examples/ansible.cfg) does, or per play with C(strategy). Nothing else changes - a play
    that sets its own C(strategy) keeps it.
  - C(internal_poll_interval) also paces ansible-core's wait for the results of running
    tasks (every 1 ms by default, about 5 % of a core for as long as any task runs);
    C(examples/ansible.cfg) sets it to 0.01.
seealso:
  - name: Controlling playbook execution - strategies and more
    description: Ansible's documentation of strategies and forks.
    link: https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_strategies.html
author:
  - fleetqual.storage developers (!UNKNOWN)
"""

import time

from ansible import constants as C
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

# the shortest pause between two looks at the forks, whatever internal_poll_interval says
MIN_FORK_POLL_S = 0.005


def fork_poll_s(internal_poll_interval):
    """Seconds between two looks at the forks while every one is busy."""
    try:
        return max(MIN_FORK_POLL_S, float(internal_poll_interval))
    except (TypeError, ValueError):
        return MIN_FORK_POLL_S


def has_free_fork(workers):
    """Whether a task can be handed to a worker slot now: one never used, or whose process
    has ended (what ansible-core's ``_queue_task`` looks for)."""
    return any(w is None or not w.is_alive() for w in workers)


class StrategyModule(LinearStrategyModule):
    """P(ansible.builtin.linear#strategy), whose wait for a free fork sleeps between its
    looks (see DOCUMENTATION)."""

    def _queue_task(self, host, task, task_vars, play_context):
        pause = fork_poll_s(C.DEFAULT_INTERNAL_POLL_INTERVAL)
        # pylint: disable-next=protected-access
        while self._workers and not has_free_fork(self._workers) and not self._tqm._terminated:
            time.sleep(pause)
        super()._queue_task(host, task, task_vars, play_context)
