# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every targeted host's qualification variables checked on the controller in ONE task
(module docs: plugins/modules/validate_hosts.py): for each host, the variables of the role's
argument specification that the host sets (inventory, group_vars, host_vars, extra vars;
each templated in the host's context, as ``hostvars[host][name]``) against that
specification (types, choices: Ansible's own ArgumentSpecValidator, its messages), then
by the collection's validators (plugin_utils/validate.validate_inputs) over the role's
defaults. Fails once, with one line per refused host naming the variable and the closest
valid value. What it returns or says of the inputs is masked (module_utils/common/secrets.py):
the value of a secret key (``fleetqual_power.password``, ...) is ``********`` in the ``inputs``
it returns (printed from ``-v`` on, kept by AWX in the job's output), and any secret value an
error message would quote is replaced by it.

The play this replaces ran a loop item per host in three tasks, one of them
growing a dict with ``combine`` at every item (quadratic): 4 s of controller CPU for 32
hosts, 42 s for 320, 223 s for 1,000. Here the cost per host is its variables' templating
and the checks themselves."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.fleetqual.storage.plugins.module_utils.common.secrets import mask_secrets, scrub, secret_values
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import durability as _durability


def host_problems(validator, inputs, defaults, host=None, connection=None):
    """The problems of one host's ``inputs`` ({variable: value} it sets): the argument
    specification's first (a value of the wrong type or no valid choice is not checked
    further), else the collection's validators over ``defaults`` updated with ``inputs``,
    and for a host the power-cut test would cut, every reason it must not be cut
    (``connection``: how the controller reaches it, ``(ansible_connection, address, port)``)."""
    errors = validator.validate(inputs).error_messages
    if errors:
        return list(errors)
    merged = dict(defaults, **inputs)
    problems = validate_inputs(merged)
    if _durability.power_cut_wanted(merged):
        conn, address, port = connection or (None, host, None)
        problems += _durability.power_cut_refusals(merged, host, conn, address, port,
                                                   merged.get("fleetqual_profile_safety"))
        problems += _durability.durability_settings(merged.get(_durability.DURABILITY_VAR), host)[1]
        problems += _durability.power_tools_missing(merged.get(_durability.POWER_VAR), host)
    elif merged.get(_durability.POWER_VAR) or merged.get(_durability.DURABILITY_VAR):
        problems += _durability.validate_power(merged.get(_durability.POWER_VAR), host)
        problems += _durability.durability_settings(merged.get(_durability.DURABILITY_VAR), host)[1]
    return problems


class ActionModule(ActionBase):
    """fleetqual.storage.validate_hosts"""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts", "spec", "defaults"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        hosts, spec, defaults = args.get("hosts"), args.get("spec"), args.get("defaults") or {}
        if not isinstance(hosts, list):
            raise AnsibleActionFail("hosts: must be a list of host names, got %r" % (mask_secrets(hosts),))
        if not isinstance(spec, dict) or not spec:
            raise AnsibleActionFail("spec: must be the role's argument specification (its options), got %r"
                                    % (mask_secrets(spec),))
        if not isinstance(defaults, dict):
            raise AnsibleActionFail("defaults: must be a mapping of variable -> default, got %r" % (mask_secrets(defaults),))
        hostvars = task_vars.get("hostvars") or {}
        validator = ArgumentSpecValidator(spec)
        inputs, problems = {}, []
        default_secrets = secret_values(defaults)
        for host in hosts:
            host = str(host)
            try:
                hv = hostvars[host]
            except KeyError:
                hv = {}
            if not isinstance(hv, Mapping):     # a host the inventory does not know: Ansible's undefined marker
                hv = {}
            mine = {name: hv[name] for name in spec if name in hv}
            inputs[host] = mask_secrets(mine)
            conn = (hv.get("ansible_connection"), hv.get("ansible_host", host), hv.get("ansible_port"))
            found = host_problems(validator, mine, defaults, host, conn)
            if found:
                # a message that quotes a value (Ansible's type errors, a wrong argv) never quotes a secret
                problems.append(scrub("%s: %s" % (host, "; ".join(found)), secret_values(mine) + default_secrets))
        if problems:
            # the refused hosts' lines only (the fleet report's summary quotes the first line)
            result.update(changed=False, failed=True, problems=problems,
                          msg="%s\n(%d of %d hosts refused before any host was contacted)"
                              % ("\n".join(problems), len(problems), len(hosts)))
        else:
            result.update(changed=False, inputs=inputs, problems=[], msg="%d hosts' variables are valid" % len(hosts))
        return result
