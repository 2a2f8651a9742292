"""One boot for the VM tier's guests: the first guest of a test process boots a base machine
(the image's kernel, no test drive, a ``virtio-scsi-pci`` controller ready), which is saved
once it answers SSH (QMP ``stop`` and ``migrate`` to a file: its memory and device state, with
the qcow2 overlay of its root disk as it was then); each guest then starts from that state
(``-incoming``) on a copy of that overlay and gets its own drives hot-plugged through QMP
(``drive_add`` with the same ``-drive`` options a cold boot has, ``device_add`` with the same
properties: guests.drive_specs). docs/testing.md, "The VM tier".

Measured on this machine: the base boot took 27 CPU-s and 38 s to SSH, its state 307 MB
(saved in 2 s); a guest from it ran 0.7 s after its start and answered SSH after 8-9 s and
4 CPU-s, its NVMe serials, critical warning, SCSI rotation and throttles as a cold boot gives
them. A guest restored keeps the base's boot (its ``boot_id``, kernel log, SSH host keys);
its clock is set from this machine's at the first login, and its own key replaces the base's.
A power cut's restart (``Guest.restart``) is a cold boot, as a power cycle is.

``FLEETQUAL_VM_SNAPSHOT=0`` boots every guest cold."""
import atexit
import os
import shlex
import shutil
import subprocess
import threading
import time

ENABLED = os.environ.get("FLEETQUAL_VM_SNAPSHOT", "1") != "0"
MIGRATE_TIMEOUT_S = 120
RESTORE_TIMEOUT_S = 120

_LOCK = threading.Lock()
_BASES = {}             # key -> Base (or the exception its boot raised)


class SnapshotError(RuntimeError):
    """The base could not be saved or a guest not restored from it (the guest then boots cold)."""


class Base:
    """The saved base machine of one configuration: ``state`` (QEMU's migration stream),
    ``overlay`` (its root disk's qcow2 overlay at the save), ``key`` (the private key its
    root authorized), in ``directory``."""

    def __init__(self, directory):
        self.directory = directory
        self.state = os.path.join(directory, "state")
        self.overlay = os.path.join(directory, "overlay.qcow2")
        self.key = os.path.join(directory, "base_ed25519")
        self.boot_s, self.cpu_s = None, None

    def remove(self):
        shutil.rmtree(self.directory, ignore_errors=True)


def key_of(guest):
    """What a guest's saved state depends on: the machine's memory, CPUs and accelerator (the
    network's restrictions are the backend's, not the machine's state)."""
    return (guest.mem_mb, guest.smp, guest.accel)


def base_for(guest, make_guest, run_base):
    """The :class:`Base` of ``guest``'s configuration, made once per test process by booting
    ``make_guest(name, ssh_key)`` (a :class:`guests.Guest` without drives, its slot the asking
    guest's, booted cold) and saving it. Raises :class:`SnapshotError`."""
    key = key_of(guest)
    with _LOCK:
        got = _BASES.get(key)
        if got is None:
            try:
                got = _BASES[key] = _make(key, make_guest, run_base)
            except Exception as e:  # noqa: BLE001 - every later guest boots cold, saying why
                got = _BASES[key] = SnapshotError("the base machine %s could not be saved: %s" % (key, e))
    if isinstance(got, Exception):
        raise got
    return got


def _make(key, make_guest, run_base):
    directory = os.path.join(run_base, "fqvm-%d-base-%s" % (os.getpid(), "-".join(str(k) for k in key)))
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory, mode=0o700)
    base = Base(directory)
    atexit.register(base.remove)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fqvm-base", "-f", base.key], check=True)
    g = make_guest("base-%d" % (len(_BASES) + 1), base.key)
    try:
        g.start(slot=False, snapshot=False)
        g.wait_ssh()
        # what the guests inherit is on the overlay, written through: nothing waits in the cache
        g.ssh("sync")
        g.qmp("stop")
        g.qmp("migrate", uri="exec:cat > %s" % shlex.quote(base.state))
        deadline = time.monotonic() + MIGRATE_TIMEOUT_S
        while True:
            st = g.qmp("query-migrate")
            if st.get("status") == "completed":
                break
            if st.get("status") in ("failed", "cancelled") or time.monotonic() > deadline:
                raise SnapshotError("migrate to %s: %s" % (base.state, st))
            time.sleep(0.2)
        shutil.copyfile(g.path("overlay.qcow2"), base.overlay)
        base.boot_s, base.cpu_s = g.boot_s, g.cpu_s()
    except BaseException:
        base.remove()
        raise
    finally:
        g.stop()
    return base


def wait_incoming(guest, timeout=RESTORE_TIMEOUT_S):
    """Until QEMU has read the whole saved state (QMP answers and the machine is paused: the
    base was saved stopped), bounded; SnapshotError with QEMU's messages."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not guest.running():
            raise SnapshotError("qemu exited %s while restoring: %s" % (guest.proc.returncode, guest.console_tail()))
        if os.path.exists(guest.path("qmp.sock")):
            try:
                last = guest.qmp("query-status")
            except Exception as e:  # noqa: BLE001 - not answering yet
                last = str(e)
            if isinstance(last, dict) and last.get("status") in ("paused", "postmigrate", "running"):
                return last
        time.sleep(0.1)
    raise SnapshotError("no restored machine within %d s (last status %s)" % (timeout, last))


def hotplug(guest, specs):
    """Plug each drive (``guests.drive_specs``: its ``-drive`` options, device driver and
    properties) into the paused machine, then let it run: the guest's kernel finds them as
    hot-plugged PCI devices (NVMe) and SCSI disks."""
    for drive_opts, driver, props in specs:
        out = guest.qmp("human-monitor-command", **{"command-line": "drive_add 0 " + drive_opts})
        if out.strip() != "OK":
            raise SnapshotError("drive_add %s: %s" % (drive_opts, out.strip()))
        guest.qmp("device_add", driver=driver, **dict(props))
    guest.qmp("cont")


def first_login(guest, base, timeout=120):
    """The restored guest's first login, with the base's key: its own key replaces the base's
    for root, and its clock (which stood still from the save on) is set from this machine's,
    sent once the guest's shell is reading: one way of an open channel late, not a login."""
    pub = open(guest.ssh_key + ".pub").read().strip()
    command = ("umask 077 && mkdir -p /root/.ssh && printf '%%s\\n' %s > /root/.ssh/authorized_keys.new "
               "&& mv -f /root/.ssh/authorized_keys.new /root/.ssh/authorized_keys && echo ready "
               "&& read -r t && date -s \"@$t\" > /dev/null && echo set" % shlex.quote(pub))
    p = subprocess.Popen(guest.ssh_argv(command, key=base.key), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise SnapshotError("%s: the first login did not take the key: %s %s"
                                % (guest.name, line, p.stderr.read()[-1000:]))
        p.stdin.write("%.6f\n" % time.time())
        p.stdin.flush()
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0 or out.strip() != "set":
        raise SnapshotError("%s: setting the clock failed (exit %s): %s" % (guest.name, p.returncode, err[-1000:]))
