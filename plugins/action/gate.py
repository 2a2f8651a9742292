# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict gate of one host (module docs: plugins/modules/gate.py), in one task: a host
the start found unreachable is tried again (``ansible.builtin.ping``: still unreachable, the
task is unreachable), a host whose verdict fails the gate fails with its verdict and reasons,
a host not failed whose verdict is not PASS (INCONCLUSIVE with ``fleetqual_inconclusive:
warn``) is printed with its reasons and warned about. One worker per host instead of a task
for each case (each a fork even when skipped).

What it prints is bounded whatever the record holds (plugin_utils/report/brief.py): the verdict, the
first reasons, each cut, and the record's file for the rest (docs/report.md, "Where the full
record is"); ``reasons`` holds the reasons as printed, in the result of a host not failed (a
failed host's are in its ``msg``, which ansible-core prints twice already)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import brief


def gate_message(host, verdict):
    """``host: VERDICT reason; reason; reason (+N more in <record>)`` (the fail and the warning
    say the same; brief.message)."""
    return brief.message(host, verdict.get("verdict"), verdict.get("reasons"), verdict.get("results_file"))


def check_verdict(verdict):
    """The verdict argument as the fleet_verdicts action gives it, or AnsibleActionFail."""
    if not isinstance(verdict, dict) or not isinstance(verdict.get("verdict"), str) \
            or not isinstance(verdict.get("fails"), bool) or not isinstance(verdict.get("reasons", []), list):
        raise AnsibleActionFail("verdict: expected {verdict: str, reasons: list, fails: bool} "
                                "(a host of fleet_verdicts' verdicts), got %r" % (verdict,))
    return verdict


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("verdict", "unreachable"))   # ActionBase.run refuses any other

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        verdict = check_verdict(args.get("verdict"))
        host = (task_vars or {}).get("inventory_hostname", "?")
        if args.get("unreachable"):
            # unreachable at the start of its batch: still so? (an AnsibleConnectionFailure here
            # makes this task unreachable, as the separate ping task did)
            pinged = self._execute_module(module_name="ansible.legacy.ping", module_args={}, task_vars=task_vars)
            result["pinged"] = not pinged.get("failed")
        msg = gate_message(host, verdict)
        if result.get("pinged") and verdict["verdict"] == "UNREACHABLE":
            # away when its batch started, back now: still not measured
            msg += " (it answers now: qualify it again)"
        result.update(verdict=verdict["verdict"], fails=verdict["fails"])
        if verdict["fails"]:
            result.update(failed=True, msg=msg)
        elif verdict["verdict"] != "PASS":
            # fleetqual_inconclusive: warn -- not failed, but never silent
            note = "%s (not failed: fleetqual_inconclusive is warn)" % msg
            result.update(msg=note, _ansible_verbose_always=True)
            result.setdefault("warnings", []).append(note)
        else:
            result["msg"] = msg
        if not verdict["fails"]:
            result["reasons"] = brief.reasons(verdict.get("reasons"), verdict.get("results_file"))[0]
        return result
