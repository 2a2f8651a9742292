"""The BMC lab (docs/testing.md, "The BMC lab"): the machines a power method acts on, and the
two BMC emulators that data centres' tooling is tested against, all on 127.0.0.1.

* a private libvirt daemon (``qemu:///session`` of the unprivileged user ``nobody``, its home
  and sockets in the lab's directory: no system service, no D-Bus, no virtlogd), whose
  domains are small TCG machines with no disk (SeaBIOS finds nothing to boot and idles);
* sushy-tools' Redfish emulator over it (TLS with a certificate of its own, basic auth), as
  OpenStack Ironic and Metal3 test their Redfish paths (https://docs.openstack.org/sushy-tools/);
* virtualbmc's vbmcd, one IPMI-over-LAN BMC per domain (https://docs.openstack.org/virtualbmc/).

Every process is a child of the test process (PR_SET_PDEATHSIG), libvirtd's QEMUs children of
a subreaper (reaper.py), ended by :meth:`Lab.stop` by their PIDs. Nothing is downloaded: the
emulators are in .venv-bmc (tests/bmc/requirements.txt, scripts/setup.sh --long).
"""
import ctypes
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BMC_VENV = os.path.join(ROOT, ".venv-bmc", "bin")
LIBVIRTD = "/usr/sbin/libvirtd"
QEMU = "/usr/bin/qemu-system-x86_64"
USER = "nobody"
ADMIN, PASSWORD = "admin", "fleetqual-bmc"
PR_SET_PDEATHSIG = 1


def missing():
    """What this machine lacks for the lab (empty when it can run)."""
    out = []
    if os.geteuid() != 0:
        out.append("root (libvirtd runs as %s)" % USER)
    for path, what in ((LIBVIRTD, "Debian libvirt-daemon"), (QEMU, "Debian qemu-system-x86"),
                       (os.path.join(BMC_VENV, "sushy-emulator"), ".venv-bmc (scripts/setup.sh --long)"),
                       (os.path.join(BMC_VENV, "vbmc"), ".venv-bmc (scripts/setup.sh --long)"),
                       (shutil.which("setpriv") or "/nonexistent", "util-linux setpriv"),
                       (shutil.which("openssl") or "/nonexistent", "openssl")):
        if not os.path.exists(path):
            out.append("%s (%s)" % (path, what))
    try:
        pwd.getpwnam(USER)
    except KeyError:
        out.append("user %s" % USER)
    return out


def _pdeathsig():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what, proc=None):
    """Poll ``pred`` (exceptions count as not yet) until it holds; TimeoutError after
    ``timeout`` seconds, or at once when ``proc`` (a Popen) has ended."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001  (not up yet: connection refused, TLS not ready, ...)
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s: the process ended with status %s" % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise TimeoutError("%s: not ready after %s s" % (what, timeout))
        time.sleep(0.1)


def domain_xml(name):
    """A TCG machine with no disk and no OS: powered on, SeaBIOS idles; powered off, nothing."""
    return """<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <emulator>%s</emulator>
    <memballoon model='none'/>
  </devices>
</domain>
""" % (name, QEMU)


class Lab:
    """The lab, started by :meth:`start` with one domain per name; ``uuids`` and
    ``ipmi_ports`` by domain name, ``redfish_port``, ``cert`` (the CA file that Redfish
    clients check the emulator's certificate against)."""

    def __init__(self, names):
        self.names = list(names)
        self.base = tempfile.mkdtemp(prefix="fqbmc-%d-" % os.getpid(), dir="/dev/shm")
        os.chmod(self.base, 0o755)          # libvirtd, as nobody, lives in it
        pw = pwd.getpwnam(USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.home, self.rundir = os.path.join(self.base, "home"), os.path.join(self.base, "run")
        self.logs = os.path.join(self.base, "logs")
        self.uri = "qemu+unix:///session?socket=%s" % os.path.join(self.rundir, "libvirt", "libvirt-sock")
        self.procs = {}
        self.uuids, self.ipmi_ports = {}, {}
        self.redfish_port, self.vbmc_port = free_port(), free_port()
        self.cert = None
        self.timing = {}

    # -- helpers -------------------------------------------------------------------------------
    def _popen(self, name, argv, env=None, new_session=False):
        log = open(os.path.join(self.logs, name + ".log"), "ab")
        try:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                env=env, preexec_fn=_pdeathsig, start_new_session=new_session)
        finally:
            log.close()
        return self.procs[name]

    def virt(self, op, arg):
        """One libvirt call through virt.py (.venv-bmc's python3-libvirt)."""
        r = subprocess.run([os.path.join(BMC_VENV, "python"), os.path.join(HERE, "virt.py"), self.uri, op, arg],
                           capture_output=True, text=True, timeout=60, check=False)
        if r.returncode:
            raise RuntimeError("virt.py %s %s: %s" % (op, arg, r.stderr.strip()[-800:]))
        return r.stdout.strip()

    def state(self, name):
        """``(state, reason)`` of a domain as libvirt says it, e.g. ``("shutoff", "destroyed")``."""
        state, reason = (self.virt("state", name).split(" ", 1) + [""])[:2]
        return state, reason

    def log(self, name):
        try:
            with open(os.path.join(self.logs, name + ".log"), errors="replace") as fh:
                return fh.read()[-3000:]
        except OSError:
            return ""

    # -- start ---------------------------------------------------------------------------------
    def start(self):
        t0 = time.monotonic()
        for d in (self.logs, os.path.join(self.home, ".config", "libvirt"), self.rundir):
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(self.home, ".config", "libvirt", "qemu.conf"), "w") as fh:
            fh.write('stdio_handler = "file"\n')        # QEMU's output to files: no virtlogd
        for root, _dirs, files in os.walk(self.home):
            for p in [root] + [os.path.join(root, f) for f in files]:
                os.chown(p, self.uid, self.gid)
        os.chown(self.rundir, self.uid, self.gid)
        os.chmod(self.rundir, 0o700)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.home, "XDG_RUNTIME_DIR": self.rundir,
               "LANG": "C.UTF-8"}
        # setpriv's --pdeathsig after the change of user (which clears an inherited one)
        lv = self._popen("libvirtd", [os.path.join(BMC_VENV, "python"), os.path.join(HERE, "reaper.py"), "setpriv",
                                      "--reuid=%d" % self.uid, "--regid=%d" % self.gid, "--clear-groups",
                                      "--pdeathsig=KILL", LIBVIRTD], env=env)
        sock = os.path.join(self.rundir, "libvirt", "libvirt-sock")
        wait_for(lambda: os.path.exists(sock), 60, "libvirtd", lv)
        for name in self.names:
            xml = os.path.join(self.base, name + ".xml")
            with open(xml, "w") as fh:
                fh.write(domain_xml(name))
            self.uuids[name] = self.virt("define", xml)
        self.timing["libvirtd"] = time.monotonic() - t0
        # sushy caches libvirt's domain objects: it starts after libvirtd and stops before it
        self._start_sushy()
        self._start_vbmcd()
        self.timing["total"] = time.monotonic() - t0
        return self

    def _start_sushy(self):
        t0 = time.monotonic()
        tls = os.path.join(self.base, "tls")
        os.makedirs(tls, exist_ok=True)
        self.cert, key = os.path.join(tls, "cert.pem"), os.path.join(tls, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", self.cert,
                        "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True, timeout=120)
        htpasswd = os.path.join(tls, "htpasswd")
        subprocess.run([os.path.join(BMC_VENV, "python"), "-c",
                        "import bcrypt, sys; open(sys.argv[1], 'w').write('%s:' + bcrypt.hashpw(sys.argv[2].encode(), "
                        "bcrypt.gensalt(rounds=4)).decode() + '\\n')" % ADMIN, htpasswd, PASSWORD],
                       check=True, capture_output=True, timeout=60)
        conf = os.path.join(tls, "sushy.conf")
        with open(conf, "w") as fh:
            fh.write("SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = %d\n"
                     "SUSHY_EMULATOR_SSL_CERT = %r\nSUSHY_EMULATOR_SSL_KEY = %r\nSUSHY_EMULATOR_AUTH_FILE = %r\n"
                     "SUSHY_EMULATOR_LIBVIRT_URI = %r\nSUSHY_EMULATOR_IGNORE_BOOT_DEVICE = True\n"
                     "SUSHY_EMULATOR_ALLOWED_INSTANCES = %r\n"
                     % (self.redfish_port, self.cert, key, htpasswd, self.uri, sorted(self.uuids.values())))
        proc = self._popen("sushy", [os.path.join(BMC_VENV, "sushy-emulator"), "--config", conf])
        ctx = ssl.create_default_context(cafile=self.cert)
        url = "https://127.0.0.1:%d/redfish/v1/" % self.redfish_port
        wait_for(lambda: urllib.request.urlopen(url, context=ctx, timeout=5).status == 200, 60, "sushy-emulator", proc)
        self.timing["sushy"] = time.monotonic() - t0

    def _start_vbmcd(self):
        t0 = time.monotonic()
        vdir = os.path.join(self.base, "vbmc")
        os.makedirs(os.path.join(vdir, "state"), exist_ok=True)      # vbmcd ends at once without it
        conf = os.path.join(vdir, "virtualbmc.conf")
        with open(conf, "w") as fh:
            fh.write("[default]\nconfig_dir = %s/state\npid_file = %s/master.pid\nserver_port = %d\n"
                     "[log]\nlogfile = %s/vbmcd-own.log\ndebug = false\n" % (vdir, vdir, self.vbmc_port, self.logs))
        self.vbmc_env = dict(os.environ, VIRTUALBMC_CONFIG=conf)
        # a session of its own: vbmcd forks one process per BMC, and stop() ends the group
        proc = self._popen("vbmcd", [os.path.join(BMC_VENV, "python"), os.path.join(HERE, "vbmcd_run.py"),
                                     "--foreground"], env=self.vbmc_env, new_session=True)
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.vbmc_port), 1).close() is None, 60, "vbmcd", proc)
        for name in self.names:
            port = self.ipmi_ports[name] = free_port(socket.SOCK_DGRAM)
            self.vbmc("add", name, "--address", "127.0.0.1", "--port", str(port), "--username", ADMIN,
                      "--password", PASSWORD, "--libvirt-uri", self.uri)
            self.vbmc("start", name)
        self.timing["vbmcd"] = time.monotonic() - t0

    def vbmc(self, *args):
        return subprocess.run([os.path.join(BMC_VENV, "vbmc"), *args], env=self.vbmc_env, check=True,
                              capture_output=True, text=True, timeout=60).stdout

    # -- stop ----------------------------------------------------------------------------------
    def _end(self, name, group=False):
        p = self.procs.pop(name, None)
        if p is None:
            return
        kill = os.killpg if group else os.kill
        if p.poll() is None:
            try:
                kill(p.pid, signal.SIGTERM)
                p.wait(15)
            except subprocess.TimeoutExpired:
                kill(p.pid, signal.SIGKILL)
                p.wait(10)
            except ProcessLookupError:
                pass
        if group:
            try:
                os.killpg(p.pid, signal.SIGKILL)        # its per-BMC processes, if any is left
            except ProcessLookupError:
                pass

    def stop(self):
        """Ends everything the lab started (vbmcd, sushy, the domains, libvirtd) and removes its
        directory."""
        self._end("vbmcd", group=True)
        self._end("sushy")
        if "libvirtd" in self.procs and self.procs["libvirtd"].poll() is None:
            for name in self.uuids:
                try:
                    self.virt("remove", name)
                except (RuntimeError, subprocess.TimeoutExpired):
                    pass
        self._end("libvirtd")        # reaper.py: passes SIGTERM on, then SIGKILLs any QEMU left
        shutil.rmtree(self.base, ignore_errors=True)
