"""testinfra checks of the localhost scenario: deployed binary, stored results, no leftovers."""
import glob
import hashlib
import json

BASE = "/tmp/fleetqual-molecule"


def _sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_binary_installed_root_owned_not_writable_by_others(host):
    f = host.file(BASE + "/bin/iobench")
    assert f.exists and f.is_file
    assert f.user == "root" and f.group == "root"
    assert f.mode == 0o755


def test_binary_matches_the_controller_build(host):
    builds = glob.glob(BASE + "/cache/*/iobench-static")
    assert len(builds) == 1, builds
    assert host.file(BASE + "/bin/iobench").sha256sum == _sha256(builds[0])


def test_binary_runs(host):
    out = host.run(BASE + "/bin/iobench --version")
    assert out.rc == 0 and "iobench" in out.stdout


def test_results_json_is_complete(host):
    record = json.loads(host.file(BASE + "/results/molecule/localhost.json").content_string)
    assert record["schema_version"] == 1
    assert record["host"] == "localhost"
    assert record["verdict"] == "PASS", record["reasons"]
    assert record["workloads"], "no workload recorded"
    for wl in record["workloads"]:
        bench = wl["result"]["bench"]
        assert bench["schema_version"] == 1
        assert not bench["interrupted"]
        assert bench["errors"]["total"] == 0
        assert wl["metrics"]["iops"] > 0
        assert wl["result"]["collector"]["source"] in ("sysstat", "procfs")
    assert host.file(BASE + "/results/molecule/localhost.json").mode == 0o600


def test_no_test_files_remain(host):
    assert not host.file(BASE + "/test").exists
