"""Running the qualify playbook against a fleet inventory (used by the fleet tests' conftest
and test modules). Reuses the integration suite's helpers (tests/integration/playbook_run.py:
``Run``, ``tree_snapshot``, the repository paths) and its way of calling ansible-playbook;
only the per-host directories come from host_vars, not from extra vars (extra vars would
override every host's own test and binary directory)."""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import playbook_run  # noqa: E402

ROOT = playbook_run.ROOT
BIN = playbook_run.BIN
tree_snapshot = playbook_run.tree_snapshot
# the INCONCLUSIVE count is printed only when there is one (summary() leaves it out)
SUMMARY_RE = re.compile(r"fleet: (\d+)/(\d+) hosts passed \(PASS (\d+), FAIL (\d+), UNREACHABLE (\d+), ERROR (\d+)"
                        r"(?:, INCONCLUSIVE \d+)?\)")


class FleetRun(playbook_run.Run):
    def __init__(self, proc, base, run_id, elapsed):
        super().__init__(proc, base, run_id)
        self.elapsed = elapsed

    def fleet(self):
        with open(os.path.join(self.results_dir(), "fleet.json")) as fh:
            return json.load(fh)

    def fleet_host(self, host):
        return next(h for h in self.fleet()["hosts"] if h["host"] == host)

    def summary(self):
        """(passed, hosts, PASS, FAIL, UNREACHABLE, ERROR) of the callback's fleet: line."""
        m = SUMMARY_RE.findall(self.out)
        assert m, "no 'fleet: N/M hosts passed' line in the output:\n" + self.out[-3000:]
        return tuple(int(x) for x in m[-1])

    def verdicts(self):
        """{host: (verdict, its first three reasons)} from fleet.json (a failing assertion's
        message: why a host did not get the verdict a test expected)."""
        try:
            return {h["host"]: (h.get("verdict"), (h.get("reasons") or [])[:3]) for h in self.fleet()["hosts"]}
        except (OSError, ValueError, KeyError) as exc:
            return "no fleet.json: %s" % exc

    def has_record(self, host):
        return os.path.exists(os.path.join(self.results_dir(), host + ".json"))


# the workload record's warning when no iostat report fell inside its window
# (plugins/module_utils/job/workload.py)


def iostat_sampled_or_warned(result):
    """A workload result (a host record's ``workloads[].result``) holds iostat reports from its
    window, or says it has none. Whether a 1 s report falls inside a short window depends on
    how soon a loaded machine ran iostat (a starved stream once took none for 6 s): never
    silently."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.job.workload import NO_IOSTAT_SAMPLE
    return bool(result["iostat"]["samples"]) or any(w.startswith(NO_IOSTAT_SAMPLE) for w in result.get("warnings", []))


def playbook_command(fleet, inventory, base, run_id, extra_vars=None, args=(), env_extra=None):
    """``(argv, env)`` of ``ansible-playbook playbooks/qualify.yml -i <inventory>`` with the
    run's results under ``base/results``."""
    ev = {
        "fleetqual_results_dir": os.path.join(base, "results"),
        "fleetqual_build_cache_dir": build_cache_dir(),
        "fleetqual_run_id": run_id,
    }
    ev.update(extra_vars or {})
    env = playbook_run.ansible_env(fleet.ansible_env())
    # report files of a run without any host record (stopped by validation) go here too,
    # not to ./results of the checkout
    env["FLEETQUAL_REPORT_DIR"] = os.path.join(base, "results")
    env.update(env_extra or {})
    argv = [os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
            "-i", inventory, "-e", json.dumps(ev)] + list(args)
    return argv, env


def run_playbook(fleet, inventory, base, run_id, extra_vars=None, args=(), timeout=600, env_extra=None):
    """ansible-playbook playbooks/qualify.yml -i <inventory> -> FleetRun (results under base/results)."""
    argv, env = playbook_command(fleet, inventory, base, run_id, extra_vars, args, env_extra)
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False)
    return FleetRun(proc, base, run_id, time.monotonic() - t0)


def start_playbook(fleet, inventory, base, run_id, extra_vars=None, args=(), env_extra=None, mode="w"):
    """The same in the background, its output in ``<base>/out.log`` (opened with ``mode``):
    ``(proc, log)``; the caller ends both (a test that kills the controller)."""
    argv, env = playbook_command(fleet, inventory, base, run_id, extra_vars, args, env_extra)
    log = open(os.path.join(base, "out.log"), mode)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    return proc, log


_BUILD_CACHE = []


def build_cache_dir():
    return _BUILD_CACHE[0]
