"""Fixtures: run the real qualify playbook with ansible-playbook, on this machine, in throwaway dirs."""
import json
import os
import subprocess

import pytest

from playbook_run import BIN, ROOT, SHARED_DISK_STALL_RULE, Run, ansible_env


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory):
    """One controller build cache for the whole session: the binary is compiled once."""
    return str(tmp_path_factory.mktemp("build-cache"))


@pytest.fixture
def playbook(tmp_path, build_cache):
    """Call playbook(extra_vars=..., args=[...], inventory=path) -> Run. An extra var given
    as None is left out (e.g. ``fleetqual_test_dir: None`` for an inventory whose hosts
    have their own directories: extra vars would override every host's). A run on this
    machine's own inventory without rules of its own gets ``SHARED_DISK_STALL_RULE`` (its
    disk is the suite's); a test that gives rules adds it where its subject is not a stall."""
    counter = {"n": 0}

    def run(extra_vars=None, args=(), inventory=None, timeout=600, env_extra=None):
        counter["n"] += 1
        run_id = "it%d" % counter["n"]
        base = str(tmp_path)
        ev = {
            "fleetqual_profile": "quick",
            "fleetqual_bin_dir": os.path.join(base, "bin"),
            "fleetqual_test_dir": os.path.join(base, "test"),
            "fleetqual_results_dir": os.path.join(base, "results"),
            "fleetqual_build_cache_dir": build_cache,
            "fleetqual_run_id": run_id,
        }
        if inventory is None and "fleetqual_thresholds" not in (extra_vars or {}):
            ev["fleetqual_thresholds"] = [SHARED_DISK_STALL_RULE]
        ev.update(extra_vars or {})
        ev = {k: v for k, v in ev.items() if v is not None}
        env = ansible_env(env_extra)
        argv = [os.path.join(BIN, "ansible-playbook"), os.path.join(ROOT, "playbooks", "qualify.yml"),
                "-i", inventory or os.path.join(ROOT, "inventory", "localhost.yml"),
                "-e", json.dumps(ev)] + list(args)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False)
        return Run(proc, base, run_id)

    return run
