"""A mixed fleet of Debian 11, 12 and 13 hosts passes (docs/testing.md, "Hosts of other Debian
releases"). The Debian 11 (bullseye: Python 3.9, sysstat 12.5) and 13 (trixie: Python 3.13,
sysstat 12.7) hosts are sshd daemons running inside debootstrap chroots (tests/fleet/chroots.py,
built once and cached per machine: chroots.CACHE); the Debian 12 host is the machine itself.

ONE playbook run, 7 hosts at ``--forks 3``:

| host | release | sysstat | plan |
|---|---|---|---|
| deb11-quick, deb13-quick | 11, 13 | yes | the real quick profile (6 workloads) |
| deb11-compliance, deb13-compliance | 11, 13 | hidden from PATH: /proc collector | compliance profile, workloads of 2 s |
| arr-deb11, arr-deb12, arr-deb13 | 11, 12, 13 | yes | one array (group arr): 1 step, 3 initiators in lock-step, then 1 tiny workload |

A release the archive no longer serves, or a machine without debootstrap or network, skips
that release's tests with the reason (pytest's -ra summary lists it); the others still run.
The chroots' safety (nothing mounted is ever removed, every exit path unmounts) is tested
apart, without the playbook: a SIGTERMed and a SIGKILLed owner of a live chroot.

Every test that needs a chroot is in the long suite (``make test-long``, which builds them:
minutes of debootstrap); the parsers and the mount-safety test without a chroot stay in make test.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

import chroots
import fleetlib
from fleetrun import iostat_sampled_or_warned, run_playbook

HERE = os.path.dirname(os.path.abspath(__file__))
QUICK_IDS = ["cache-rndrd-t1", "over_cache-rndrd-t4", "over_cache-rndwr-t4", "log-seqwr-t1",
             "cache-rndwr-t1", "over_cache-rndwr-t1"]
COMPLIANCE_IDS = ["cache-rndrd-t1", "cache-rndrd-t4", "cache-rndwr-t1", "over_cache-rndrd-t4",
                  "over_cache-rndwr-t4", "log-seqwr-t1"]
OTHER = {"bullseye": "11", "trixie": "13"}           # release -> inventory suffix
# a 4 s step: its members may begin their windows 400 ms apart (10 %, arrays' lock-step) when
# this machine's seven test streams delay one iobench's wake-up (85 ms seen; a 2 s step's
# 200 ms was exceeded once). A member that reaches the step's start late warms up less and
# opens its window on time: the 3 s warmup absorbs a start up to 3 s late (a starved stream
# launched all three members 2 s late, one of them reached its start 1.6 s late). Lock-step
# itself is judged by the array fleets' own tests
ARRAY = {"initiators": [3], "threads": [1], "modes": ["rndrd"], "time": 4, "warmup": 3,
         "block_size": "16K", "total_size": "16M", "file_num": 1}
TINY = [{"workload": "cache", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M", "block_size": "16K",
         "direct": True, "time": 1, "warmup": 0}]
COMPLIANCE = {"fleetqual_profile": "compliance",
              # small working sets (cache 8M, over-cache 64M) and 2 s windows: "it runs there"
              "fleetqual_cache_size": "16M",
              "fleetqual_workload_overrides": dict({"time": 2, "warmup": 1}, **fleetlib.PACE),
              # the other hosts measure on the same disk meanwhile: no quiet wait (it would wait
              # in vain), a shared window is a warning, and no guard stopping a workload when the
              # others' await passes its bound (on a busy machine it would, at random)
              "fleetqual_foreign_io": {"wait_s": 2, "sample_s": 1, "quiet_util_pct": 100, "on_busy": "warn",
                                       "guard_await_ms": 0}}
CHROOT_DIRS = "/srv/fleetqual/%s"


def _inner_dirs(name):
    return {"fleetqual_test_dir": CHROOT_DIRS % name + "/test", "fleetqual_bin_dir": CHROOT_DIRS % name + "/bin"}


def _ssh(fleet, inst, command):
    argv = ["ssh", "-i", fleet.client_key, "-p", str(inst.port)] + fleetlib.SSH_ARGS.split() + \
        ["-o", "BatchMode=yes", "root@" + inst.addr, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def distros(fleet, tmp_path_factory):
    why = chroots.unavailable()
    if why:
        pytest.skip(why)
    d = chroots.Distros(fleet, str(tmp_path_factory.mktemp("distros")))
    try:
        yield d
    finally:
        errors, pids = d.close()
        assert not errors, errors
        assert not fleetlib.sshd_pids_below(pids), "sshd still running after teardown"
        assert not [c.dir for c in d.chroots.values() if os.path.exists(c.dir) or chroots.mounts_under(c.dir)]


@pytest.fixture(scope="module")
def mixed_run(fleet, distros, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("mixed"))
    hosts, insts, n = [], {}, 150
    for release, v in OTHER.items():
        try:
            distros.chroot(release)
        except chroots.Unavailable:
            continue                            # its tests skip with distros.skipped[release]
        shadow = distros.chroots[release].hide_sysstat()
        for kind, key_options, extra in (
                ("quick", "", {"fleetqual_profile": "quick", "fleetqual_workload_overrides": fleetlib.PACE}),
                ("compliance", 'environment="PATH=%s:/usr/sbin"' % shadow, COMPLIANCE),
                ("arr", "", {"fleetqual_matrix": TINY})):
            n += 1
            name = "arr-deb%s" % v if kind == "arr" else "deb%s-%s" % (v, kind)
            insts[name] = distros.host(release, n, key_options=key_options)
            hosts.append({"name": name, "group": "arr" if kind == "arr" else "distros", "inst": insts[name],
                          "vars": dict(extra, ansible_python_interpreter="/usr/bin/python3", **_inner_dirs(name))})
    if not hosts:
        pytest.skip("no chroot host of another Debian release: %s" % "; ".join(distros.skipped.values()))
    # the machine's own Debian 12, with its own /usr/bin/python3 (not the venv's)
    insts["arr-deb12"] = fleet.host(159)
    hosts.append({"name": "arr-deb12", "group": "arr", "inst": insts["arr-deb12"],
                  "vars": {"ansible_python_interpreter": "/usr/bin/python3", "fleetqual_matrix": TINY}})
    group_vars = {"arr": {"fleetqual_array": "mixed", "fleetqual_arrays": {"mixed": ARRAY}},
                  # poll the jobs every 2 s, not at 30 s rounds; a 5 s stall limit (rule
                  # suite-shared-disk): a fresh-clone run's debian13 host FAILed on a real 1.7 s
                  # stall of this machine's shared disk under the suite's seven streams, which
                  # is not what this fleet tests (the stall rule has fleets of its own)
                  "all": {"fleetqual_progress_interval": 2, "fleetqual_thresholds": [fleetlib.SHARED_DISK_STALL_RULE]}}
    inv = fleet.inventory(os.path.join(base, "inventory"), hosts, group_vars=group_vars)
    run = run_playbook(fleet, inv, base, "distros", args=["--forks", "3"], timeout=900)
    run.insts = insts
    run.hosts = {h["name"]: h for h in hosts}
    run.records = {h: run.record(h) for h in run.hosts if run.has_record(h)}
    return run


def _need(distros, release):
    if release in distros.skipped:
        version = chroots.RELEASES[release]["version"]
        pytest.skip("Debian %s (%s) hosts: %s" % (version, release, distros.skipped[release]))


RELEASE_PARAMS = [pytest.param(r, id="debian%s-%s" % (v, r)) for r, v in OTHER.items()]


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("release", RELEASE_PARAMS)
def test_the_host_runs_that_releases_python_and_sysstat(distros, mixed_run, release):
    _need(distros, release)
    want = chroots.RELEASES[release]
    v = OTHER[release]
    meta = distros.chroots[release].meta
    assert meta["python"].startswith(want["python"] + "."), meta
    assert meta["sysstat"].startswith(want["sysstat"] + "."), meta
    # what the modules ran with on that host: its /usr/bin/python3 and its iostat
    inst = mixed_run.insts["deb%s-quick" % v]
    p = _ssh(distros.fleet, inst,
             "/usr/bin/python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'; iostat -V; "
             "cat /etc/debian_version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == want["python"], p.stdout
    assert "sysstat version %s" % want["sysstat"] in p.stdout, p.stdout
    assert p.stdout.strip().splitlines()[-1].startswith(want["version"]), p.stdout


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
def test_the_mixed_fleet_passes(mixed_run):
    assert sorted(mixed_run.records) == sorted(mixed_run.hosts), mixed_run.out[-5000:]
    verdicts = {h: r["verdict"] for h, r in mixed_run.records.items()}
    assert set(verdicts.values()) == {"PASS"}, {h: (r["verdict"], r["reasons"]) for h, r in mixed_run.records.items()}
    arrays = {a["name"]: (a["verdict"], a["reasons"]) for a in mixed_run.fleet().get("arrays") or []}
    assert mixed_run.rc == 0, (arrays, mixed_run.out[-5000:])
    assert mixed_run.summary()[:2] == (len(mixed_run.hosts), len(mixed_run.hosts)), mixed_run.out[-3000:]


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("release", RELEASE_PARAMS)
def test_quick_profile_on_that_release(distros, mixed_run, release):
    _need(distros, release)
    rec = mixed_run.records["deb%s-quick" % OTHER[release]]
    assert rec["verdict"] == "PASS", rec["reasons"]
    assert [w["id"] for w in rec["workloads"]] == QUICK_IDS
    for wl in rec["workloads"]:
        res = wl["result"]
        assert res["rc"] == 0 and wl["metrics"]["iops"] > 0, (wl["id"], wl["metrics"])
        assert res["collector"]["source"] == "sysstat", res["collector"]
        assert res["iostat"]["samples"] and res["vmstat"]["samples"], wl["id"]


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("release", RELEASE_PARAMS)
def test_compliance_without_sysstat_on_that_release(distros, mixed_run, release):
    _need(distros, release)
    rec = mixed_run.records["deb%s-compliance" % OTHER[release]]
    assert rec["verdict"] == "PASS", rec["reasons"]
    assert [w["id"] for w in rec["workloads"]] == COMPLIANCE_IDS
    # the /proc sampler ran on that release's Python: samples over the host's workloads (one
    # workload of 3 s once got none, its stream starved by the others)
    assert sum(w["result"]["collector"]["samples_total"]["iostat"] for w in rec["workloads"]) > 0, rec["workloads"]
    for wl in rec["workloads"]:
        col = wl["result"]["collector"]
        assert col["source"] == "procfs" and "iostat not found" in col["reason"], col
        # samples in its window, or the record says none fell there (one starved stream once
        # had none for 4 s)
        assert iostat_sampled_or_warned(wl["result"]), wl["id"]
        m = wl["metrics"]
        # the production safety of the profile ran: impact settings applied (nice 10, idle I/O
        # class), the foreign I/O counted -- by iobench's own requests: a chroot has no cgroup
        assert m["impact"]["nice"] == 10 and m["impact"]["ioprio_class"] == 3, (wl["id"], m["impact"])
        assert m["foreign_source"] == "iobench" and 0 <= m["foreign_share"] <= 1, (wl["id"], m)
        assert m["foreign_on_busy"] == "warn" and m["foreign_quiet"]["ok"], (wl["id"], m["foreign_quiet"])


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
def test_array_across_three_releases(mixed_run):
    members = sorted(h for h in mixed_run.hosts if h.startswith("arr-"))
    runs = {h: mixed_run.records[h]["array_run"] for h in members}
    assert all(runs.values()), {h: bool(r) for h, r in runs.items()}
    assert len({r["t0"] for r in runs.values()}) == 1
    for h, r in runs.items():
        (step,) = r["steps"]
        assert step["active"] and step["complete"], (h, step)
        assert step["metrics"]["iops"] > 0, (h, step["metrics"])
    (arr,) = [a for a in mixed_run.fleet().get("arrays") or [] if a["name"] == "mixed"]
    assert [(s["complete"], s["missing_hosts"]) for s in arr["steps"]] == [(True, [])]
    assert arr["hosts"] == members and arr["verdict"] == "PASS", (arr["hosts"], arr["verdict"], arr["reasons"])


@pytest.mark.fleet
@pytest.mark.slow
@pytest.mark.long
def test_nothing_left_on_the_chroot_hosts(distros, mixed_run):
    for name, h in mixed_run.hosts.items():
        chroot = getattr(h["inst"], "chroot", None)
        if chroot is not None:
            test_dir = chroot.path(_inner_dirs(name)["fleetqual_test_dir"])
            left = [os.path.join(dp, f) for dp, dn, fs in os.walk(test_dir) for f in fs
                    if not f.startswith(".fleetqual")] if os.path.isdir(test_dir) else []
            assert not left, (name, left)


# --------------------------------------------------------------------------- chroot safety

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces' mounts need root")


@needs_root
def test_safe_rmtree_refuses_a_tree_with_a_mount_inside(tmp_path):
    inner = tmp_path / "tree" / "a b" / "mnt"
    inner.mkdir(parents=True)
    (tmp_path / "tree" / "keep").write_text("x")
    assert subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "fqtest", str(inner)], check=False).returncode == 0
    try:
        assert chroots.mounts_under(str(tmp_path / "tree")) == [str(inner)]
        with pytest.raises(RuntimeError, match="still mounted"):
            chroots.safe_rmtree(str(tmp_path / "tree"))
        assert (tmp_path / "tree" / "keep").exists()
    finally:
        assert chroots.umount(str(inner))
    chroots.safe_rmtree(str(tmp_path / "tree"))
    assert not (tmp_path / "tree").exists()


OWNER = r"""
import os, sys, time
sys.path.insert(0, %(here)r)
import chroots
archive, meta = chroots.build(%(release)r)
c = chroots.Chroot(%(release)r, %(base)r).open(archive, meta)
print(c.dir, flush=True)
time.sleep(600)
"""


def _owner(release, base):
    """A Python process holding a live chroot (extracted and mounted), until signalled."""
    code = OWNER % {"here": HERE, "release": release, "base": base}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line, "the owner process did not open its chroot (rc %s)" % p.poll()
    return p, line


@pytest.fixture(scope="module")
def cached_release():
    why = chroots.unavailable()
    if why:
        pytest.skip(why)
    for release in OTHER:
        try:
            chroots.build(release)
            return release
        except chroots.Unavailable as e:
            reason = str(e)
    pytest.skip(reason)


@needs_root
@pytest.mark.slow
@pytest.mark.long
def test_sigterm_of_the_owner_unmounts_and_removes_its_chroot(cached_release, tmp_path):
    p, cdir = _owner(cached_release, str(tmp_path))
    try:
        assert len(chroots.mounts_under(cdir)) == 5, chroots.mounts_under(cdir)   # root, proc, sys, dev, dev/pts
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
    assert chroots.mounts_under(cdir) == []
    assert not os.path.exists(cdir)


@needs_root
@pytest.mark.slow
@pytest.mark.long
def test_a_sigkilled_owners_mounts_are_swept_before_anything_is_removed(cached_release, tmp_path):
    p, cdir = _owner(cached_release, str(tmp_path))
    p.kill()
    p.wait(timeout=30)
    try:
        left = chroots.mounts_under(cdir)
        assert len(left) == 5, left                      # nothing ran its exit path
        with pytest.raises(RuntimeError, match="still mounted"):
            chroots.safe_rmtree(cdir)
        assert os.path.exists(os.path.join(cdir, "root", "etc", "debian_version"))
        swept = chroots.sweep_stale()
        assert set(left) <= set(swept), (left, swept)
        assert chroots.mounts_under(cdir) == []
    finally:
        for point in chroots.mounts_under(cdir):
            chroots.umount(point)
    chroots.safe_rmtree(cdir)


# --------------------------------------------------------------------------- parsers

def test_apt_mirror_from_deb822_and_one_line_sources(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n")
    assert chroots.apt_mirror(str(etc), "bookworm") == "http://mirror.example/debian"
    (etc / "sources.list.d" / "debian.sources").unlink()
    (etc / "sources.list").write_text("# deb http://old.example/debian bookworm main\n"
                                      "deb-src http://src.example/debian bookworm main\n"
                                      "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n")
    assert chroots.apt_mirror(str(etc), "bookworm") == "http://one.example/debian"
    assert chroots.apt_mirror(str(etc), "trixie") is None


PATH_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/\n"),
                    min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(PATH_TEXT, min_size=1, max_size=4), other=PATH_TEXT)
def test_mounts_under_reads_escaped_mountinfo(parts, other):
    """mountinfo escapes space, tab, newline and backslash as octal: a mount point is found
    below its tree whatever its name, and a sibling sharing a name prefix is not."""
    base = "/tmp/fqbase"
    point = base + "/" + "/".join(parts)

    def esc(p):
        return re.sub(rb"[ \t\n\\]", lambda m: b"\\%03o" % m.group(0)[0], os.fsencode(p))
    lines = [b"%d 1 0:%d / %s rw - tmpfs t rw\n" % (i, i, esc(p))
             for i, p in enumerate([point, base + "x/" + other, "/" + other])]
    with tempfile.NamedTemporaryFile("wb", delete=False) as fh:
        fh.writelines(lines)
    try:
        found = chroots.mounts_under(base, mountinfo=fh.name)
    finally:
        os.unlink(fh.name)
    assert found == [point]


@needs_root
def test_the_build_command_says_what_became_of_each_release_and_refuses_an_unknown_one(tmp_path):
    """``chroots.py build`` (make test's fleet-chroots stream): with every archive in its cache
    it builds nothing and says so, one line per release; an unknown release is a usage error,
    before anything is built."""
    cache = tmp_path / "cache"
    cache.mkdir()
    env = dict(os.environ, FLEETQUAL_CHROOT_CACHE=str(cache))
    script = os.path.join(os.path.dirname(os.path.abspath(chroots.__file__)), "chroots.py")
    for release in chroots.OTHER_RELEASES:
        for path in chroots.cache_paths(release):
            open(os.path.join(str(cache), os.path.basename(path)), "w").close()
    r = subprocess.run([sys.executable, script, "build"], capture_output=True, text=True, env=env, timeout=60,
                       check=False)
    assert r.returncode == 0, r
    assert r.stdout.splitlines() == ["chroots: %s cached" % rel for rel in chroots.OTHER_RELEASES], r.stdout
    r = subprocess.run([sys.executable, script, "build", "sid"], capture_output=True, text=True, env=env,
                       timeout=60, check=False)
    assert r.returncode == 2 and "usage: chroots.py build" in r.stderr and r.stdout == "", r
    assert sorted(os.listdir(str(cache))) == sorted(os.path.basename(p) for rel in chroots.OTHER_RELEASES
                                                    for p in chroots.cache_paths(rel))
