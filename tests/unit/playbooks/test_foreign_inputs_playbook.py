"""Playbooks/qualify.yml's validation play refuses bad foreign-I/O, impact and
INCONCLUSIVE-policy settings before any host is contacted. The hosts do not exist (TEST-NET
addresses, ssh): a refused run never gathers facts, never connects, creates no results
directory, and names the host, the variable and the closest valid key or value."""
from __future__ import annotations

import os
import subprocess
import sys

import yaml
import unitpaths

ROOT = unitpaths.ROOT


def _playbook(tmp_path, hosts):
    results = tmp_path / "results"
    inv = {"all": {"vars": {"fleetqual_results_dir": str(results), "ansible_connection": "ssh",
                            "ansible_user": "nobody"},
                   "hosts": {name: dict({"ansible_host": "192.0.2.%d" % i}, **hv)
                             for i, (name, hv) in enumerate(sorted(hosts.items()), 1)}}}
    (tmp_path / "inv.yml").write_text(yaml.safe_dump(inv))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml",
                           os.path.join(ROOT, "playbooks", "qualify.yml")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    # refused by the validation play: no host was touched
    assert "Gather facts" not in text and "UNREACHABLE" not in text and "192.0.2" not in text, text
    assert not results.exists()
    return " ".join(text.split())


def test_a_typo_and_an_out_of_range_value_are_refused_before_any_host_is_contacted(tmp_path):
    """db01 misspells max_share, db02's on_busy is no choice, db04's impact a number out of
    range; db03 runs the compliance profile with its own valid keys over the profile's
    safety and is not named."""
    text = _playbook(tmp_path, {
        "db01": {"fleetqual_foreign_io": {"max_shar": 0.2}},
        "db02": {"fleetqual_foreign_io": {"on_busy": "maybe"}},
        "db03": {"fleetqual_profile": "compliance", "fleetqual_foreign_io": {"max_share": 0.2, "on_busy": "warn"},
                 "fleetqual_impact": {"nice": 5}},
        "db04": {"fleetqual_profile": "compliance", "fleetqual_impact": {"max_free_share": 5}}})
    assert "db01: fleetqual_foreign_io.max_shar: unknown key (did you mean max_share?)" in text, text
    assert "db02: fleetqual_foreign_io.on_busy must be one of inconclusive, fail, warn, got 'maybe'" in text, text
    assert "db04: fleetqual_impact.max_free_share must be between 0 and 1, got 5" in text, text
    assert "db03:" not in text


def test_the_exit_code_policy_is_a_choice_checked_before_any_host_is_contacted(tmp_path):
    """The role's argument specification (choices fail, warn) refuses db02's policy, the
    line naming the host; db01's valid one passes (is not named)."""
    text = _playbook(tmp_path, {"db01": {"fleetqual_inconclusive": "warn"}, "db02": {"fleetqual_inconclusive": "wran"}})
    assert "db02: value of fleetqual_inconclusive must be one of: fail, warn, got: wran" in text, text
    assert "1 of 2 hosts refused before any host was contacted" in text, text
    assert "db01:" not in text, text
