"""End to end: three slices of the real qualify playbook, run at the same time with one run
id over disjoint parts of a 6-host inventory (local connections, each host its own test
and binary directories), then fleetqual.storage.report over the run directory: one
report of every host, equal to the report of the same records aggregated at once; the
non-PASS host re-run with --limit @not-passed.limit lands in the same report."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet

# in the long suite (docs/testing.md, "The long suite"): three playbook runs side by side, minutes
# of the loaded machine; make test covers the merge itself (plugin_utils/fleet/test_merge.py)
pytestmark = [pytest.mark.slow, pytest.mark.long]

ROOT = unitpaths.ROOT
BIN = os.path.dirname(sys.executable)
HOSTS = ["q1", "q2", "q3", "q4", "q5", "q6"]
RUN_ID = "slices-e2e"
MATRIX = [{"workload": "cache", "id": "cache-rndrd-t1", "mode": "rndrd", "threads": 1, "working_set": "cache",
           "direct": False, "time": 1, "warmup": 0}]


def _env(**extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra)
    return env


def _inventory(base):
    """6 hosts over local connections; q5 alone has an impossible IOPS floor (host vars)."""
    hosts = {}
    for h in HOSTS:
        hosts[h] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                    "fleetqual_test_dir": os.path.join(base, "test", h), "fleetqual_bin_dir": os.path.join(base, "bin", h)}
    hosts["q5"]["fleetqual_thresholds"] = [{"name": "q5-floor", "min_iops": 1e12}]
    path = os.path.join(base, "hosts.yml")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"fleet": {"hosts": hosts}}, f)          # JSON is YAML
    return path


def _qualify(base, inventory, limit, extra=None):
    ev = {"fleetqual_matrix": MATRIX, "fleetqual_cache_size": "16M", "fleetqual_run_id": RUN_ID,
          "fleetqual_results_dir": os.path.join(base, "results"),
          "fleetqual_build_cache_dir": os.path.join(base, "build-cache")}
    ev.update(extra or {})
    argv = [os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"), "-i", inventory,
            "--limit", limit, "-e", json.dumps(ev)]
    return subprocess.run(argv, capture_output=True, text=True, env=_env(FLEETQUAL_REPORT_HISTORY="false"),
                          cwd=base, timeout=900, check=False)


def _report(base):
    argv = [os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "report.yml"), "-i", "localhost,",
            "-e", "fleetqual_run_id=%s" % RUN_ID, "-e", "fleetqual_results_dir=%s" % os.path.join(base, "results")]
    return subprocess.run(argv, capture_output=True, text=True, env=_env(FLEETQUAL_REPORT_HISTORY="false"), cwd=base,
                          timeout=300, check=False)


def test_three_sliced_playbook_runs_make_one_report_and_a_rerun_joins_it(tmp_path):
    base = str(tmp_path)
    inventory = _inventory(base)
    slices = [("q1,q2", 1), ("q3,q4", 2), ("q5,q6", 3)]
    # the controller build cache is filled once, so the slices below share it read-only
    warm = _qualify(base, inventory, "q1", {"fleetqual_run_id": "warm"})
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr[-2000:]
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda s: _qualify(base, inventory, s[0], {
            "fleetqual_slice_number": s[1], "fleetqual_slice_count": 3}), slices))
    out = [r.stdout + r.stderr for r in runs]
    assert [r.returncode for r in runs] == [0, 0, 2], "\n".join(o[-3000:] for o in out)
    run_dir = os.path.join(base, "results", RUN_ID)
    for n in (1, 2, 3):
        assert os.path.exists(os.path.join(run_dir, "slice-%d" % n, "fleet.json"))

    rep = _report(base)
    text = rep.stdout + rep.stderr
    assert rep.returncode == 2, text[-4000:]
    assert text.count("FLEET REPORT") == 1          # the report playbook's own play is not a fleet
    assert "fleet: 5/6 hosts passed" in text, text[-5000:]
    stored = json.load(open(os.path.join(run_dir, "fleet.json"), encoding="utf-8"))
    assert {h["host"]: h["verdict"] for h in stored["hosts"]} == {h: ("FAIL" if h == "q5" else "PASS")
                                                                  for h in HOSTS}
    assert stored["summary"]["slices"] == ["1/3", "2/3", "3/3"]
    # the same as the records aggregated at once
    records = {h: json.load(open(os.path.join(run_dir, h + ".json"), encoding="utf-8")) for h in HOSTS}
    once = fleet.aggregate(records, run_id=RUN_ID)
    assert {h["host"]: h["verdict"] for h in once["hosts"]} == {h["host"]: h["verdict"] for h in stored["hosts"]}
    assert once["latency"] == stored["latency"]
    assert [(o["host"], o["workload"], o["metric"]) for o in once["outliers"]] == \
        [(o["host"], o["workload"], o["metric"]) for o in stored["outliers"]]
    limit = os.path.join(run_dir, "not-passed.limit")
    assert open(limit, encoding="utf-8").read() == "q5\n"

    # re-run the non-PASS host without the impossible rule: it joins the same run
    rerun = _qualify(base, inventory, "@" + limit, {"fleetqual_thresholds": []})
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    assert any(n.startswith("q5.json.") and n.endswith("~") for n in os.listdir(run_dir))   # history kept
    rep = _report(base)
    assert rep.returncode == 0, (rep.stdout + rep.stderr)[-4000:]
    stored = json.load(open(os.path.join(run_dir, "fleet.json"), encoding="utf-8"))
    assert [h["verdict"] for h in stored["hosts"]] == ["PASS"] * 6
    assert open(limit, encoding="utf-8").read() == ""
