"""Hosts of other Debian releases for the fleet tests: debootstrap chroots, each host an sshd
running inside one (docs/testing.md, "Hosts of other Debian releases").

**Build, once per release and package list.** ``debootstrap --variant=minbase
--include=<PACKAGES>`` from the Debian archive apt uses on this machine (read from apt's
sources at run time; without one, debootstrap's default), a few directories a host does not
need stripped (downloaded .debs, apt lists, docs, man pages, locales), the Python and sysstat
versions read from the tree, then packed as ``<cache>/<release>-<key>.tar.zst`` (``CACHE``)
(``<key>``: a hash of the release, the variant, the package list and this builder's
``FORMAT``; ``build/`` is not versioned). Later sessions reuse the archive. A lock per
release lets two sessions share one build. Extracting the archive costs about 1 s, less than
copying a cached directory (``cp -a``): measured on the test machine, see docs/testing.md.

**Live chroot, per session** (:class:`Chroot`): the archive is extracted into the session's
tmp directory (``fqchroot-<release>-<pid>/root``), the root bound onto itself (so the chroot's
``/`` is a mount point its processes see in their own mountinfo) and made private (no mount
event propagates in or out), then *fresh* kernel filesystems are mounted inside, never binds
of the host's: ``proc``, ``sysfs``, a ``tmpfs`` ``/dev`` holding only null, zero, full,
random, urandom and tty with its own ``devpts`` instance. So even an ``rm -rf`` of a chroot
whose mounts were left behind (pytest SIGKILLed) could not delete anything of the host. No
cgroup filesystem is mounted: a chroot host's foreign-I/O accounting uses iobench's own
counters (docs/compliance.md), as a host without a block-I/O cgroup does.

**Safe end, in every exit path** (fixture finalizer, ``atexit``, SIGTERM): every process whose
root directory is the chroot (sshd, sessions, modules, detached jobs) is frozen and killed by
PID, the mounts are unmounted in reverse order (lazily when busy), ``/proc/self/mountinfo``
is checked, and the tree is removed only when nothing is mounted below it: :func:`safe_rmtree`
refuses otherwise. A session that died without its end (SIGKILL) leaves mounts whose owner
PID is gone: :func:`sweep_stale` unmounts them at the next import of this module.

**Hosts** (:class:`ChrootSshd`): a ``fleetlib.SshdInstance`` whose files live inside the
chroot and whose daemon is ``chroot <root> /usr/sbin/sshd -D -f ...``. The chroot holds a
symlink at the path of its own root pointing to ``/``, so the host paths fleetlib writes into
``sshd_config`` (host key, PID file, authorized_keys, log) resolve inside the chroot too.
"""
import atexit
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import fcntl

import fleetlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Built once per machine, not per checkout: a fresh clone (CI's) reuses the archives a
# session built, keyed by release and package list. FLEETQUAL_CHROOT_CACHE chooses another
# place; without root the checkout's build/ holds them.
CACHE = os.environ.get("FLEETQUAL_CHROOT_CACHE") or (
    "/var/cache/fleetqual-tests/chroots" if os.geteuid() == 0 else os.path.join(ROOT, "build", "chroots"))

# release -> what it ships (README "Tested with"); bookworm is the test machine's own
RELEASES = {
    "bullseye": {"version": "11", "python": "3.9", "sysstat": "12.5"},
    "bookworm": {"version": "12", "python": "3.11", "sysstat": "12.6"},
    "trixie": {"version": "13", "python": "3.13", "sysstat": "12.7"},
}
# what a host needs (README "Qualifying a real fleet": Python 3 and SSH) plus sysstat, and
# procps for vmstat, as every Debian install but a minbase one has it
PACKAGES = ("python3", "openssh-server", "sysstat", "procps")
# the releases the fleet tests build chroots of (bookworm is this machine's own)
OTHER_RELEASES = ("bullseye", "trixie")
VARIANT = "minbase"
FORMAT = 1          # bump when the steps after debootstrap change: a new cache key
STRIP = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale")
# sysstat's tools, hidden from a host's PATH to make "sysstat absent" (docs/testing.md)
SYSSTAT_TOOLS = ("iostat", "sar", "sadf", "mpstat", "pidstat", "cifsiostat", "tapestat")
DEV_NODES = (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0))
BUILD_TIMEOUT = 1800
LIVE_RE = re.compile(r"/fqchroot-[a-z]+-(\d+)/root(/|$)")


_LIVE = set()          # open Chroot objects
_BUILDS = {}           # debootstrap PID -> its work directory, while it runs
_LOCK = threading.Lock()
_CLOSING = threading.Event()    # set by close_all(): no new build starts after it


class Unavailable(Exception):
    """This machine cannot provide the chroot of a release; the message is the skip reason."""


def _run(argv, timeout=600, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)


# --------------------------------------------------------------------------- apt's archive

def _os_codename(path="/etc/os-release"):
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("VERSION_CODENAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def _apt_sources(etc="/etc/apt"):
    """(uri, suites) of every enabled ``deb`` source: one-line ``.list`` and deb822 ``.sources``."""
    out = []
    paths = [os.path.join(etc, "sources.list")]
    d = os.path.join(etc, "sources.list.d")
    if os.path.isdir(d):
        paths += [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith((".list", ".sources"))]
    for path in paths:
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                    if m and not line.startswith("#"):
                        fields[m.group(1).lower()] = m.group(2).split()
                if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"])[0] != "no":
                    out += [(u, fields.get("suites", [])) for u in fields.get("uris", [])]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    out.append((words[1], [words[2]]))
    return out


def apt_mirror(etc="/etc/apt", codename=None):
    """The Debian archive apt uses here: the source serving the machine's own release
    (``bookworm``, not ``bookworm-security``), or None (debootstrap's default)."""
    codename = codename or _os_codename()
    for uri, suites in _apt_sources(etc):
        if codename in suites:
            return uri.rstrip("/")
    return None


def archive_serves(mirror, release, timeout=15):
    """None when ``mirror`` serves ``release``, else why not (a skip reason)."""
    url = "%s/dists/%s/InRelease" % (mirror, release)
    req = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=timeout):
            return None
    except urllib.error.HTTPError as e:
        return ("the Debian archive %s no longer serves %s (Debian %s): %s gave HTTP %d"
                % (mirror, release, RELEASES[release]["version"], url, e.code))
    except (urllib.error.URLError, OSError) as e:
        return "the Debian archive %s is unreachable (%s): cannot build the %s chroot" % (
            mirror, getattr(e, "reason", e), release)


# --------------------------------------------------------------------------- mounts

def mount_points(mountinfo="/proc/self/mountinfo"):
    """Every mount point of ``mountinfo``: its 5th space-separated field, in which the kernel
    writes space, tab, newline and backslash as octal escapes (bytes: any other byte as is)."""
    with open(mountinfo, "rb") as fh:
        for line in fh.read().split(b"\n"):
            fields = line.split(b" ")
            if len(fields) > 4:
                yield os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4]))


def mounts_under(path, mountinfo="/proc/self/mountinfo"):
    """Mount points at or below ``path``, deepest first (from ``/proc/self/mountinfo``)."""
    path = os.path.realpath(path).rstrip("/")
    found = [p for p in mount_points(mountinfo) if p == path or p.startswith(path + "/")]
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def umount(point):
    """Unmount ``point``; lazily (``-l``) when it is busy. True when it is gone."""
    if _run(["umount", point], timeout=60).returncode != 0:
        _run(["umount", "-l", point], timeout=60)
    return point not in mounts_under(point)


def safe_rmtree(path):
    """``rm -rf path``, refused while anything is mounted at or below it."""
    left = mounts_under(path) if os.path.exists(path) else []
    if left:
        raise RuntimeError("refusing to remove %s: still mounted below it: %s" % (path, ", ".join(left)))
    if os.path.lexists(path):
        shutil.rmtree(path)


def rooted_in(root):
    """PIDs of the processes whose root directory is ``root`` or below it."""
    root = os.path.realpath(root).rstrip("/")
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            r = os.readlink("/proc/%s/root" % name)
        except OSError:
            continue
        if r == root or r.startswith(root + "/"):
            pids.append(int(name))
    return pids


def kill_rooted_in(root, timeout=10):
    """SIGKILL every process living in the chroot ``root`` (started by its sshd, whatever it
    forked or detached), each with the tree below it, until none is left. By PID only."""
    killed = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [p for p in rooted_in(root) if p not in killed]
        if not new:
            break
        for p in new:        # fleetlib.kill_tree: frozen with its descendants, then SIGKILLed
            killed += [p] + fleetlib.kill_tree(p)
    while rooted_in(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    return killed


def _pid_alive(pid):
    return os.path.exists("/proc/%d" % pid)


def sweep_stale(mountinfo="/proc/self/mountinfo"):
    """Unmount what a dead session left mounted in its chroots (``fqchroot-<release>-<pid>``
    whose PID is gone): processes still living in them are killed first. Returns the points."""
    stale = {}
    for point in mount_points(mountinfo):
        m = LIVE_RE.search(point)
        if m and not _pid_alive(int(m.group(1))):
            stale.setdefault(point[:m.start() + len(m.group(0).rstrip("/"))], []).append(point)
    done = []
    for root, points in stale.items():
        kill_rooted_in(root)
        for point in sorted(points, key=lambda p: p.count("/"), reverse=True):
            umount(point)
            done.append(point)
    return done


# --------------------------------------------------------------------------- build

def cache_key(release, packages=PACKAGES):
    doc = json.dumps({"release": release, "variant": VARIANT, "packages": sorted(packages), "format": FORMAT},
                     sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:12]


def cache_paths(release, packages=PACKAGES):
    stem = os.path.join(CACHE, "%s-%s" % (release, cache_key(release, packages)))
    return stem + ".tar.zst", stem + ".json"


def unavailable():
    """None when chroot hosts can be built and run here, else why not."""
    why = fleetlib.available()
    if why:
        return why
    for tool in ("chroot", "mount", "umount", "tar", "zstd"):
        if not shutil.which(tool):
            return "%s is missing: the chroot hosts need chroot, mount, tar and zstd" % tool
    return None


def _versions(root):
    """The Python and sysstat versions of a built tree (read from its files)."""
    py = _run(["chroot", root, "python3", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
    ss = _run(["chroot", root, "dpkg-query", "-W", "-f", "${Version}", "sysstat"])
    return {"python": py.stdout.strip() or None, "sysstat": ss.stdout.strip() or None}


def build(release, packages=PACKAGES, log=None):
    """The cached archive of ``release`` (built now if missing): ``(archive path, metadata)``;
    metadata holds the versions, the first build's seconds and ``built_now``.
    Raises :class:`Unavailable` when it cannot be built here (the skip reason)."""
    why = unavailable()
    if why:
        raise Unavailable(why)
    archive, meta_path = cache_paths(release, packages)
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "%s.lock" % release), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # one build per release, shared by concurrent sessions
        if os.path.exists(archive) and os.path.exists(meta_path):
            meta = fleetlib.load_json(meta_path)
            meta["built_now"] = False
            return archive, meta
        if not shutil.which("debootstrap"):
            raise Unavailable("debootstrap is missing (Debian package debootstrap): cannot build the %s chroot"
                              % release)
        mirror = apt_mirror()
        if mirror:
            why = archive_serves(mirror, release)
            if why:
                raise Unavailable(why)
        _sweep_builds()
        work = os.path.join(CACHE, ".build-%s-%d" % (release, os.getpid()))
        tree = os.path.join(work, "root")
        os.makedirs(work)
        log = log or os.path.join(CACHE, "%s-%s.log" % (release, cache_key(release, packages)))
        try:
            t0 = time.monotonic()
            argv = ["debootstrap", "--variant=" + VARIANT, "--include=" + ",".join(packages), release, tree]
            with open(log, "w") as fh:
                with _LOCK:
                    if _CLOSING.is_set():
                        raise Unavailable("the session is ending: %s not built" % release)
                    p = subprocess.Popen(argv + ([mirror] if mirror else []), stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
                    _BUILDS[p.pid] = work          # ended by close_all() at exit or SIGTERM
            try:
                p.wait(timeout=BUILD_TIMEOUT)
            except subprocess.TimeoutExpired:
                fleetlib.kill_tree(p.pid)
                p.wait()
            finally:
                with _LOCK:
                    _BUILDS.pop(p.pid, None)
            if p.returncode != 0:
                with open(log, errors="replace") as fh:
                    tail = " | ".join(fh.read().strip().splitlines()[-3:])
                raise Unavailable("debootstrap %s failed (exit %d, log %s): %s" % (release, p.returncode, log, tail))
            for rel in STRIP:
                d = os.path.join(tree, rel)
                if os.path.isdir(d) and not os.path.islink(d):
                    for name in os.listdir(d):
                        full = os.path.join(d, name)
                        if os.path.isdir(full) and not os.path.islink(full):
                            shutil.rmtree(full)
                        else:
                            os.unlink(full)
            for name in os.listdir(os.path.join(tree, "etc", "ssh")):
                if name.startswith("ssh_host_"):      # every test host makes its own key
                    os.unlink(os.path.join(tree, "etc", "ssh", name))
            meta = dict(_versions(tree), release=release, version=RELEASES[release]["version"],
                        packages=list(packages), variant=VARIANT, key=cache_key(release, packages))
            partial = archive + ".part-%d" % os.getpid()
            tar = subprocess.Popen(["tar", "--numeric-owner", "--xattrs", "-C", tree, "-cf", "-", "."],
                                   stdout=subprocess.PIPE)
            zst = _run(["zstd", "-q", "-T0", "-3", "-o", partial], stdin=tar.stdout, timeout=BUILD_TIMEOUT)
            tar.stdout.close()
            if tar.wait() != 0 or zst.returncode != 0:
                raise RuntimeError("packing %s failed: %s" % (tree, zst.stderr))
            meta["build_s"] = round(time.monotonic() - t0, 1)
            with open(meta_path + ".part", "w") as fh:
                json.dump(meta, fh, indent=1, sort_keys=True)
            os.rename(partial, archive)
            os.rename(meta_path + ".part", meta_path)
            meta["built_now"] = True
            return archive, meta
        finally:
            _remove_build(work)


def _remove_build(work):
    """debootstrap mounts /proc (and /sys) in the tree while it works: never rm -rf over them."""
    if os.path.lexists(work):
        kill_rooted_in(os.path.join(work, "root"))
        for point in mounts_under(work):
            umount(point)
        safe_rmtree(work)


def _sweep_builds():
    """Remove what a dead session's build left (``.build-<release>-<pid>``, PID gone)."""
    for name in os.listdir(CACHE):
        m = re.match(r"^\.build-[a-z]+-(\d+)$", name)
        if m and not _pid_alive(int(m.group(1))):
            _remove_build(os.path.join(CACHE, name))


def prebuild(releases=OTHER_RELEASES, results=None):
    """Build the missing archives of ``releases`` in background threads (while other tests
    run): the threads, none when every archive is there or none can be built here. The
    fixture's :func:`build` waits for them on the release's lock; errors are left for that
    call to meet again (and turn into the skip reason), and said in ``results`` (a dict,
    release -> what became of it) when one is given."""
    if unavailable() or all(os.path.exists(cache_paths(r)[0]) for r in releases):
        return []
    _install_exit_handlers()

    def work(release):
        try:
            _archive, meta = build(release)
            said = "built in %s s" % meta["build_s"] if meta["built_now"] else "built by another session"
        except Exception as e:  # noqa: BLE001 - the fixture's own build() call reports it
            said = "not built: %s" % e
        if results is not None:
            results[release] = said
    # one thread per release: one build downloads while the other unpacks
    threads = [threading.Thread(target=work, args=(r,), name="chroot-prebuild-" + r, daemon=True)
               for r in releases if not os.path.exists(cache_paths(r)[0])]
    for t in threads:
        t.start()
    return threads


# --------------------------------------------------------------------------- live chroots

_HANDLERS = []


class Chroot:
    """One release's tree extracted under ``base`` and mounted for use (see the module doc)."""

    def __init__(self, release, base):
        self.release = release
        self.dir = os.path.join(os.path.realpath(base), "fqchroot-%s-%d" % (release, os.getpid()))
        self.root = os.path.join(self.dir, "root")
        self.mounts = []            # mount points we made, in order
        self.meta = None
        self.unpack_s = None

    def path(self, inner):
        """The host path of ``inner`` (an absolute path inside the chroot)."""
        return os.path.join(self.root, inner.lstrip("/"))

    def _mount(self, argv, point, record=True):
        p = _run(["mount"] + argv + [point], timeout=60)
        if p.returncode != 0:
            raise RuntimeError("mount %s %s: %s" % (" ".join(argv), point, p.stderr.strip()))
        if record:
            self.mounts.append(point)

    def open(self, archive, meta):
        """Extract ``archive`` and mount the chroot's kernel filesystems."""
        self.meta = meta
        _install_exit_handlers()
        with _LOCK:
            _LIVE.add(self)
        os.makedirs(self.root)
        t0 = time.monotonic()
        zst = subprocess.Popen(["zstd", "-q", "-dc", archive], stdout=subprocess.PIPE)
        tar = _run(["tar", "--numeric-owner", "--xattrs", "-C", self.root, "-xf", "-"], stdin=zst.stdout)
        zst.stdout.close()
        if zst.wait() != 0 or tar.returncode != 0:
            raise RuntimeError("extracting %s failed: %s" % (archive, tar.stderr))
        self.unpack_s = round(time.monotonic() - t0, 2)
        r = self.root
        self._mount(["--bind", r], r)
        self._mount(["--make-private"], r, record=False)
        self._mount(["-t", "proc", "-o", "nosuid,nodev,noexec", "proc"], os.path.join(r, "proc"))
        self._mount(["-t", "sysfs", "-o", "nosuid,nodev,noexec", "sysfs"], os.path.join(r, "sys"))
        dev = os.path.join(r, "dev")
        self._mount(["-t", "tmpfs", "-o", "nosuid,mode=0755,size=4m", "fqdev"], dev)
        for name, major, minor in DEV_NODES:
            os.mknod(os.path.join(dev, name), 0o666 | 0o020000, os.makedev(major, minor))
            os.chmod(os.path.join(dev, name), 0o666)
        for name, mode in (("pts", 0o755), ("shm", 0o1777)):
            os.mkdir(os.path.join(dev, name))
            os.chmod(os.path.join(dev, name), mode)
        self._mount(["-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620,gid=5", "devpts"],
                    os.path.join(dev, "pts"))
        for name, target in (("ptmx", "pts/ptmx"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
            os.symlink(target, os.path.join(dev, name))
        os.makedirs(self.path("/run/sshd"), mode=0o755, exist_ok=True)
        # the host path of this root, inside the chroot, leads to its "/": paths written on the
        # host side (sshd_config, the host key) mean the same file inside
        inner = self.path(self.root)
        os.makedirs(os.path.dirname(inner), exist_ok=True)
        os.symlink("/", inner)
        return self

    def close(self):
        """Kill what lives in the chroot, unmount, check mountinfo, remove. Idempotent."""
        with _LOCK:
            if self not in _LIVE:
                return
            _LIVE.discard(self)
        if os.path.isdir(self.root):
            kill_rooted_in(self.root)
        for point in reversed(self.mounts):
            umount(point)
        for point in mounts_under(self.dir):     # anything else (a mount some test made inside)
            umount(point)
        left = mounts_under(self.dir)
        if left:
            raise RuntimeError("chroot %s: still mounted, NOT removed: %s" % (self.dir, ", ".join(left)))
        self.mounts = []
        safe_rmtree(self.dir)

    def hide_sysstat(self, inner_dir="/srv/fleetqual-nosysstat"):
        """A directory inside the chroot with a symlink to everything of /usr/bin but sysstat's
        tools; a PATH of it and /usr/sbin makes "sysstat absent" for one host. Returns its
        path inside the chroot."""
        shadow = self.path(inner_dir)
        os.makedirs(shadow, exist_ok=True)
        for name in os.listdir(self.path("/usr/bin")):
            if name not in SYSSTAT_TOOLS and not os.path.lexists(os.path.join(shadow, name)):
                os.symlink(os.path.join("/usr/bin", name), os.path.join(shadow, name))
        return inner_dir


def close_all():
    """End every running build and close every live chroot of this process (exit paths)."""
    with _LOCK:
        _CLOSING.set()
        live = list(_LIVE)
        builds = dict(_BUILDS)
    errors = []
    for pid, work in builds.items():
        fleetlib.kill_tree(pid)
        try:
            _remove_build(work)
        except Exception as e:  # noqa: BLE001 - at exit: report, go on with the others
            errors.append(str(e))
    for c in live:
        try:
            c.close()
        except Exception as e:  # noqa: BLE001 - at exit: report, go on with the others
            errors.append(str(e))
    return errors


def _install_exit_handlers():
    if _HANDLERS:
        return
    _HANDLERS.append(True)
    atexit.register(close_all)
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            close_all()
            fleetlib._kill_all()        # what fleetlib's own handler does (it is not installed after this one)
            if callable(previous):
                previous(signum, frame)
            raise SystemExit(128 + signum)
        signal.signal(signal.SIGTERM, on_term)


class ChrootSshd(fleetlib.SshdInstance):
    """A fleetlib host whose sshd runs inside ``chroot`` (its files in the chroot's /srv)."""

    def __init__(self, fleet, name, addr, chroot):
        super().__init__(fleet, name, addr)
        self.chroot = chroot
        self.dir = chroot.path("/srv/fleetqual-sshd/%s" % name)
        self.config = os.path.join(self.dir, "sshd_config")
        self.log = os.path.join(self.dir, "sshd.log")
        self.pidfile = os.path.join(self.dir, "sshd.pid")
        self.authorized_keys = os.path.join(self.dir, "authorized_keys")
        self.command_prefix = ("chroot", chroot.root)


class Distros:
    """The session's chroots (one per release, shared by its hosts) and their hosts."""

    def __init__(self, fleet, base):
        self.fleet, self.base = fleet, base
        self.chroots = {}
        self.skipped = {}           # release -> reason

    def chroot(self, release):
        """The live chroot of ``release``; raises :class:`Unavailable` (the reason) otherwise."""
        if release in self.skipped:
            raise Unavailable(self.skipped[release])
        if release not in self.chroots:
            try:
                archive, meta = build(release)
            except Unavailable as e:
                self.skipped[release] = str(e)
                raise
            c = Chroot(release, self.base)
            try:
                c.open(archive, meta)
            except BaseException:
                c.close()
                raise
            self.chroots[release] = c
        return self.chroots[release]

    def host(self, release, n, key_options=""):
        """Host fq<n> on 127.0.0.<n>, its sshd running inside the chroot of ``release``."""
        name = "fq%d" % n
        inst = self.fleet.instances.get(name)
        if inst is None:
            inst = self.fleet.instances[name] = ChrootSshd(self.fleet, name, self.fleet.addr_of(n),
                                                           self.chroot(release))
        return inst.start(key_options)

    def close(self):
        """Stop the chroot hosts (removed from the fleet: their chroot goes) and close every
        chroot. Returns the errors and the PIDs of the daemons that were stopped."""
        errors, pids = [], []
        for c in self.chroots.values():
            for inst in [i for i in self.fleet.instances.values() if getattr(i, "chroot", None) is c]:
                pids += [inst.pid] if inst.pid else []
                inst.kill()
                self.fleet.instances.pop(inst.name, None)
            try:
                c.close()
            except RuntimeError as e:
                errors.append(str(e))
        return errors, pids


if os.geteuid() == 0:
    sweep_stale()


def main(argv):
    """``chroots.py build [RELEASE ...]``: build the missing archives (every release the tests
    use by default) and wait for them; one line per release. ``make test`` runs it as a stream
    of its own from the start, so a fresh machine's first builds (minutes of debootstrap)
    overlap the C tests and the fleet tests before the distro tests, which wait for them on
    the release's lock. It exits 0 when a release cannot be built: the tests that need it
    meet the reason again and report it."""
    if argv[:1] != ["build"] or not set(argv[1:]) <= set(RELEASES):
        sys.stderr.write("usage: chroots.py build [%s ...]\n" % " | ".join(sorted(RELEASES)))
        return 2
    releases = argv[1:] or list(OTHER_RELEASES)
    why = unavailable()
    if why:
        print("chroots: none built: %s" % why)
        return 0
    results = {}
    for t in prebuild(releases, results):
        t.join()
    for r in releases:
        print("chroots: %s %s" % (r, results.get(r, "cached")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
