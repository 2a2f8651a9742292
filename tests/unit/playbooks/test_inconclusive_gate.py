"""The exit-code policy of INCONCLUSIVE (fleetqual_inconclusive: fail | warn) at
playbooks/qualify.yml's own verdict gate play (taken verbatim from the playbook, after a
play that hands over synthetic records as roles/qualify/tasks/store.yml does), through
ansible-playbook: by default an INCONCLUSIVE host fails the gate (exit 2) with
``<host>: INCONCLUSIVE <reasons>``; with ``warn`` it is not failed (exit 0) but its verdict
and reasons are printed; a host's own policy applies to it alone; the AWX summary counts
INCONCLUSIVE apart. The end-to-end run on a shared loop device is
tests/integration/test_compliance_playbook.py (long suite)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml
import unitpaths

sys.path.insert(0, os.path.join(unitpaths.UNIT, "fixtures", "report"))
import handover  # noqa: E402
import report_synth as synth  # noqa: E402

ROOT = unitpaths.ROOT
RUN_ID = "20261125T030000Z"
SHARED = ("cache-rndrd-t1: shared window: foreign share 0.35 > limit 0.1 (I/O not ours on device vda over 9.9 s: "
          "foreign share 0.35, reads 31000, writes 0)")


def _records(results):
    small = [("cache", "rndrd", 1)]
    recs = {"db1": synth.make_record("db1", matrix=small, samples=4, seed=1, run_id=RUN_ID, results_dir=results),
            "db2": synth.make_record("db2", matrix=small, samples=4, seed=2, run_id=RUN_ID, results_dir=results,
                                     verdict="INCONCLUSIVE", reasons=[SHARED]),
            "db3": synth.make_record("db3", matrix=small, samples=4, seed=3, run_id=RUN_ID, results_dir=results,
                                     verdict="INCONCLUSIVE", reasons=[SHARED])}
    os.makedirs(os.path.join(results, RUN_ID), exist_ok=True)
    for rec in recs.values():
        with open(rec["results_file"], "w", encoding="utf-8") as fh:
            json.dump(rec, fh)
    return recs


def _gate(tmp_path, host_vars=None, extra_vars=None):
    """The records handed over, then qualify.yml's gate play; ``(rc, output, AWX summary)``."""
    results = str(tmp_path / "results")
    _records(results)
    with open(os.path.join(ROOT, "playbooks", "qualify.yml"), encoding="utf-8") as fh:
        gate = yaml.safe_load(fh)[-1]
    assert gate["vars"]["_fleetqual_report_play"] == "gate"
    store = handover.store_play("%s/%s/{{ inventory_hostname }}.json" % (results, RUN_ID))
    (tmp_path / "gate.yml").write_text(yaml.safe_dump([store, gate], sort_keys=False))
    hosts = {h: dict({"ansible_connection": "local"}, **(host_vars or {}).get(h, {})) for h in ("db1", "db2", "db3")}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_SHOW_CUSTOM_STATS="1",
               ANSIBLE_ACTION_PLUGINS=handover.PLUGINS, FLEETQUAL_REPORT_HISTORY="false", ANSIBLE_LOCALHOST_WARNING="false",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "gate.yml", "-i", "hosts.yml"]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env, check=False)
    out = proc.stdout + proc.stderr
    custom = out[out.index("CUSTOM STATS"):]
    summary = json.loads(custom[custom.index("RUN:") + 4:].strip().splitlines()[0])["fleetqual_summary_local"]
    return proc.returncode, " ".join(out.split()), summary


def _section(out, banner, end):
    part = out[out.index("TASK [%s" % banner):]
    return part[:part.index(end)]


def _gate_failed(out):
    """The hosts the gate task failed (``fatal: [host]: FAILED!`` under the gate's banner)."""
    gate = _section(out, "Gate on the verdict", "PLAY RECAP")
    return sorted(h for h in ("db1", "db2", "db3") if "fatal: [%s]: FAILED!" % h in gate)


def _printed(out):
    """The hosts the gate printed as not failed, with their result (``ok: [host] =>``; a
    passing host is only ``ok: [host]``)."""
    shown = _section(out, "Gate on the verdict", "PLAY RECAP")
    return sorted(h for h in ("db1", "db2", "db3") if "ok: [%s] =>" % h in shown)


def _warned(out):
    """The hosts the gate warned about (``[WARNING]: <host>: INCONCLUSIVE ...``)."""
    return sorted(h for h in ("db1", "db2", "db3") if "[WARNING]: %s: INCONCLUSIVE" % h in out)


def test_inconclusive_fails_the_gate_by_default_and_is_printed(tmp_path):
    rc, out, summary = _gate(tmp_path)
    assert rc == 2, out
    assert _gate_failed(out) == ["db2", "db3"]
    assert '"msg": "db2: INCONCLUSIVE %s"' % SHARED in out and '"msg": "db3: INCONCLUSIVE %s"' % SHARED in out
    assert _printed(out) == [] and _warned(out) == []
    assert summary["counts"] == {"PASS": 1, "FAIL": 0, "ERROR": 0, "UNREACHABLE": 0, "INCONCLUSIVE": 2}
    assert summary["verdicts"] == {"db1": "PASS", "db2": "INCONCLUSIVE", "db3": "INCONCLUSIVE"}


def test_warn_does_not_fail_the_gate_but_prints_the_verdict_and_reasons(tmp_path):
    rc, out, summary = _gate(tmp_path, extra_vars={"fleetqual_inconclusive": "warn"})
    assert rc == 0, out
    assert "FAILED!" not in out and _printed(out) == ["db2", "db3"] and _warned(out) == ["db2", "db3"]
    for host in ("db2", "db3"):
        assert '"msg": "%s: INCONCLUSIVE %s (not failed: fleetqual_inconclusive is warn)"' % (host, SHARED) in out
    assert summary["counts"]["INCONCLUSIVE"] == 2 and summary["counts"]["PASS"] == 1


def test_each_host_keeps_its_own_policy(tmp_path):
    """db2's inventory says warn, db3 says nothing: db3 is failed, db2 printed; the one
    run_once action judges both with their own policy."""
    rc, out = _gate(tmp_path, host_vars={"db2": {"fleetqual_inconclusive": "warn"}})[:2]
    assert rc == 2, out
    assert _gate_failed(out) == ["db3"] and _printed(out) == ["db2"] and _warned(out) == ["db2"]
    assert '"msg": "db2: INCONCLUSIVE %s (not failed: fleetqual_inconclusive is warn)"' % SHARED in out
    assert '"msg": "db3: INCONCLUSIVE %s"' % SHARED in out
