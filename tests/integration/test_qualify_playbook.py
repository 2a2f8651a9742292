"""End-to-end: ansible-playbook playbooks/qualify.yml on localhost with the quick profile."""
import os
import shutil
import subprocess

import pytest

from playbook_run import BIN, PACE, ROOT, SHARED_DISK_STALL_RULE, tree_snapshot

pytestmark = pytest.mark.slow

# the quick profile's workloads shortened and paced, for tests about something other than the
# measurement itself (the gate, the build on the host, the package step)
SHORT = {"fleetqual_workload_overrides": dict({"time": 2, "warmup": 1}, **PACE)}


def test_quick_profile_passes_and_stores_results(playbook, tmp_path):
    textfile_dir = tmp_path / "textfile"
    textfile_dir.mkdir()
    run = playbook({"fleetqual_node_exporter_textfile_dir": str(textfile_dir)})
    assert run.rc == 0, run.out[-4000:]
    rec = run.record()
    assert rec["verdict"] == "PASS", rec["reasons"]
    assert rec["run_id"] == run.run_id and rec["profile"] == "quick"
    ids = [w["id"] for w in rec["workloads"]]
    assert len(ids) == len(set(ids)) >= 3
    for wl in rec["workloads"]:
        assert wl["metrics"]["iops"] > 0, wl["id"]
        assert wl["result"]["bench"]["config"]["mode"] == wl["mode"]
        assert wl["result"]["collector"]["source"] in ("sysstat", "procfs")
    # Progress: each workload task names its place in the matrix and its duration.
    assert "Workload 1/%d: %s" % (len(ids), ids[0]) in run.out
    # Results are owner-only and the test directory is gone.
    assert os.stat(os.path.join(run.results_dir(), "localhost.json")).st_mode & 0o077 == 0
    assert not os.path.exists(os.path.join(run.base, "test"))
    # The deployed binary is root-owned and not writable by group or others.
    st = os.stat(os.path.join(run.base, "bin", "iobench"))
    assert st.st_uid == 0 and st.st_mode & 0o022 == 0
    # The host's own series, written by the cleanup's module run from the judged record
    # every workload, the host's pass, and promtool-clean.
    text = (textfile_dir / "fleetqual.prom").read_text()
    assert "fleetqual_host_pass 1.0" in text and all('workload="%s"' % i in text for i in ids), text[:2000]
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr


BAD_INPUTS = {"fleetqual_profile": "nosuch", "fleetqual_cache_size": "12Q", "fleetqual_test_dir": "relative/dir",
              "fleetqual_thresholds": [{"max_raed_p99_ms": 5}]}


def test_bad_inputs_stop_before_any_host_is_touched_each_named(playbook):
    """Four bad inputs in one run (each is refused by the same validation, which gathers every
    problem before any host): each is named in the message, nothing was touched."""
    results_before = tree_snapshot(os.path.join(ROOT, "results"))
    run = playbook(BAD_INPUTS, args=["-v"])          # -v: the refusal in full, not bounded
    assert run.rc != 0
    for names in ("fleetqual_profile: unknown profile 'nosuch'", "fleetqual_cache_size: unknown size suffix 'Q'",
                  "fleetqual_test_dir: must be an absolute path, got 'relative/dir'",
                  "fleetqual_thresholds[0].max_raed_p99_ms"):
        assert names in run.out, (names, run.out[-3000:])
    # The fleet report says the inputs were refused instead of inventing an ERROR host.
    assert "fleet: no host qualified: the inputs were refused" in run.out
    assert "FLEET REPORT" not in run.out
    # Nothing was built, deployed or created, and no report was written anywhere.
    assert tree_snapshot(run.base) == {}
    assert not os.path.exists(os.path.join(ROOT, "results")) or \
        tree_snapshot(os.path.join(ROOT, "results")) == results_before


def test_check_mode_reports_without_building(playbook, tmp_path):
    cache = tmp_path / "fresh-cache"
    run = playbook({"fleetqual_build_cache_dir": str(cache)}, args=["--check"])
    assert "would compile iobench" in run.out, run.out[-3000:]
    assert not cache.exists() or not any(cache.rglob("iobench-static"))
    assert not os.path.exists(os.path.join(run.base, "bin", "iobench"))


@pytest.mark.long
def test_build_on_target_compiles_on_the_host_and_a_threshold_failure_exits_non_zero(playbook, tmp_path):
    """One run for two things apart (a run costs a minute): the build on the host, and the
    gate of a failing threshold."""
    cache = tmp_path / "unused-cache"
    src = tmp_path / "hostsrc"
    run = playbook({"fleetqual_build_on": "target", "fleetqual_src_dir": str(src),
                    "fleetqual_build_cache_dir": str(cache),
                    "fleetqual_thresholds": [{"workload": "cache", "min_iops": 1e12}, SHARED_DISK_STALL_RULE],
                    **SHORT})
    # the build: made on the host, the controller's cache unused, the binary installed
    assert "Run make on the host" in run.out, run.out[-4000:]
    assert not cache.exists(), "the controller cache must not be used"
    builds = list(src.glob("*/iobench"))
    assert len(builds) == 1
    installed = os.path.join(run.base, "bin", "iobench")
    with open(builds[0], "rb") as a, open(installed, "rb") as b:
        assert a.read() == b.read()
    # the gate: the threshold FAILs the host and the playbook exits non-zero
    assert run.rc != 0, run.out[-3000:]
    rec = run.record()
    assert rec["verdict"] == "FAIL", rec["reasons"]
    assert any("1000000000000" in r or "1e+12" in r or "1e12" in r for r in rec["reasons"]), rec["reasons"]
    # the binary built on the host measured every workload
    assert rec["workloads"] and all(w["metrics"]["iops"] > 0 for w in rec["workloads"]), rec["workloads"]
    assert "Gate on the verdict" in run.out
    assert not os.path.exists(os.path.join(run.base, "test")), "test files must be removed on failure too"


def test_search_and_database_pattern_reach_the_diagnostics(playbook):
    matrix = [
        {"workload": "search", "id": "search-rndrd", "mode": "rndrd", "working_set": "cache",
         "direct": True, "search": "threads", "search_bound_ms": 1000, "search_max": 4,
         "search_step_time": 1, "warmup": 0},
        {"workload": "db", "id": "db-pattern", "mode": "dbpattern", "threads": 4, "working_set": "cache",
         "direct": True, "db_log_size": "4M", "time": 2, "warmup": 0},
    ]
    run = playbook({"fleetqual_matrix": matrix, "fleetqual_cache_size": "32M"})
    assert run.rc == 0, run.out[-4000:]
    rec = run.record()
    # the profile keeps its name (its rules follow it); the record says the matrix was the user's
    assert rec["profile"] == "quick" and rec["matrix"] == "custom"
    search = next(w for w in rec["workloads"] if w["id"] == "search-rndrd")["result"]["bench"]["search"]
    assert [s["threads"] for s in search["steps"]] == [1, 2, 4]
    assert search["stopped"] == "max_reached" and search["best"] is not None
    bounded = rec["diagnostics"]["bounded_max"]
    assert bounded["evidence"]["source"] == "search", bounded
    db = rec["diagnostics"]["db_pattern"]
    assert db["conclusion"] == "measured" and db["evidence"]["commits_per_sec"] > 0, db
    assert "commits/s" in db["sentence"]
    assert not os.path.exists(os.path.join(run.base, "test")), "the db log file must be cleaned up too"


def path_without(tool, where):
    """A directory of symlinks to every command of this PATH but ``tool``: a PATH on which
    ``tool`` is not installed, everything else as it is."""
    os.makedirs(where)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = os.path.join(where, name)
            if name != tool and not os.path.lexists(link) and os.access(os.path.join(d, name), os.X_OK):
                os.symlink(os.path.join(d, name), link)
    return where


def test_a_host_without_iostat_installs_sysstat_and_starts_again(playbook, tmp_path):
    """fleetqual_manage_packages: the start's module run finds iostat missing and changes
    nothing (packages_needed); the role installs sysstat (already a Debian package here, so
    the package manager changes nothing and needs no network) and starts again without
    asking again; the job, on a PATH where iostat still is not, samples /proc, and says so."""
    apt = subprocess.run(["/usr/bin/python3", "-c", "import apt"], capture_output=True, check=False)
    assert apt.returncode == 0, "python3-apt (scripts/setup.sh --test) is needed by the package module"
    bin_dir = path_without("iostat", str(tmp_path / "path"))
    run = playbook({"fleetqual_manage_packages": True, **SHORT},
                   env_extra={"PATH": BIN + os.pathsep + bin_dir})
    assert run.rc == 0, run.out[-4000:]
    assert "TASK [fleetqual.storage.qualify : Install sysstat for iostat and vmstat]" in run.out, run.out[-4000:]
    assert "TASK [fleetqual.storage.qualify : Start the measurement job now that sysstat is installed]" in run.out
    rec = run.record()
    assert rec["verdict"] == "PASS", rec["reasons"]
    for wl in rec["workloads"]:
        collector = wl["result"]["collector"]
        assert collector["source"] == "procfs" and "iostat not found" in (collector.get("reason") or ""), collector
    assert not os.path.exists(os.path.join(run.base, "test"))
