"""Guests of the VM tier: Debian 12 (its own kernel, systemd, cgroup v2) under QEMU, reached
over SSH on a 127.0.0.1 port, with drives whose truth the test sets (docs/testing.md, "The
VM tier"). Importable by any test (``tests/vm`` on ``sys.path``)::

    from guests import Guest, Drive
    drives = [Drive("nvme", "FQNVME01"),                                  # serial FQNVME01
              Drive("scsi", "FQHDD01", rotation_rate=7200, write_cache=False),
              Drive("nvme", "FQTHR01", throttle={"iops-total": 200})]
    with Guest("vm1", drives=drives, ssh_key=fleet.client_key) as g:      # booting (non-blocking)
        g.wait_ssh()                       # bounded (300 s); the console's tail on failure
        g.ssh("lsblk -o NAME,SERIAL")      # CompletedProcess; check=True raises with the output
        g.by_id("FQNVME01")                # /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_FQNVME01
        g.qmp("qom-set", path=g.qom_path(drives[0]), property="smart_critical_warning", value=4)
        g.addr, g.port, g.pid, g.console_tail()

``Guest(...).start()`` / ``.stop()`` work outside a ``with`` (``stop`` is idempotent);
:class:`Boot` boots several guests in background threads (a pytest hook starts it at
collection time, so boots overlap the tests before them) and ``boot.guest(name)`` waits for
one. ``ssh_key``: a private key whose ``.pub`` is authorized for root (the kernel command
line carries it, ``vmimage.KEY_PARAM``); without it each guest makes a throwaway key.

**Lifecycle.** ``start`` takes one of the machine's :data:`MAX_GUESTS` slots (:class:`Slot`; a guest
waits for a free one),
builds or reuses the cached image (``vmimage.build``), makes a qcow2 overlay of it and each
drive's sparse raw file in the guest's directory (``<RUN_BASE>/fqvm-<pid>-<name>``: short, for the
QMP socket's path), picks a free port and starts ``qemu-system-x86_64`` (TCG, at most
:data:`MAX_MEM_MB` MiB) with the kernel and initrd of the image, the console to
``console.log`` and QMP on ``qmp.sock``. The process is started by one long-lived thread, so
``PR_SET_PDEATHSIG`` (SIGKILL when its starter dies, even by SIGKILL) holds whichever thread
asked. By default a guest does not boot: it starts from the base machine the test process
saved once (snapshot.py), on a copy of its overlay, and its drives are hot-plugged
(:func:`drive_specs`); ``snapshot_ok=False`` (or ``FLEETQUAL_VM_SNAPSHOT=0``) boots it cold.
``stop``, in every exit path (``with``, a fixture finalizer, ``atexit``, SIGTERM):
QMP ``quit``, then SIGKILL by the PID of the process this object started and has not reaped
(never anything else), then the directory removed.

**Drives** (:class:`Drive`, turned into argv by :func:`drive_args`, a pure function): ``nvme``
(``-device nvme``: serial, ``smart_critical_warning``), ``scsi`` (``scsi-hd`` on one
``virtio-scsi-pci``: serial, vendor, product, ``rotation_rate``, ``write-cache``) or ``virtio``
(``virtio-blk-pci``: serial, ``write-cache``), each on a ``-drive`` of its own with
``werror=report,rerror=report`` and any ``throttling.*`` options. Values are checked
(:func:`check_drive`) and commas escaped as QEMU's option syntax wants (``,,``).

**Faulty drives** (the drive's raw file stays its data either way):

* ``read_errors=((offset, length), ...)``: reads of those byte regions fail with EIO, from
  QEMU's ``blkdebug`` driver under the drive (one ``[inject-error]`` rule per 4 KiB,
  ``iotype = "read"``, ``once = "off"``: :func:`blkdebug_config`, a pure function); writes
  and everything else of the drive answer as usual;
* ``nbdkit=True``: Debian's ``nbdkit`` serves the raw file over a unix socket in the guest's
  directory (``file`` plugin under the ``pause`` and ``error`` filters, :func:`nbdkit_args`)
  and QEMU reads it as an NBD export: ``g.pause(drive)`` makes every request after it hang,
  ``g.resume(drive)`` lets them go on; ``g.hang(drive)`` makes the drive stop completing
  requests for good, across the guest's controller resets (:class:`Hang`: the guest's kernel
  times them out, aborts, resets the controller, again and again). ``stop`` ends a hang and
  resumes a paused drive before it stops QEMU, and ends the nbdkit process it started (by
  its Popen, never by name).

* ``nbdkit=True, cache="writeback"|"unsafe"|"writethrough"``: nbdkit's ``cache`` filter
  under the others, a volatile write cache in nbdkit's own memory-backed file:
  ``writeback`` holds writes until a flush or FUA (an honest cache), ``unsafe`` acknowledges
  flushes it never does (a cache that lies), ``writethrough`` writes through at once.

**Power loss**: ``g.power_off()`` SIGKILLs the QEMU process this object started (no shutdown,
no flush: what the guest had not written to its disks is lost) and keeps the guest's files,
slot and nbdkit processes; ``g.power_cut()`` also SIGKILLs the drives' nbdkit processes (what
their caches held is gone); ``g.restart()`` serves such drives again and boots the guest on
the same overlay and drive files (the same port when it is free; the previous console is kept as
``console.log.<n>``), then ``g.wait_ssh()``.
"""
import atexit
import base64
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time

from dataclasses import dataclass, field

import snapshot
import vmimage

fleetlib = vmimage.fleetlib
import suitecost  # noqa: E402  (tests/, on sys.path through fleetlib)

# guests at a time on this machine (FLEETQUAL_VM_SLOTS lowers or raises it: 2 cores, 24 GiB)
MAX_GUESTS = int(os.environ.get("FLEETQUAL_VM_SLOTS") or 4)
# Each guest's overlay and drive files live in memory (/dev/shm where it can be written): the
# guests' writes never reach the machine's disk, whose stalls the tests beside the VM tier
# (loop devices, the fleet's hosts on the root disk) would otherwise measure as their own.
RUN_BASE = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp"
MAX_MEM_MB = 1024
# udev watches every disk (60-block.rules, OPTIONS+="watch"): closing a drive opened for
# writing makes it re-probe the drive (blkid: 51 reads of a throttled NVMe drive, measured),
# foreign reads in the next workload's window that a drive throttled to 40 IOPS notices. The
# guests' drives are the tests' own: off for them, from the first login on (in /run: every
# boot; the change event drops the watch of the drives already there).
NOWATCH = ("mkdir -p /run/udev/rules.d && echo 'ACTION==\"add|change\", SUBSYSTEM==\"block\", "
           "KERNEL==\"nvme*|sd*\", OPTIONS+=\"nowatch\"' > /run/udev/rules.d/99-fleetqual-test-nowatch.rules "
           "&& udevadm control --reload && udevadm trigger --action=change --subsystem-match=block "
           "&& udevadm settle --timeout=60")

SSH_TIMEOUT = 300
BOOT_SLOT_TIMEOUT = 3600      # a background boot's wait for a slot (Boot); Boot.guest() bounds the test's own wait
KINDS = ("nvme", "scsi", "virtio")
# the limits QEMU 7.2 puts on a property (longer values are refused or cut)
SERIAL_MAX = {"nvme": 20, "scsi": 36, "virtio": 20}
VENDOR_MAX, PRODUCT_MAX = 8, 16
THROTTLE_KEYS = ("iops-total", "iops-total-max", "iops-total-max-length", "iops-read", "iops-write",
                 "bps-total", "bps-total-max", "bps-total-max-length", "iops-size")
BLKDEBUG_MAX_RULES = 1024             # read_errors: 4 MiB of failing reads in all
# nbdkit's cache filter (nbdkit-cache-filter(1)): writeback holds writes until a flush or FUA,
# unsafe acknowledges flushes it never does (a drive that lies), writethrough writes at once
CACHE_MODES = ("writeback", "unsafe", "writethrough")
SAFE = re.compile(r"^[\x21-\x7e]+$")        # printable ASCII, no space
# ssh's own words when it could not log in at all (exit 255 before any command ran)
SSH_TRANSPORT_ERRORS = ("Connection timed out during banner exchange", "kex_exchange_identification",
                        "Connection reset by peer", "Connection refused", "Connection closed by remote host",
                        "connect to host")


def transport_failed(r):
    """Whether a finished ssh ``r`` (CompletedProcess) failed to log in, not in its command."""
    return r.returncode == 255 and any(e in (r.stderr or "") for e in SSH_TRANSPORT_ERRORS)


SSH_OPTS = fleetlib.SSH_ARGS.split() + ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]

SLOTS_DIR = os.path.join(vmimage.CACHE, "slots")
_LIVE = set()
_LOCK = threading.Lock()


class GuestError(RuntimeError):
    """A guest did not boot, answer or stop; the message carries the console's tail."""


class QMPError(RuntimeError):
    """QMP answered with an error (its class and description)."""


# --------------------------------------------------------------------------- drives

@dataclass(frozen=True)
class Drive:
    """One emulated drive; ``serial`` also names it (``/dev/disk/by-id/*<serial>``)."""
    kind: str
    serial: str
    size: int = 256 << 20
    vendor: str = None                  # scsi
    product: str = None                 # scsi
    rotation_rate: int = None           # scsi: 1 = non-rotating, 7200 = an HDD's rpm
    write_cache: bool = None            # scsi, virtio: what the guest is told
    smart_critical_warning: int = None  # nvme: the SMART log's critical warning byte
    throttle: dict = field(default_factory=dict)     # throttling.<key>=<int> on the -drive
    read_errors: tuple = ()             # ((offset, length), ...) bytes whose reads fail with EIO (blkdebug)
    nbdkit: bool = False                # served by nbdkit over a unix socket, pausable (module doc)
    cache: str = None                   # nbdkit: its cache filter's mode, a volatile write cache (module doc)


def check_drive(d):
    """ValueError naming the field when QEMU would refuse ``d`` or read it otherwise."""
    if d.kind not in KINDS:
        raise ValueError("kind: %r is not one of %s" % (d.kind, ", ".join(KINDS)))
    if not isinstance(d.serial, str) or not SAFE.match(d.serial) or len(d.serial) > SERIAL_MAX[d.kind]:
        raise ValueError("serial: %r must be 1-%d printable ASCII characters without space"
                         % (d.serial, SERIAL_MAX[d.kind]))
    if not isinstance(d.size, int) or d.size < (1 << 20) or d.size % 4096:
        raise ValueError("size: %r must be a whole number of 4 KiB blocks, 1 MiB or more" % (d.size,))
    only = {"vendor": ("scsi",), "product": ("scsi",), "rotation_rate": ("scsi",),
            "write_cache": ("scsi", "virtio"), "smart_critical_warning": ("nvme",)}
    for name, kinds in only.items():
        if getattr(d, name) is not None and d.kind not in kinds:
            raise ValueError("%s: only for %s drives, not %s" % (name, " and ".join(kinds), d.kind))
    for name, limit in (("vendor", VENDOR_MAX), ("product", PRODUCT_MAX)):
        v = getattr(d, name)
        if v is not None and (not isinstance(v, str) or not SAFE.match(v) or len(v) > limit):
            raise ValueError("%s: %r must be 1-%d printable ASCII characters without space" % (name, v, limit))
    if d.rotation_rate is not None and (not isinstance(d.rotation_rate, int) or not 0 <= d.rotation_rate <= 65534):
        raise ValueError("rotation_rate: %r must be 0-65534 (1: non-rotating, else rpm)" % (d.rotation_rate,))
    if d.write_cache is not None and not isinstance(d.write_cache, bool):
        raise ValueError("write_cache: %r must be true or false" % (d.write_cache,))
    w = d.smart_critical_warning
    if w is not None and (not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= 255):
        raise ValueError("smart_critical_warning: %r must be a byte (0-255)" % (w,))
    for k, v in d.throttle.items():
        if k not in THROTTLE_KEYS:
            raise ValueError("throttle: unknown key %r; known: %s" % (k, ", ".join(THROTTLE_KEYS)))
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError("throttle.%s: %r must be a whole number >= 1" % (k, v))
    if "iops-total-max-length" in d.throttle and "iops-total-max" not in d.throttle:
        raise ValueError("throttle.iops-total-max-length: needs iops-total-max (a burst's rate)")
    if "iops-total-max" in d.throttle and d.throttle["iops-total-max"] < d.throttle.get("iops-total", 0):
        raise ValueError("throttle.iops-total-max: below iops-total")
    if not isinstance(d.nbdkit, bool):
        raise ValueError("nbdkit: %r must be true or false" % (d.nbdkit,))
    if d.cache is not None and (d.cache not in CACHE_MODES or not d.nbdkit):
        raise ValueError("cache: %r must be one of %s, on an nbdkit drive" % (d.cache, ", ".join(CACHE_MODES)))
    if not isinstance(d.read_errors, tuple):
        raise ValueError("read_errors: %r must be a tuple of (offset, length) pairs" % (d.read_errors,))
    if d.read_errors and d.nbdkit:
        raise ValueError("read_errors: blkdebug sits on the drive's raw file, not on an nbdkit drive")
    rules = 0
    for region in d.read_errors:
        if not (isinstance(region, tuple) and len(region) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in region)):
            raise ValueError("read_errors: %r must be an (offset, length) pair of whole numbers" % (region,))
        off, length = region
        if off < 0 or length < 4096 or off % 4096 or length % 4096 or off + length > d.size:
            raise ValueError("read_errors: (%d, %d) must be whole 4 KiB blocks inside the drive (%d bytes)"
                             % (off, length, d.size))
        rules += length // 4096
    if rules > BLKDEBUG_MAX_RULES:
        raise ValueError("read_errors: %d KiB in all, at most %d KiB (one blkdebug rule per 4 KiB)"
                         % (rules * 4, BLKDEBUG_MAX_RULES * 4))
    return d


def blkdebug_config(drive):
    """The ``blkdebug`` configuration of ``drive``'s ``read_errors``: one rule per 4 KiB (a
    rule fails each request that holds its sector; iobench's and the kernel's requests are
    whole 4 KiB blocks), reads only, EIO, every time (pure)."""
    out = []
    for off, length in drive.read_errors:
        for sector in range(off // 512, (off + length) // 512, 8):
            out.append('[inject-error]\nevent = "read_aio"\niotype = "read"\nerrno = "%d"\nsector = "%d"\n'
                       'once = "off"\n' % (errno.EIO, sector))
    return "\n".join(out)


def aux_path(raw_file, what):
    """The file beside a drive's raw file that serves it: ``blkdebug`` (its configuration),
    ``nbd`` (nbdkit's socket), ``pause`` (the pause filter's control socket) or ``fail``
    (while it exists, nbdkit fails every request with EIO)."""
    base = raw_file[:-len(".raw")] if raw_file.endswith(".raw") else raw_file
    return "%s.%s" % (base, what)


def qemu_escape(value):
    """A value inside QEMU's ``key=value,...`` option syntax: a comma doubled."""
    return str(value).replace(",", ",,")


def opts(*pairs):
    """``key=value,...`` of (key, value) pairs, values escaped; None values left out."""
    return ",".join("%s=%s" % (k, qemu_escape(v)) for k, v in pairs if v is not None)


def _onoff(v):
    return None if v is None else ("on" if v else "off")


def device_id(drive, index):
    """The QOM id of the drive's device (``/machine/peripheral/<id>``): nvme1, scsi2, ..."""
    return "%s%d" % (drive.kind, index)


def drive_specs(drives, files):
    """Each of ``drives`` (with ``files``, each one's raw file, in the same order; a faulty
    drive's blkdebug configuration or nbdkit socket is beside it, :func:`aux_path`) as
    ``(its -drive options, its device's driver, its device's properties)``: what a cold boot
    puts on the command line (:func:`drive_args`) and a restored guest hot-plugs
    (snapshot.hotplug). Properties are (name, value) pairs, None values left out."""
    out = []
    for i, (d, path) in enumerate(zip(drives, files), start=1):
        check_drive(d)
        node = "d%d" % i
        if d.nbdkit:
            source = (("format", "raw"), ("file.driver", "nbd"), ("file.server.type", "unix"),
                      ("file.server.path", aux_path(path, "nbd")))
        elif d.read_errors:
            source = (("format", "raw"), ("file.driver", "blkdebug"), ("file.config", aux_path(path, "blkdebug")),
                      ("file.image.filename", path))
        else:
            source = (("file", path), ("format", "raw"))
        drive = opts(("if", "none"), ("id", node), *source, ("werror", "report"), ("rerror", "report"),
                     *(("throttling." + k, v) for k, v in sorted(d.throttle.items())))
        dev_id = device_id(d, i)
        if d.kind == "nvme":
            driver, props = "nvme", (("drive", node), ("serial", d.serial), ("id", dev_id),
                                     ("smart_critical_warning", d.smart_critical_warning))
        elif d.kind == "scsi":
            driver, props = "scsi-hd", (("drive", node), ("bus", "scsi0.0"), ("id", dev_id), ("serial", d.serial),
                                        ("vendor", d.vendor), ("product", d.product),
                                        ("rotation_rate", d.rotation_rate), ("write-cache", _onoff(d.write_cache)))
        else:
            driver, props = "virtio-blk-pci", (("drive", node), ("id", dev_id), ("serial", d.serial),
                                               ("write-cache", _onoff(d.write_cache)))
        out.append((drive, driver, tuple((k, v) for k, v in props if v is not None)))
    return out


def drive_args(drives, files):
    """argv of ``drives`` on a cold boot's command line (:func:`drive_specs`)."""
    argv = []
    if any(d.kind == "scsi" for d in drives):
        argv += ["-device", SCSI_CONTROLLER]
    for drive, driver, props in drive_specs(drives, files):
        argv += ["-drive", drive, "-device", driver + "," + opts(*props)]
    return argv


def nbdkit_args(raw_file, cache=None):
    """argv of the nbdkit process that serves ``raw_file`` (a drive with ``nbdkit``): the
    ``file`` plugin under the ``pause`` filter (outermost: it holds the requests) and the
    ``error`` filter (EIO for every request while the file ``aux_path(raw_file, "fail")``
    exists), with ``cache`` the ``cache`` filter in that mode between them and the file (its
    cache is a file of nbdkit's own, gone with the process: a volatile write cache), on a unix
    socket beside it (:func:`aux_path`), in the foreground, gone with its parent."""
    return (["nbdkit", "--foreground", "--exit-with-parent", "--unix", aux_path(raw_file, "nbd"),
             "--filter=pause", "--filter=error"] + (["--filter=cache"] if cache else [])
            + ["file", "file=" + raw_file, "pause-control=" + aux_path(raw_file, "pause"),
               "error=EIO", "error-rate=100%", "error-file=" + aux_path(raw_file, "fail")]
            + (["cache=" + cache] if cache else []))


# The emulated CPU under TCG: QEMU's baseline x86-64 model. ``max`` offers AVX2, which the
# guest's glibc then uses for its string and memory functions, and TCG emulates those vector
# instructions at a cost: measured here, the same boot, Python work and O_DIRECT writes in a
# guest took 11 %, 11 % and 21 % more host CPU with ``max`` than with ``qemu64`` (an Intel
# model such as Nehalem cost more still: the guest's kernel then isolates its page tables).
CPU_MODEL = "qemu64"
# the SCSI drives' controller; a machine a guest is restored from has it from its boot on
SCSI_CONTROLLER = "virtio-scsi-pci,id=scsi0"


def guest_args(paths, overlay, port, qmp_sock, console, mem_mb, smp, pubkey, accel="tcg", restrict=True):
    """argv of the machine itself: the image's kernel, the overlay as /dev/vda, user-mode
    networking with one forward from 127.0.0.1:port to the guest's sshd, QMP, the console.
    ``restrict``: the guest reaches nothing but its forward (QEMU's ``restrict=on``); off, it
    also reaches this machine's loopback services at 10.0.2.2 (a SAN initiator, tests/vm/san.py)."""
    if not 128 <= mem_mb <= MAX_MEM_MB:
        raise ValueError("mem_mb: %r must be 128-%d" % (mem_mb, MAX_MEM_MB))
    append = "root=/dev/vda rw console=ttyS0 panic=1 net.ifnames=0 %s=%s" % (
        vmimage.KEY_PARAM, base64.b64encode(pubkey.strip().encode()).decode())
    return ["qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-accel", accel, "-cpu", CPU_MODEL if accel == "tcg" else "max", "-smp", str(smp), "-m", str(mem_mb),
            "-kernel", paths["kernel"], "-initrd", paths["initrd"], "-append", append,
            "-drive", opts(("if", "none"), ("id", "root"), ("file", overlay), ("format", "qcow2"), ("cache", "unsafe")),
            "-device", "virtio-blk-pci,drive=root,serial=fqroot",
            "-netdev", "user,id=n0,restrict=%s,hostfwd=tcp:127.0.0.1:%d-:22" % ("on" if restrict else "off", port),
            "-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci",
            "-serial", "file:" + console, "-qmp", "unix:%s,server,nowait" % qmp_sock]


# --------------------------------------------------------------------------- processes

class Slot:
    """One of the machine's :data:`MAX_GUESTS` guest slots: an exclusive ``flock`` on
    ``SLOTS_DIR/slot-<n>``, so the limit holds across threads, test processes and sessions,
    and the kernel frees the slot of a process that died, however it died."""

    def __init__(self):
        self.fh = None

    def acquire(self, timeout):
        os.makedirs(SLOTS_DIR, exist_ok=True)
        deadline = time.monotonic() + timeout
        while True:
            for n in range(MAX_GUESTS):
                fh = open(os.path.join(SLOTS_DIR, "slot-%d" % n), "a")
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    fh.close()
                    continue
                self.fh = fh
                return n
            if time.monotonic() > deadline:
                return None
            time.sleep(1)

    def release(self):
        if self.fh is not None:
            self.fh.close()         # closing the file drops the lock
            self.fh = None


# QEMU and nbdkit are forked by fleetlib's launcher thread (why: fleetlib.Launcher)
_LAUNCHER = fleetlib.LAUNCHER

# the emulators and the drives' nbdkit servers run at vmimage.VM_NICE (why: there)
GUEST_NICE = vmimage.VM_NICE


def _child_setup():
    """In each QEMU or nbdkit child before its exec: die with the launcher (PDEATHSIG), then
    take :data:`GUEST_NICE` (vmimage.take_vm_priority)."""
    fleetlib._pdeathsig()
    vmimage.take_vm_priority()


def qmp_call(sock_path, command, timeout=10.0, **arguments):
    """One QMP command over a fresh connection: greeting, ``qmp_capabilities``, the command;
    its ``return`` value (events in between skipped), :class:`QMPError` on an ``error``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        reader = s.makefile("r")

        def answer():
            while True:
                line = reader.readline()
                if not line:
                    raise QMPError("QMP connection closed while waiting for the answer to %s" % command)
                msg = json.loads(line)
                if "return" in msg:
                    return msg["return"]
                if "error" in msg:
                    raise QMPError("%s: %s: %s" % (command, msg["error"].get("class"), msg["error"].get("desc")))
        json.loads(reader.readline())           # the greeting
        s.sendall(b'{"execute": "qmp_capabilities"}\n')
        answer()
        doc = {"execute": command}
        if arguments:
            doc["arguments"] = arguments
        s.sendall(json.dumps(doc).encode() + b"\n")
        return answer()


# --------------------------------------------------------------------------- the guest

class Guest:
    """One QEMU guest (see the module doc)."""

    def __init__(self, name, drives=(), ssh_key=None, mem_mb=768, smp=1, base=None, accel="tcg", restrict=True,
                 snapshot_ok=None):
        if not re.match(r"^[a-z0-9][a-z0-9-]{0,30}$", name):
            raise ValueError("name: %r must be 1-31 of a-z, 0-9 and -" % (name,))
        self.name, self.drives, self.mem_mb, self.smp, self.accel = name, tuple(drives), mem_mb, smp, accel
        self.restrict = restrict
        # started from the saved base machine (snapshot.py) unless told otherwise
        self.snapshot_ok = (snapshot.ENABLED and accel == "tcg") if snapshot_ok is None else snapshot_ok
        self.restored_from = None   # the snapshot.Base this guest was started from
        self.restore_error = None   # why it booted cold instead, when it tried
        self._login_key = None      # the key of its first login (the base's, when restored)
        self._base_machine = False  # the machine guests are restored from (snapshot.py): no drive, SCSI ready
        for d in self.drives:
            check_drive(d)
        if len({d.serial for d in self.drives}) != len(self.drives):
            raise ValueError("drives: serials must differ (they name the drives)")
        self.dir = os.path.join(base or RUN_BASE, "fqvm-%d-%s" % (os.getpid(), name))
        self.ssh_key = ssh_key
        self.addr, self.port, self.proc = "127.0.0.1", None, None
        self.boot_s, self.image = None, None
        self.first_boot_s = None    # boot_s of the first boot (boot_s is the last one's; None while booting)
        self._cost_group, self._cpu_final = None, None     # its CPU seconds (_charge, cpu_s)
        self.nbdkit = {}            # serial -> the nbdkit Popen serving that drive
        self._hangs = []            # Hang objects started on this guest
        self.boots = 0              # QEMU processes started on these disk files
        self._slot = Slot()
        self._stopping = threading.Lock()
        _install_exit_handlers()

    # paths
    def path(self, name):
        return os.path.join(self.dir, name)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def qom_path(self, drive):
        """The QOM path of ``drive``'s device (for ``qom-set`` / ``qom-get``)."""
        return "/machine/peripheral/" + device_id(drive, self.drives.index(drive) + 1)

    def take_slot(self, timeout):
        """Hold one of the machine's guest slots (:class:`Slot`; kept if already held), waiting
        up to ``timeout`` s; GuestError when none came free."""
        if self._slot.fh is None and self._slot.acquire(timeout) is None:
            raise GuestError("%s: no free guest slot (%d at most on this machine, %s) within %d s"
                             % (self.name, MAX_GUESTS, SLOTS_DIR, timeout))

    def start(self, slot_timeout=900, slot=True, snapshot=None):
        """Boot (non-blocking: :meth:`wait_ssh` waits), or start from the saved base machine
        (``snapshot``, default :attr:`snapshot_ok`: snapshot.py; cold when that fails, saying
        why in :attr:`restore_error`). ``slot``: take one of the machine's guest slots (the
        base machine runs in the slot of the guest that asked for it). Raises
        ``vmimage.Unavailable`` when this machine cannot run guests."""
        if self.running():
            return self
        why = vmimage.unavailable()
        if why:
            raise vmimage.Unavailable(why)
        if slot:
            self.take_slot(slot_timeout)
        _install_exit_handlers()
        with _LOCK:
            _LIVE.add(self)
        try:
            paths, self.image = vmimage.build()
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            if self.ssh_key is None:
                self.ssh_key = self.path("client_ed25519")
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fqvm-" + self.name,
                                "-f", self.ssh_key], check=True)
            with open(self.ssh_key + ".pub") as fh:
                pubkey = fh.read()
            overlay = self.path("overlay.qcow2")
            base = None
            if self.snapshot_ok if snapshot is None else snapshot:
                try:
                    base = _snapshot_base(self)
                except snapshot.SnapshotError as e:
                    self.restore_error = str(e)
            if base is not None:
                shutil.copyfile(base.overlay, overlay)
            else:
                _fresh_overlay(paths, overlay)
            files = []
            for d in self.drives:
                files.append(self.drive_file(d))
                with open(files[-1], "wb") as fh:
                    fh.truncate(d.size)
                if d.read_errors:
                    with open(aux_path(files[-1], "blkdebug"), "w") as fh:
                        fh.write(blkdebug_config(d))
                if d.nbdkit:
                    self._serve(d, files[-1])
            if base is not None and not self._restore(base, paths, overlay, files, pubkey):
                _fresh_overlay(paths, overlay)
                base = None
            if base is None:
                self._spawn(paths, overlay, files, pubkey)
        except BaseException:
            self.stop()
            raise
        return self

    def _serve(self, drive, raw_file, timeout=30):
        """Start the nbdkit of ``drive`` and wait for its socket (bounded)."""
        for what in ("nbd", "pause"):           # a killed nbdkit's sockets (ours: beside the drive)
            if os.path.exists(aux_path(raw_file, what)):
                os.unlink(aux_path(raw_file, what))
        # the cache filter's file in the guest's directory (memory, not the machine's disk)
        env = dict(os.environ, TMPDIR=self.dir)
        with open(self.path("nbdkit-%s.log" % drive.serial), "a") as log:
            proc = self.nbdkit[drive.serial] = _LAUNCHER.popen(nbdkit_args(raw_file, drive.cache),
                                                               stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                               env=env, preexec_fn=_child_setup)
        self._charge(proc.pid)
        deadline = time.monotonic() + timeout
        while not (os.path.exists(aux_path(raw_file, "nbd")) and os.path.exists(aux_path(raw_file, "pause"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(self.path("nbdkit-%s.log" % drive.serial), errors="replace") as fh:
                    raise GuestError("%s: nbdkit for %s %s: %s" % (
                        self.name, drive.serial, "exited %s" % proc.returncode if proc.poll() is not None
                        else "made no socket within %d s" % timeout, fh.read()[-2000:]))
            time.sleep(0.1)

    def _pause_control(self, drive, command, timeout):
        """Send ``command`` (``p`` or ``r``) to the pause filter of ``drive``; True once it
        answered in capitals (for ``p``: once the requests it had were done), False when it
        did not within ``timeout`` s (the command is taken all the same)."""
        if not drive.nbdkit:
            raise ValueError("%s is not served by nbdkit (Drive(nbdkit=True))" % drive.serial)
        ctl = aux_path(self.drive_file(drive), "pause")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(ctl)
            s.sendall(command.encode())
            try:
                return s.recv(1) == command.upper().encode()
            except socket.timeout:
                return False

    def drive_file(self, drive):
        """The raw file that holds ``drive``'s data (kept by :meth:`power_off` and :meth:`restart`)."""
        return self.path("drive-%s.raw" % drive.serial.replace("/", "_"))

    def pause(self, drive, timeout=10):
        """From now on no request to ``drive`` (an nbdkit drive) completes, until :meth:`resume`."""
        return self._pause_control(drive, "p", timeout)

    def resume(self, drive, timeout=10):
        """``drive``'s requests complete again (the ones held are served)."""
        return self._pause_control(drive, "r", timeout)

    def hang(self, drive, **kw):
        """Make ``drive`` (an nbdkit drive) stop completing requests, for good, until the
        returned :class:`Hang` is stopped (see there)."""
        h = Hang(self, drive, **kw)
        self._hangs.append(h)
        return h.start()

    def power_off(self):
        """A power loss: SIGKILL the QEMU process this object started (no shutdown, no flush),
        keeping the guest's files, slot and nbdkit processes for :meth:`restart`. Returns its
        PID (None when it was not running)."""
        if not self.running():
            return None
        pid = self.proc.pid
        self.proc.kill()                # ours and not reaped: the PID is still this process
        self.proc.wait(timeout=30)
        return pid

    def power_cut(self):
        """A power loss of the machine and of its drives: :meth:`power_off`, then SIGKILL every
        nbdkit this object started (what a drive's ``cache`` held and had not written is gone,
        as a volatile write cache's content is); :meth:`restart` serves them again. Returns
        the QEMU PID."""
        pid = self.power_off()
        for proc in self.nbdkit.values():
            if proc.poll() is None:
                proc.kill()             # ours and not reaped: the PID is still this process
                proc.wait(timeout=30)
        return pid

    def restart(self):
        """Boot again on the same overlay and drive files after :meth:`power_off` or
        :meth:`power_cut` (or after QEMU ended), on the same port when it is free; non-blocking,
        then :meth:`wait_ssh`. The console so far is kept as
        ``console.log.<boot>``."""
        if self.running():
            raise GuestError("%s: still running (pid %s); power_off() first" % (self.name, self.pid))
        if self.proc is None or not os.path.isdir(self.dir):
            raise GuestError("%s: never started, or stopped (its files are gone)" % self.name)
        with _LOCK:
            _LIVE.add(self)
        for name in ("console.log", "qemu.err"):
            if os.path.exists(self.path(name)):
                os.replace(self.path(name), self.path("%s.%d" % (name, self.boots)))
        self.boot_s = None
        for d, path in zip(self.drives, self._files):
            if d.nbdkit and self.nbdkit[d.serial].poll() is not None:     # after power_cut
                self._serve(d, path)
        # the same port when it is free (an inventory names it), else a new one
        self._spawn(self._paths, self.path("overlay.qcow2"), self._files, self._pubkey,
                    port=self.port if not fleetlib.port_open(self.addr, self.port) else None)
        return self

    def _restore(self, base, paths, overlay, files, pubkey):
        """Start from ``base`` (snapshot.py): the saved machine, then this guest's drives
        hot-plugged; True once it runs, False (QEMU ended, :attr:`restore_error` says why) to
        boot cold instead."""
        try:
            self._spawn(paths, overlay, files, pubkey, restore=base)
            snapshot.wait_incoming(self)
            snapshot.hotplug(self, drive_specs(self.drives, files))
        except (snapshot.SnapshotError, QMPError, OSError) as e:
            self.restore_error = "%s: %s" % (self.name, e)
            if self.running():
                self.proc.kill()        # ours and not reaped: the PID is still this process
                self.proc.wait(timeout=30)
            return False
        self.restored_from, self._login_key = base, base.key
        return True

    def _spawn(self, paths, overlay, files, pubkey, port=None, restore=None):
        """Start QEMU: a cold boot with the drives on its command line, or (``restore``: a
        snapshot.Base) the base's machine read from its saved state, paused, without them."""
        self._paths, self._files, self._pubkey = paths, files, pubkey
        self.port = port or fleetlib.free_port(self.addr)
        self.argv = guest_args(paths, overlay, self.port, self.path("qmp.sock"), self.path("console.log"),
                               self.mem_mb, self.smp, pubkey, self.accel, self.restrict)
        if restore is not None:
            self.argv += ["-device", SCSI_CONTROLLER, "-incoming", "exec:cat %s" % shlex.quote(restore.state)]
        elif self._base_machine:
            self.argv += ["-device", SCSI_CONTROLLER]
        else:
            self.argv += drive_args(self.drives, files)
        self.t0 = time.monotonic()
        self.boots += 1
        with open(self.path("qemu.err"), "w") as err:
            self.proc = _LAUNCHER.popen(self.argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                        preexec_fn=_child_setup)
        self._charge(self.proc.pid)

    def _charge(self, pid):
        """Count ``pid`` (QEMU, an nbdkit) in this guest's own control group, below the test
        stream's (tests/suitecost.py): its CPU seconds are then the guest's, in the tier's
        summary and in the stream's total alike. Nothing where the stream has no group."""
        try:
            if self._cost_group is None:
                self._cost_group = suitecost.sub_group("guest-" + self.name)
            if self._cost_group:
                suitecost.join(self._cost_group, pid)
        except OSError:
            pass

    def cpu_s(self):
        """CPU seconds this guest's emulator and drives have used so far (every boot), or None
        when they are not counted apart (:meth:`_charge`)."""
        if self._cost_group is None:
            return self._cpu_final
        try:
            return round(sum(suitecost.group_cpu(self._cost_group)), 1)
        except (OSError, KeyError, ValueError):
            return self._cpu_final

    def console_tail(self, chars=3000):
        """The last ``chars`` of the console, and of QEMU's own messages when it printed any."""
        out = []
        for name in ("console.log", "qemu.err"):
            try:
                with open(self.path(name), errors="replace") as fh:
                    text = fh.read()[-chars:]
            except OSError:
                continue
            if text.strip():
                out.append(("qemu: " if name == "qemu.err" else "") + text)
        return "\n".join(out)

    def wait_ssh(self, timeout=SSH_TIMEOUT):
        """Wait until root logs in over SSH (bounded), then turn udev's watch off (:data:`NOWATCH`);
        GuestError with the console's tail."""
        deadline = self.t0 + timeout
        retries = 2
        while True:
            if not self.running():
                err = self.console_tail()
                if "host forwarding" in err and retries:      # the port was taken meanwhile: another
                    retries -= 1
                    self.proc.wait()
                    self._respawn()
                    continue
                raise GuestError("%s: qemu exited %s before SSH answered:\n%s" % (self.name, self.proc.returncode, err))
            p = self._ssh_argv(["true"], key=self._login_key)
            r = subprocess.run(p, capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
            if r.returncode == 0:
                if self._login_key is not None:
                    # restored: its own key for root from now on, and the clock set
                    snapshot.first_login(self, self.restored_from)
                    self._login_key = None
                self.boot_s = round(time.monotonic() - self.t0, 1)
                self.first_boot_s = self.first_boot_s or self.boot_s
                self.ssh(NOWATCH, timeout=120)
                return self
            if time.monotonic() > deadline:
                raise GuestError("%s: no SSH login on %s:%d within %d s (last: %s); console's tail:\n%s"
                                 % (self.name, self.addr, self.port, timeout, r.stderr.strip()[-300:],
                                    self.console_tail()))
            time.sleep(2)

    def _respawn(self):
        if self.restored_from is not None and self._login_key is not None \
                and self._restore(self.restored_from, self._paths, self.path("overlay.qcow2"), self._files, self._pubkey):
            return
        if self.restored_from is not None:
            # the copy of the base's overlay was a running machine's disk: a cold boot starts anew
            _fresh_overlay(self._paths, self.path("overlay.qcow2"))
        self.restored_from, self._login_key = None, None
        self._spawn(self._paths, self.path("overlay.qcow2"), self._files, self._pubkey)

    def _ssh_argv(self, argv, key=None):
        return ["ssh"] + SSH_OPTS + ["-i", key or self.ssh_key, "-p", str(self.port), "root@" + self.addr, "--"] + \
            list(argv)

    def ssh_argv(self, command, key=None):
        """argv of ``ssh`` running ``command`` (a shell string) as root in the guest (``key``:
        another private key than the guest's own)."""
        return self._ssh_argv([command], key=key)

    def ssh(self, command, timeout=120, check=True, input=None, connect_tries=3):
        """Run ``command`` (a shell string) as root in the guest: CompletedProcess (text). A
        login that never reached the command (ssh's own exit 255 with one of
        :data:`SSH_TRANSPORT_ERRORS`: a TCG guest's sshd on a loaded machine answered its banner
        after ConnectTimeout) is tried again, ``connect_tries`` times in all, as Ansible's ssh
        connection retries; a command's own failure never is."""
        for attempt in range(connect_tries):
            r = subprocess.run(self._ssh_argv([command]), capture_output=True, text=True, timeout=timeout, check=False,
                               input=input, stdin=None if input is not None else subprocess.DEVNULL)
            if not transport_failed(r) or attempt == connect_tries - 1:
                break
            time.sleep(2 * (attempt + 1))
        if check and r.returncode != 0:
            raise GuestError("%s: `%s` exited %d: %s%s" % (self.name, command, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
        return r

    def ssh_popen(self, command, **kw):
        """``command`` (a shell string) as root in the guest, as a Popen (text, stdin closed):
        a watcher that prints for as long as it runs costs one login, not one per look."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.DEVNULL)
        return subprocess.Popen(self._ssh_argv([command]), stdin=subprocess.DEVNULL, text=True, **kw)

    def by_id(self, serial, timeout=30):
        """The ``/dev/disk/by-id`` link of the drive with ``serial`` (the whole disk's)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.ssh("ls /dev/disk/by-id").stdout.split()
            found = sorted((n for n in out if n.endswith("_" + serial) or n.endswith("-" + serial)),
                           key=lambda n: (not n.startswith(("nvme-", "scsi-0", "virtio-")), len(n)))
            if found:
                return "/dev/disk/by-id/" + found[0]
            if time.monotonic() > deadline:
                raise GuestError("%s: no /dev/disk/by-id link ends with %s: %s" % (self.name, serial, out))
            time.sleep(1)

    def qmp(self, command, timeout=10.0, **arguments):
        """A QMP command's ``return`` (:func:`qmp_call` on this guest's socket)."""
        return qmp_call(self.path("qmp.sock"), command, timeout=timeout, **arguments)

    def stop(self, quit_timeout=15):
        """QMP quit, SIGKILL by PID if still running, files removed, slot freed. Idempotent;
        returns the PID that was stopped (None if none ran)."""
        with self._stopping:
            pid = None
            if self.proc is not None:
                pid = self.proc.pid
                for h in self._hangs:
                    h.stop()
                if self.proc.poll() is None:
                    for d in self.drives:
                        if d.nbdkit and self.nbdkit.get(d.serial) is not None and self.nbdkit[d.serial].poll() is None:
                            try:        # a paused drive would hold QEMU's quit (it drains its requests)
                                self.resume(d, timeout=2)
                            except (OSError, ValueError):
                                pass
                    try:
                        self.qmp("quit", timeout=5)
                    except (OSError, QMPError, ValueError):
                        pass
                    try:
                        self.proc.wait(timeout=quit_timeout)
                    except subprocess.TimeoutExpired:
                        self.proc.kill()        # ours and not reaped: the PID is still this process
                        self.proc.wait(timeout=30)
            for serial, proc in list(self.nbdkit.items()):
                if proc.poll() is None:
                    proc.terminate()            # ours and not reaped, as above
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(timeout=30)
            shutil.rmtree(self.dir, ignore_errors=True)
            if self._cost_group is not None:
                self._cpu_final = self.cpu_s()
                suitecost.remove_group(self._cost_group)
                self._cost_group = None
            with _LOCK:
                _LIVE.discard(self)
            self._slot.release()
            return pid

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Hang:
    """A drive that stops completing requests and stays so across the guest's controller
    resets: the drive's nbdkit is paused (every request after it is held), and whenever QEMU
    stops answering QMP the held requests are failed (EIO) and the drive paused again at once.

    Why: the guest's NVMe driver times a request out (30 s), aborts it, times it out again and
    resets the controller; QEMU's NVMe reset cancels the requests in flight and waits for them
    (a request held by nbdkit never ends), so QEMU itself stops (no vCPU, no QMP, no network)
    until they end. Ending them lets the reset finish; ended with their data they complete
    (measured: the driver reaps their completions during the reset and the waiting process goes
    on), so they end with an error the driver retries (an unrecovered read, without Do Not
    Retry): the kernel resubmits them after the reset and they hang again. The guest sees what
    a real controller that keeps failing does
    ("I/O ... QID ... timeout, reset controller" again and again, up to the driver's 5
    retries), its processes in uninterruptible sleep, and stays reachable over SSH.

    ``events``: ``[(seconds since start, what)]`` (``paused``, ``qemu stopped answering``,
    ``released``, ``stopped``). ``stop()`` resumes the drive for good (idempotent)."""

    def __init__(self, guest, drive, probe_s=1.0, qmp_timeout=3.0):
        if not drive.nbdkit:
            raise ValueError("%s is not served by nbdkit (Drive(nbdkit=True))" % drive.serial)
        self.guest, self.drive, self.probe_s, self.qmp_timeout = guest, drive, probe_s, qmp_timeout
        self.events, self.thread, self.t0 = [], None, None
        self._stop = threading.Event()

    def _event(self, what):
        self.events.append((round(time.monotonic() - self.t0, 1), what))

    def start(self):
        self.t0 = time.monotonic()
        self.guest.pause(self.drive, timeout=1)
        self._event("paused")
        self.thread = threading.Thread(target=self._loop, name="vm-hang-" + self.drive.serial, daemon=True)
        self.thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(self.probe_s):
            try:
                self.guest.qmp("query-status", timeout=self.qmp_timeout)
                continue
            except (OSError, QMPError, ValueError):
                if self._stop.is_set() or not self.guest.running():
                    return
            self._event("qemu stopped answering")
            fail = aux_path(self.guest.drive_file(self.drive), "fail")
            try:
                with open(fail, "w"):
                    pass
                self.guest.resume(self.drive, timeout=30)
                self._event("released")
                # paused again at once: the requests the guest resubmits after its reset must
                # find the drive hanging
                if not self._stop.is_set():
                    self.guest.pause(self.drive, timeout=5)
                    self._event("paused")
            except OSError as e:
                self._event("pause control failed: %s" % e)
            finally:
                try:
                    os.unlink(fail)
                except OSError:
                    pass

    def released(self):
        """How many times the held requests were let go for a controller reset."""
        return sum(1 for _t, what in self.events if what == "released")

    def stop(self):
        if self._stop.is_set():
            return
        self._stop.set()
        if self.thread is not None:
            self.thread.join(60)
        try:
            self.guest.resume(self.drive, timeout=30)
        except OSError:
            pass
        self._event("stopped")


def _fresh_overlay(paths, overlay):
    """A new qcow2 overlay of the image at ``overlay`` (the image itself is never written)."""
    p = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", paths["image"], "-F", "raw", overlay],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise GuestError("qemu-img create %s: %s" % (overlay, p.stderr.strip()))


def _snapshot_base(guest):
    """The saved base machine of ``guest``'s configuration (snapshot.base_for), booted cold once."""
    def make(name, key):
        g = Guest(name, ssh_key=key, mem_mb=guest.mem_mb, smp=guest.smp, accel=guest.accel, snapshot_ok=False)
        g._base_machine = True
        return g
    return snapshot.base_for(guest, make, RUN_BASE)


# --------------------------------------------------------------------------- background boots

class Boot:
    """Guests booted in background threads: ``Boot([Guest(...), ...]).start()``; then
    ``boot.guest(name)`` waits (bounded) for that guest to answer SSH and returns it, or
    raises what its boot raised (``vmimage.Unavailable``: the skip reason)."""

    def __init__(self, guests):
        self.guests = {g.name: g for g in guests}
        self.errors, self.threads = {}, {}
        self.slotted = {g.name: threading.Event() for g in guests}
        self.t0 = None

    def _boot(self, g, before):
        try:
            # The slots are taken in the boot's order: a guest waits until the one before it
            # has its slot. A guest named by later tests waits for the slots of the guests
            # before it, which stop after their own last test, possibly many runs later; when
            # the threads raced for the slots, a later scenario's guest once took the slot
            # the first run's vm-hdd needed, and the first run waited on it for good.
            if before is not None:
                before.wait()
            try:
                g.take_slot(BOOT_SLOT_TIMEOUT)
            finally:
                self.slotted[g.name].set()
            g.start(slot_timeout=BOOT_SLOT_TIMEOUT)
            g.wait_ssh()
        except BaseException as e:  # noqa: BLE001 - re-raised by guest()
            self.errors[g.name] = e

    def start(self):
        self.t0 = time.monotonic()
        _install_exit_handlers()
        before = None
        for name, g in self.guests.items():
            t = threading.Thread(target=self._boot, args=(g, before), name="vm-boot-" + name, daemon=True)
            self.threads[name] = t
            t.start()
            before = self.slotted[name]
        return self

    def guest(self, name, timeout=SSH_TIMEOUT + 1200):
        """The booted guest ``name`` (waits for its thread: image build, slot, boot, SSH)."""
        t = self.threads[name]
        t.join(timeout)
        if t.is_alive():
            raise GuestError("%s: still booting after %d s" % (name, timeout))
        if name in self.errors:
            raise self.errors[name]
        return self.guests[name]

    def stop(self):
        return [g.stop() for g in self.guests.values()]


def sweep_stale(base=None):
    """Remove what a dead test process left of its guests (``fqvm-<pid>-<name>`` whose PID is
    gone; its QEMU processes died with it, ``PR_SET_PDEATHSIG``), in ``base`` (default:
    ``RUN_BASE`` and /tmp, where earlier versions put them). Returns the directories."""
    done = []
    for where in ([base] if base else list(dict.fromkeys([RUN_BASE, "/tmp"]))):
        done += _sweep(where)
    return done


def _sweep(base):
    done = []
    for name in os.listdir(base):
        m = re.match(r"^fqvm-(\d+)-[a-z0-9-]+$", name)
        if m and not os.path.exists("/proc/" + m.group(1)):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
            done.append(os.path.join(base, name))
    return done


def close_all():
    """Stop every live guest and any running image build of this process (exit paths)."""
    with _LOCK:
        live = list(_LIVE)
    return vmimage.stop_builds() + vmimage.each(Guest.stop, live)


_HANDLERS = []


def _install_exit_handlers():
    """atexit once; the SIGTERM handler (chained to the one before it) once, from the main
    thread (Python sets signal handlers there only)."""
    if "atexit" not in _HANDLERS:
        _HANDLERS.append("atexit")
        atexit.register(close_all)
    if "sigterm" in _HANDLERS or threading.current_thread() is not threading.main_thread():
        return
    _HANDLERS.append("sigterm")
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        close_all()
        if callable(previous):
            previous(signum, frame)
        fleetlib.end_on_signal(signum)
    signal.signal(signal.SIGTERM, on_term)


if os.geteuid() == 0:
    sweep_stale()
