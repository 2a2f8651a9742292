# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stdout callback fleetqual.storage.bounded with the real
ansible-playbook over local-connection hosts: a passing run prints the same lines for 1 and
for 6 hosts, the fleet report's table included (the qualify_report callback with
examples/ansible.cfg's [fleetqual_report], table_max_hosts = 0); a failure is one line under its banner, its
message bounded (the rest with -v), without ansible-core's [ERROR] block and without the warnings a failed
transfer leaves; warnings of results not printed are one line per task; -v prints what the default callback prints. The SSH fleet test with
the whole qualify playbook is tests/fleet/test_fleet_output.py (long suite)."""
import configparser
import json
import os
import re
import subprocess
import sys

import pytest
import unitpaths

ROOT = unitpaths.ROOT
BIN = os.path.dirname(sys.executable)

pytestmark = pytest.mark.slow

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
import report_synth as synth  # noqa: E402

EXAMPLE_CFG = os.path.join(ROOT, "examples", "ansible.cfg")

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
      warner: {text: ["disk of {{ inventory_hostname }} is slow"]}
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

# the records the qualify role hands over: the qualify_report callback builds the fleet from them
REPORT_PLAY = """
- name: Play three
  hosts: all
  gather_facts: false
  tasks:
    - name: Hand over the record
      ansible.builtin.set_stats:
        data:
          fleetqual_report: "{{ lookup('ansible.builtin.file', 'records/' ~ inventory_hostname ~ '.json') | from_json }}"
        per_host: true
"""

WARNER = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
m = AnsibleModule(argument_spec=dict(text=dict(type='list', elements='str'), fail=dict(type='str')))
for text in m.params['text']:
    m.warn(text)
if m.params['fail']:
    m.fail_json(msg=m.params['fail'])
m.exit_json(changed=False)
"""

# failures of three shapes on the chosen hosts
FAIL_PLAYBOOK = """
- name: Play one
  hosts: all
  gather_facts: false
  tasks:
    - name: A command that fails with a long stderr
      ansible.builtin.shell: "echo start-of-stderr >&2; head -c 5000 /dev/zero | tr '\\\\0' E >&2; exit 3"
      when: inventory_hostname in fail_hosts
      ignore_errors: true
    - name: A loop with a failing item
      ansible.builtin.fail: {msg: "item {{ item }} of {{ inventory_hostname }} broke"}
      loop: [1, 2]
      when: inventory_hostname in fail_hosts and item == 2
      ignore_errors: true
    - name: A transfer that fails
      warner:
        text: ["sftp transfer mechanism failed on [{{ inventory_hostname }}]. Use ANSIBLE_DEBUG=1 to see detailed information",
               "scp transfer mechanism failed on [{{ inventory_hostname }}]. Use ANSIBLE_DEBUG=1 to see detailed information",
               "the disk of {{ inventory_hostname }} is slow"]
        fail: "{{ inventory_hostname }}: failed to transfer the build: Permission denied"
      when: inventory_hostname in fail_hosts
"""


@pytest.fixture
def play(tmp_path):
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    (tmp_path / "pb-fail.yml").write_text(FAIL_PLAYBOOK)
    (tmp_path / "included.yml").write_text("- name: Inside the include\n  ansible.builtin.debug: {msg: in}\n")
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "warner.py").write_text(WARNER)
    (tmp_path / "ansible.cfg").write_text("[defaults]\nstdout_callback = fleetqual.storage.bounded\n"
                                          "forks = 2\nretry_files_enabled = False\n")
    # with the fleet report: the example's [fleetqual_report] as it is, the results in tmp_path
    (tmp_path / "pb-report.yml").write_text(PLAYBOOK + REPORT_PLAY)
    example = configparser.ConfigParser(interpolation=None)
    example.read(EXAMPLE_CFG)
    report = ["[defaults]", "stdout_callback = fleetqual.storage.bounded", "callbacks_enabled = fleetqual.storage.qualify_report",
              "forks = 2", "retry_files_enabled = False", "[fleetqual_report]"]
    report += ["%s = %s" % kv for kv in example["fleetqual_report"].items()]
    report += ["output_dir = %s" % (tmp_path / "results")]
    (tmp_path / "ansible-report.cfg").write_text("\n".join(report) + "\n")
    (tmp_path / "records").mkdir()

    def run(hosts, *args, fail_hosts=(), report=False, playbook="pb.yml"):
        inv = tmp_path / ("inv-%d" % hosts)
        inv.write_text("".join("h%d ansible_connection=local ansible_python_interpreter=%s\n" % (i, sys.executable)
                               for i in range(1, hosts + 1)))
        for i in range(1, hosts + 1):
            (tmp_path / "records" / ("h%d.json" % i)).write_text(json.dumps(synth.make_record(
                "h%d" % i, matrix=[("cache", "rndrd", 1), ("log", "seqwr", 1)], samples=2, seed=1)))
        env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / ("ansible-report.cfg" if report else "ansible.cfg")),
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LIBRARY=str(tmp_path / "library"))
        argv = [os.path.join(BIN, "ansible-playbook"), "-i", str(inv), str(tmp_path / ("pb-report.yml" if report else playbook)),
                "-e", '{"fail_hosts": %s}' % list(fail_hosts).__repr__().replace("'", '"')] + list(args)
        p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
        return p.returncode, p.stdout + p.stderr
    return run


def test_a_passing_run_prints_the_same_lines_for_one_and_six_hosts(play):
    rc1, out1 = play(1, report=True)
    rc6, out6 = play(6, report=True)
    assert rc1 == 0 and rc6 == 0, out6

    def shape(out):
        return [re.sub(r"(host|result|warning)s\b", r"\1", re.sub(r"\d+", "N", ln)) for ln in out.splitlines()]
    assert shape(out1) == shape(out6), out1 + "\n----\n" + out6
    # the fleet report's table is in what was compared: its header, the PASS hosts counted
    for out, n in ((out1, "1 PASS host"), (out6, "6 PASS hosts")):
        lines = out.splitlines()
        head = [i for i, ln in enumerate(lines) if ln.startswith("host ") and "verdict" in ln and "first failing rule" in ln]
        assert len(head) == 1 and "FLEET REPORT [20261121T120000Z]" in out, out
        assert lines[head[0] + 2].startswith("... %s not listed (table_max_hosts 0" % n), out
        assert "fleet: %s/%s hosts passed" % ((1, 1) if n[0] == "1" else (6, 6)) in out, out
    assert not re.search(r"^h\d+ ", out6, re.M), out6
    assert not re.search(r"^(ok|changed|skipping|included): ", out6, re.M), out6
    assert "hello" not in out6 and "Inside the include" not in out6 and "TASK [" not in out6
    assert "Play one: 6 hosts, all ok | ok 30, changed 6, skipped 12 results" in out6, out6
    assert "Play two: 6 hosts, all ok | ok 6 results" in out6
    # the warnings of the hidden results: one line for the task, the first warning, the count
    assert re.search(r"^\[WARNING\]: A task that warns: disk of h\d is slow \(6 warnings, 6 hosts\)$", out6, re.M), out6
    assert out6.count("[WARNING]") == 1
    assert "Play three: 6 hosts, all ok | ok 6 results" in out6
    assert "6 hosts without a failure : ok=48 changed=6 unreachable=0 failed=0 skipped=12" in out6


def test_a_failure_is_one_bounded_line_under_its_banner(play):
    rc, out = play(6, fail_hosts=("h4",))
    assert rc == 2, out
    assert "TASK [A failure on the chosen host]" in out
    assert re.search(r"^fatal: \[h4\]: FAILED! => h4 broke: the reason in full, 42 MiB/s below 100$", out, re.M), out
    assert "Play one: 6 hosts (1 failed)" in out
    assert re.search(r"^h4 : ok=\d+ changed=1 unreachable=0 failed=1", out, re.M)
    assert "5 hosts without a failure : " in out
    assert "h3" not in out
    # no [ERROR] block repeating the message with the task's origin
    assert "[ERROR]" not in out and "Origin:" not in out, out


def test_failures_are_bounded_and_a_failed_transfer_says_its_reason(play):
    rc, out = play(3, fail_hosts=("h2", "h3"), playbook="pb-fail.yml")
    assert rc == 2, out
    for host in ("h2", "h3"):
        # a command's return code and its stderr, each line cut, then ignored
        lines = out.splitlines()
        at = lines.index("fatal: [%s]: FAILED! => non-zero return code (rc 3)" % host)
        assert lines[at + 1] == "stderr: start-of-stderr", lines[at:at + 3]
        assert lines[at + 2].startswith("EEE") and lines[at + 2].endswith("\u2026 (in full in the -v output)"), lines[at + 2]
        assert len(lines[at + 2]) < 550 and lines[at + 3] == "...ignoring", lines[at:at + 4]
        # the transfer's failure: its reason on one line, not the sftp/scp warnings
        assert re.search(r"^fatal: \[%s\]: FAILED! => %s: failed to transfer the build: Permission denied$" % (host, host),
                         out, re.M), out
        # the failed item, on its line
        assert re.search(r"^failed: \[%s\] \(item=2\) => item 2 of %s broke$" % (host, host), out, re.M), out
        # each failing host is named by its three failures and its recap line (and the warning's own text)
        assert len([ln for ln in out.splitlines() if host in ln and not ln.startswith("[WARNING]")]) == 4, out
    assert out.count("...ignoring") == 4
    assert "transfer mechanism failed" not in out, out
    # the failed task's other warning is counted with the rest (one line for the task)
    assert re.search(r"^\[WARNING\]: A transfer that fails: the disk of h\d is slow \(2 warnings, 2 hosts\)$", out, re.M), out
    assert "[ERROR]" not in out and "Origin:" not in out, out
    # -v: the default callback's whole result
    rc, out = play(3, "-v", fail_hosts=("h2",), playbook="pb-fail.yml")
    assert "E" * 4000 in out and "sftp transfer mechanism failed on [h2]" in out, out


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
