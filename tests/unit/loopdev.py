"""An ext4 on a loop device of its own over a file (``losetup --direct-io=on``), mounted,
for tests and bench/ scripts that need a device no other work touches, and a tmpfs of a
bounded size for files whose latency must not depend on the machine's disk. The one place
of that setup for tests/unit, tests/integration, tests/fleet and bench/ (tests/iobench has
its raw-device helper)."""
import contextlib
import os
import shutil
import subprocess
import tempfile


def missing_tools():
    """Why a loop device cannot be made here, or None."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        return "needs root, losetup and mkfs.ext4 for a loop device of its own"
    return None


def run(argv):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


@contextlib.contextmanager
def loop_ext4(size_mb, prefix="fq-loop-", base=None, where="/var/tmp", discard=False):
    """Yield ``{dev, name, mnt, base, image}``: an ext4 made with its inode tables and journal
    initialised at once (no ext4lazyinit writing in the background of a measurement), on a
    loop device over ``<base>/disk.img``; unmounted (lazily if busy), detached and removed
    afterwards. ``discard``: mounted ``-o discard``, so the blocks of a deleted file are
    punched out of the image file at once (an image on a tmpfs gives their memory back)."""
    made = base is None
    base = base or tempfile.mkdtemp(prefix=prefix, dir=where)
    image, mnt = os.path.join(base, "disk-%d.img" % size_mb), os.path.join(base, "mnt-%d" % size_mb)
    os.mkdir(mnt)
    with open(image, "wb") as fh:
        fh.truncate(size_mb << 20)
    dev = run(["losetup", "--find", "--show", "--direct-io=on", image])
    mounted = False
    try:
        run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        run(["mount"] + (["-o", "discard"] if discard else []) + [dev, mnt])
        mounted = True
        yield {"dev": dev, "name": os.path.basename(dev), "mnt": mnt, "base": base, "image": image}
    finally:
        if mounted and subprocess.run(["umount", mnt], check=False, capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mnt], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)
        if made:
            shutil.rmtree(base, ignore_errors=True)
        else:
            os.unlink(image)
            os.rmdir(mnt)


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
