# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict gate's inputs (module docs: plugins/modules/fleet_verdicts.py): every play
host's final verdict, its record judged with the fleet judgements (outliers, regressions,
drive consistency, the arrays it is an initiator of, its own history) by verdict.final_verdict, from the records the role left in each host's
``_fleetqual_host_record``. Run once, on the controller; registered, the result reaches
every host of the play."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import callback_loader
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report_config import options_and_baseline

display = Display()

CALLBACK = "fleetqual.storage.qualify_report"
RECORD_VAR = "_fleetqual_host_record"


def report_settings():
    """The qualify_report callback's configured options (ansible.cfg ``[fleetqual_report]``,
    ``FLEETQUAL_REPORT_*``), whether or not the callback is enabled: the report and the gate
    read one configuration."""
    cb = callback_loader.get(CALLBACK)
    if cb is None:
        raise AnsibleActionFail("the callback %s is not installed with this collection" % CALLBACK)
    cb.set_options()
    return cb.get_option


def final_verdicts(records, get_option, warn):
    """{host: {verdict, reasons}} of the hosts with a record ({host: record})."""
    opts, baseline, notes = options_and_baseline(get_option)
    for note in notes:
        warn("%s: %s" % (CALLBACK, note))
    # the records themselves, not entries built from them: the aggregation reads each
    # record's array_run (an array's verdict gates its members) and finds the results
    # directory of the host's own history (drift) from the records' results_file
    fleet = aggregate(records, options=opts, baseline=baseline, detail_hosts=0)
    return {h["host"]: {"verdict": h["verdict"], "reasons": h["reasons"]} for h in fleet["hosts"]}


class ActionModule(ActionBase):
    """fleetqual.storage.fleet_verdicts"""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        hosts = self._task.args.get("hosts") or task_vars.get("ansible_play_hosts_all") or []
        if not isinstance(hosts, list):
            raise AnsibleActionFail("hosts: must be a list of host names, got %r" % (hosts,))
        hostvars = task_vars.get("hostvars") or {}
        records = {}
        for name in hosts:
            try:
                rec = hostvars[name].get(RECORD_VAR)
            except KeyError:
                rec = None
            if isinstance(rec, dict):
                records[str(name)] = rec
        verdicts = final_verdicts(records, report_settings(), display.warning)
        result.update(changed=False, verdicts=verdicts)
        return result
