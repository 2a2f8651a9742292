"""No secret in any output of a whole qualify run: ``playbooks/qualify.yml`` at the default
verbosity and at ``-vvv`` through ansible-runner (as AWX runs it: its stdout, its job events and the ``set_stats``
artifact on disk) over three loopback hosts, each with a BMC of another power method
(``fleetqual_power``: redfish and ipmi with a marker password, a command with a marker on its
argv). Ansible prints every ok task's result from ``-v`` on, so the validation play's result
(every host's inputs), each host's start, wait and record pass through the output; the marker
is in no line of it, in no file of the runner's artifacts and in no file of the results
directory (records, fleet.json, history, reports), while the masked value is printed. The
power tasks themselves, which run only in a power cut, are checked at both verbosities on the
BMC lab (tests/bmc/test_bmc_power.py)."""
import os

import pytest

import fleetrun

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

MARKER = "fq-secret-MARKER-41c7"
HOSTS = ["fq54", "fq55", "fq56"]
POWER = {
    "fq54": {"method": "redfish", "baseuri": "192.0.2.54", "username": "admin", "password": MARKER},
    "fq55": {"method": "ipmi", "name": "192.0.2.55", "user": "admin", "password": MARKER},
    "fq56": {"method": "command", "off": ["/usr/local/bin/bmc-off", "--password", MARKER],
             "on": ["/usr/local/bin/bmc-on", "--password", MARKER]},
}
# paced: what this proves is the output, not the drives
MATRIX = [{"workload": "w0", "mode": "rndrd", "threads": 1, "file_num": 2, "total_size": "8M", "block_size": "16K",
           "direct": True, "time": 2, "warmup": 0, "rate_iops": 200}]


def files_with(root, marker):
    """Every file under ``root`` whose bytes hold ``marker``."""
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(path)
    return found


@pytest.mark.parametrize("verbosity", [0, 3])
def test_no_bmc_secret_in_the_output_artifacts_or_results_of_a_run(fleet, tmp_path_factory, verbosity):
    ansible_runner = pytest.importorskip("ansible_runner")
    base = str(tmp_path_factory.mktemp("secrets"))
    hosts = [{"name": h, "inst": fleet.host(int(h[2:])), "vars": {"fleetqual_power": POWER[h]}} for h in HOSTS]
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts,
                          group_vars={"all": {"fleetqual_matrix": MATRIX, "fleetqual_progress_interval": 3}})
    results = os.path.join(base, "results")
    private = os.path.join(base, "runner")
    os.makedirs(os.path.join(private, "project"))
    env = fleetrun.playbook_run.ansible_env(fleet.ansible_env())
    env["FLEETQUAL_REPORT_DIR"] = results
    r = ansible_runner.run(private_data_dir=private, playbook=os.path.join(fleetrun.ROOT, "playbooks", "qualify.yml"),
                           inventory=inv, verbosity=verbosity, quiet=True, timeout=600, envvars=env,
                           extravars={"fleetqual_results_dir": results, "fleetqual_run_id": "secrets",
                                      "fleetqual_build_cache_dir": fleetrun.build_cache_dir()})
    out = r.stdout.read()
    assert r.rc == 0, out[-5000:]
    assert "fleet: 3/3 hosts passed" in out, out[-5000:]
    if verbosity:
        # -vvv printed the results that hold the inputs, with the password masked
        assert "task path:" in out and '"password": "********"' in out, out[-5000:]
    lines = [line for line in out.splitlines() if MARKER in line]
    assert not lines, "\n".join(lines[:10])
    stats = [e for e in r.events if e.get("event") == "playbook_on_stats"]
    assert stats and stats[-1]["event_data"]["artifact_data"], "no set_stats artifact"
    assert files_with(private, MARKER) == [], files_with(private, MARKER)
    assert os.listdir(os.path.join(results, "secrets")), "no results were written"
    assert files_with(results, MARKER) == [], files_with(results, MARKER)
