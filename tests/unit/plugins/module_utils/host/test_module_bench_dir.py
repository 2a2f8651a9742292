"""The bench_dir module on real filesystems: every refusal happens before anything is
written, names the variable and the numbers, and cleanup removes only what is ours."""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import unitpaths

COLLECTIONS = os.path.join(unitpaths.ROOT,
                           "build", "collections")

MOD = "ansible_collections.fleetqual.storage.plugins.modules.bench_dir"
MARKER = ".fleetqual-storage"


def run_module(tmp_path, check_mode=False, **args):
    if check_mode:
        args["_ansible_check_mode"] = True
    argsfile = tmp_path / ("args-%d.json" % len(list(tmp_path.glob("args-*.json"))))
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, "-m", MOD, str(argsfile)], capture_output=True, text=True,
                          cwd=COLLECTIONS, check=False)
    return json.loads(proc.stdout)


def snapshot(path):
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            digest = None
            if os.path.isfile(full) and not os.path.islink(full):
                digest = hashlib.sha256(open(full, "rb").read()).hexdigest()
            out[os.path.relpath(full, path)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def mount(tmp_path):
    """mount(fstype, options) -> mount point, unmounted afterwards (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a filesystem needs root")
    mounted = []

    def do(fstype, options):
        point = tmp_path / ("mnt-%s-%d" % (fstype, len(mounted)))
        point.mkdir()
        subprocess.run(["mount", "-t", fstype, "-o", options, fstype, str(point)], check=True)
        mounted.append(point)
        return point

    yield do
    for point in reversed(mounted):
        subprocess.run(["umount", str(point)], check=False)


def test_creates_owner_only_directory_marker_and_datasets(tmp_path):
    target = tmp_path / "fq"
    res = run_module(tmp_path, path=str(target), datasets=["cache", "over_cache"], required_bytes=1 << 20)
    assert not res.get("failed"), res
    assert res["created"] and res["changed"]
    assert (os.stat(target).st_mode & 0o777) == 0o700
    assert (os.stat(target / "cache").st_mode & 0o777) == 0o700
    assert (os.stat(target / MARKER).st_mode & 0o777) == 0o600
    assert res["filesystem"] and res["free_bytes"] > 0


def test_refuses_someone_elses_directory_and_leaves_it_byte_identical(tmp_path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "ibdata1").write_bytes(os.urandom(4096))
    (target / "notes.txt").write_text("keep me")
    before = snapshot(tmp_path)
    res = run_module(tmp_path, path=str(target), datasets=["cache"], direct=True)
    assert res["failed"]
    assert "fleetqual_test_dir" in res["msg"] and "2 entries" in res["msg"] and "refusing" in res["msg"]
    after = snapshot(tmp_path)
    after.pop("args-0.json", None)
    before.pop("args-0.json", None)
    assert after == before


def test_refuses_a_symlinked_test_dir(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    res = run_module(tmp_path, path=str(link))
    assert res["failed"] and "symlink" in res["msg"]
    assert os.listdir(real) == []


@pytest.mark.parametrize("path", ["relative/dir", "/var/tmp/../etc/fq"])
def test_refuses_relative_and_dotdot_paths(tmp_path, path):
    res = run_module(tmp_path, path=path)
    assert res["failed"] and "fleetqual_test_dir must be an absolute path" in res["msg"]


def test_not_enough_space_states_both_numbers_and_writes_nothing(tmp_path, mount):
    point = mount("tmpfs", "size=4m,mode=0755")
    res = run_module(tmp_path, path=str(point / "fq"), required_bytes=64 << 20)
    assert res["failed"]
    assert "not enough space" in res["msg"] and "64.0 MiB" in res["msg"] and "70.4 MiB" in res["msg"]
    assert "free" in res["msg"] and "tmpfs" in res["msg"]
    assert os.listdir(point) == []


def test_o_direct_refused_names_the_filesystem_and_leaves_nothing(tmp_path, mount):
    # tmpfs accepts O_DIRECT on kernels >= 6.6; ramfs still refuses it.
    point = mount("ramfs", "size=8m")
    res = run_module(tmp_path, path=str(point / "fq"), datasets=["cache"], direct=True, required_bytes=1024)
    assert res["failed"]
    assert "O_DIRECT is refused by the ramfs filesystem" in res["msg"] and "direct: false" in res["msg"]
    assert os.listdir(point) == [], "the probe and the directories it made must be undone"


def test_check_mode_creates_nothing(tmp_path):
    target = tmp_path / "fq"
    res = run_module(tmp_path, check_mode=True, path=str(target), datasets=["cache"], direct=True)
    assert not res.get("failed"), res
    assert res["changed"] and not target.exists()


def test_absent_removes_only_what_is_ours(tmp_path):
    target = tmp_path / "fq"
    res = run_module(tmp_path, path=str(target), datasets=["cache", "log"])
    assert not res.get("failed"), res
    (target / "cache" / "someone.txt").write_text("not ours")
    res = run_module(tmp_path, path=str(target), datasets=["cache", "log"], state="absent")
    assert not res.get("failed"), res
    assert str(target / "log") in res["removed"]
    assert (target / "cache" / "someone.txt").read_text() == "not ours"
    assert str(target / "cache" / "someone.txt") in res["left"]
    assert (target / MARKER).exists(), "the directory still holds foreign files, so it stays marked"


def test_absent_refuses_an_unmarked_directory(tmp_path):
    target = tmp_path / "unmarked"
    target.mkdir()
    (target / "x").write_text("x")
    res = run_module(tmp_path, path=str(target), state="absent")
    assert res["failed"] and "not ours" in res["msg"]
    assert (target / "x").read_text() == "x"


def test_present_refuses_a_missing_binary_before_creating_anything(tmp_path):
    target = tmp_path / "t"
    r = run_module(tmp_path, path=str(target), binary=str(tmp_path / "bin" / "iobench"))
    assert r["failed"] and "iobench is missing; run the fleetqual.storage.iobench role first" in r["msg"]
    assert not target.exists()
    fake = tmp_path / "iobench"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    r = run_module(tmp_path, path=str(target), binary=str(fake))
    assert not r.get("failed") and target.is_dir()
