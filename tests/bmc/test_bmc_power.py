"""The power methods of the power-cut test (docs/durability.md, "Power actions") against real BMC
services: the qualify role's own task files (power_redfish.yml, power_ipmi.yml), run by
ansible-playbook on the controller for an inventory host that is never contacted, cut and
restore the power of libvirt domains through sushy-tools' Redfish emulator and virtualbmc's
IPMI BMCs (tests/bmc/bmclab.py). libvirt's own state says what each action did. No BMC
password is in any line of the output or any file the run writes, at any verbosity."""
import json
import os
import subprocess
import sys

import pytest
import yaml

import bmclab
from playbook_run import BIN, ROOT, ansible_env

pytestmark = [pytest.mark.slow, pytest.mark.long]

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


def power(lab, tmp, state, hosts, label, args=(), env=None):
    """One ansible-playbook run that sets every host's power to ``state``: (returncode, output,
    {host: the power action's answer}). ``args``: more of ansible-playbook's (-vvv); ``env``:
    more of its environment."""
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
    env = ansible_env(dict({"ANSIBLE_CONFIG": cfg}, **(env or {})))
    r = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, pb, "-e",
                        json.dumps({"power_state": state, "answers": answers, "role_tasks": ROLE_TASKS}), *args],
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


def fatal(out, host, censored=False):
    """The failure ansible-playbook printed for ``host`` (its ``fatal: [host]`` line, with the
    result's lines that follow it at -vvv, joined): the one in words, or with ``censored`` the
    power action's own, which no_log hides."""
    lines, found = out.splitlines(), []
    for i, ln in enumerate(lines):
        if ln.startswith("fatal: [%s " % host) or ln.startswith("fatal: [%s]" % host):
            block = [ln]
            if ln.endswith("{"):            # -vvv: the result indented, to a closing brace of its own
                for more in lines[i + 1:]:
                    block.append(more.strip())
                    if more == "}":
                        break
            found.append(" ".join(block))
    found = [f for f in found if ('"censored"' in f) == censored]
    return found[0] if found else ""


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
    # the refusal in words: the BMC's address and what the module said (its arguments hidden)
    assert "CERTIFICATE_VERIFY_FAILED" in fatal(out, "node-untrusted"), out[-4000:]
    assert "401" in fatal(out, "node-badpass"), out[-4000:]
    assert ("the power action (method redfish, on) through the BMC at 127.0.0.1:%d failed: " % lab.redfish_port
            in fatal(out, "node-badpass")), out[-4000:]
    assert fatal(out, "node-badpass", censored=True), out[-4000:]
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


# A command method's power action, as docs/durability.md says to give it a BMC password: from the
# controller's environment (FQ_BMC_PASSWORD here), never on its argv. It resets a system through
# the lab's Redfish emulator (the PDU, relay or hypervisor of a real lab), idempotent as the
# BMC methods are.
COMMAND = """
import base64, json, os, ssl, sys, urllib.request
base, system, cafile, state = sys.argv[1:5]
auth = base64.b64encode(("admin:" + os.environ["FQ_BMC_PASSWORD"]).encode()).decode()
ctx = ssl.create_default_context(cafile=cafile)
def call(path, body=None):
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Basic " + auth, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return json.loads(r.read() or b"{}")
now = call("/redfish/v1/Systems/" + system)["PowerState"]
if now.lower() != state:
    call("/redfish/v1/Systems/%s/Actions/ComputerSystem.Reset" % system, {"ResetType": "On" if state == "on" else "ForceOff"})
"""
WRONG = "fq-wrong-MARKER-91c2"         # a wrong BMC password, refused
ON_ARGV = "fq-argv-MARKER-3b77"        # what must never be done (a secret on a command's argv), hidden all the same


def secret_lines(text, markers):
    return [ln for ln in text.splitlines() if any(m in ln for m in markers)]


def files_with(tmp, markers, inputs):
    """The files under ``tmp`` (the run's log, temporary files, the answers kept) that hold a
    marker, the run's own inputs (inventories, the command) apart."""
    found = []
    for dirpath, _dirs, files in os.walk(tmp):
        for name in files:
            path = os.path.join(dirpath, name)
            if name in inputs or name.startswith("inventory-"):
                continue
            with open(path, "rb") as fh:
                body = fh.read()
            if any(m.encode() in body for m in markers):
                found.append(path)
    return found


@pytest.mark.parametrize("verbosity", ["default", "-vvv"])
def test_no_bmc_password_in_any_line_or_file_of_a_power_run(lab, tmp_path, verbosity):
    tmp = str(tmp_path)
    script = os.path.join(tmp, "bmc_reset.py")
    with open(script, "w") as fh:
        fh.write(COMMAND)
    base = "https://127.0.0.1:%d" % lab.redfish_port

    def command():
        return {"method": "command", "off": [sys.executable, script, base, lab.uuids["fq-refused"], lab.cert, "off"],
                "on": [sys.executable, script, base, lab.uuids["fq-refused"], lab.cert, "on"]}

    failing_command = {"method": "command", "off": [sys.executable, "-c", "import sys; sys.exit(3)", ON_ARGV],
                       "on": [sys.executable, "-c", "import sys; sys.exit(3)", ON_ARGV]}
    hosts = {"node-redfish": {"fleetqual_power": redfish(lab)}, "node-ipmi": {"fleetqual_power": ipmi(lab)},
             "node-command": {"fleetqual_power": command()},
             "node-badpass": {"fleetqual_power": redfish(lab, password=WRONG)},
             "node-cmdfail": {"fleetqual_power": failing_command}}
    markers = (bmclab.PASSWORD, WRONG, ON_ARGV)
    args = [] if verbosity == "default" else ["-vvv"]
    env = {"FQ_BMC_PASSWORD": bmclab.PASSWORD, "ANSIBLE_LOG_PATH": os.path.join(tmp, "ansible.log"),
           "ANSIBLE_LOCAL_TEMP": os.path.join(tmp, "ansible-local-tmp"),
           "ANSIBLE_REMOTE_TEMP": os.path.join(tmp, "ansible-remote-tmp")}
    for state in ("on", "off"):
        rc, out, answers = power(lab, tmp, state, hosts, "%s-%s" % (state, verbosity), args, env)
        assert rc != 0, out[-4000:]             # node-badpass and node-cmdfail fail
        assert not secret_lines(out, markers), "\n".join(secret_lines(out, markers))
        assert not files_with(tmp, markers, {"bmc_reset.py", "power.yml", "ansible.cfg"}), files_with(
            tmp, markers, {"bmc_reset.py", "power.yml", "ansible.cfg"})
        assert os.path.getsize(os.path.join(tmp, "ansible.log")) > 0
        if args:
            assert "task path:" in out and "ESTABLISH LOCAL CONNECTION" in out, out[-4000:]
        # the power actions did what they were asked, the refused ones say why in words
        want = "running" if state == "on" else "shutoff"
        for node, domain in (("node-redfish", "fq-redfish"), ("node-ipmi", "fq-ipmi"), ("node-command", "fq-refused")):
            assert fatal(out, node) == "", out[-4000:]
            assert lab.state(domain)[0] == want, (node, lab.state(domain), out[-4000:])
        assert sorted(answers) == ["node-command", "node-ipmi", "node-redfish"], out[-4000:]
        assert "401" in fatal(out, "node-badpass"), out[-4000:]
        assert "the power command %s (%s) failed: exit status 3" % (sys.executable, state) in fatal(out, "node-cmdfail"), \
            out[-4000:]
        assert fatal(out, "node-cmdfail", censored=True) and fatal(out, "node-badpass", censored=True), out[-4000:]
