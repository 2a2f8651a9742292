"""Safety: marker, refusals, symlinks, space, read-only, O_DIRECT refusal. Every refusal
has its exit code and message and leaves the parent tree byte-identical."""
import os

from iobench_helpers import SMALL, mounted, seed_parent, snapshot


def fresh(parent):
    seed_parent(str(parent))
    d = parent / "bench"
    d.mkdir()
    return d


def test_missing_dir(ib, tmp_path):
    seed_parent(str(tmp_path))
    before = snapshot(str(tmp_path))
    for cmd in (["prepare"], ["run", "--mode", "rndrd"], ["cleanup"], ["run", "--prepare", "--mode", "rndrd"]):
        r = ib(*cmd, "--dir", tmp_path / "nope", *SMALL)
        assert r.rc == 3, r
        assert r.err.startswith("iobench: error: ") and "--dir" in r.err and "does not exist" in r.err
    assert snapshot(str(tmp_path)) == before
    assert not (tmp_path / "nope").exists()


def test_non_empty_dir_without_marker(ib, tmp_path):
    d = fresh(tmp_path)
    (d / "important.db").write_bytes(os.urandom(10000))
    (d / "test_file.0").write_bytes(b"someone else's file named like ours")
    before = snapshot(str(tmp_path))
    r = ib("prepare", "--dir", d, *SMALL)
    assert r.rc == 3, r
    assert "not empty" in r.err and ".iobench-marker" in r.err
    r = ib("run", "--prepare", "--dir", d, *SMALL, "--mode", "rndrd")
    assert r.rc == 3, r
    for cmd in (["run", "--mode", "rndrd"], ["cleanup"]):
        r = ib(*cmd, "--dir", d, *SMALL)
        assert r.rc == 3 and ".iobench-marker" in r.err, r
    assert snapshot(str(tmp_path)) == before


def test_fake_marker_refused(ib, tmp_path):
    d = fresh(tmp_path)
    (d / ".iobench-marker").write_text("hello\n")
    (d / "test_file.0").write_text("x")
    before = snapshot(str(tmp_path))
    for cmd in (["prepare"], ["cleanup"], ["run", "--mode", "rndrd"]):
        r = ib(*cmd, "--dir", d, *SMALL)
        assert r.rc == 3 and "marker" in r.err, r
    assert snapshot(str(tmp_path)) == before


def test_marker_written_and_cleanup_exact(ib, tmp_path):
    d = fresh(tmp_path)
    assert ib("prepare", "--dir", d, "--file-num", "3", "--total-size", "3M").rc == 0
    assert (d / ".iobench-marker").read_text().startswith("iobench test directory marker v1\n")
    # things that look like ours but are not, added after prepare
    (d / "test_file.01").write_text("leading zero: not ours")
    (d / "test_file.x").write_text("not a number")
    (d / "test_file.3.bak").write_text("suffix")
    (d / "notes.txt").write_text("user file")
    (d / "sub").mkdir()
    (d / "sub" / "test_file.0").write_text("nested")
    r = ib("cleanup", "--dir", d)
    assert r.rc == 0, r
    assert r.json["cleanup"]["removed_files"] == 3
    assert sorted(os.listdir(d)) == ["notes.txt", "sub", "test_file.01", "test_file.3.bak", "test_file.x"]
    assert (d / "sub" / "test_file.0").read_text() == "nested"
    assert (tmp_path / "test_file.0").read_text() == "not iobench's\n"
    # a second cleanup: marker gone -> refused, nothing touched
    before = snapshot(str(tmp_path))
    r = ib("cleanup", "--dir", d)
    assert r.rc == 3
    assert snapshot(str(tmp_path)) == before


def test_created_files_are_owner_only(ib, tmp_path):
    """Data files, the marker, the db log and the JSON result are 0600 whatever the umask."""
    d = fresh(tmp_path)
    out = tmp_path / "result.json"
    old = os.umask(0o022)
    try:
        r = ib("run", "--prepare", "--dir", d, "--mode", "dbpattern", "--threads", "2", "--time", "1",
               "--file-num", "2", "--total-size", "4M", "--db-log-size", "1M", "--output", out)
    finally:
        os.umask(old)
    assert r.rc == 0, r
    created = [d / ".iobench-marker", d / "test_file.0", d / "test_file.1", d / "ib_logfile.iobench", out]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in created} == {p.name: "0o600" for p in created}


def test_symlink_not_followed(ib, tmp_path):
    d = fresh(tmp_path)
    assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "2M").rc == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(os.urandom(2 << 20))
    os.unlink(d / "test_file.1")
    os.symlink(victim, d / "test_file.1")
    before = snapshot(str(tmp_path))
    r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "2M", "--mode", "rndwr", "--requests", "100")
    assert r.rc == 3 and "symlink" in r.err, r
    r = ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "2M")
    assert r.rc == 3 and "test_file.1" in r.err, r
    r = ib("cleanup", "--dir", d)
    assert r.rc == 3 and "test_file.1" in r.err, r
    assert snapshot(str(tmp_path)) == before
    assert os.path.islink(d / "test_file.1") and (d / "test_file.0").exists()


def test_symlinked_marker_refused(ib, tmp_path):
    d = fresh(tmp_path)
    real = tmp_path / "real-marker"
    real.write_text("iobench test directory marker v1\n")
    os.symlink(real, d / ".iobench-marker")
    before = snapshot(str(tmp_path))
    r = ib("cleanup", "--dir", d)
    assert r.rc == 3, r
    assert snapshot(str(tmp_path)) == before


def test_read_only_filesystem(ib):
    with mounted("tmpfs", "ro,size=1m") as mnt:
        before = snapshot(mnt)
        r = ib("prepare", "--dir", mnt, *SMALL)
        assert r.rc == 3 and "not writable" in r.err and "--dir" in r.err, r
        r = ib("run", "--prepare", "--dir", mnt, *SMALL, "--mode", "rndwr")
        assert r.rc == 3, r
        assert snapshot(mnt) == before == {}


def test_not_enough_space(ib):
    with mounted("tmpfs", "size=16m") as mnt:
        parent = mnt
        seed_parent(parent)
        d = os.path.join(parent, "bench")
        os.mkdir(d)
        before = snapshot(parent)
        r = ib("prepare", "--dir", d, "--file-num", "4", "--total-size", "64M")
        assert r.rc == 3, r
        assert "not enough free space" in r.err
        # both numbers are stated: need = 64 MiB + 5 % + 64 MiB
        need = (64 << 20) + (64 << 20) // 20 + (64 << 20)
        assert str(need) in r.err
        import re
        avail = int(re.search(r"available (\d+) bytes", r.err).group(1))
        assert 0 < avail <= 16 << 20
        assert snapshot(parent) == before


def test_odirect_refused_names_filesystem(ib):
    # tmpfs accepts O_DIRECT on recent kernels; ramfs refuses it
    with mounted("ramfs") as mnt:
        seed_parent(mnt)
        d = os.path.join(mnt, "bench")
        os.mkdir(d)
        before = snapshot(mnt)
        r = ib("prepare", "--dir", d, *SMALL, "--direct")
        assert r.rc == 3, r
        assert "O_DIRECT" in r.err and "ramfs" in r.err and "without --direct" in r.err
        r = ib("run", "--prepare", "--dir", d, *SMALL, "--direct", "--mode", "rndrd", "--requests", "10")
        assert r.rc == 3 and "ramfs" in r.err, r
        assert snapshot(mnt) == before
        # prepared buffered, a --direct run is refused the same way before any I/O
        assert ib("prepare", "--dir", d, "--file-num", "2", "--total-size", "2M").rc == 0
        before = snapshot(mnt)
        r = ib("run", "--dir", d, "--file-num", "2", "--total-size", "2M", "--direct", "--mode", "rndwr",
               "--requests", "10")
        assert r.rc == 3 and "ramfs" in r.err, r
        assert snapshot(mnt) == before


def test_io_uring_refused_is_exit_3(ib, tmp_path):
    d = fresh(tmp_path)
    before = snapshot(str(tmp_path))
    r = ib("run", "--prepare", "--dir", d, *SMALL, "--mode", "rndrd", "--engine", "io_uring",
           env={"IOBENCH_DEBUG_URING_ERRNO": "EPERM"})
    assert r.rc == 3 and "io_uring" in r.err and "--engine sync" in r.err, r
    assert snapshot(str(tmp_path)) == before


def test_unaligned_direct_block_exit_2(ib, tmp_path):
    d = fresh(tmp_path)
    before = snapshot(str(tmp_path))
    r = ib("run", "--prepare", "--dir", d, *SMALL, "--mode", "rndrd", "--direct", "--block-size", "6000")
    assert r.rc == 2 and "--block-size" in r.err, r
    assert snapshot(str(tmp_path)) == before


def test_lost_found_counts_as_empty(ib, tmp_path):
    d = fresh(tmp_path)
    (d / "lost+found").mkdir()
    r = ib("prepare", "--dir", d, "--file-num", "1", "--total-size", "1M")
    assert r.rc == 0, r
    assert ib("cleanup", "--dir", d).rc == 0
    assert os.listdir(d) == ["lost+found"]
