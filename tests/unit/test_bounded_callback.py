# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stdout callback fleetqual.storage.bounded (issue 18 item 3) with the real
ansible-playbook over local-connection hosts: a passing run prints the same lines for 1 and
for 6 hosts; a failure is printed in full with its banner; warnings of results not printed
are one line per task; -v prints what the default callback prints. The SSH fleet test with
the whole qualify playbook is tests/fleet/test_fleet_output.py."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

pytestmark = pytest.mark.slow

PLAYBOOK = """
- name: Play one
  hosts: all
  gather_facts: false
  tasks:
    - name: An ok task
      ansible.builtin.debug: {msg: "hello {{ inventory_hostname }}"}
    - name: A changed task
      ansible.builtin.command: "true"
    - name: A task that warns
      warner: {text: "disk of {{ inventory_hostname }} is slow"}
    - name: A skipped task
      ansible.builtin.debug: {msg: never}
      when: false
    - name: A loop
      ansible.builtin.debug: {msg: "{{ item }}"}
      loop: [1, 2, 3]
    - name: An include
      ansible.builtin.include_tasks: included.yml
    - name: A failure on the chosen host
      ansible.builtin.fail: {msg: "{{ inventory_hostname }} broke: the reason in full, 42 MiB/s below 100"}
      when: inventory_hostname in (fail_hosts | default([]))

- name: Play two
  hosts: all
  gather_facts: false
  tasks:
    - name: Another ok task
      ansible.builtin.debug: {msg: bye}
"""

WARNER = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec=dict(text=dict(type='str')))
m.warn(m.params['text'])
m.exit_json(changed=False)
"""


@pytest.fixture
def play(tmp_path):
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    (tmp_path / "included.yml").write_text("- name: Inside the include\n  ansible.builtin.debug: {msg: in}\n")
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "warner.py").write_text(WARNER)
    (tmp_path / "ansible.cfg").write_text("[defaults]\nstdout_callback = fleetqual.storage.bounded\n"
                                          "forks = 2\nretry_files_enabled = False\n")

    def run(hosts, *args, fail_hosts=()):
        inv = tmp_path / ("inv-%d" % hosts)
        inv.write_text("".join("h%d ansible_connection=local ansible_python_interpreter=%s\n" % (i, sys.executable)
                               for i in range(1, hosts + 1)))
        env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LIBRARY=str(tmp_path / "library"))
        argv = [os.path.join(BIN, "ansible-playbook"), "-i", str(inv), str(tmp_path / "pb.yml"),
                "-e", '{"fail_hosts": %s}' % list(fail_hosts).__repr__().replace("'", '"')] + list(args)
        p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
        return p.returncode, p.stdout + p.stderr
    return run


def test_a_passing_run_prints_the_same_lines_for_one_and_six_hosts(play):
    rc1, out1 = play(1)
    rc6, out6 = play(6)
    assert rc1 == 0 and rc6 == 0, out6
    def shape(out):
        return [re.sub(r"(host|result|warning)s\b", r"\1", re.sub(r"\d+", "N", ln)) for ln in out.splitlines()]
    assert shape(out1) == shape(out6), out1 + "\n----\n" + out6
    assert not re.search(r"^(ok|changed|skipping|included): ", out6, re.M), out6
    assert "hello" not in out6 and "Inside the include" not in out6 and "TASK [" not in out6
    assert "Play one: 6 hosts, all ok | ok 30, changed 6, skipped 12 results" in out6, out6
    assert "Play two: 6 hosts, all ok | ok 6 results" in out6
    # the warnings of the hidden results: one line for the task, the first warning, the count
    assert re.search(r"^\[WARNING\]: A task that warns: disk of h\d is slow \(6 warnings, 6 hosts\)$", out6, re.M), out6
    assert out6.count("[WARNING]") == 1
    assert "6 hosts without a failure : ok=42 changed=6 unreachable=0 failed=0 skipped=12" in out6


def test_a_failure_is_printed_in_full_with_its_banner(play):
    rc, out = play(6, fail_hosts=("h4",))
    assert rc == 2, out
    assert "TASK [A failure on the chosen host]" in out
    assert re.search(r'^fatal: \[h4\]: FAILED! => .*"msg": "h4 broke: the reason in full, 42 MiB/s below 100"', out, re.M), out
    assert "Play one: 6 hosts (1 failed)" in out
    assert re.search(r"^h4 : ok=\d+ changed=1 unreachable=0 failed=1", out, re.M)
    assert "5 hosts without a failure : " in out
    assert "h3" not in out


def test_verbose_prints_what_the_default_callback_prints(play):
    rc, out = play(2, "-v")
    assert rc == 0, out
    for host in ("h1", "h2"):
        assert re.search(r"^ok: \[%s\] => " % host, out, re.M), out
        assert re.search(r"^changed: \[%s\]" % host, out, re.M)
        assert re.search(r"^%s\s+: ok=\d+" % host, out, re.M)      # the default recap
    assert "included: " in out and "(item=3)" in out


def test_ansible_doc_renders_the_callback():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"))
    p = subprocess.run([os.path.join(BIN, "ansible-doc"), "-t", "callback", "fleetqual.storage.bounded"],
                       capture_output=True, text=True, env=env, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert "warning_tasks" in p.stdout and "display_failed_stderr" in p.stdout
