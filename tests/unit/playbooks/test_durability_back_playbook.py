"""After a power cut's power-on (roles/qualify/tasks/durability_back.yml, docs/durability.md): a host
that answers again goes on; one that does not fails with a message that quotes what the power
action answered, so that the host's ERROR says whether the BMC took the power-on. Run by
ansible-playbook on two hosts: one reached by the local connection, one whose SSH port nothing
listens on (a machine that stayed off)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import yaml
import unitpaths

ROOT = unitpaths.ROOT
TASKS = os.path.join(ROOT, "roles", "qualify", "tasks", "durability_back.yml")
# what community.general.ipmi_power answers (its documented return values) when the BMC took it
ANSWER = {"changed": True, "powerstate": "on", "status": [{"targetAddress": 0, "powerstate": "on"}],
          "invocation": {"module_args": {"password": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}}}


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]       # closed again once the socket is: nothing listens there


def test_a_host_that_does_not_come_back_fails_quoting_the_power_answer_and_one_that_does_goes_on(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    keep = {"delegate_to": "localhost", "ansible.builtin.copy": {"mode": "0600"}}
    # the role's rescue reads the failed task and its message as here (roles/qualify/tasks/main.yml)
    play = {"name": "After the power-on", "hosts": "all", "gather_facts": False,
            "vars": {"_fleetqual_dur": {"settings": {"boot_timeout_s": 3}}, "_fleetqual_power_answer": ANSWER,
                     "fleetqual_power": {"method": "ipmi"}},
            "tasks": [{"name": "As the role does", "block": [
                {"name": "The role's task file", "ansible.builtin.include_tasks": TASKS},
                dict(keep, name="Went on", **{"ansible.builtin.copy": dict(
                    keep["ansible.builtin.copy"], content="went on", dest="%s/{{ inventory_hostname }}.on" % out)})],
                "rescue": [dict(keep, name="Rescued", **{"ansible.builtin.copy": dict(
                    keep["ansible.builtin.copy"],
                    content="{{ {'task': ansible_failed_task.name, 'msg': ansible_failed_result.msg} | to_json }}",
                    dest="%s/{{ inventory_hostname }}.failed" % out)})]}]}
    (tmp_path / "back.yml").write_text(yaml.safe_dump([play], sort_keys=False))
    hosts = {"up": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
             "gone": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": closed_port(),
                      "ansible_ssh_common_args": "-o ConnectTimeout=2 -o StrictHostKeyChecking=no"}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.junit",
               JUNIT_OUTPUT_DIR=str(tmp_path / "junit"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_LOCALHOST_WARNING="false",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "back.yml", "-i", "hosts.yml"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["gone.failed", "up.on"]
    failed = json.loads((out / "gone.failed").read_text())
    assert failed["task"] == "A host that did not come back is an error that quotes the power action's answer"
    msg = failed["msg"]
    assert msg.startswith("the host did not answer within 3 s after its power was restored (timed out waiting"), msg
    assert "Connection refused" in msg
    # the power action's answer: its figures, nothing of its invocation (where a password is)
    head = "(method ipmi, on) answered: "
    assert json.loads(msg[msg.index(head) + len(head):]) == {"changed": True, "powerstate": "on"}
