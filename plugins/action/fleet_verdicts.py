# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict gate's inputs (module docs: plugins/modules/fleet_verdicts.py): every play
host's final verdict, its record judged with the fleet judgements (outliers, regressions,
drive consistency, the arrays it is an initiator of, its own history) by verdict.final_verdict, from the records the role left in each host's
``_fleetqual_result`` (the ``record`` the action ``qualify_host`` returned), and whether the gate fails it (``fails``: verdict.exit_fails
with the host's INCONCLUSIVE policy, the ``inconclusive`` argument: the role variable
``fleetqual_inconclusive``), and the file of its record (``results_file``: the gate names it for
the reasons it does not print, plugin_utils/report/brief.py). Run once, on the controller; registered,
the result reaches every host of the play."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.aggregate import aggregate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.config import (
    CALLBACK,
    options_and_baseline,
    report_settings,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.verdict import INCONCLUSIVE_POLICIES, exit_fails

display = Display()

RECORD_VAR = "_fleetqual_result"     # registered by the role's qualify_host tasks; its "record"
POLICY_VAR = "fleetqual_inconclusive"
DEFAULT_POLICY = "fail"


def inconclusive_policies(value, hosts):
    """``{host: fail | warn}`` from the ``inconclusive`` argument: one policy for every host
    (a string; None: ``fail``) or a policy per host (a mapping; a host not in it, or None:
    ``fail``). A value that is no policy raises AnsibleActionFail naming the host, the
    variable and the closest policy."""
    if value is None or isinstance(value, str):
        given = dict.fromkeys(hosts, value)
    elif isinstance(value, dict):
        given = {str(h): value.get(h) for h in hosts}
    else:
        raise AnsibleActionFail("inconclusive: must be %s or a mapping of host -> %s (%s), got %s"
                                % (" or ".join(INCONCLUSIVE_POLICIES), " | ".join(INCONCLUSIVE_POLICIES),
                                   POLICY_VAR, type(value).__name__))
    out, errors = {}, []
    for host, policy in given.items():
        if policy is None:
            policy = DEFAULT_POLICY
        if policy not in INCONCLUSIVE_POLICIES:
            close = difflib.get_close_matches(str(policy), INCONCLUSIVE_POLICIES, n=1, cutoff=0.5)
            errors.append("host %s: %s must be %s, got %r%s" % (
                host, POLICY_VAR, " or ".join(INCONCLUSIVE_POLICIES), policy,
                " (did you mean %s?)" % close[0] if close else ""))
        out[str(host)] = policy
    if errors:
        raise AnsibleActionFail("inconclusive: %s" % "; ".join(errors))
    return out


def host_var(hostvars, host, name):
    """``name`` of ``host``'s variables as it was registered, not templated (None when the host
    or the variable is not there). The records are data an action returned, never a template:
    ``hostvars[host][name]`` would run the whole record through the templating engine, which
    cost ansible-core 2.19 about 0.5 s of controller CPU per host for a 70 KB record
    (py-spy over a 32-host run, bench/RESULTS-fleet.md); ``HostVars.raw_get`` hands over the
    host's variables as they are."""
    raw_get = getattr(hostvars, "raw_get", None)
    try:
        hv = raw_get(host) if raw_get is not None else hostvars[host]
        return hv.get(name) if isinstance(hv, Mapping) else None
    except (KeyError, AttributeError):
        return None


def final_verdicts(records, get_option, warn, inconclusive=None):
    """{host: {verdict, reasons, fails}} of the hosts with a record ({host: record});
    ``fails``: whether the verdict gate fails the host (verdict.exit_fails with the host's
    policy from ``inconclusive``, see :func:`inconclusive_policies`; default ``fail``);
    ``results_file``: the host's record, when it names it."""
    policies = inconclusive_policies(inconclusive, list(records))
    opts, baseline, notes = options_and_baseline(get_option)
    for note in notes:
        warn("%s: %s" % (CALLBACK, note))
    # the records themselves, not entries built from them: the aggregation reads each
    # record's array_run (an array's verdict gates its members) and finds the results
    # directory of the host's own history (drift) from the records' results_file
    fleet = aggregate(records, options=opts, baseline=baseline, detail_hosts=0)
    out = {}
    for h in fleet["hosts"]:
        policy = policies.get(h["host"], DEFAULT_POLICY)
        out[h["host"]] = {"verdict": h["verdict"], "reasons": h["reasons"],
                          "fails": exit_fails(h["verdict"], {"inconclusive": policy})}
        results_file = (records.get(h["host"]) or {}).get("results_file")
        if results_file:
            out[h["host"]]["results_file"] = results_file
    return out


class ActionModule(ActionBase):
    """fleetqual.storage.fleet_verdicts"""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts", "inconclusive"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        hosts = self._task.args.get("hosts") or task_vars.get("ansible_play_hosts_all") or []
        if not isinstance(hosts, list):
            raise AnsibleActionFail("hosts: must be a list of host names, got %r" % (hosts,))
        hostvars = task_vars.get("hostvars") or {}
        # checked before the records are read: a policy that is none fails the task, never a host silently
        inconclusive_policies(self._task.args.get("inconclusive"), [str(h) for h in hosts])
        records = {}
        for name in hosts:
            rec = (host_var(hostvars, name, RECORD_VAR) or {}).get("record")
            if isinstance(rec, dict):
                records[str(name)] = rec
        verdicts = final_verdicts(records, report_settings(), display.warning, self._task.args.get("inconclusive"))
        result.update(changed=False, verdicts=verdicts)
        return result
