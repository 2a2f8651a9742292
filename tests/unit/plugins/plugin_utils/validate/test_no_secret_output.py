# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No secret in the validation play's output: the role's validate.yml run by ansible-playbook
at -vvv (Ansible prints an ok task's result from -v on: the validate action's result holds
every host's inputs), for hosts that are never contacted. A BMC password is shown masked,
never in clear, whether the hosts pass or are refused with messages that quote values."""
import os
import subprocess
import sys

import pytest
import yaml
import unitpaths

from ansible_collections.fleetqual.storage.plugins.action.validate_hosts import host_problems
from ansible_collections.fleetqual.storage.plugins.module_utils.common.secrets import MASK

MARKER = "fq-bmc-MARKER-5e1d"
TARGETS = [{"device": "/dev/disk/by-id/nvme-ACME_X200_S4XNA0R812345", "destroy_data": True}]


def redfish(**over):
    return dict({"method": "redfish", "baseuri": "192.0.2.117", "username": "admin", "password": MARKER}, **over)


def run_validation(tmp_path, hosts, *args):
    """ansible-playbook over the role's validate.yml for ``hosts`` ({name: vars}): (returncode,
    stdout + stderr, the text of every file the run wrote under ``tmp_path``)."""
    root = unitpaths.ROOT
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "fleetqual.storage.qualify", "tasks_from": "validate.yml"},
         "vars": {"fleetqual_validate_hosts": "{{ groups['all'] }}"}}]}]))
    inputs = {"inv.yml", "pb.yml"}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_LOG_PATH=str(tmp_path / "ansible.log"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml", "pb.yml",
                          *args], env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    written = {}
    for dirpath, _dirs, files in os.walk(str(tmp_path)):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.relpath(path, str(tmp_path)) not in inputs:
                with open(path, "rb") as fh:
                    written[path] = fh.read().decode("utf-8", "replace")
    return out.returncode, out.stdout + out.stderr, written


def no_marker(text, written):
    lines = [ln for ln in text.splitlines() if MARKER in ln]
    assert not lines, "the marker password is printed:\n" + "\n".join(lines)
    files = sorted(p for p, body in written.items() if MARKER in body)
    assert not files, "the marker password is in %s" % files


@pytest.mark.parametrize("verbosity", [[], ["-vvv"]])
def test_a_valid_host_s_inputs_are_printed_with_the_bmc_password_masked(tmp_path, verbosity):
    hosts = {"db17": {"ansible_host": "192.0.2.17", "fleetqual_profile": "durability", "fleetqual_targets": TARGETS,
                      "fleetqual_power": redfish()},
             # a command method's password comes from the controller's environment: nothing to mask,
             # and a secret-named key anywhere in the inputs is masked all the same
             "db18": {"ansible_host": "192.0.2.18", "fleetqual_profile": "quick",
                      "fleetqual_power": {"method": "ipmi", "name": "192.0.2.118", "user": "admin", "password": MARKER}}}
    rc, text, written = run_validation(tmp_path, hosts, *verbosity)
    assert rc == 0, text[-4000:]
    assert os.path.exists(str(tmp_path / "ansible.log")), sorted(written)
    no_marker(text, written)
    if verbosity:
        # the validate task's result, every host's inputs, is printed: there the password is masked
        shown = [ln for ln in text.splitlines() if '"password": "%s"' % MASK in ln]
        assert len(shown) == 2, text[-6000:]
        assert '"baseuri": "192.0.2.117"' in text and '"name": "192.0.2.118"' in text, text[-6000:]


def test_refused_hosts_messages_quote_no_secret_at_minus_vvv(tmp_path):
    hosts = {
        # a power command given as a shell line with the password on it: refused, shown by its first word
        "db21": {"ansible_host": "192.0.2.21", "fleetqual_profile": "durability", "fleetqual_targets": TARGETS,
                 "fleetqual_power": {"method": "command", "off": "ipmitool -H 192.0.2.121 -P %s power off" % MARKER,
                                     "on": ["ipmitool", "-H", "192.0.2.121", "-E", "power", "on"]}},
        # a message that quotes a value equal to the host's BMC password quotes it masked
        "db22": {"ansible_host": "192.0.2.22", "fleetqual_profile": "durability", "fleetqual_targets": TARGETS,
                 "fleetqual_power": redfish(), "fleetqual_durability": {"cycles": MARKER}},
        # a wrong type Ansible's argument spec refuses
        "db23": {"ansible_host": "192.0.2.23", "fleetqual_power": redfish(timeout=MARKER),
                 "fleetqual_inconclusive": MARKER},
    }
    rc, text, written = run_validation(tmp_path, hosts, "-vvv")
    assert rc != 0, text[-4000:]
    no_marker(text, written)
    assert "host db21: fleetqual_power.off: required for method command" in text, text[-6000:]
    assert "got a string starting with 'ipmitool'" in text, text[-6000:]
    assert "host db22: fleetqual_durability.cycles: must be a whole number" in text, text[-6000:]
    assert "got '%s'" % MASK in text, text[-6000:]
    assert "db23: " in text and "fleetqual_inconclusive" in text, text[-6000:]


def test_the_refusals_themselves_quote_the_secret_unless_masked():
    """What the action's scrub guards against: without it, the validators' own message would
    quote the value (the check above could not fail otherwise)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    validator = ArgumentSpecValidator({"fleetqual_durability": {"type": "dict"}, "fleetqual_power": {"type": "dict"}})
    found = host_problems(validator, {"fleetqual_power": redfish(), "fleetqual_durability": {"cycles": MARKER}},
                          {"fleetqual_profile": "quick"}, "db22")
    assert any(MARKER in p for p in found), found
