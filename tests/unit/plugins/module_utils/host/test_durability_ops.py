"""The host side of the power-cut test (module_utils/host/durability.py) on devices of the
test's own, with the real iobench: writers start detached and have writes acknowledged, a
snapshot names only acknowledged writes, a check after the writers were killed (the cut of a
drive that keeps what it acknowledged) finds every one, a check after the drive's image was
put back as it was before the cycle (a drive that kept nothing of it) finds every one lost;
the refusals; cleanup ends a writer whose cut never came. The cut itself, of a real machine
with a volatile drive cache, is tests/vm/test_vm_durability.py."""
import os
import shutil
import signal
import time

import pytest

import loopdev
import unitpaths

unitpaths.on_path()

from test_module_iobench import iobench_binary  # noqa: E402,F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.module_utils.host import durability as dur  # noqa: E402

pytestmark = pytest.mark.slow
SETTINGS = {"size": 4 << 20, "block_size": 4096, "threads": 2}


@pytest.fixture
def devices(tmp_path):
    """A raw loop device and an ext4 on another, both over files on a tmpfs of the test's own."""
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    with loopdev.tmpfs(str(tmp_path / "mem"), 200) as mem:
        image = os.path.join(mem, "raw.img")
        with open(image, "wb") as fh:
            fh.truncate(8 << 20)
        raw = loopdev.attach(image)
        started = set(dur._PROCS)
        try:
            with loopdev.loop_ext4(112, base=mem) as fs:
                path = os.path.join(fs["mnt"], "fq")
                os.mkdir(path)
                yield {"raw": raw, "image": image, "fs": fs, "path": path, "shm": os.path.join(mem, "shm")}
        finally:
            # a test that failed half way leaves no writer running (ours: started by this process)
            for pid, proc in list(dur._PROCS.items()):
                if pid not in started and proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
            loopdev.detach(raw, image)


def targets(dev):
    return [{"name": "raw", "kind": "device", "device": dev["raw"], "destroy_data": True},
            {"name": "dir", "kind": "path", "path": dev["path"], "destroy_data": True}]


def kill(started):
    for t in started["targets"]:
        os.kill(t["pid"], signal.SIGKILL)
    for t in started["targets"]:
        deadline = time.time() + 30
        while dur._writer_alive(t) and time.time() < deadline:
            time.sleep(0.05)


def test_a_cycle_finds_every_acknowledged_write_and_a_drive_that_kept_none_of_them(iobench_binary, devices):
    os.makedirs(devices["shm"])
    ts = targets(devices)
    s1 = dur.start(iobench_binary, "run1", 1, ts, SETTINGS, root=devices["shm"])
    assert [t["name"] for t in s1["targets"]] == ["raw", "dir"]
    raw = s1["targets"][0]
    assert raw["drive"]["name"] == os.path.basename(devices["raw"]), raw["drive"]
    assert s1["targets"][1]["drive"]["name"] == devices["fs"]["name"]
    time.sleep(0.5)
    snap = dur.snapshot(s1["targets"])
    assert all(w["acked"] > 0 and w["writer_running"] for w in snap["witnesses"].values()), snap
    kill(s1)
    got = dur.check(iobench_binary, "run1", 1, s1["targets"], {n: w["witness"] for n, w in snap["witnesses"].items()},
                    root=devices["shm"])
    for name, w in snap["witnesses"].items():
        assert got[name]["acked"] == w["acked"] and got[name]["intact"] == w["acked"], got[name]
        assert got[name]["lost"] == got[name]["torn"] == 0

    # cycle 2 on a drive that keeps nothing of it: its image put back as it was before
    before = devices["image"] + ".before"
    shutil.copy(devices["image"], before)
    s2 = dur.start(iobench_binary, "run1", 2, ts[:1], SETTINGS, root=devices["shm"])
    time.sleep(0.5)
    snap2 = dur.snapshot(s2["targets"])
    kill(s2)
    with open(before, "rb") as src, open(devices["raw"], "r+b") as dst:
        dst.write(src.read())
        dst.flush()
        os.fsync(dst.fileno())
    got = dur.check(iobench_binary, "run1", 2, s2["targets"], {"raw": snap2["witnesses"]["raw"]["witness"]},
                    root=devices["shm"])["raw"]
    assert got["acked"] == snap2["witnesses"]["raw"]["acked"] > 0 and got["lost"] == got["acked"], got
    assert got["lost_acked_ms"]["last"] <= snap2["taken_ms"]

    out = dur.cleanup(iobench_binary, "run1", s1["targets"], root=devices["shm"])
    assert out["ended_writers"] == []
    assert not os.path.exists(dur.witness_dir("run1", devices["shm"]))
    assert not os.path.exists(dur.marked_dir(ts[1])) and os.listdir(devices["path"]) == []


def test_cleanup_ends_a_writer_whose_cut_never_came(iobench_binary, devices):
    os.makedirs(devices["shm"])
    ts = targets(devices)[:1]
    s = dur.start(iobench_binary, "run2", 1, ts, SETTINGS, root=devices["shm"])
    out = dur.cleanup(iobench_binary, "run2", s["targets"], root=devices["shm"])
    assert out["ended_writers"] == ["raw"] and not dur._writer_alive(s["targets"][0])


def test_refusals(iobench_binary, devices, tmp_path):
    t = targets(devices)
    cases = [
        (dict(t[0], destroy_data=None), "not opted in"),
        ({"name": "root", "kind": "path", "path": str(tmp_path), "destroy_data": True}, "root filesystem"),
        ({"name": "mounted", "kind": "device", "device": devices["fs"]["dev"], "destroy_data": True}, "mounted"),
    ]
    for target, text in cases:
        with pytest.raises(dur.DurabilityError) as e:
            dur.start(iobench_binary, "run3", 1, [target], SETTINGS, root=devices["shm"])
        assert text in str(e.value) and target["name"] in str(e.value), e.value
    assert not os.path.exists(dur.witness_dir("run3", devices["shm"]))


def test_a_host_on_the_controllers_own_kernel_is_refused(iobench_binary, devices):
    with pytest.raises(dur.DurabilityError) as e:
        dur.start(iobench_binary, "run4", 1, targets(devices)[:1], SETTINGS, root=devices["shm"],
                  controller_boot_id=dur.boot_id())
    assert "controller's own kernel" in str(e.value)
    assert not os.path.exists(dur.witness_dir("run4", devices["shm"]))
