"""The SAN lab (docs/testing.md, "The SAN lab"): iSCSI LUNs on this machine, reached by the VM
tier's guests over two paths each and grouped by their dm-multipath.

* **The array**: Debian's ``tgtd`` (the Linux SCSI target framework, https://github.com/fujita/tgt),
  started by :class:`Tgt` in the foreground as a child of the test process, on a management
  port of its own, with two portals on 127.0.0.1 (two paths per LUN); a LUN is a file.
* **The initiators**: guests of the VM tier (tests/vm/guests.py), which reach the portals at
  10.0.2.2 through QEMU's user-mode network. :func:`make_initiator` gives a guest an initiator
  name of its own and a ``multipath.conf`` (``no_path_retry``: ``queue`` holds I/O while no path
  is left, ``fail`` fails it at once) and starts iscsid and multipathd (masked in the image);
  :func:`login` logs in on each portal (with short NOP-Out and replacement timeouts, so a cut
  path is failed within seconds) and waits for the multipath map of the LUN's WWID.
* **A path cut** (:meth:`Tgt.cut` / :meth:`Tgt.restore`), an iptables rule of this lab's own
  on the loopback interface, removed by restore and at stop: ``reset`` (the default) answers
  every segment to the portal's port with a TCP reset, as a target portal or port going down
  does: the initiator's connection ends at once (what it had sent and the target had not
  received is gone with it), its session recovers in vain and multipath fails the path;
  ``blackhole`` drops them, as a failed cable is: no reset, no answer, the NOP-Out times out.
  A blackhole keeps the connection's unsent writes in the initiator's socket, and tgt
  executes them when the path comes back, after multipath retried them down the other path
  and later writes overwrote them: a stale block (seen once in one run of test_vm_san), the
  hazard a real array's session reinstatement guards against, not tgt's.

Everything is bounded, loopback only, and ends with the test (PR_SET_PDEATHSIG; :meth:`Tgt.stop`).
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time

TGTD, TGTADM, IPTABLES = "/usr/sbin/tgtd", "/usr/sbin/tgtadm", shutil.which("iptables") or "/usr/sbin/iptables"
HOST_FROM_GUEST = "10.0.2.2"        # this machine, as QEMU's user-mode network shows it to a guest
IQN_PREFIX = "iqn.2026-11.test.fleetqual"
# the initiator's timers (open-iscsi's iscsid.conf): a NOP-Out every 2 s, a connection whose
# NOP-Out is not answered in 2 s is in error, and its session's I/O is failed to multipath
# after 5 s of recovery
NODE_SETTINGS = {"node.conn[0].timeo.noop_out_interval": "2", "node.conn[0].timeo.noop_out_timeout": "2",
                 "node.session.timeo.replacement_timeout": "5"}
PR_SET_PDEATHSIG = 1


def missing():
    """What this machine lacks for the lab (empty when it can run)."""
    out = [p for p in (TGTD, TGTADM, IPTABLES) if not os.path.exists(p)]
    if os.geteuid() != 0:
        out.append("root")
    elif os.path.exists(IPTABLES) and subprocess.run([IPTABLES, "-w", "-L", "INPUT", "-n"], capture_output=True,
                                                     timeout=30, check=False).returncode:
        out.append("iptables (no packet filter in this kernel)")
    return out


def _pdeathsig():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tgt:
    """One tgtd with ``portals`` portals on 127.0.0.1 (``ports``); LUNs added by :meth:`lun`."""

    def __init__(self, base, portals=2):
        self.base = base
        # the management channel's number (a unix socket; tgtd takes 0-32767)
        self.ctl = 1000 + os.getpid() % 30000
        self.ports = [free_port() for _port in range(portals)]
        self.proc = None
        self.cuts = set()
        self.targets = {}           # iqn -> tid

    def adm(self, *args, check=True):
        r = subprocess.run([TGTADM, "-C", str(self.ctl), "--lld", "iscsi", *args], capture_output=True, text=True,
                           timeout=30, check=False)
        if check and r.returncode:
            raise RuntimeError("tgtadm %s: %s" % (" ".join(args), (r.stderr or r.stdout).strip()))
        return r.stdout

    def start(self, timeout=30):
        os.makedirs(self.base, exist_ok=True)
        log = open(os.path.join(self.base, "tgtd.log"), "ab")
        try:
            self.proc = subprocess.Popen([TGTD, "-f", "-C", str(self.ctl), "--iscsi",
                                          "portal=127.0.0.1:%d" % self.ports[0]], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("tgtd ended with status %s: %s" % (self.proc.returncode, self.log()))
            if subprocess.run([TGTADM, "-C", str(self.ctl), "--lld", "iscsi", "--op", "show", "--mode", "portal"],
                              capture_output=True, timeout=30, check=False).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("tgtd: no management channel after %s s" % timeout)
            time.sleep(0.1)
        for port in self.ports[1:]:
            self.adm("--op", "new", "--mode", "portal", "--param", "portal=127.0.0.1:%d" % port)
        return self

    def lun(self, name, path, size):
        """A target ``<IQN_PREFIX>:<name>`` with one LUN (1), a file of ``size`` bytes at
        ``path``, open to every initiator; its IQN."""
        iqn = "%s:%s" % (IQN_PREFIX, name)
        tid = self.targets[iqn] = len(self.targets) + 1
        with open(path, "wb") as fh:
            fh.truncate(size)
        self.adm("--op", "new", "--mode", "target", "--tid", str(tid), "-T", iqn)
        self.adm("--op", "new", "--mode", "logicalunit", "--tid", str(tid), "--lun", "1", "-b", path,
                 "--bsoflags", "direct")
        self.adm("--op", "bind", "--mode", "target", "--tid", str(tid), "-I", "ALL")
        return iqn

    def portals(self):
        """The portals as a guest reaches them (``10.0.2.2:<port>``)."""
        return ["%s:%d" % (HOST_FROM_GUEST, p) for p in self.ports]

    CUTS = {"reset": ["REJECT", "--reject-with", "tcp-reset"], "blackhole": ["DROP"]}

    def _rule_argv(self, op, port, how="reset"):
        return [IPTABLES, "-w", op, "INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-m", "comment",
                "--comment", "fleetqual-san-%d" % os.getpid(), "-j"] + self.CUTS[how]

    def _rule(self, op, port, how="reset"):
        return subprocess.run(self._rule_argv(op, port, how), capture_output=True, text=True, timeout=30, check=False)

    def cut_command(self, index, how="reset"):
        """:meth:`cut` as a shell command (what ``fleetqual_failover.cut`` runs on the controller)."""
        return " ".join(self._rule_argv("-A", self.ports[index], how))

    def restore_command(self, index):
        """:meth:`restore` as a shell command: every rule of the lab on that port removed."""
        return "; ".join("while %s 2>/dev/null; do :; done" % " ".join(self._rule_argv("-D", self.ports[index], how))
                         for how in self.CUTS)

    def cut(self, index, how="reset"):
        """Cut path ``index`` (its portal's port on the loopback interface): ``reset`` or
        ``blackhole``."""
        port = self.ports[index]
        r = self._rule("-A", port, how)
        if r.returncode:
            raise RuntimeError("iptables: %s" % r.stderr.strip())
        self.cuts.add(port)

    def restore(self, index):
        port = self.ports[index]
        for how in self.CUTS:
            while self._rule("-D", port, how).returncode == 0:
                pass
        self.cuts.discard(port)

    def log(self):
        try:
            with open(os.path.join(self.base, "tgtd.log"), errors="replace") as fh:
                return fh.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        # every path back, cut here or by a command of the lab's (cut_command)
        for index in range(len(self.ports)):
            self.restore(index)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()            # tgtd ends on SIGKILL only (SIGTERM is ignored while targets exist)
            self.proc.wait(30)


MULTIPATH_CONF = """defaults {
    user_friendly_names yes
    find_multipaths no
    no_path_retry %(no_path_retry)s
    polling_interval 2
}
blacklist {
    devnode "^(vd|nvme)"
}
"""


def make_initiator(guest, no_path_retry="queue"):
    """Make a guest an initiator: its own initiator name, a multipath.conf, iscsid and multipathd
    started (both masked in the image)."""
    name = "%s:%s" % (IQN_PREFIX, guest.name)
    guest.ssh("set -e; echo InitiatorName=%s > /etc/iscsi/initiatorname.iscsi; cat > /etc/multipath.conf; "
              "systemctl unmask iscsid.socket iscsid.service multipathd.socket multipathd.service >/dev/null 2>&1; "
              "modprobe iscsi_tcp; modprobe dm_multipath; systemctl start iscsid.service multipathd.service"
              % name, input=MULTIPATH_CONF % {"no_path_retry": no_path_retry})
    return name


def fail_at_once(guest, wwid, timeout=60):
    """This LUN's map fails I/O as soon as it has no path (``no_path_retry fail`` for its WWID
    alone: a ``multipaths`` entry of the guest's multipath.conf, multipathd reconfigured),
    whatever the defaults; returns the map's device-mapper table, which no longer queues."""
    out = guest.ssh("set -e; printf 'multipaths {\n    multipath {\n        wwid %s\n        no_path_retry fail\n"
                    "    }\n}\n' >> /etc/multipath.conf; multipathd reconfigure >/dev/null; sleep 1; "
                    "dmsetup table $(multipath -ll %s | awk 'NR==1{print $1}')" % (wwid, wwid), timeout=timeout)
    return out.stdout.strip()


def login(guest, iqn, portals, timeout=120):
    """Log the guest in on each of ``portals`` (node records made for the addresses given: the
    target's own discovery would answer 127.0.0.1); returns the new multipath map (its
    ``name``, ``wwid`` and ``paths``: :func:`parse_multipath_ll`) once it has as many paths as
    portals."""
    known = {m["wwid"] for m in parse_multipath_ll(guest.ssh("multipath -ll 2>/dev/null || true", timeout=60,
                                                             check=False).stdout)}
    for portal in portals:
        settings = " ".join("&& iscsiadm -m node -T %s -p %s -o update -n '%s' -v %s" % (iqn, portal, k, v)
                            for k, v in NODE_SETTINGS.items())
        guest.ssh("iscsiadm -m node -T %s -p %s -o new >/dev/null %s && iscsiadm -m node -T %s -p %s --login"
                  % (iqn, portal, settings, iqn, portal), timeout=120)
    deadline = time.monotonic() + timeout
    while True:
        out = guest.ssh("multipath -ll 2>/dev/null || true", timeout=60, check=False).stdout
        maps = parse_multipath_ll(out)
        for m in maps:
            if m["wwid"] not in known and len(m["paths"]) >= len(portals):
                return m
        if time.monotonic() > deadline:
            raise TimeoutError("%s: no multipath map with %d paths after %s s: %s"
                               % (guest.name, len(portals), timeout, out[-1500:]))
        guest.ssh("multipath -r >/dev/null 2>&1 || true", timeout=60, check=False)
        time.sleep(2)


def logout(guest, timeout=120):
    """Log the guest out of every session, flush its multipath maps and stop iscsid and
    multipathd (the guest goes on to other tests)."""
    guest.ssh("multipath -F >/dev/null 2>&1; iscsiadm -m node --logoutall=all >/dev/null 2>&1; "
              "iscsiadm -m node -o delete >/dev/null 2>&1; multipath -F >/dev/null 2>&1; "
              "systemctl stop multipathd.socket multipathd.service iscsid.socket iscsid.service >/dev/null 2>&1; true",
              timeout=timeout, check=False)


def parse_multipath_ll(text):
    """The maps of ``multipath -ll``: ``[{"name", "wwid", "paths": [{"dev", "states"}]}]``."""
    maps, cur = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if not line.startswith((" ", "|", "`")) and "(" in line and ")" in line and " dm-" in line:
            name, rest = line.split(" ", 1)
            cur = {"name": name, "wwid": rest[rest.index("(") + 1:rest.index(")")], "paths": []}
            maps.append(cur)
        elif cur is not None and ":" in stripped and stripped.lstrip("|`- ").split(" ")[0].count(":") == 3:
            fields = stripped.lstrip("|`- ").split()
            cur["paths"].append({"hctl": fields[0], "dev": fields[1], "states": fields[3:]})
    return maps
