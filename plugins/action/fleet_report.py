# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report of a whole run from its run directory (module docs:
plugins/modules/fleet_report.py; playbooks/report.yml): run_store.aggregate_run, then
report.publish, with the qualify_report callback's options."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.summary import run_summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.publish import publish
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.config import (
    CALLBACK,
    default_results_dir,
    options_and_baseline,
    report_settings,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.run_store import aggregate_run

display = Display()


def report_run(run_id, results_dir, get_option, out):
    """Report the run ``<results_dir>/<run_id>``: returns its summary (fleet_summary.run_summary)
    with ``run_dir``, ``limit_file`` and ``written``. ``out``: where the table goes (Display)."""
    if not run_id:
        raise ValueError("fleetqual_run_id is not set: pass -e fleetqual_run_id=<run id>")
    root = str(results_dir or default_results_dir())
    run_dir = os.path.join(root, str(run_id))
    if not os.path.isdir(run_dir):
        raise ValueError("no run directory %s (fleetqual_results_dir=%s, fleetqual_run_id=%s)" % (run_dir, root, run_id))
    opts, baseline, notes = options_and_baseline(get_option)
    for note in notes:
        out.warning("%s: %s" % (CALLBACK, note))
    fleet = aggregate_run(run_dir, options=opts, baseline=baseline, detail_hosts=int(get_option("html_detail_hosts") or 0))
    fleet["notes"].extend(notes)
    # history.jsonl: each qualify run (slice, re-run) appended its own hosts already
    written = publish(fleet, root, run_dir, get_option, out, history=False)
    summary = run_summary(fleet)
    summary.update(run_dir=run_dir, limit_file=written.get("limit"), written=written)
    return summary


class ActionModule(ActionBase):
    """fleetqual.storage.fleet_report"""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("run_id", "results_dir"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        try:
            summary = report_run(args.get("run_id"), args.get("results_dir"), report_settings(), display)
        except ValueError as exc:
            raise AnsibleActionFail(str(exc))
        result.update(summary)
        result["changed"] = False
        return result
