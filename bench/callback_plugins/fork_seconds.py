# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fork-seconds per host, for bench/bench_fleet_scale.py only (not part of the collection).

Enabled by the bench alone::

    ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins
    ANSIBLE_CALLBACKS_ENABLED=fleetqual.storage.qualify_report,fork_seconds
    FQ_FORK_SECONDS_FILE=/path/to/out.json

For every task result of a host, the time from ``v2_runner_on_start`` (the strategy has handed
the host's task to a worker process) to its result (``v2_runner_on_ok`` / ``failed`` /
``skipped`` / ``unreachable``, as the controller's main process receives it) is what a worker
was busy for that host. Summed per host. Kept apart:

* tasks delegated (``delegate_to``) or ``run_once``: one worker for the whole fleet, not a
  per-host cost (``_delegated``, by task name);
* tasks of the host ``localhost`` (the validation play): ``_controller``;
* per host, the part spent in the job's wait (``fleetqual.storage.job`` with ``state: wait``,
  the polls; since the two-module-run path ``fleetqual.storage.qualify_host`` with ``state: finished``,
  which also holds the one cleanup module run and the judge/store): a fork held while the
  host's job measures, mostly not Ansible's own work (``wait_s``).

At the end of the run (``v2_playbook_on_stats``) one JSON document is written to
``$FQ_FORK_SECONDS_FILE``: ``{"hosts": {host: {"fork_s", "wait_s", "tasks"}}, "by_task":
{name: seconds over the fleet hosts}, "_delegated": {...}, "_controller": {...}}``.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: fork_seconds
type: aggregate
short_description: Sum, per host, the time workers are busy with its tasks (bench only)
description:
  - Writes the per-host sums to the file named by the environment variable FQ_FORK_SECONDS_FILE.
requirements:
  - enabled in callbacks_enabled
"""

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

from ansible.plugins.callback import CallbackBase  # noqa: E402


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fork_seconds"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._start = {}
        self._hosts = {}
        self._by_task = {}
        self._delegated = {}
        self._controller = {}

    def v2_runner_on_start(self, host, task):
        self._start[(host.get_name(), task._uuid)] = time.monotonic()

    @staticmethod
    def _is_wait(task):
        args = task.args or {}
        # before the two-module-run path: fleetqual.storage.job state=wait (module polls); after it:
        # fleetqual.storage.qualify_host state=finished (raw polls, then the one cleanup module
        # run and the judge/store on the controller, all in that one task)
        return ((task.action.endswith(".job") and args.get("state") == "wait")
                or (task.action.endswith(".qualify_host") and args.get("state") == "finished"))

    def _end(self, result):
        host = result._host.get_name()
        task = result._task
        t0 = self._start.pop((host, task._uuid), None)
        if t0 is None:
            return
        dt = time.monotonic() - t0
        name = task.get_name()
        if host == "localhost" and not task.delegate_to:
            self._controller[name] = self._controller.get(name, 0.0) + dt
        elif task.delegate_to or task.run_once:
            self._delegated[name] = self._delegated.get(name, 0.0) + dt
        else:
            h = self._hosts.setdefault(host, {"fork_s": 0.0, "wait_s": 0.0, "tasks": 0})
            h["fork_s"] += dt
            h["tasks"] += 1
            if self._is_wait(task):
                h["wait_s"] += dt
            self._by_task[name] = self._by_task.get(name, 0.0) + dt

    v2_runner_on_ok = _end
    v2_runner_on_skipped = _end
    v2_runner_on_unreachable = _end

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._end(result)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("FQ_FORK_SECONDS_FILE")
        if not path:
            return
        doc = {"hosts": self._hosts, "by_task": self._by_task, "_delegated": self._delegated,
               "_controller": self._controller}
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
