"""One privilege model, end to end (docs/privileges.md): real users log in over SSH as
themselves, in ONE playbook run of nine hosts at forks 3 (a mixed fleet):

| host   | login                         | settings                                   | expected |
|--------|-------------------------------|--------------------------------------------|----------|
| fq161  | non-root, passwordless sudo   | defaults (fleetqual_become: the default)   | PASS, job files root's |
| fq162  | non-root, passwordless sudo   | ansible_become: true                       | PASS, job files root's |
| fq163  | non-root, no sudo             | fleetqual_become: false, dirs in its home  | PASS, job files its own, foreign_source iobench |
| fq164  | non-root, sudo asks password  | defaults                                   | ERROR: refused at the start, with the fix |
| fq165  | root                          | defaults                                   | PASS |
| fq166  | non-root, no sudo             | fleetqual_become: false, root-owned bin dir | ERROR: refused, names fleetqual_bin_dir |
| fq167  | non-root, no sudo             | fleetqual_become: false, test dir it cannot create | ERROR: refused, names fleetqual_test_dir |
| fq168, fq169 | non-root, passwordless sudo | defaults, one array (docs/arrays.md)     | PASS, one common start, as root |

The users (``fqt-<tag>-sudo``, ``-plain``, ``-pw``) are made by a session fixture
(``useradd``; sudoers drop-ins ``/etc/sudoers.d/fqt-<tag>-*`` checked with ``visudo -cf``)
and removed, with their drop-ins, homes and /tmp payloads, in every exit path. Their homes
are NOT under pytest's temporary directory: pytest-of-root is 0700 and any pytest session
starting meanwhile (several run on this machine) resets it to 0700, which would cut a login
off its home mid-run; they live in a directory of their own under /tmp (0711).

A watcher records the owner of each host's ``.fleetqual-job/status.json`` while the jobs
run: the identity the record names. A stale AnsiballZ payload of this collection planted for
the no-sudo user (older than the stale age) is removed by that user's next start, a fresh one
is kept; no payload of these users is left after the run.
"""
import contextlib
import grp
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

import fleetlib
from fleetrun import run_playbook

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

PYTHON = "/usr/bin/python3"      # the users' interpreter (the venv's lives under /root, 0700)
FORKS = 3
WAIT = 300                       # bound of the watcher and of the playbook run, seconds
MATRIX = [{"workload": "pv%d" % i, "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
           "block_size": "16K", "direct": True, "time": 2, "warmup": 1, **fleetlib.PACE} for i in range(2)]
# attribution without a cgroup is what a run without root can do; never skipped for a busy disk
FOREIGN = {"enabled": True, "max_share": 1, "wait_s": 0, "on_busy": "warn", "sample_s": 0.5,
           "quiet_util_pct": 100}
HOSTS = {"fq161": 161, "fq162": 162, "fq163": 163, "fq164": 164, "fq165": 165, "fq166": 166, "fq167": 167,
         "fq168": 168, "fq169": 169}
# fq168 and fq169: two logins with passwordless sudo in one array (docs/arrays.md): the array's
# status reads and the hand-over of its common start run as the identity too
ARRAY_HOSTS = ("fq168", "fq169")
ARRAY = {"fleetqual_array": "priv", "fleetqual_arrays": {"priv": {
    "initiators": [1, 2], "threads": [1], "modes": ["rndrd"], "time": 1, "warmup": 1, "block_size": "16K",
    "total_size": "8M", "file_num": 1}}}
PAYLOAD_STALE_AGE_S = 2 * 3600   # older than module_utils/job_runner.PAYLOAD_STALE_S


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, **kw)


class Users:
    """The test's logins: created by :meth:`add`, every trace removed by :meth:`close`."""

    def __init__(self, client_pub):
        self.tag = uuid.uuid4().hex[:6]
        self.client_pub = client_pub
        self.base = tempfile.mkdtemp(prefix="fqt-%s-" % self.tag, dir="/tmp")
        os.chmod(self.base, 0o711)
        self.names = []
        self.sudoers = []

    def add(self, role, sudo=None):
        """A user ``fqt-<tag>-<role>`` with its home in :attr:`base` and the fleet's client key;
        ``sudo``: None, "nopasswd" or "password" (a sudoers drop-in, checked by visudo)."""
        name = "fqt-%s-%s" % (self.tag, role)
        home = os.path.join(self.base, role)
        # '*': no password, but not a locked account (sshd without PAM refuses those)
        p = _run(["useradd", "--create-home", "--home-dir", home, "--shell", "/bin/sh", "-p", "*", name])
        assert p.returncode == 0, p.stderr
        self.names.append(name)
        keys = os.path.join(home, os.path.basename(fleetlib.USER_KEYS.replace("%h/", "")))
        with open(keys, "w") as fh:
            fh.write(self.client_pub + "\n")
        pw = pwd.getpwnam(name)
        os.chown(keys, pw.pw_uid, pw.pw_gid)
        os.chmod(keys, 0o600)
        if sudo:
            rule = "NOPASSWD: ALL" if sudo == "nopasswd" else "ALL"
            path = "/etc/sudoers.d/%s" % name
            fd, tmp = tempfile.mkstemp(dir="/etc/sudoers.d", prefix=".fqt-")
            with os.fdopen(fd, "w") as fh:
                fh.write("%s ALL=(ALL:ALL) %s\n" % (name, rule))
            os.chmod(tmp, 0o440)
            check = _run(["visudo", "-cf", tmp])
            if check.returncode != 0:
                os.unlink(tmp)
                raise AssertionError("visudo refused the drop-in: %s" % check.stdout + check.stderr)
            os.rename(tmp, path)
            self.sudoers.append(path)
        return pw

    def payloads(self):
        """This test's users' AnsiballZ payload directories in /tmp."""
        uids = set()
        for name in self.names:
            with contextlib.suppress(KeyError):
                uids.add(pwd.getpwnam(name).pw_uid)
        out = []
        for entry in os.listdir("/tmp"):
            if entry.startswith("ansible_") and "_payload_" in entry:
                with contextlib.suppress(OSError):
                    if os.lstat(os.path.join("/tmp", entry)).st_uid in uids:
                        out.append(os.path.join("/tmp", entry))
        return sorted(out)

    def close(self):
        problems = []
        for path in self.payloads():
            shutil.rmtree(path, ignore_errors=True)
        for path in self.sudoers:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        for name in self.names:
            # the users' processes end with them: this run's SSH sessions (ansible's ControlPersist
            # masters keep them open for a while), a job left by a failed assertion
            with contextlib.suppress(KeyError):
                _end_processes_of(pwd.getpwnam(name).pw_uid)
            p = _run(["userdel", "--remove", name])
            if p.returncode not in (0, 6, 12):      # 6: no such user, 12: its home was gone already
                problems.append("userdel %s: %s" % (name, p.stderr.strip()))
            with contextlib.suppress(KeyError):
                grp.getgrnam(name)
                _run(["groupdel", name])
        shutil.rmtree(self.base, ignore_errors=True)
        assert not problems, problems


def _uids_of(pid):
    """The real, effective, saved and filesystem uids of ``pid`` (/proc/<pid>/status), or ()."""
    try:
        with open("/proc/%s/status" % pid) as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except (OSError, ValueError):
        pass
    return ()


def _end_processes_of(uid, wait_s=15.0):
    """SIGKILL every process running as ``uid`` (one of this test's users: only processes
    this test's runs started run as them) and wait, bounded, until none is left."""
    limit = time.monotonic() + wait_s
    while True:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and uid in _uids_of(d)]
        if not pids or time.monotonic() > limit:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        time.sleep(0.2)


@pytest.fixture(scope="session")
def users(fleet):
    if not shutil.which("sudo") or not shutil.which("visudo") or not shutil.which("useradd"):
        pytest.skip("needs sudo, visudo and useradd (Debian packages sudo, passwd)")
    u = Users(fleet.client_pub)
    try:
        u.sudo = u.add("sudo", sudo="nopasswd")
        u.plain = u.add("plain")
        u.pw = u.add("pw", sudo="password")
        yield u
    finally:
        u.close()


class OwnerWatcher(threading.Thread):
    """Records the owner uid of each test directory's job status while the jobs run."""

    def __init__(self, test_dirs):
        super().__init__(daemon=True)
        self.test_dirs = test_dirs
        self.owners = {h: set() for h in test_dirs}
        self.stop = threading.Event()

    def run(self):
        deadline = time.monotonic() + WAIT
        while not self.stop.is_set() and time.monotonic() < deadline:
            for host, d in self.test_dirs.items():
                with contextlib.suppress(OSError):
                    self.owners[host].add(os.stat(os.path.join(d, ".fleetqual-job", "status.json")).st_uid)
            time.sleep(0.05)


def _plant_payload(user, base, age_s):
    """A payload directory of this collection's job module owned by ``user`` in /tmp."""
    path = tempfile.mkdtemp(prefix="ansible_fleetqual.storage.job_payload_", dir="/tmp")
    zpath = os.path.join(path, "ansible_fleetqual.storage.job_payload.zip")
    with open(zpath, "wb") as fh:
        fh.write(b"PK\x05\x06" + b"\0" * 18)     # an empty zip
    for p in (zpath, path):
        os.chown(p, user.pw_uid, user.pw_gid)
    then = time.time() - age_s
    os.utime(zpath, (then, then))
    os.utime(path, (then, then))
    return path


@pytest.fixture(scope="module")
def mixed(fleet, users, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("privilege"))
    inv_dir = os.path.join(base, "inventory")
    root_dirs = os.path.join(users.base, "rootowned")       # root's, 0755: no user writes there
    os.makedirs(root_dirs, mode=0o755)

    def own(role, host):
        home = os.path.join(users.base, role)
        return {"fleetqual_test_dir": os.path.join(home, host, "test"), "fleetqual_bin_dir": os.path.join(home, host, "bin")}

    common = {"ansible_python_interpreter": PYTHON}
    vars_of = {
        "fq161": dict(common, ansible_user=users.sudo.pw_name),
        "fq162": dict(common, ansible_user=users.sudo.pw_name, ansible_become=True),
        "fq163": dict(common, ansible_user=users.plain.pw_name, fleetqual_become=False,
                      fleetqual_foreign_io=FOREIGN, **own("plain", "fq163")),
        "fq164": dict(common, ansible_user=users.pw.pw_name),
        "fq165": {"fleetqual_foreign_io": FOREIGN},
        "fq166": dict(common, ansible_user=users.plain.pw_name, fleetqual_become=False,
                      **dict(own("plain", "fq166"), fleetqual_bin_dir=os.path.join(root_dirs, "bin"))),
        "fq167": dict(common, ansible_user=users.plain.pw_name, fleetqual_become=False,
                      **dict(own("plain", "fq167"), fleetqual_test_dir=os.path.join(root_dirs, "test"))),
    }
    for h in ARRAY_HOSTS:
        vars_of[h] = dict(common, ansible_user=users.sudo.pw_name, **ARRAY)
    hosts = [{"name": h, "inst": fleet.host(n), "vars": vars_of[h]} for h, n in HOSTS.items()]
    inv = fleet.inventory(inv_dir, hosts, group_vars={"all": {"fleetqual_matrix": MATRIX, "fleetqual_progress_interval": 2}})
    test_dirs = {h: hv.get("fleetqual_test_dir") or fleet.host_dirs(h, fleet.default_dirs_root(inv_dir))["fleetqual_test_dir"]
                 for h, hv in vars_of.items()}
    stale = _plant_payload(users.plain, base, PAYLOAD_STALE_AGE_S)
    fresh = _plant_payload(users.plain, base, 0)
    watcher = OwnerWatcher({h: test_dirs[h] for h in ("fq161", "fq162", "fq163", "fq165")})
    watcher.start()
    try:
        run = run_playbook(fleet, inv, base, "privilege", args=("--forks", str(FORKS)), timeout=WAIT)
    finally:
        watcher.stop.set()
        watcher.join(10)
    left_payloads = [p for p in users.payloads() if p != fresh]
    print(run.out[-6000:])     # shown with -s / -rP
    return {"run": run, "owners": watcher.owners, "test_dirs": test_dirs, "stale": stale, "fresh": fresh,
            "left_payloads": left_payloads, "users": users}


def _rec(mixed, host):
    return mixed["run"].record(host)


@pytest.mark.long
def test_the_mixed_fleet_ends_with_the_expected_verdicts(mixed):
    run = mixed["run"]
    assert run.summary() == (6, 9, 6, 0, 0, 3), run.out[-5000:]
    assert run.rc == 2, run.out[-3000:]       # the verdict gate fails the three refused hosts


@pytest.mark.long
@pytest.mark.parametrize("host", ["fq161", "fq162"])
def test_a_login_with_passwordless_sudo_runs_as_root(mixed, host):
    """The default (fleetqual_become true for a login other than root) and ansible_become:
    the start escalated, so the job's files are root's, and the wait, the cleanup and the
    store read and removed them as root: PASS, nothing left."""
    rec = _rec(mixed, host)
    assert rec["verdict"] == "PASS", rec["reasons"]
    ident = rec["identity"]
    assert ident["become"] is True and ident["uid"] == 0 and ident["user"] == "root", ident
    assert ident["method"].endswith("sudo") and ident["login_user"] == mixed["users"].sudo.pw_name, ident
    assert mixed["owners"][host] == {0}, mixed["owners"][host]
    assert len(rec["workloads"]) == len(MATRIX) and not os.path.exists(mixed["test_dirs"][host])


@pytest.mark.long
def test_an_array_of_sudo_logins_starts_together_as_root(mixed):
    t0s = set()
    for host in ARRAY_HOSTS:
        rec = _rec(mixed, host)
        assert rec["verdict"] == "PASS", (host, rec["reasons"])
        assert rec["identity"]["become"] is True and rec["identity"]["uid"] == 0, rec["identity"]
        run = rec["array_run"]
        assert run and run.get("t0") and len(run.get("steps") or []) == 2, run
        t0s.add(run["t0"])
        assert not os.path.exists(mixed["test_dirs"][host])
    assert len(t0s) == 1, t0s


@pytest.mark.long
def test_a_login_without_sudo_runs_as_itself_without_cgroup(mixed):
    rec = _rec(mixed, "fq163")
    plain = mixed["users"].plain
    assert rec["verdict"] == "PASS", rec["reasons"]
    ident = rec["identity"]
    assert ident["become"] is False and ident["uid"] == plain.pw_uid and ident["user"] == plain.pw_name, ident
    assert mixed["owners"]["fq163"] == {plain.pw_uid}, mixed["owners"]["fq163"]
    for wl in rec["workloads"]:
        m = wl["metrics"]
        assert m["foreign_source"] == "iobench", m
        assert "not root" in (wl["result"].get("foreign") or {}).get("cgroup_error", ""), wl["result"].get("foreign")
    assert not os.path.exists(mixed["test_dirs"]["fq163"])


@pytest.mark.long
def test_root_login_is_unchanged(mixed):
    rec = _rec(mixed, "fq165")
    assert rec["verdict"] == "PASS", rec["reasons"]
    assert rec["identity"]["uid"] == 0 and rec["identity"]["become"] is False, rec["identity"]
    assert mixed["owners"]["fq165"] == {0}


@pytest.mark.long
def test_sudo_that_asks_for_a_password_is_refused_with_the_fix(mixed):
    rec = _rec(mixed, "fq164")
    text = " ".join(rec["reasons"]) + " " + str((rec.get("error") or {}).get("msg"))
    assert rec["verdict"] == "ERROR" and rec["workloads"] == [], rec["reasons"]
    assert "privileges: host fq164" in text and mixed["users"].pw.pw_name in text, text
    assert "asks for a password" in text, text
    assert "ansible_become_password" in text and "fleetqual_become: false" in text, text
    assert not os.path.exists(mixed["test_dirs"]["fq164"])


@pytest.mark.long
@pytest.mark.parametrize("host,variable", [("fq166", "fleetqual_bin_dir"), ("fq167", "fleetqual_test_dir")])
def test_a_directory_the_login_cannot_write_is_refused_before_measuring(mixed, host, variable):
    rec = _rec(mixed, host)
    text = " ".join(rec["reasons"])
    assert rec["verdict"] == "ERROR" and rec["workloads"] == [], rec["reasons"]
    assert "privileges:" in text and variable in text and "fleetqual_become: true" in text, text
    assert mixed["users"].plain.pw_name in text, text
    # nothing was written where it could not write, and nothing of it is left in its home
    assert os.listdir(os.path.join(mixed["users"].base, "rootowned")) == []
    assert not os.path.exists(mixed["test_dirs"][host])


@pytest.mark.long
def test_payloads_stale_removed_fresh_kept_none_left(mixed):
    """The no-sudo user's start removed the planted stale payload of this collection's job
    module, kept the fresh one (maybe a live run's), and the run left no payload behind."""
    assert not os.path.exists(mixed["stale"])
    assert os.path.isdir(mixed["fresh"])
    assert mixed["left_payloads"] == [], mixed["left_payloads"]


# ----------------------------------------------------------------------------- without the fleet
# the pieces the run above goes through, on real files (no sshd needed)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as host_start  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.job import payloads  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3 * payloads.STALE_S), st.booleans(), st.booleans(), st.booleans(),
                          st.sampled_from(["job", "qualify_host", "other"])), max_size=6), st.booleans())
def test_only_stale_unused_payloads_of_this_collection_and_user_are_removed(entries, mine):
    """(age, a directory?, kept as this run's own?, open in a live process?, module) per entry:
    removed exactly the directories of this collection's modules, of the given user, at least
    STALE_S old, not this run's own and not open in a live process."""
    uid = os.geteuid() if mine else os.geteuid() + 1
    now = time.time()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        expected, keep = [], []
        for i, (age, is_dir, own, open_now, module) in enumerate(entries):
            prefix = "ansible_fleetqual.storage.%s_payload_" % module if module != "other" else "ansible_x.y.job_payload_"
            path = os.path.join(tmp, "%s%d" % (prefix, i))
            if is_dir:
                os.mkdir(path)
                zpath = os.path.join(path, "payload.zip")
                with open(zpath, "wb") as fh:
                    fh.write(b"PK")
                if open_now:
                    stack.enter_context(open(zpath, "rb"))
            else:
                open(path, "w").close()
            os.utime(path, (now - age, now - age))
            if own:
                keep.append(path)
            if is_dir and mine and module != "other" and age >= payloads.STALE_S and not own and not open_now:
                expected.append(path)
        found = payloads.stale_payloads(tmp, uid=uid, now=now, keep=tuple(keep))
        assert found == sorted(expected)


def test_payload_dir_is_found_only_for_this_collections_ansiballz_zip():
    assert payloads.payload_dir("/tmp/ansible_fleetqual.storage.job_payload_ab12/ansible_fleetqual.storage.job_payload.zip") \
        == "/tmp/ansible_fleetqual.storage.job_payload_ab12"
    assert payloads.payload_dir("/tmp/ansible_community.general.x_payload_ab/ansible_community.general.x_payload.zip") is None
    assert payloads.payload_dir("/work/main/plugins") is None


def test_a_raw_device_target_without_root_is_refused_before_anything():
    ident = {"user": "ops", "uid": 1000}
    with pytest.raises(host_start.StartError) as err:
        host_start.privileges({"path": "/nonexistent/test", "targets": [{"name": "nvme", "device": "/dev/nvme9n1"}]},
                              ident)
    assert "raw device /dev/nvme9n1" in err.value.msg and "user ops (uid 1000)" in err.value.msg
    assert "fleetqual_become: true" in err.value.msg
    # root may: no refusal, nothing looked at
    host_start.privileges({"path": "/nonexistent/test", "targets": [{"device": "/dev/nvme9n1"}]}, {"user": "root", "uid": 0})
