"""The whole qualify playbook over SSH against a fleet of four loopback sshd hosts (group db),
quick profile, then testinfra over SSH checks each host.

One playbook run (module fixture ``full_run``); while it runs, a watcher samples one
host's test directory to check the permissions of what the run creates there.
"""
import hashlib
import os
import stat
import threading
import time

import pytest
import testinfra

from fleetrun import run_playbook
import fleetlib

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.long]

HOSTS = ["fq11", "fq12", "fq13", "fq14"]


class TreeWatcher(threading.Thread):
    """Record (relative path, mode, uid) of everything under path while a run goes on."""

    def __init__(self, path, timeout=300):
        super().__init__(daemon=True)
        self.path, self.timeout = path, timeout
        self.seen = {}
        self.stop = threading.Event()

    def run(self):
        deadline = time.monotonic() + self.timeout
        while not self.stop.is_set() and time.monotonic() < deadline:
            for dirpath, dirnames, filenames in os.walk(self.path):
                for name in [""] + dirnames + filenames:
                    full = os.path.join(dirpath, name) if name else dirpath
                    try:
                        st = os.lstat(full)
                    except OSError:
                        continue
                    rel = os.path.relpath(full, self.path)
                    self.seen[rel] = (stat.S_IMODE(st.st_mode), st.st_uid, stat.S_ISDIR(st.st_mode))
            time.sleep(0.05)


@pytest.fixture(scope="module")
def full_run(fleet, fleet4, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("full"))
    hosts = [{"name": "fq%d" % (11 + i), "inst": inst} for i, inst in enumerate(fleet4)]
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts,
                          group_vars={"db": {"fleetqual_profile": "quick", "fleetqual_workload_overrides": fleetlib.PACE}})
    dirs = {h["name"]: fleet.host_dirs(h["name"], fleet.default_dirs_root(os.path.join(base, "inventory"))) for h in hosts}
    logins_before = {inst.name: inst.accepted_logins() for inst in fleet4}
    watcher = TreeWatcher(dirs["fq11"]["fleetqual_test_dir"])
    watcher.start()
    try:
        # a build cache of its own: exactly one build, the one this run deployed
        run = run_playbook(fleet, inv, base, "full",
                           extra_vars={"fleetqual_build_cache_dir": os.path.join(base, "cache")})
    finally:
        watcher.stop.set()
        watcher.join()
    run.dirs = dirs
    run.watcher = watcher
    run.logins = {inst.name: inst.accepted_logins() - logins_before[inst.name] for inst in fleet4}
    return run


def test_every_host_passes_over_ssh(full_run):
    assert full_run.rc == 0, full_run.out[-5000:]
    assert full_run.summary() == (4, 4, 4, 0, 0, 0)
    fj = full_run.fleet()
    assert fj["summary"]["by_verdict"] == {"PASS": 4, "FAIL": 0, "UNREACHABLE": 0, "ERROR": 0, "INCONCLUSIVE": 0}
    assert sorted(h["host"] for h in fj["hosts"]) == HOSTS
    # the inventory group is the outlier group, and it is big enough to be judged
    db = [g for g in fj["groups"] if g["name"] == "db"]
    assert db and db[0]["source"] == "inventory" and db[0]["judged"] is True
    assert sorted(db[0]["hosts"]) == HOSTS


def test_every_host_was_reached_over_its_own_sshd(full_run):
    # each sshd logged the client key's logins: the run really went over SSH to every host
    assert all(n > 0 for n in full_run.logins.values()), full_run.logins


@pytest.mark.parametrize("host", HOSTS)
def test_results_stored_on_the_controller(full_run, host):
    rec = full_run.record(host)
    assert rec["verdict"] == "PASS", rec["reasons"]
    assert rec["groups"] == ["db"] and rec["profile"] == "quick"
    assert rec["test_dir"] == full_run.dirs[host]["fleetqual_test_dir"]
    # PASS implies no planned workload is missing (the judge checks the plan's ids)
    assert len(rec["workloads"]) >= 4
    assert [w["id"] for w in rec["workloads"]] == [w["id"] for w in full_run.record("fq11")["workloads"]]
    for wl in rec["workloads"]:
        assert wl["metrics"]["iops"] > 0 and wl["metrics"]["errors"] == 0, wl["id"]
    path = os.path.join(full_run.results_dir(), host + ".json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(full_run.results_dir()).st_mode) == 0o700


def _testinfra_host(fleet, inst):
    return testinfra.get_host("ssh://root@%s:%d" % (inst.addr, inst.port),
                              ssh_identity_file=fleet.client_key,
                              ssh_extra_args=fleetlib.SSH_ARGS + " -o ControlMaster=no -o ControlPath=none")


@pytest.mark.parametrize("host", HOSTS)
def test_host_state_checked_with_testinfra_over_ssh(fleet, full_run, host):
    inst = fleet.instances[host]
    th = _testinfra_host(fleet, inst)
    assert th.backend.get_hostname() and th.run("true").rc == 0
    dirs = full_run.dirs[host]
    binary = th.file(os.path.join(dirs["fleetqual_bin_dir"], "iobench"))
    assert binary.exists and binary.is_file
    assert binary.user == "root" and binary.group == "root"
    assert binary.mode == 0o755
    # the deployed binary is the controller's cached build, byte for byte
    cache = os.path.join(full_run.base, "cache")
    cached = [os.path.join(d, f) for d, _dirs, fs in os.walk(cache) for f in fs if f == "iobench-static"]
    assert len(cached) == 1, cached
    with open(cached[0], "rb") as fh:
        assert binary.sha256sum == hashlib.sha256(fh.read()).hexdigest()
    # no test files left on the host
    assert not th.file(dirs["fleetqual_test_dir"]).exists
    leftovers = th.run("find %s -name 'test_file.*'" % os.path.dirname(dirs["fleetqual_test_dir"]))
    assert leftovers.rc == 0 and leftovers.stdout.strip() == ""


def test_test_files_are_owner_only_while_the_run_goes_on(full_run):
    seen = full_run.watcher.seen
    files = {p: v for p, v in seen.items() if os.path.basename(p).startswith("test_file.")}
    assert files, "the watcher never saw the data set files: %s" % sorted(seen)[:20]
    dirs = {p: v for p, v in seen.items() if v[2]}
    # the test directory and each data set directory are 0700 root: nobody else can reach
    # the files below them, whatever their own mode bits
    assert dirs["."][0] == 0o700 and dirs["."][1] == 0
    assert all(mode == 0o700 and uid == 0 for p, (mode, uid, _isdir) in dirs.items()), dirs
    assert all(uid == 0 for _mode, uid, _isdir in files.values())
    marker = seen.get(".fleetqual-storage")
    assert marker and marker[0] == 0o600
    # iobench creates its files 0644 (files.c); they are owner-only in effect because every
    # directory above them inside the test dir is 0700. Never group/world writable:
    assert all(mode & 0o022 == 0 for mode, _uid, _isdir in files.values()), files
