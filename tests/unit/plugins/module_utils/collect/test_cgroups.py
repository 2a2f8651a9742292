"""The benchmark's own block-I/O group on cgroup v2 (docs/compliance.md, "What is ours" and
"Limits inherited"): the pure parts (counters, limits, where the group goes, which way is
tried on which host) and the whole group made in cgroup trees the tests write into temporary
directories: a v2 tree without systemd (``v2-leaf``), and a systemd host whose ``systemd-run``
is a stand-in (tests/unit/fixtures/fake_systemd_run.py) that makes the unit's group in that
tree as systemd would, with the properties it was given as the group's ``io.max``, then runs
the holder in it. This machine (cgroup v1, no systemd) is tested on its own kernel by
test_foreign_limits.py."""
import atexit
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import cgroups
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import impact
from ansible_collections.fleetqual.storage.plugins.module_utils.collect import units

import unitpaths
from proctree import wait_gone

FAKE_PY = os.path.join(unitpaths.FIXTURES, "fake_systemd_run.py")


def _fake_command():
    """An executable ``systemd-run`` that runs the stand-in with this interpreter (the
    fixture itself carries no shebang: ansible-test's sanity allows none there)."""
    where = tempfile.mkdtemp(prefix="fq-fake-systemd-")
    atexit.register(shutil.rmtree, where, True)
    path = os.path.join(where, "systemd-run")
    with open(path, "w") as fh:
        fh.write('#!/bin/sh\nexec %s %s "$@"\n' % (shlex.quote(sys.executable), shlex.quote(FAKE_PY)))
    os.chmod(path, 0o755)
    return path


FAKE_RUN = _fake_command()
RULES = cgroups.THROTTLE_RULES
NUMBERS = {"7:3": "loop3", "254:16": "vdb"}


# --------------------------------------------------------------------------- counters and limits

COUNTS = st.lists(st.integers(0, 2 ** 62), min_size=6, max_size=6)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(NUMBERS)), COUNTS), st.lists(COUNTS, max_size=3))
def test_io_stat_gives_each_devices_four_counters_and_zeros_for_an_untouched_one(lines, others):
    line = "%s rbytes=%d wbytes=%d rios=%d wios=%d dbytes=%d dios=%d\n"
    text = "".join(line % (num, c[1], c[3], c[0], c[2], c[4], c[5]) for num, c in sorted(lines.items()))
    text += "".join("8:%d rbytes=%d wbytes=1 rios=%d wios=2 dbytes=0 dios=0\n" % (i, c[0], c[1])
                    for i, c in enumerate(others))
    got = cgroups.parse_io_stat(text, NUMBERS)
    assert got == {dev: (lines[num][:4] if num in lines else [0, 0, 0, 0]) for num, dev in NUMBERS.items()}


LIMITS = st.dictionaries(st.sampled_from(RULES), st.integers(1, 10 ** 12), min_size=1)


@settings(max_examples=80, deadline=None)
@given(LIMITS)
def test_an_io_max_line_reads_back_as_the_limits_it_sets(limits):
    line = cgroups.io_max_line("7:3", limits)
    assert cgroups.parse_io_max(line) == {"7:3": limits}
    # as the kernel shows it: every key, "max" where there is no limit
    kernel = "7:3 " + " ".join("%s=%s" % (k, limits.get(r, "max")) for k, r in sorted(cgroups.IO_MAX_KEYS.items()))
    assert cgroups.parse_io_max(kernel) == {"7:3": limits}


def test_within_and_the_innermost_slice():
    assert cgroups.within("/system.slice/ssh.service", "/system.slice")
    assert cgroups.within("/system.slice", "/system.slice") and cgroups.within("/anything", "/")
    assert not cgroups.within("/system.slice2/x", "/system.slice") and not cgroups.within("/", "/system.slice")
    assert units.slice_of("/system.slice/ssh.service") == ("system.slice", "/system.slice")
    assert units.slice_of("/user.slice/user-0.slice/session-4.scope") == ("user-0.slice", "/user.slice/user-0.slice")
    assert units.slice_of("/init.scope") == (None, None) and units.slice_of("/") == (None, None)


NAME = st.text(st.sampled_from("abcxyz019-_."), min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(NAME, st.booleans()), max_size=6))
def test_the_unit_goes_to_the_innermost_slice_on_the_jobs_path(parts):
    names = [n + (".slice" if is_slice else ".d") for n, is_slice in parts]
    rel = "/" + "/".join(names)
    name, path = units.slice_of(rel)
    slices = [i for i, n in enumerate(names) if n.endswith(".slice")]
    if not slices:
        assert (name, path) == (None, None)
    else:
        k = slices[-1]
        assert name == names[k] and path == "/" + "/".join(names[:k + 1]) and cgroups.within(rel, path)


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200), st.integers(1, 2 ** 22), st.integers(1, 10 ** 6), st.integers(1, 10 ** 6))
def test_a_unit_name_is_valid_bounded_and_unique_per_process_and_counter(label, pid, seq, other):
    name = units.unit_name(label, pid, seq)
    assert name.startswith("fleetqual-job-") and name.endswith("-%d-%d.scope" % (pid, seq))
    assert len(name) <= 255 and all(c.isascii() and (c.isalnum() or c in ":_.-") for c in name)
    assert units.unit_name(label, pid, seq) == name
    if other != seq:
        assert units.unit_name(label, pid, other) != name


def test_the_units_argv_and_properties():
    limits = [{"rule": "read_iops_device", "device": "vdb", "number": "254:16", "value": 300},
              {"rule": "write_bps_device", "device": "vdb", "number": "254:16", "value": 67108864}]
    props = units.properties(limits, 1, node=lambda dev, num: "/dev/" + dev)
    assert props == ["IOAccounting=yes", "IOReadIOPSMax=/dev/vdb 300", "IOWriteBandwidthMax=/dev/vdb 67108864",
                     "IOWeight=1"]
    argv = units.scope_argv("/usr/bin/systemd-run", "fleetqual-job-r-1-1.scope", "user-0.slice", props)
    assert argv[:7] == ["/usr/bin/systemd-run", "--scope", "--quiet", "--collect", "--unit",
                        "fleetqual-job-r-1-1.scope", "--slice"]
    assert argv[argv.index("--") + 1:] == list(units.HOLDER)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-p"] == props
    # no slice: systemd's default (system.slice)
    assert "--slice" not in units.scope_argv("systemd-run", "u.scope", None, props)


def test_a_device_node_is_the_device_itself_or_udevs_link(tmp_path):
    assert units.device_node("vdb", "254:16", str(tmp_path)) == os.path.join(str(tmp_path), "block", "254:16")
    assert units.device_node("null", "1:3", "/dev") == "/dev/block/1:3"      # a character device


def test_the_impact_caps_as_kernel_limits():
    assert impact.kernel_limits({"max_iops": 2000, "max_mibps": 64}) == {
        "read_iops_device": 2000, "write_iops_device": 2000, "read_bps_device": 64 << 20, "write_bps_device": 64 << 20}
    assert impact.kernel_limits({"max_iops": 0.4, "max_mibps": 0}) == {"read_iops_device": 1, "write_iops_device": 1}
    assert impact.kernel_limits({}) == {}
    assert impact.io_weight({"ioprio": "idle"}) == 1 and impact.io_weight({"ioprio": "none"}) is None
    enforced = [{"rule": "read_iops_device", "device": "vdb", "number": "254:16", "value": 300, "from": "/x.service"},
                {"rule": "write_iops_device", "device": "vdb", "number": "254:16", "value": 2000, "from": "impact"}]
    assert impact.enforced_note("cgroup v2 unit u.scope", enforced, 1) == [
        "impact limits kernel-enforced by cgroup v2 unit u.scope: vdb: write 2000 IOPS; IOWeight 1"]
    assert impact.enforced_note("cgroup-v2", enforced[:1]) == []


# --------------------------------------------------------------------------- the limits a new group keeps

def _write_tree(root, chain, io_max):
    """Groups ``chain`` (rel paths, the job's own first) under ``root``; ``io_max``: {rel: {rule: value}} on 7:3."""
    for rel in chain:
        os.makedirs(os.path.join(root, rel.strip("/")), exist_ok=True)
    for rel, limits in io_max.items():
        if limits:
            with open(os.path.join(root, rel.strip("/"), "io.max"), "w") as fh:
                fh.write(cgroups.io_max_line("7:3", limits) + "\n")


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.data())
def test_a_new_group_is_never_less_limited_than_the_job_and_carries_the_caps(tmp_path_factory, depth, data):
    """Wherever on the job's path the new group's parent is, the limit that holds it for each
    rule (the parent's and its ancestors' by nesting, its own copied ones and the caps) is at
    most the job's own (the strictest over the job's path) and at most the cap."""
    root = str(tmp_path_factory.mktemp("v2"))
    own = "/" + "/".join("g%d" % i for i in range(1, depth + 1))
    chain = [rel for _path, rel in cgroups.ancestry(root, own)]
    io_max = {rel: data.draw(st.dictionaries(st.sampled_from(RULES), st.integers(1, 10 ** 6)), label=rel)
              for rel in chain if rel != "/"}
    caps = data.draw(st.dictionaries(st.sampled_from(RULES), st.integers(1, 10 ** 6)), label="caps")
    parent = data.draw(st.sampled_from(chain + ["/elsewhere.slice"]), label="parent")
    _write_tree(root, chain, io_max)
    numbers = {"7:3": "loop3"}
    inherited = cgroups.split_inherited(cgroups.io_max_rules(root, own, numbers), parent)
    enforced = cgroups.enforced_rules(inherited, caps, numbers)
    for rule in RULES:
        job = [v[rule] for v in io_max.values() if rule in v]
        nested = [v[rule] for rel, v in io_max.items() if rule in v and cgroups.within(parent, rel)]
        own_limit = [r["value"] for r in enforced if r["rule"] == rule]
        assert len(own_limit) <= 1
        holds = nested + own_limit
        if job:
            assert holds and min(holds) <= min(job)
        if rule in caps:
            assert own_limit and own_limit[0] <= caps[rule]
        if not job and rule not in caps:
            assert not own_limit
    for r in inherited:
        assert r["applies"] == ("nested" if cgroups.within(parent, r["from"]) else "copied")
        assert r["device"] == "loop3"
    assert all(r["from"] in ("impact",) + tuple(chain) for r in enforced)


# --------------------------------------------------------------------------- where, without systemd

def _v2_group(root, rel, io_sub=False, procs=False, io_avail=True):
    path = os.path.join(root, rel.strip("/"))
    os.makedirs(path, exist_ok=True)
    for name, text in (("cgroup.controllers", "cpu io memory" if io_avail else "cpu memory"),
                       ("cgroup.subtree_control", "io" if io_sub else ""), ("cgroup.procs", "123\n" if procs else ""),
                       ("io.stat", ""), ("io.max", "")):
        with open(os.path.join(path, name), "w") as fh:
            fh.write(text)
    return path


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 5), st.data())
def test_the_leaf_parent_is_the_deepest_group_whose_children_can_have_io(tmp_path_factory, depth, data):
    """A consistent cgroup v2 tree (io on for the children of the root-most ``k`` groups, none
    of which below the root holds a process; the job's own group holds the job): the parent
    chosen is the deepest whose chain up to io can be given io, and nothing it enables below
    the root holds a process."""
    root = str(tmp_path_factory.mktemp("v2"))
    own = "/" + "/".join("g%d" % i for i in range(1, depth + 1)) if depth else "/"
    chain = [rel for _p, rel in cgroups.ancestry(root, own)]          # own first, root last
    top_down = chain[::-1]
    enabled = data.draw(st.integers(0, len(chain)), label="groups giving io, root first")
    state = {}
    for i, rel in enumerate(top_down):
        sub = i < enabled
        if rel == own and rel != "/":
            sub, procs = False, True                                 # the job is in it: no io for children
        elif sub and rel != "/":
            procs = False
        else:
            procs = data.draw(st.booleans(), label="procs " + rel)
        state[rel] = (sub, procs)
        _v2_group(root, rel, io_sub=sub, procs=procs)
    parent, enable = cgroups.plan_leaf(root, own)
    assert parent in chain
    # every group from the parent up to the first that gives io either gives it or is enabled
    up = chain[chain.index(parent):]
    for rel in up:
        if state[rel][0]:
            break
        assert rel in enable and (rel == "/" or not state[rel][1])
    assert enable == [r for r in top_down if r in enable]             # root-most first
    # no deeper group would do
    for deeper in chain[:chain.index(parent)]:
        blocked = False
        for rel in chain[chain.index(deeper):]:
            if state[rel][0]:
                break
            if rel != "/" and state[rel][1]:
                blocked = True
                break
        assert blocked


def test_without_the_io_controller_on_v2_there_is_no_leaf(tmp_path):
    root = str(tmp_path)
    _v2_group(root, "/", io_avail=False)
    _v2_group(root, "/a", procs=True)
    with pytest.raises(OSError, match="not available"):
        cgroups.plan_leaf(root, "/a")


@pytest.mark.parametrize("v1", [None, "/x"])
@pytest.mark.parametrize("v1_mounted", [False, True])
@pytest.mark.parametrize("v2", [None, "/", "/system.slice/ssh.service"])
@pytest.mark.parametrize("v2_mount", [None, "/sys/fs/cgroup"])
@pytest.mark.parametrize("systemd", [False, True])
def test_which_ways_are_tried_on_which_host(v1, v1_mounted, v2, v2_mount, systemd):
    got = cgroups.methods(v1, v1_mounted, v2, v2_mount, systemd)
    want = ["v1"] if v1 and v1_mounted else []
    if v2 and v2_mount:
        want += ["unit", "v2-own"] if systemd else ["v2-leaf"]
    assert got == want
    # under systemd the job never writes +io in the groups systemd manages
    assert not (systemd and "v2-leaf" in got)


def _host(tmp_path, systemd=False):
    """A fake host: a cgroup v2 tree, /run/systemd/system when ``systemd``, no v1 blkio, a /proc."""
    cg = str(tmp_path / "cgroup")
    os.makedirs(cg)
    run = str(tmp_path / "run-systemd")
    if systemd:
        os.makedirs(run)
    proc = str(tmp_path / "proc")
    os.makedirs(proc)
    return {"cg": cg, "run": run, "proc": proc, "log": str(tmp_path / "systemctl.log")}


def _cgroup(host, own, **kw):
    return cgroups.Cgroup(["loop3"], proc_cgroup="0::%s\n" % own, numbers={"7:3": "loop3"},
                          v1_mount=os.path.join(host["cg"], "no-v1"), v2_mounts=(host["cg"],),
                          systemd_dir=host["run"], proc=host["proc"], **kw)


def _kernel_files_go(path):
    """A real group's files go with its rmdir; a fake one's are removed first."""
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))


def test_without_systemd_the_group_goes_where_io_can_be_given_and_leaves_as_it_came(tmp_path):
    host = _host(tmp_path)
    root = host["cg"]
    _v2_group(root, "/", io_sub=False)
    _v2_group(root, "/openrc.sshd", procs=True)
    with open(os.path.join(root, "openrc.sshd", "io.max"), "w") as fh:
        fh.write("7:3 rbps=max wbps=max riops=300 wiops=max\n")
    cg = _cgroup(host, "/openrc.sshd", caps={"write_iops_device": 2000})
    assert cg.create() is None, cg.error
    assert cg.method == "v2-leaf" and cg.source() == "cgroup-v2"
    assert os.path.dirname(cg.path) == root and cg.enabled == ["/"]
    with open(os.path.join(root, "cgroup.subtree_control")) as fh:
        assert fh.read() == "+io"
    d = cg.describe()
    assert [(r["rule"], r["value"], r["from"], r["applies"]) for r in d["inherited"]] == [
        ("read_iops_device", 300, "/openrc.sshd", "copied")]
    assert [(r["rule"], r["value"], r["from"]) for r in d["enforced"]] == [
        ("read_iops_device", 300, "/openrc.sshd"), ("write_iops_device", 2000, "impact")]
    with open(os.path.join(cg.path, "io.max")) as fh:
        assert cgroups.parse_io_max(fh.read()) == {"7:3": {"read_iops_device": 300, "write_iops_device": 2000}}
    with open(os.path.join(cg.path, "io.stat"), "w") as fh:
        fh.write("7:3 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n")
    assert cg.counters() == {"loop3": [1, 4096, 2, 8192]}
    path = cg.path
    _kernel_files_go(path)
    cg.remove()
    assert not os.path.exists(path) and cg.path is None
    with open(os.path.join(root, "cgroup.subtree_control")) as fh:
        assert fh.read() == "-io"                                        # taken back


# --------------------------------------------------------------------------- a systemd host

def _systemd_host(tmp_path, own="/system.slice/ssh.service", mode="ok"):
    host = _host(tmp_path, systemd=True)
    root = host["cg"]
    _v2_group(root, "/", io_sub=True)
    _v2_group(root, "/system.slice", io_sub=False)
    _v2_group(root, own, procs=True)
    env = {"FQ_FAKE_CGROUP": root, "FQ_FAKE_PROC": host["proc"], "FQ_FAKE_MODE": mode,
           "FQ_FAKE_SYSTEMCTL_LOG": host["log"]}
    os.environ.update(env)
    return host


@pytest.fixture
def fake_env():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_under_systemd_the_group_is_a_unit_in_the_jobs_slice(tmp_path, fake_env):
    host = _systemd_host(tmp_path)
    with open(os.path.join(host["cg"], "system.slice", "ssh.service", "io.max"), "w") as fh:
        fh.write("7:3 rbps=max wbps=max riops=500 wiops=max\n")
    with open(os.path.join(host["cg"], "system.slice", "io.max"), "w") as fh:
        fh.write("7:3 rbps=max wbps=max riops=300 wiops=max\n")
    cg = _cgroup(host, "/system.slice/ssh.service", caps=impact.kernel_limits({"max_iops": 2000}), weight=1,
                 label="20261127T100000Z", systemd_run=FAKE_RUN, systemctl=FAKE_RUN)
    assert cg.create() is None, cg.error
    unit = "fleetqual-job-20261127T100000Z-%d-%d.scope" % (os.getpid(), cgroups.Cgroup._seq)
    assert cg.method == "unit" and cg.source() == "cgroup v2 unit " + unit
    assert cg.path == os.path.join(host["cg"], "system.slice", unit) and cg.procs == os.path.join(cg.path, "cgroup.procs")
    d = cg.describe()
    assert d["unit"] == unit and d["slice"] == "system.slice" and d["io_weight"] == 1
    # the slice's 300 holds by nesting (the strictest); the job's own service's 500 is not needed
    assert [(r["rule"], r["value"], r["from"], r["applies"]) for r in d["inherited"]] == [
        ("read_iops_device", 300, "/system.slice", "nested")]
    assert [(r["rule"], r["value"], r["from"]) for r in d["enforced"]] == [
        ("read_iops_device", 2000, "impact"), ("write_iops_device", 2000, "impact")]
    holder = cg.scope.pid
    with open(cg.procs) as fh:
        assert fh.read().split() == [str(holder)]
    with open(os.path.join(cg.path, "io.stat"), "w") as fh:
        fh.write("7:3 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
    assert cg.counters() == {"loop3": [1, 4096, 0, 0]}
    with open(cg.procs, "w") as fh:                  # the fake's group: the holder left it when it ended
        fh.write("")
    cg.remove()
    assert wait_gone(holder) and cg.path is None
    assert not os.path.exists(host["log"])           # nothing left in it: no systemctl stop


def test_a_unit_holding_a_process_after_its_holder_ended_is_stopped(tmp_path, fake_env):
    host = _systemd_host(tmp_path, own="/user.slice/user-1000.slice/session-3.scope")
    cg = _cgroup(host, "/user.slice/user-1000.slice/session-3.scope", label="r", systemd_run=FAKE_RUN,
                 systemctl=FAKE_RUN)
    assert cg.create() is None, cg.error
    assert cg.describe()["slice"] == "user-1000.slice" and cg.path.startswith(
        os.path.join(host["cg"], "user.slice", "user-1000.slice", "fleetqual-job-r-"))
    with open(cg.procs, "a") as fh:
        fh.write("99999999\n")                       # a benchmark that would not end
    unit = cg.unit
    cg.remove()
    with open(host["log"]) as fh:
        assert fh.read().split() == ["stop", "--no-block", unit]


def test_a_unit_systemd_would_not_make_falls_back_to_a_delegated_group_or_says_why(tmp_path, fake_env):
    host = _systemd_host(tmp_path, mode="fail")
    cg = _cgroup(host, "/system.slice/ssh.service", label="r", systemd_run=FAKE_RUN)
    err = cg.create()
    assert err and "systemd-run could not start unit fleetqual-job-r-" in err and "already exists" in err
    assert "the io controller is not enabled for the children of" in err and cg.path is None
    assert cg.describe() is None
    # the job's own group delegated to it (io for its children): a child of it
    _v2_group(host["cg"], "/system.slice/ssh.service", io_sub=True, procs=True)
    cg = _cgroup(host, "/system.slice/ssh.service", label="r", systemd_run=FAKE_RUN)
    assert cg.create() is None and cg.method == "v2-own" and cg.source() == "cgroup-v2"
    assert os.path.dirname(cg.path) == os.path.join(host["cg"], "system.slice", "ssh.service")
    assert cg.describe().get("unit") is None
    _kernel_files_go(cg.path)
    cg.remove()
    assert cg.path is None


def test_a_unit_whose_copied_limit_did_not_hold_is_ended_and_not_used(tmp_path, fake_env):
    host = _systemd_host(tmp_path, own="/system.slice/db.service", mode="drop-properties")
    with open(os.path.join(host["cg"], "system.slice", "db.service", "io.max"), "w") as fh:
        fh.write("7:3 riops=300\n")
    cg = _cgroup(host, "/system.slice/db.service", label="r", systemd_run=FAKE_RUN)
    err = cg.create()
    assert err and "the limit read_iops_device loop3 300 of /system.slice/db.service did not hold" in err
    assert cg.path is None and cg.scope is None


def test_a_systemd_run_that_hangs_is_given_up_and_its_process_ended(tmp_path, fake_env):
    _systemd_host(tmp_path, mode="hang")
    scope = units.Scope("fleetqual-job-r-1-1.scope", None, ["IOAccounting=yes"], systemd_run=FAKE_RUN)
    began = time.monotonic()
    err = scope.start(timeout=1.0)
    assert err == "systemd-run did not start unit fleetqual-job-r-1-1.scope within 1 s"
    assert time.monotonic() - began < 15 and scope.proc is None


def test_the_holder_ends_with_the_process_that_made_it(tmp_path, fake_env):
    """However the job ends (here SIGKILL), the holder sees end of file and ends: the scope
    never outlives the job."""
    _systemd_host(tmp_path)
    code = ("import os, sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.fleetqual.storage.plugins.module_utils.collect import units\n"
            "s = units.Scope('fleetqual-job-r-1-1.scope', None, [], systemd_run=%r)\n"
            "assert s.start() is None\n"
            "print(s.pid, flush=True)\n"
            "os.kill(os.getpid(), 9)\n" % (os.path.join(unitpaths.ROOT, "build", "collections"), FAKE_RUN))
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, timeout=60, check=False)
    holder = int(p.stdout.split()[0])
    assert p.returncode == -9 and wait_gone(holder)
