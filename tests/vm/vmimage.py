"""The VM tier's guest image: a Debian 12 root with its stock kernel, built once per machine
(docs/testing.md, "The VM tier").

**Build** (:func:`build`): ``mmdebstrap --mode=root --variant=minbase --include=<PACKAGES>
bookworm`` from the Debian archive apt uses on this machine (``chroots.apt_mirror``), with
dpkg told not to unpack docs, man pages, info pages and locales (``path-exclude``) and the
initramfs made of the root drive's modules only (:data:`INITRAMFS_MODULES`, ``MODULES=list``,
written before the kernel's package builds it); then the few files a guest needs written into
the tree (:data:`GUEST_FILES`: the static address QEMU's user-mode network gives, sshd's
settings, the unit that installs root's authorized key from the kernel command line),
services enabled and the periodic ones masked, the kernel and initrd copied out of ``/boot``,
and the tree turned into an ext4 image with ``mke2fs -t ext4 -d``. Each step's seconds go to
the metadata and the build log (``build_s`` and ``steps``). mmdebstrap, not debootstrap: it
installs in one apt run, and with the short initramfs the build costs a third of
debootstrap's CPU (docs/testing.md, "The VM tier").

**Cache**: ``<CACHE>/bookworm-<key>.img`` (raw, sparse) with ``.vmlinuz``, ``.initrd`` and
``.json`` beside it, ``<key>`` a hash of the release, the variant, the package list, the
guest files and :data:`FORMAT`. The cache is the machine's (``/var/cache/fleetqual-tests/vm``
as root, ``FLEETQUAL_VM_CACHE`` chooses another place), so later sessions and CI's fresh clone
reuse it; one lock lets concurrent sessions share one build. Guests never write the image:
each boots a qcow2 overlay of it (``guests.Guest``).

**The SSH key is not in the image**: a guest's kernel command line carries the public key
(``fleetqual.ssh_key=<base64>``) and the unit ``fleetqual-ssh-key.service`` writes it to
root's ``authorized_keys`` before sshd starts. So each session logs in with its own
throwaway client key, as the fleet tests do (``fleetlib.Fleet.client_key``), and the cached
image holds no credential.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import fcntl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fleet"))

import chroots  # noqa: E402  (tests/fleet/chroots.py: apt's archive, mounts, safe removal)
import fleetlib  # noqa: E402

ROOT = chroots.ROOT
CACHE = os.environ.get("FLEETQUAL_VM_CACHE") or (
    "/var/cache/fleetqual-tests/vm" if os.geteuid() == 0 else os.path.join(ROOT, "build", "vm"))
RELEASE = "bookworm"
VARIANT = "minbase"
# the stock kernel and its initramfs (virtio, NVMe and SCSI drivers as modules), systemd,
# what a fleet host needs (README "Qualifying a real fleet": Python 3 and SSH; sysstat and
# procps for iostat/vmstat), the drive tools the drives module reads (smartctl, nvme-cli) and a
# SAN initiator's (open-iscsi, multipath-tools: the SAN lab, tests/vm/san.py)
PACKAGES = ("linux-image-amd64", "systemd-sysv", "udev", "dbus", "kmod", "iproute2", "openssh-server", "python3",
            "sysstat", "procps", "smartmontools", "nvme-cli", "e2fsprogs", "open-iscsi", "multipath-tools")
FORMAT = 2          # bump when the build changes in a way the key's other inputs do not show
# The initramfs holds what mounting the root drive needs (virtio-blk on PCI, ext4; the modules
# they depend on come along): initramfs-tools' MODULES=list (initramfs.conf(5)). Its default,
# MODULES=most, packs every storage and filesystem driver: a 37 MB initrd whose build was a
# third of the image's CPU, and which every cold boot unpacked under TCG. The guest's other
# drivers (NVMe, virtio-scsi, virtio-net) load from the root filesystem, by udev, as on any host.
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "ext4")
# dpkg leaves these out of every package it unpacks (dpkg(1) --path-exclude)
PATH_EXCLUDE = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
# mmdebstrap's settings for dpkg and apt inside the tree, removed once the tree is built so
# that the guest's dpkg and apt are Debian's own
BUILD_ONLY_FILES = ("etc/dpkg/dpkg.cfg.d/99mmdebstrap", "etc/apt/apt.conf.d/99mmdebstrap")
IMAGE_SIZE = 3 << 30
BUILD_TIMEOUT = 1800
# periodic jobs and daemons a test guest must not run while it is measured
MASKED = ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer", "fstrim.timer",
          "e2scrub_reap.service", "smartmontools.service", "sysstat.service", "sysstat-collect.timer",
          "sysstat-summary.timer", "nvmf-autoconnect.service", "getty@tty1.service",
          # the SAN initiator's daemons start only in the guests the SAN lab makes initiators
          "iscsid.service", "iscsid.socket", "open-iscsi.service", "multipathd.service", "multipathd.socket")
ENABLED = ("fleetqual-net.service", "ssh.service", "fleetqual-ssh-key.service")
KEY_PARAM = "fleetqual.ssh_key"

_SSH_KEY_SCRIPT = r"""#!/bin/sh
# root's authorized key from the kernel command line (fleetqual.ssh_key=<base64 of the line>)
set -eu
for word in $(cat /proc/cmdline); do
  case "$word" in
    %s=*) key=${word#*=} ;;
  esac
done
[ -n "${key:-}" ] || exit 0
umask 077
mkdir -p /root/.ssh
printf '%%s' "$key" | base64 -d > /root/.ssh/authorized_keys
""" % KEY_PARAM

GUEST_FILES = {
    "etc/hostname": "fqvm\n",
    "etc/hosts": "127.0.0.1 localhost\n127.0.1.1 fqvm\n",
    "etc/fstab": "/dev/vda / ext4 rw,errors=remount-ro 0 1\n",
    # QEMU's user-mode network is fixed (guest 10.0.2.15, gateway 10.0.2.2): a static address
    # on eth0 (net.ifnames=0) costs one ip(8) call where systemd-networkd took 12 s to start
    # under TCG, the longest step before sshd. The unit waits for eth0 itself (bounded, 600 s)
    # rather than through its device unit, whose job times out after systemd's default 90 s:
    # a guest booting at load 14 saw eth0 later than that and came up without a network
    "etc/systemd/system/fleetqual-net.service": (
        "[Unit]\nDescription=QEMU user-mode network on eth0\nBefore=network.target\nWants=network.target\n\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nTimeoutStartSec=660\n"
        "ExecStartPre=/bin/sh -c 'for i in $(seq 1200); do [ -e /sys/class/net/eth0 ] && exit 0; sleep 0.5; done; "
        "echo no eth0 after 600 s >&2; exit 1'\n"
        "ExecStart=/usr/sbin/ip link set lo up\nExecStart=/usr/sbin/ip link set eth0 up\n"
        "ExecStart=/usr/sbin/ip addr add 10.0.2.15/24 dev eth0\n"
        "ExecStart=/usr/sbin/ip route add default via 10.0.2.2\n\n"
        "[Install]\nWantedBy=multi-user.target\n"),
    "etc/ssh/sshd_config.d/fleetqual.conf": ("PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                                             "UseDNS no\nMaxStartups 100\nMaxSessions 100\n"),
    "usr/local/sbin/fleetqual-ssh-key": _SSH_KEY_SCRIPT,
    "etc/systemd/system/fleetqual-ssh-key.service": (
        "[Unit]\nDescription=root's authorized key from the kernel command line\nBefore=ssh.service\n\n"
        "[Service]\nType=oneshot\nExecStart=/usr/local/sbin/fleetqual-ssh-key\n\n"
        "[Install]\nWantedBy=multi-user.target\n"),
    # the journal in memory: nothing of it lands in the overlay
    "etc/systemd/journald.conf.d/fleetqual.conf": "[Journal]\nStorage=volatile\n",
}


class Unavailable(Exception):
    """The image cannot be built or used here; the message is the skip reason."""


_BUILDS = {}           # mmdebstrap PID -> its work directory, while it runs
_LOCK = threading.Lock()
CLOSING = threading.Event()     # set at exit: no new build starts


def cache_key(packages=PACKAGES):
    doc = json.dumps({"release": RELEASE, "variant": VARIANT, "packages": sorted(packages), "format": FORMAT,
                      "files": GUEST_FILES, "masked": MASKED, "enabled": ENABLED, "size": IMAGE_SIZE,
                      "initramfs": INITRAMFS_MODULES, "exclude": PATH_EXCLUDE},
                     sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:12]


def cache_paths(packages=PACKAGES):
    """{image, kernel, initrd, meta, log} of the cached image of ``packages``."""
    stem = os.path.join(CACHE, "%s-%s" % (RELEASE, cache_key(packages)))
    return {"image": stem + ".img", "kernel": stem + ".vmlinuz", "initrd": stem + ".initrd",
            "meta": stem + ".json", "log": stem + ".log"}


def cached(packages=PACKAGES):
    """True when the image of ``packages`` is in the cache (nothing to build)."""
    return all(os.path.exists(p) for k, p in cache_paths(packages).items() if k != "log")


def unavailable():
    """None when guests can be built and booted here, else why not (a skip reason)."""
    if os.geteuid() != 0:
        return "the VM tier needs root (mmdebstrap --mode=root, mke2fs -d of a root-owned tree)"
    for tool, pkg in (("qemu-system-x86_64", "qemu-system-x86"), ("qemu-img", "qemu-utils"), ("mke2fs", "e2fsprogs"),
                      ("ssh", "openssh-client"), ("ssh-keygen", "openssh-client")):
        if not shutil.which(tool):
            return "%s is missing (Debian package %s): the VM tier cannot run" % (tool, pkg)
    if not cached() and not shutil.which("mmdebstrap"):
        return "mmdebstrap is missing (Debian package mmdebstrap): cannot build the VM image"
    return None


def _run(argv, timeout=600, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _pid_alive(pid):
    return os.path.exists("/proc/%d" % pid)


def remove_build(work):
    """A build directory, whatever mmdebstrap left mounted in it (``/proc``, ``/sys``, ...) unmounted first and
    every process living in its tree killed by PID; never an ``rm -rf`` over a mount."""
    if os.path.lexists(work):
        chroots.kill_rooted_in(os.path.join(work, "root"))
        for point in chroots.mounts_under(work):
            chroots.umount(point)
        chroots.safe_rmtree(work)


def sweep_builds():
    """Remove what a dead session's build left (``.build-<pid>``, PID gone)."""
    for name in os.listdir(CACHE):
        m = re.match(r"^\.build-(\d+)$", name)
        if m and not _pid_alive(int(m.group(1))):
            remove_build(os.path.join(CACHE, name))


class _Steps:
    """Seconds per build step, written to the build log as each ends."""

    def __init__(self, log):
        self.log, self.steps, self.t0 = log, {}, time.monotonic()
        self._t = self.t0

    def done(self, name):
        now = time.monotonic()
        self.steps[name] = round(now - self._t, 1)
        self._t = now
        with open(self.log, "a") as fh:
            fh.write("fleetqual-vm: step %s took %.1f s\n" % (name, self.steps[name]))

    def total(self):
        return round(time.monotonic() - self.t0, 1)


def prune(keep):
    """Remove the images of other keys (an older builder's): a guest still running on one keeps
    its open file; a checkout that needs one builds it again."""
    keep = set(keep.values())
    for name in os.listdir(CACHE):
        path = os.path.join(CACHE, name)
        if name.startswith(RELEASE + "-") and path not in keep and os.path.isfile(path):
            os.unlink(path)


# The VM tier's processes run at a higher priority, as root (an unprivileged process cannot
# raise its own: left as it is). The guests' emulators and their drives' nbdkit servers
# (guests.py): under TCG a guest's CPU, clock and timers are this machine's CPU time, and at
# the default priority on a loaded machine (load 10-17 on 2 cores) four guests took 200-230 s
# to reach SSH, or more than 300, and a guest lagged behind its own drive's throttle. The
# image's build: the first step of the tier's critical path, every guest waits for it
# (a fresh-clone run's debootstrap took 483 s at load 14 at the default priority, 92-100 s on a
# quiet machine).
VM_NICE = -5


def take_vm_priority():
    """In a child before its exec: take :data:`VM_NICE` (as root; else left as it is)."""
    try:
        os.nice(VM_NICE)
    except OSError:
        pass


def _setup_hook():
    """mmdebstrap's ``--setup-hook`` (sh, the tree as ``$1``): initramfs-tools' settings, in
    place before the kernel's package is configured and builds the initramfs."""
    return ('mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/usr/share/initramfs-tools/modules.d" && '
            'printf "MODULES=list\\n" > "$1/etc/initramfs-tools/conf.d/fleetqual.conf" && '
            'printf "%s\\n" > "$1/usr/share/initramfs-tools/modules.d/fleetqual.conf"' % "\\n".join(INITRAMFS_MODULES))


def bootstrap_argv(tree, packages, mirror=None):
    """mmdebstrap's command line for the guest's tree (see the module doc)."""
    argv = ["mmdebstrap", "--mode=root", "--variant=" + VARIANT, "--include=" + ",".join(packages),
            # the tree is thrown away if the build fails: dpkg need not sync each file it unpacks
            "--dpkgopt=force-unsafe-io"]
    argv += ["--dpkgopt=path-exclude=" + p for p in PATH_EXCLUDE]
    argv += ["--setup-hook=" + _setup_hook(), RELEASE, tree]
    return argv + ([mirror] if mirror else [])


def _bootstrap(tree, packages, log):
    mirror = chroots.apt_mirror()
    if mirror:
        why = chroots.archive_serves(mirror, RELEASE)
        if why:
            raise Unavailable(why)
    argv = bootstrap_argv(tree, packages, mirror)
    with open(log, "a") as fh:
        with _LOCK:
            if CLOSING.is_set():
                raise Unavailable("the session is ending: the VM image was not built")
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 preexec_fn=take_vm_priority)
            _BUILDS[p.pid] = os.path.dirname(tree)
        try:
            rc = p.wait(timeout=BUILD_TIMEOUT)
        finally:
            with _LOCK:
                _BUILDS.pop(p.pid, None)
    if rc != 0:
        with open(log, errors="replace") as fh:
            tail = fh.read()[-1500:]
        raise Unavailable("mmdebstrap %s failed (exit %d): %s" % (RELEASE, rc, tail))


def _customize(tree):
    """The guest files, services enabled and masked, the tree stripped; (kernel, initrd) paths."""
    for rel, text in GUEST_FILES.items():
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, 0o755 if "/sbin/" in rel else 0o644)
    for argv in (["systemctl", "enable"] + list(ENABLED), ["systemctl", "mask"] + list(MASKED)):
        p = _run(["chroot", tree] + argv, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("%s in the guest tree: %s" % (" ".join(argv), p.stderr.strip()[-800:]))
    for rel in chroots.STRIP:
        shutil.rmtree(os.path.join(tree, rel), ignore_errors=True)
        os.makedirs(os.path.join(tree, rel), exist_ok=True)
    for rel in BUILD_ONLY_FILES:
        if os.path.lexists(os.path.join(tree, rel)):
            os.unlink(os.path.join(tree, rel))
    boot = os.path.join(tree, "boot")
    kernels = sorted(n for n in os.listdir(boot) if n.startswith("vmlinuz-"))
    if not kernels:
        raise RuntimeError("no kernel in %s: %s" % (boot, os.listdir(boot)))
    version = kernels[-1][len("vmlinuz-"):]
    initrd = os.path.join(boot, "initrd.img-" + version)
    if not os.path.exists(initrd):
        raise RuntimeError("no initrd for kernel %s in %s" % (version, boot))
    return os.path.join(boot, kernels[-1]), initrd, version


def _versions(tree):
    py = _run(["chroot", tree, "python3", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
    sd = _run(["chroot", tree, "dpkg-query", "-W", "-f", "${Version}", "systemd"])
    return {"python": py.stdout.strip() or None, "systemd": sd.stdout.strip() or None}


def build(packages=PACKAGES):
    """The cached image of ``packages`` (built now if missing): ``(paths, metadata)``;
    metadata holds the kernel, the versions, the build's seconds per step and ``built_now``.
    Raises :class:`Unavailable` when it cannot be built here (the skip reason)."""
    why = unavailable()
    if why:
        raise Unavailable(why)
    paths = cache_paths(packages)
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "image.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one build per machine, shared by concurrent sessions
        if cached(packages):
            meta = fleetlib.load_json(paths["meta"])
            meta["built_now"] = False
            return paths, meta
        sweep_builds()
        prune(paths)
        work = os.path.join(CACHE, ".build-%d" % os.getpid())
        tree = os.path.join(work, "root")
        os.makedirs(work)
        with open(paths["log"], "w") as fh:
            fh.write("fleetqual-vm: building %s (%s)\n" % (paths["image"], " ".join(packages)))
        steps = _Steps(paths["log"])
        try:
            _bootstrap(tree, packages, paths["log"])
            steps.done("mmdebstrap")
            kernel, initrd, version = _customize(tree)
            meta = dict(_versions(tree), kernel=version, release=RELEASE, packages=list(packages),
                        variant=VARIANT, key=cache_key(packages))
            for src, key in ((kernel, "kernel"), (initrd, "initrd")):
                shutil.copyfile(src, paths[key] + ".part")
            steps.done("customize")
            part = paths["image"] + ".part"
            with open(part, "wb") as fh:
                fh.truncate(IMAGE_SIZE)
            p = _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "fqroot", "-d", tree, part], timeout=BUILD_TIMEOUT)
            if p.returncode != 0:
                raise RuntimeError("mke2fs -d %s: %s" % (tree, p.stderr.strip()[-800:]))
            steps.done("mke2fs")
            meta.update(build_s=steps.total(), steps=steps.steps,
                        image_bytes_used=os.stat(part).st_blocks * 512)
            with open(paths["meta"] + ".part", "w") as fh:
                json.dump(meta, fh, indent=1, sort_keys=True)
            for key in ("kernel", "initrd", "image", "meta"):
                os.rename(paths[key] + ".part", paths[key])
            meta["built_now"] = True
            return paths, meta
        finally:
            for key in ("kernel", "initrd", "image", "meta"):
                if os.path.exists(paths[key] + ".part"):
                    os.unlink(paths[key] + ".part")
            remove_build(work)


def each(action, items):
    """``action(item)`` for every item whatever the others did (exit paths): the errors' texts."""
    errors = []
    for item in items:
        try:
            action(item)
        except Exception as e:  # noqa: BLE001 - at exit: report, go on with the others
            errors.append(str(e))
    return errors


def _stop_build(pid_work):
    fleetlib.kill_tree(pid_work[0])
    remove_build(pid_work[1])


def stop_builds():
    """End a running build of this process (exit paths): mmdebstrap's tree killed by PID,
    its directory unmounted and removed. Returns the errors."""
    with _LOCK:
        CLOSING.set()
        builds = list(_BUILDS.items())
    return each(_stop_build, builds)


if __name__ == "__main__":      # build (or show) the cached image: python tests/vm/vmimage.py
    print(json.dumps(build()[1], indent=1, sort_keys=True))
