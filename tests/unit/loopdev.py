"""An ext4 on a loop device of its own over a file (``losetup --direct-io=on``), mounted,
for tests and bench/ scripts that need a device no other work touches, and a tmpfs of a
bounded size for files whose latency must not depend on the machine's disk. The one place
of that setup for tests/unit, tests/integration, tests/fleet, tests/iobench, tests/faultdrive
and bench/, and of every loop device they bind: :func:`attach` and :func:`detach`.

Loop devices of our own, and only ours. ``losetup --find`` hands every caller the lowest
free number, so the streams of ``make test`` (four pytest processes at once) take each
other's numbers as soon as one is freed, and a ``losetup -d`` of a name whose binding has
ended (the kernel auto-clears a device detached while open) detaches whatever another stream
bound there since; a device rebound under a test that still writes through its name sends
that test's I/O to another's file (a fault drive's EIO, for one). Here instead:

* :func:`attach` binds a device NAMED from this process's own range of numbers
  (``FLEETQUAL_LOOP_RANGE="FIRST-LAST"``, which the Makefile sets per stream; see
  :func:`loop_range` for the default). The kernel's bind is atomic: of two binders of one
  number (threads, processes) exactly one succeeds, the other gets EBUSY and tries the next.
* :func:`detach` unbinds only a device this process bound whose backing file is still the
  image it bound (sysfs), so a name whose binding is gone is never detached.
"""
import contextlib
import errno
import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
import threading

RANGE_ENV = "FLEETQUAL_LOOP_RANGE"
LOOP_CTL_ADD = 0x4C80        # linux/loop.h: add /dev/loopN (EEXIST when it is there)
LOOP_MAJOR = 7
_BOUND = {}                  # /dev/loopN -> realpath of its image: what this process bound
_BOUND_LOCK = threading.Lock()


class LoopError(RuntimeError):
    """A loop device could not be bound or detached (the message carries losetup's stderr)."""


class RangeExhausted(LoopError):
    """Every number of this process's range is bound (ours leaked, or the range is too small)."""


def nonzero(path, start, end):
    """Whether bytes [start, end) of ``path`` (a loop device's backing file) hold anything but
    zeros: counted by bytes.count, not by a Python loop over each byte (0.37 CPU-s a 64 MiB read)."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return data.count(0) != len(data)


def missing_tools():
    """Why a loop device cannot be made here, or None."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        return "needs root, losetup and mkfs.ext4 for a loop device of its own"
    return None


def run(argv):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def loop_range():
    """``(first, last)``: the loop device numbers this process binds from. ``FLEETQUAL_LOOP_RANGE``
    ("FIRST-LAST", inclusive), else 64 numbers from 512 + 64 * (pid % 64): above the few
    devices the loop module makes at load (max_loop) and that ``losetup --find`` and ``mount -o
    loop`` hand out first, and two pytest processes started by hand share a range only once in
    64. A shared range is slower, never unsafe: binds stay atomic and detaches checked."""
    spec = os.environ.get(RANGE_ENV)
    if not spec:
        first = 512 + 64 * (os.getpid() % 64)
        return first, first + 63
    try:
        first, last = (int(x) for x in spec.split("-"))
    except ValueError:
        first = last = -1
    if not 0 <= first <= last < 1 << 20:
        raise ValueError("%s=%r: expected FIRST-LAST, two loop device numbers, FIRST <= LAST (like 200-263)"
                         % (RANGE_ENV, spec))
    return first, last


def backing_file(dev):
    """The backing file of loop device ``dev`` as sysfs names it (with " (deleted)" after a
    deleted file's path), or None when it is not bound (or does not exist)."""
    try:
        with open("/sys/block/%s/loop/backing_file" % os.path.basename(dev)) as fh:
            return fh.read().rstrip("\n")
    except OSError:
        return None


def _names(backing, real):
    """Whether sysfs's ``backing`` is the file at ``real`` (the kernel appends " (deleted)")."""
    return backing in (real, real + " (deleted)")


def _ensure_node(n):
    """/dev/loopN made if missing: the device by LOOP_CTL_ADD (devtmpfs makes its node), else
    the node by hand (block 7:N, or the minor sysfs gives when max_part shifts it)."""
    dev = "/dev/loop%d" % n
    fd = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, LOOP_CTL_ADD, n)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise LoopError("LOOP_CTL_ADD %d: %s" % (n, exc.strerror)) from exc
    finally:
        os.close(fd)
    if not os.path.exists(dev):
        try:
            with open("/sys/block/loop%d/dev" % n) as fh:
                major, minor = (int(x) for x in fh.read().split(":"))
        except OSError:
            major, minor = LOOP_MAJOR, n
        try:
            os.mknod(dev, stat.S_IFBLK | 0o600, os.makedev(major, minor))
        except FileExistsError:
            pass
    return dev


def _losetup(argv):
    return subprocess.run(["losetup"] + argv, capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, LC_ALL="C"))


def attach(image, direct_io=False, partscan=False, read_only=False):
    """Bind ``image`` to a loop device of this process's range (:func:`loop_range`); return
    "/dev/loopN". A number someone else holds (losetup: "Device or resource busy") is
    skipped; :class:`RangeExhausted` when none is left, :class:`LoopError` (losetup's stderr)
    for any other failure."""
    real = os.path.realpath(image)
    opts = (["--direct-io=on"] if direct_io else []) + (["-P"] if partscan else []) + (["-r"] if read_only else [])
    first, last = loop_range()
    for n in range(first, last + 1):
        dev = "/dev/loop%d" % n
        if backing_file(dev) is not None:
            continue                          # bound: no need to ask losetup
        _ensure_node(n)
        p = _losetup(opts + [dev, image])
        if p.returncode == 0:
            with _BOUND_LOCK:
                _BOUND[dev] = real
            return dev
        if "Device or resource busy" in p.stderr:
            continue                          # another thread or process bound it first
        if _names(backing_file(dev), real):   # bound, then failed (-P, --direct-io): undo ours
            with _BOUND_LOCK:
                _BOUND[dev] = real
            detach(dev, image)
        raise LoopError("losetup %s %s %s: %s" % (" ".join(opts), dev, image, p.stderr.strip()))
    raise RangeExhausted("no free loop device in /dev/loop%d..%d (%s=%s) for %s: this process holds %d of them"
                         % (first, last, RANGE_ENV, os.environ.get(RANGE_ENV, "unset: per-PID default"),
                            image, len(_BOUND)))


def detach(dev, image=None):
    """Detach ``dev`` if this process bound it (with ``image``, that image) and sysfs still
    names its image as the backing file: True once detached (``losetup -d``: autoclear when
    it is still open) or when the kernel had cleared it already; False, touching nothing,
    for any other device (not ours, or ours no longer: the number was bound again since)."""
    with _BOUND_LOCK:
        real = _BOUND.get(dev)
    if real is None or (image is not None and os.path.realpath(image) != real):
        return False
    now = backing_file(dev)
    if now is not None and not _names(now, real):
        _forget(dev)                          # cleared, and someone else's now
        return False
    if now is not None:
        p = _losetup(["-d", dev])
        if p.returncode != 0 and _names(backing_file(dev), real):
            raise LoopError("losetup -d %s (%s): %s" % (dev, real, p.stderr.strip()))
    _forget(dev)
    return True


def _forget(dev):
    with _BOUND_LOCK:
        _BOUND.pop(dev, None)


def unbound_device():
    """A loop device of this process's range that exists and is not bound, left unbound:
    "/dev/loopN" (a detached device to look at). :class:`RangeExhausted` when there is none."""
    first, last = loop_range()
    for n in range(first, last + 1):
        dev = "/dev/loop%d" % n
        with _BOUND_LOCK:
            ours = dev in _BOUND
        if not ours and backing_file(_ensure_node(n)) is None:
            return dev
    raise RangeExhausted("no unbound loop device in /dev/loop%d..%d" % (first, last))


def attach_or_skip(image, **kw):
    """:func:`attach`, the test skipped when losetup cannot bind here (its reason); an exhausted
    range is an error (devices leaked), not a skip."""
    try:
        return attach(image, **kw)
    except RangeExhausted:
        raise
    except LoopError as exc:
        import pytest
        pytest.skip("cannot attach a loop device: %s" % exc)


@contextlib.contextmanager
def attached(image, **kw):
    """:func:`attach_or_skip` ``image``; yield the device; detached afterwards (:func:`detach`)."""
    dev = attach_or_skip(image, **kw)
    try:
        yield dev
    finally:
        detach(dev, image)


@contextlib.contextmanager
def loop_ext4(size_mb, prefix="fq-loop-", base=None, where="/dev/shm", discard=False):
    """Yield ``{dev, name, mnt, base, image}``: an ext4 made with its inode tables and journal
    initialised at once (no ext4lazyinit writing in the background of a measurement), on a
    loop device (:func:`attach`, direct I/O) over ``<base>/disk.img``; unmounted (lazily if
    busy), detached and removed afterwards. ``base``: a new directory in ``where``, by default
    /dev/shm, a tmpfs (a loop device over a loaded machine's disk stalls when that disk does;
    docs/integrity.md "Stalls"); pass ``where="/var/tmp"`` for a disk-backed one (bench/).
    ``discard``: mounted ``-o discard``, so the blocks of a deleted file are punched out of
    the image file at once (an image on a tmpfs gives their memory back)."""
    made = base is None
    base = base or tempfile.mkdtemp(prefix=prefix, dir=where)
    image, mnt = os.path.join(base, "disk-%d.img" % size_mb), os.path.join(base, "mnt-%d" % size_mb)
    os.mkdir(mnt)
    with open(image, "wb") as fh:
        fh.truncate(size_mb << 20)
    dev = None
    try:
        dev = attach(image, direct_io=True)
        with ext4_mounted(dev, mnt, options=["discard"] if discard else ()):
            yield {"dev": dev, "name": os.path.basename(dev), "mnt": mnt, "base": base, "image": image}
    finally:
        if dev:
            detach(dev, image)
        if made:
            shutil.rmtree(base, ignore_errors=True)
        else:
            os.unlink(image)
            os.rmdir(mnt)


@contextlib.contextmanager
def ext4_mounted(dev, mnt, blocks=None, options=()):
    """An ext4 made on the block device ``dev`` with its inode tables and journal initialised at
    once (no ext4lazyinit writing in the background of a measurement), mounted on ``mnt``
    (created when missing) with the mount ``options``; unmounted afterwards (lazily if busy).
    ``blocks``: the ext4 is that many 4 KiB blocks and the device's rest lies outside it;
    without it, the whole device at mke2fs.conf's block size for its size. The one place of
    that setup for :func:`loop_ext4` and for an ext4 on a fault drive (tests/faultdrive)."""
    run(["mkfs.ext4", "-q", "-F"] + (["-b", "4096"] if blocks else []) + ["-E", "lazy_itable_init=0,lazy_journal_init=0", dev]
        + ([str(blocks)] if blocks else []))
    os.makedirs(mnt, exist_ok=True)
    run(["mount"] + (["-o", ",".join(options)] if options else []) + [dev, mnt])
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", mnt], check=False, capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mnt], check=False)


@contextlib.contextmanager
def tmpfs(path, size_mb):
    """A tmpfs of ``size_mb`` MiB (mode 0700) mounted on ``path`` (a directory, created if
    missing): files whose flushes and reads cost no disk I/O, so a loaded machine's other
    writes do not decide their latency. Unmounted afterwards (lazily if busy)."""
    os.makedirs(path, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700" % size_mb, "fq-tmpfs", path])
    try:
        yield path
    finally:
        if subprocess.run(["umount", path], check=False, capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", path], check=False)
