"""A fleet of real SSH hosts on this one machine, for the fleet tests and bench/bench_fleet.py.

Each host is its own ``sshd -D`` (foreground, so the PID we hold *is* the daemon) listening
on its own loopback address (127.0.0.11, 127.0.0.12, ...) and a free port, with a throwaway
ed25519 host key, its own sshd_config / PidFile / authorized_keys / log, all under one
temporary directory. One throwaway client key logs in as root.

Process hygiene (no sshd may outlive the tests):

* every sshd is started by us with ``Popen`` and tracked by PID;
* ``PR_SET_PDEATHSIG`` = SIGKILL: if the Python process that started it dies, even by
  SIGKILL, the kernel kills the daemon;
* ``Fleet.close()`` (pytest finalizer), an ``atexit`` hook and a SIGTERM handler kill every
  tracked daemon *and its descendants* (the per-connection sshd processes and the
  commands they run), found by walking /proc from our PID: nothing is killed by name.

Inventory: ``Fleet.inventory(dir, hosts)`` writes ``hosts.yml`` plus ``host_vars/`` and
``group_vars/`` files; every host gets its own ``fleetqual_test_dir``, under ``dirs_root``
when given, else under ``Fleet.default_dirs_root(dir)``: ``<dir>/hostdirs``, or, when ``Fleet.dirs_base`` is set,
that inventory's own directory on the filesystem ``dirs_base`` lies on (the fleet tests'
session fixture, tests/fleet/conftest.py, sets it to an ext4 of their own on a loop device
over a tmpfs: the hosts' measurements never land on the machine's own disk). Its
``fleetqual_bin_dir`` is the fleet's, one for every host and inventory (``Fleet.host_dirs``).

Loop devices: :func:`loop_device` (a blank device, an unmounted ext4 or a mounted one over a
file of its own), the one shape of that setup for the fleet tests (tests/unit/loopdev.py is
the unit tests' and bench/'s mounted-ext4 one).
"""
import atexit
import contextlib
import ctypes
import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import yaml

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _TESTS)
from proctree import descendants  # noqa: E402  (tests/proctree.py; also read as fleetlib.descendants)
import suitecost  # noqa: E402  (tests/suitecost.py)
if os.path.join(_TESTS, "unit") not in sys.path:
    sys.path.append(os.path.join(_TESTS, "unit"))
import loopdev  # noqa: E402  (tests/unit/loopdev.py: loop devices of this process's own)
if os.path.join(_TESTS, "integration") not in sys.path:
    sys.path.append(os.path.join(_TESTS, "integration"))
import playbook_run  # noqa: E402  (tests/integration/playbook_run.py)

SSHD = "/usr/sbin/sshd"
PR_SET_PDEATHSIG = 1
SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
# where a login other than root keeps the fleet's client key (sshd token %h: its home);
# root logs in by the host's own authorized_keys file
USER_KEYS = "%h/.fleetqual-test-keys"

_LIVE = set()          # every SshdInstance whose daemon may still be running
_LOCK = threading.Lock()
_COST = {}             # "hosts": the loopback hosts' cost group (hosts_cost_group)


def available():
    """None when a fleet can be built here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the loopback sshd fleet needs root (sshd privilege separation, root login by key)"
    if not os.access(SSHD, os.X_OK):
        return "%s is missing (Debian package openssh-server)" % SSHD
    for tool in ("/usr/bin/ssh-keygen", "/usr/bin/ssh"):
        if not os.access(tool, os.X_OK):
            return "%s is missing (openssh-client)" % tool
    return None


def _pdeathsig():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Launcher:
    """Starts child processes from one thread that lives as long as the test process, so a
    child's PR_SET_PDEATHSIG fires only when the test process dies. The kernel binds that
    signal to the *thread* that forked the child (prctl(2), PR_SET_PDEATHSIG): a daemon
    started from a short-lived thread (a helper that restarts a host's sshd mid-run) would be
    killed when that thread returns."""

    def __init__(self):
        self.q = queue.Queue()
        self.thread = None
        self.lock = threading.Lock()

    def _loop(self):
        while True:
            argv, kw, box, done = self.q.get()
            try:
                box.append(subprocess.Popen(argv, **kw))
            except Exception as e:  # noqa: BLE001 - handed to the caller
                box.append(e)
            done.set()

    def popen(self, argv, **kw):
        """``subprocess.Popen(argv, **kw)``, forked by the launcher's thread."""
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="test-launcher", daemon=True)
                self.thread.start()
        box, done = [], threading.Event()
        self.q.put((argv, kw, box, done))
        done.wait()
        if isinstance(box[0], Exception):
            raise box[0]
        return box[0]


LAUNCHER = Launcher()


def hosts_cost_group():
    """The control group of this stream's loopback hosts (their sshd, sessions, modules,
    detached jobs and iobench), below the stream's own (tests/suitecost.py), made on first
    use; None where the stream has none. Its CPU is the hosts' side of the fleet tests, the
    rest of the stream's the controller's (ansible-playbook, ssh clients, the tests)."""
    with _LOCK:
        if "hosts" not in _COST:
            _COST["hosts"] = suitecost.sub_group("fleet-hosts")
        return _COST["hosts"]


def _host_child_setup(group):
    """In a host's sshd before its exec: :func:`_pdeathsig`, and into the hosts' cost group."""
    _pdeathsig()
    if group:
        try:
            suitecost.join(group, os.getpid())
        except OSError:
            pass


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def kill_tree(pid):
    """SIGKILL pid and everything below it, and nothing else. The tree is frozen first
    (SIGSTOP, repeated until no new PID appears) so nothing forks away while we kill."""
    _signal(pid, signal.SIGSTOP)
    frozen = []
    while True:
        new = [p for p in descendants(pid) if p not in frozen]
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        frozen.extend(new)
    for p in [pid] + frozen:
        _signal(p, signal.SIGKILL)
    return frozen


def free_port(addr):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, 0))
        return s.getsockname()[1]


def port_open(addr, port, timeout=0.2):
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return True
    except OSError:
        return False


class SshdInstance:
    # argv in front of the daemon's: tests/fleet/chroots.py runs a host's sshd with ("chroot", <root>)
    command_prefix = ()

    def __init__(self, fleet, name, addr):
        self.fleet, self.name, self.addr = fleet, name, addr
        self.dir = os.path.join(fleet.base, "sshd", name)
        self.port = None
        self.proc = None
        self.config = os.path.join(self.dir, "sshd_config")
        self.log = os.path.join(self.dir, "sshd.log")
        self.pidfile = os.path.join(self.dir, "sshd.pid")
        self.authorized_keys = os.path.join(self.dir, "authorized_keys")
        self.key_options = ""

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, key_options="", timeout=15, port=None):
        """Start (or restart) this host's sshd. key_options go in front of the client key in
        authorized_keys, e.g. environment="PATH=..." (needs PermitUserEnvironment); ``port``:
        listen there (the host back where its inventory says it is), else on a free port."""
        if self.running():
            if key_options == self.key_options:
                return self
            self.stop()
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        hostkey = os.path.join(self.dir, "ssh_host_ed25519_key")
        if not os.path.exists(hostkey):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleet-" + self.name,
                            "-f", hostkey], check=True)
        self.key_options = key_options
        with open(self.authorized_keys, "w") as fh:
            fh.write(("%s %s" % (key_options, self.fleet.client_pub)).strip() + "\n")
        self.port = port or free_port(self.addr)
        with open(self.config, "w") as fh:
            fh.write("\n".join([
                "ListenAddress %s:%d" % (self.addr, self.port),
                "HostKey %s" % hostkey,
                "PidFile %s" % self.pidfile,
                # a login other than root reads its key from its home (tests/fleet/test_fleet_privilege.py)
                "AuthorizedKeysFile %s %s" % (self.authorized_keys, USER_KEYS),
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PermitUserEnvironment yes",
                "UseDNS no",
                # a session's shell reads no rc file of this machine's user: bash sources
                # ~/.bashrc when sshd starts it unless it counts itself nested (SHLVL, bash(1)
                # INVOCATION); root's here runs `pyenv init`, whose rehash waits a minute on a
                # lock that any killed session leaves behind (a fleet stream of 10-minute runs)
                "SetEnv SHLVL=1",
                "MaxStartups 200",
                "MaxSessions 100",
                "Subsystem sftp internal-sftp",
                "LogLevel VERBOSE",
                "",
            ]))
        # privilege separation directory of the distribution's sshd
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        group = hosts_cost_group()
        with _LOCK:
            # from the launcher's thread: the caller may be a thread that ends before the host does
            self.proc = LAUNCHER.popen(list(self.command_prefix) + [SSHD, "-D", "-f", self.config, "-E", self.log],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, preexec_fn=lambda: _host_child_setup(group))
            _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while not port_open(self.addr, self.port):
            if self.proc.poll() is not None:
                raise RuntimeError("sshd %s exited %s: %s" % (self.name, self.proc.returncode, self.read_log()[-2000:]))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("sshd %s did not listen on %s:%d within %ds" % (self.name, self.addr, self.port, timeout))
            time.sleep(0.05)
        return self

    def kill(self):
        """SIGKILL this sshd and every process below it (sessions, modules, iobench)."""
        killed = []
        if self.proc is not None:
            if self.proc.poll() is None:
                killed = [self.proc.pid] + kill_tree(self.proc.pid)
            self.proc.wait(timeout=10)
        with _LOCK:
            _LIVE.discard(self)
        return killed

    stop = kill

    def read_log(self):
        try:
            with open(self.log, errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def accepted_logins(self):
        return self.read_log().count("Accepted publickey")


class Fleet:
    """Hosts named fq<N> on 127.0.0.<N>, N from 11 up."""

    # a directory below which inventories written without a dirs_root keep their hosts'
    # directories (default_dirs_root); None: in the inventory's directory
    dirs_base = None

    def __init__(self, base, python=None, pipelining=True):
        self.base = base
        self.pipelining = pipelining
        self.python = python or sys.executable
        self.instances = {}
        os.makedirs(base, mode=0o700, exist_ok=True)
        self.client_key = os.path.join(base, "client_ed25519")
        if not os.path.exists(self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleet-client",
                            "-f", self.client_key], check=True)
        with open(self.client_key + ".pub") as fh:
            self.client_pub = fh.read().strip()
        # ssh ControlPersist sockets of this fleet only (short path: sun_path is 108 bytes)
        self.control_dir = os.path.join("/tmp", "fqcp-%d-%d" % (os.getpid(), id(self) % 10000))
        os.makedirs(self.control_dir, mode=0o700, exist_ok=True)
        _install_exit_handlers()

    @staticmethod
    def addr_of(n):
        return "127.0.0.%d" % n

    def host(self, n, key_options=""):
        """The running sshd of host fq<n> (started if needed)."""
        name = "fq%d" % n
        inst = self.instances.get(name)
        if inst is None:
            inst = self.instances[name] = SshdInstance(self, name, self.addr_of(n))
        if not inst.running() or inst.key_options != key_options:
            inst.start(key_options)
        return inst

    def dead_address(self):
        """(addr, port) where nothing listens: a host that is unreachable from the start."""
        for n in range(250, 200, -1):
            addr = self.addr_of(n)
            port = free_port(addr)
            if not port_open(addr, port):
                return addr, port
        raise RuntimeError("no dead loopback address found")

    def host_dirs(self, name, root):
        """A host's ``fleetqual_test_dir`` under ``root`` (each inventory's own) and the fleet's
        ``fleetqual_bin_dir``: the loopback hosts are one machine, whose binary directory every
        host name and every inventory shares (as its /usr/local/bin would be), so the binary a
        run deployed is found by every later run, as on a real fleet (a deploy costs a host-run
        a second module run and a transfer, 2.7 CPU-s for a paced one-workload host-run where a
        deployed one costs 2.0)."""
        return {"fleetqual_test_dir": os.path.join(root, name, "test"),
                "fleetqual_bin_dir": os.path.join(self.base, "bin")}

    def default_dirs_root(self, path):
        """The root of the host directories of ``inventory(path, ...)`` without a ``dirs_root``:
        ``<path>/hostdirs``; with ``dirs_base`` set, ``<dirs_base>/<path relative to the
        directory holding the fleet's base>/hostdirs`` (a digest of the path when it is not
        below it), so each inventory has its own and a test can name it before or after."""
        if not self.dirs_base:
            return os.path.join(path, "hostdirs")
        path = os.path.abspath(path)
        rel = os.path.relpath(path, os.path.dirname(os.path.abspath(self.base)))
        if rel == "." or rel.startswith(".."):
            rel = hashlib.sha256(path.encode()).hexdigest()[:16]
        return os.path.join(self.dirs_base, rel, "hostdirs")

    def connection_vars(self, inst=None, addr=None, port=None):
        return {
            "ansible_host": inst.addr if inst else addr,
            "ansible_port": inst.port if inst else port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": self.client_key,
            "ansible_ssh_common_args": SSH_ARGS,
            # ssh's ConnectTimeout, which covers the banner: a loopback host's sshd forks and
            # re-executes itself for each login, and on the suite's saturated 2 cores one took
            # over ansible's default 10 s, making its host UNREACHABLE at the start of a run
            # whose subject was something else. A host that is really away refuses at once
            # (nothing listens on its port), so only a slow host waits longer; the VM tier's
            # guests have the same 60 s.
            "ansible_ssh_timeout": 60,
            "ansible_python_interpreter": self.python,
            # one SSH round trip per module instead of put + chmod + exec + rm (bench/RESULTS-fleet.md)
            "ansible_ssh_pipelining": self.pipelining,
        }

    def inventory(self, path, hosts, group_vars=None, dirs_root=None):
        """Write an inventory directory. hosts: list of dicts with keys name, group (default
        'db'), inst (SshdInstance) or addr/port, vars (extra host_vars); the hosts' directories
        under dirs_root, else default_dirs_root(path). Returns hosts.yml."""
        os.makedirs(os.path.join(path, "host_vars"), exist_ok=True)
        os.makedirs(os.path.join(path, "group_vars"), exist_ok=True)
        dirs_root = dirs_root or self.default_dirs_root(path)
        groups = {}
        for h in hosts:
            groups.setdefault(h.get("group", "db"), {})[h["name"]] = None
            hv = self.connection_vars(h.get("inst"), h.get("addr"), h.get("port"))
            hv.update(self.host_dirs(h["name"], dirs_root))
            hv.update(h.get("vars") or {})
            with open(os.path.join(path, "host_vars", h["name"] + ".yml"), "w") as fh:
                yaml.safe_dump(hv, fh, default_flow_style=False)
        for group, gv in (group_vars or {}).items():
            with open(os.path.join(path, "group_vars", group + ".yml"), "w") as fh:
                yaml.safe_dump(gv, fh, default_flow_style=False)
        inv = {"all": {"children": {g: {"hosts": hs} for g, hs in groups.items()}}}
        hosts_yml = os.path.join(path, "hosts.yml")
        with open(hosts_yml, "w") as fh:
            yaml.safe_dump(inv, fh, default_flow_style=False)
        return hosts_yml

    def ansible_env(self):
        """Environment of one ansible-playbook run: its own ControlPersist socket directory,
        so no run reuses another run's SSH master connection (each run logs in afresh)."""
        self._runs = getattr(self, "_runs", 0) + 1
        cp = os.path.join(self.control_dir, str(self._runs))
        os.makedirs(cp, mode=0o700, exist_ok=True)
        return {"ANSIBLE_SSH_CONTROL_PATH_DIR": cp, "ANSIBLE_HOST_KEY_CHECKING": "False"}

    def close(self):
        for inst in list(self.instances.values()):
            inst.kill()
        shutil.rmtree(self.control_dir, ignore_errors=True)


def _kill_all():
    with _LOCK:
        live = list(_LIVE)
    for inst in live:
        try:
            inst.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


_INSTALLED = []


def _install_exit_handlers():
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    atexit.register(_kill_all)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        def on_term(signum, frame):
            _kill_all()
            end_on_signal(signum)
        signal.signal(signal.SIGTERM, on_term)


def end_on_signal(signum):
    """End the process for ``signum`` from its handler, after the handler's cleanup: under
    pytest KeyboardInterrupt, which ends the session with its fixtures torn down and its JUnit
    file written (a SystemExit raised in a test is only that test's failure, and pytest goes
    on with the next); elsewhere SystemExit(128 + signum)."""
    if "pytest" in sys.modules:
        raise KeyboardInterrupt("signal %d" % signum)
    raise SystemExit(128 + signum)


def sshd_pids_below(pid_list):
    """Which of these PIDs are still alive (for the 'no sshd left' check)."""
    alive = []
    for pid in pid_list:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                if b"sshd" in fh.read():
                    alive.append(pid)
        except OSError:
            pass
    return alive


# the stall limit of the runs whose subject is not the disk (tests/integration/playbook_run.py)
SHARED_DISK_STALL_RULE = playbook_run.SHARED_DISK_STALL_RULE

# the pace of the workloads of fleets whose subject is the run (its output, its batches, its
# round trips, privileges, secrets, detached jobs), not the disk's speed or the data
# (tests/integration/playbook_run.py)
PACE = playbook_run.PACE

PAYLOAD_GLOB = "/tmp/ansible_fleetqual.storage.*_payload_*"


def leaked_payloads(since, uids=None, settle_s=30.0):
    """The AnsiballZ payload directories of this collection's module runs in /tmp (the
    fleet's hosts share it) made at or after ``since`` (epoch) and still there once every one
    of them has had ``settle_s`` seconds to end (another test's module run may be running
    now), optionally only those owned by ``uids``. A run that ended normally leaves none."""
    import glob

    def now_there():
        out = []
        for path in glob.glob(PAYLOAD_GLOB):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_mtime >= since - 1 and (uids is None or st.st_uid in uids):
                out.append(path)
        return sorted(out)

    found = now_there()
    limit = time.monotonic() + settle_s
    while found and time.monotonic() < limit:
        time.sleep(1.0)
        found = [p for p in now_there() if p in found]
    return found


def load_json(path):
    with open(path) as fh:
        return json.load(fh)


def job_status(test_dir):
    """The detached job's status document in a host's test directory, or None (not there yet,
    or being replaced): the product's own reader (module_utils/job/status.py)."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as job_status_mod
    return job_status_mod.read_status(job_status_mod.job_dir(test_dir))


# --------------------------------------------------------------------------- loop devices

LOOP_TOOLS = ("losetup", "mkfs.ext4", "mount", "umount")


def loop_tools_missing():
    """Why :func:`loop_device` cannot work here (a reason to skip), or None."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in LOOP_TOOLS):
        return "needs root, %s" % ", ".join(LOOP_TOOLS)
    return None


def _cmd(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


@contextlib.contextmanager
def loop_device(image, size, mkfs=False, mount=None):
    """A loop device over ``image`` (created, ``size`` bytes of zeros): blank, or with
    ``mkfs`` an ext4 (inode tables and journal initialised at mkfs, so no ext4lazyinit
    writes in the background of a measurement), and with ``mount`` (a directory, created)
    mounted there. Yields ``/dev/loopN`` (:func:`loopdev.attach`: of this process's own range);
    unmounted (lazily if busy) and detached afterwards. A losetup that fails skips the test."""
    with open(image, "wb") as fh:
        fh.truncate(size)
    dev = loopdev.attach_or_skip(image)
    mounted = False
    try:
        if mkfs or mount:
            p = _cmd(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
            assert p.returncode == 0, p.stderr
        if mount:
            os.makedirs(mount, exist_ok=True)
            p = _cmd(["mount", dev, mount])
            assert p.returncode == 0, p.stderr
            mounted = True
        yield dev
    finally:
        if mounted and _cmd(["umount", mount]).returncode != 0:
            _cmd(["umount", "-l", mount])
        loopdev.detach(dev, image)
