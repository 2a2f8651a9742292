"""Fixtures of the fleet tests: the session-scoped fleet of loopback sshd hosts
(fleetlib.py) and the filesystem of its hosts' directories. The playbook runner is
fleetrun.py (imported by the test modules; a plain module rather than this conftest, whose
name other test directories share)."""
import contextlib
import os
import subprocess
import sys
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# tests/unit's shared helpers (loopdev: a tmpfs or a loop device of a test's own), after ours
sys.path.append(os.path.join(os.path.dirname(HERE), "unit"))

import fleetlib  # noqa: E402
import fleetrun  # noqa: E402
import loopdev  # noqa: E402
import suitecost  # noqa: E402

REASON = fleetlib.available()
# The hosts' default directories (Fleet.dirs_base): an ext4 of their own on a loop device over
# a sparse image on a tmpfs, mounted -o discard, so a file the benchmark deletes gives its
# memory back. Memory is used only as written: the ext4's metadata (131 MiB at 4 GiB) plus
# what the hosts hold at once (the whole of tests/fleet peaked at 511 MiB on the ext4, 638 MiB
# of tmpfs; 4 GiB leaves room for a test with larger working sets and bounds the memory).
HOSTDIRS_MB = 4096


@contextlib.contextmanager
def hostdirs_filesystem(where):
    """Yield the directory the fleet's hosts keep their directories under: a filesystem that
    does not touch the machine's disk, whose stalls would otherwise be judged as the hosts'
    (the fleet tests are about fleet scale and output, not about this machine's disk). None
    when no loop device can be made here (then <inventory>/hostdirs, as before). Unmounted
    (lazily if busy) and detached afterwards."""
    # Off unless FLEETQUAL_FLEET_HOSTDIRS=loop: in two full runs beside the VM tier, healthy
    # hosts FAILed with real 1.7-1.9 s stalls of this loop device (its worker, a nice-0
    # kernel thread, starved by the guests' QEMU at nice -5), more often than the machine's
    # own disk stalls (once in five runs); the hosts' directories stay on the disk for now
    if os.environ.get("FLEETQUAL_FLEET_HOSTDIRS") != "loop" or loopdev.missing_tools():
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            memory = stack.enter_context(loopdev.tmpfs(os.path.join(where, "memory"), HOSTDIRS_MB + 16))
            loop = stack.enter_context(loopdev.loop_ext4(HOSTDIRS_MB, base=memory, discard=True))
        except (subprocess.CalledProcessError, OSError) as exc:
            stack.close()
            warnings.warn("fleet host directories on the machine's disk: no loop device of their own (%s)" % exc)
            loop = None
        yield loop and loop["mnt"]


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    """The session's fleet. Hosts are started on first use (fleet.host(11) -> fq11); their
    default directories are on hostdirs_filesystem (fleet.dirs_base). Skips, with the
    reason, when this machine cannot run it (not root, no sshd)."""
    if REASON:
        pytest.skip(REASON)
    fleetrun._BUILD_CACHE.append(str(tmp_path_factory.mktemp("fleet-build-cache")))
    f = fleetlib.Fleet(str(tmp_path_factory.mktemp("fleet")))
    started = []
    filesystem = contextlib.ExitStack()
    try:
        f.dirs_base = filesystem.enter_context(hostdirs_filesystem(str(tmp_path_factory.mktemp("fleet-hostdirs"))))
        yield f
    finally:
        # every sshd, and what runs below it, killed before the hosts' filesystem is unmounted
        started = [i.pid for i in f.instances.values() if i.pid]
        f.close()
        filesystem.close()
    left = fleetlib.sshd_pids_below(started)
    assert not left, "sshd still running after teardown: %s" % left


@pytest.fixture(scope="session")
def fleet4(fleet):
    """Four healthy hosts fq11..fq14 (group db)."""
    return [fleet.host(n) for n in (11, 12, 13, 14)]


def pytest_collection_modifyitems(session, config, items):
    """The tests of other Debian releases last (a stable sort: every other test keeps its
    place): on a machine without their chroots, the archives build (minutes of debootstrap,
    ``make test``'s fleet-chroots stream or :func:`pytest_collection_finish` below) while the
    tests before them run, instead of holding the first of them up."""
    items.sort(key=lambda item: os.path.basename(str(item.fspath)) == "test_fleet_distros.py")


def pytest_collection_finish(session):
    """When the tests of other Debian releases are selected, build their missing chroot
    archives in the background while the tests before them run (tests/fleet/chroots.py:
    a first build takes minutes; later sessions reuse the machine's cache, chroots.CACHE)."""
    if REASON:
        return
    if any("test_fleet_distros.py::" in item.nodeid and item.get_closest_marker("fleet") for item in session.items):
        import chroots
        chroots.prebuild()


def pytest_terminal_summary(terminalreporter):
    """Where the fleet tests' CPU went: the loopback hosts (sshd, modules, detached jobs,
    iobench) and the rest of the stream (the controller's ansible-playbook and ssh clients,
    the tests themselves), from the stream's control groups (tests/suitecost.py)."""
    group = fleetlib._COST.get("hosts")
    stream = os.environ.get(suitecost.ENV_GROUP)
    if not group or not stream or not os.path.isdir(group):
        return
    hosts, total = sum(suitecost.group_cpu(group)), sum(suitecost.group_cpu(stream))
    terminalreporter.write_sep("-", "fleet CPU")
    terminalreporter.write_line("loopback hosts (sshd, modules, jobs, iobench): %.0f CPU-s; controller and tests: %.0f CPU-s"
                                % (hosts, total - hosts))
