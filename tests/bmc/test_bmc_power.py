"""The power methods of the power-cut test (docs/durability.md, "Power actions") against real BMC
services: the qualify role's own task files (power_redfish.yml, power_ipmi.yml), run by
ansible-playbook on the controller for an inventory host that is never contacted, cut and
restore the power of libvirt domains through sushy-tools' Redfish emulator and virtualbmc's
IPMI BMCs (tests/bmc/bmclab.py). libvirt's own state says what each action did."""
import json
import os
import subprocess

import pytest
import yaml

import bmclab
from playbook_run import BIN, ROOT, ansible_env

pytestmark = [pytest.mark.slow]

ROLE_TASKS = os.path.join(ROOT, "roles", "qualify", "tasks")

PLAYBOOK = """
- name: Power each host through its fleetqual_power, as the power-cut test does
  hosts: all
  gather_facts: false
  tasks:
    - name: The qualify role's task file of the host's power method, included per host as its power-cut cycle does
      ansible.builtin.include_tasks: "{{ role_tasks }}/power_{{ fleetqual_power.method }}.yml"
      vars:
        _fleetqual_power_state: "{{ power_state }}"

    - name: Keep what the power action answered
      ansible.builtin.copy:
        content: "{{ _fleetqual_power_answer | to_json }}"
        dest: "{{ answers }}/{{ inventory_hostname }}-{{ power_state }}.json"
        mode: "0600"
      delegate_to: localhost
"""


def power(lab, tmp, state, hosts, label):
    """One ansible-playbook run that sets every host's power to ``state``: (returncode, output,
    {host: the power action's answer})."""
    answers = os.path.join(tmp, "answers-" + label)
    os.makedirs(answers, exist_ok=True)
    inv = os.path.join(tmp, "inventory-%s.yml" % label)
    with open(inv, "w") as fh:
        # the hosts themselves are never contacted: TEST-NET-1 addresses (RFC 5737)
        yaml.safe_dump({"all": {"hosts": {h: dict(v, ansible_host="192.0.2.%d" % (i + 1))
                                          for i, (h, v) in enumerate(hosts.items())}}}, fh)
    pb = os.path.join(tmp, "power.yml")
    with open(pb, "w") as fh:
        fh.write(PLAYBOOK)
    # the checkout's collections and the default output, without the fleet report (nothing
    # here is a qualification run)
    cfg = os.path.join(tmp, "ansible.cfg")
    with open(cfg, "w") as fh:
        fh.write("[defaults]\ncollections_path = %s\nhost_key_checking = False\nretry_files_enabled = False\n"
                 % os.path.join(ROOT, "build", "collections"))
    env = ansible_env({"ANSIBLE_CONFIG": cfg})
    r = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, pb, "-e",
                        json.dumps({"power_state": state, "answers": answers, "role_tasks": ROLE_TASKS})],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, check=False)
    got = {}
    for name in os.listdir(answers):
        with open(os.path.join(answers, name)) as fh:
            got[name.rsplit("-", 1)[0]] = json.load(fh)
    return r.returncode, r.stdout + r.stderr, got


def redfish(lab, **over):
    return dict({"method": "redfish", "baseuri": "127.0.0.1:%d" % lab.redfish_port, "username": bmclab.ADMIN,
                 "password": bmclab.PASSWORD, "resource_id": lab.uuids["fq-redfish"], "ca_path": lab.cert}, **over)


def ipmi(lab):
    return {"method": "ipmi", "name": "127.0.0.1", "port": lab.ipmi_ports["fq-ipmi"], "user": bmclab.ADMIN,
            "password": bmclab.PASSWORD}


def fatal(out, host):
    """The failure ansible-playbook printed for ``host`` (its ``fatal: [host -> localhost]`` line)."""
    lines = [ln for ln in out.splitlines() if ln.startswith("fatal: [%s " % host) or ln.startswith("fatal: [%s]" % host)]
    return lines[0] if lines else ""


def test_redfish_and_ipmi_cut_and_restore_the_power_and_a_refused_bmc_leaves_it(lab, tmp_path):
    tmp = str(tmp_path)
    hosts = {"node-redfish": {"fleetqual_power": redfish(lab)}, "node-ipmi": {"fleetqual_power": ipmi(lab)}}
    # two more hosts whose BMC refuses them, on a machine of their own: validate_certs defaults
    # to true (a certificate no CA the controller knows signed is refused), and a wrong password
    untrusted = {k: v for k, v in redfish(lab, resource_id=lab.uuids["fq-refused"]).items() if k != "ca_path"}
    refused = dict(hosts, **{"node-untrusted": {"fleetqual_power": untrusted},
                             "node-badpass": {"fleetqual_power": redfish(lab, resource_id=lab.uuids["fq-refused"],
                                                                         password="not-the-password")}})
    assert {lab.state(n)[0] for n in lab.uuids} == {"shutoff"}
    rc, out, answers = power(lab, tmp, "on", refused, "on1")
    assert rc != 0, out[-4000:]
    assert "CERTIFICATE_VERIFY_FAILED" in fatal(out, "node-untrusted"), out[-4000:]
    assert "401" in fatal(out, "node-badpass"), out[-4000:]
    assert fatal(out, "node-redfish") == fatal(out, "node-ipmi") == ""
    assert sorted(answers) == ["node-ipmi", "node-redfish"]
    assert lab.state("fq-refused")[0] == "shutoff"
    assert lab.state("fq-redfish")[0] == "running" and lab.state("fq-ipmi")[0] == "running"
    assert answers["node-redfish"]["changed"] is True and answers["node-ipmi"]["powerstate"] == "on"

    rc, out, answers = power(lab, tmp, "off", hosts, "off")
    assert rc == 0, out[-4000:]
    # a forced power-off: the machine stopped at once, not a shutdown its OS was asked for
    assert lab.state("fq-redfish") == ("shutoff", "destroyed"), lab.log("sushy")
    assert lab.state("fq-ipmi") == ("shutoff", "destroyed"), lab.log("vbmcd")
    assert answers["node-redfish"]["changed"] is True and answers["node-ipmi"]["powerstate"] == "off"

    rc, out, answers = power(lab, tmp, "on", hosts, "on2")
    assert rc == 0, out[-4000:]
    assert lab.state("fq-redfish")[0] == "running" and lab.state("fq-ipmi")[0] == "running"
