"""Fixtures of the fleet tests: the session-scoped fleet of loopback sshd hosts
(fleetlib.py). The playbook runner is fleetrun.py (imported by the test modules; a plain
module rather than this conftest, whose name other test directories share)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# tests/unit's shared helpers (loopdev: a tmpfs or a loop device of a test's own), after ours
sys.path.append(os.path.join(os.path.dirname(HERE), "unit"))

import fleetlib  # noqa: E402
import fleetrun  # noqa: E402

REASON = fleetlib.available()


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    """The session's fleet. Hosts are started on first use (fleet.host(11) -> fq11).
    Skips, with the reason, when this machine cannot run it (not root, no sshd)."""
    if REASON:
        pytest.skip(REASON)
    fleetrun._BUILD_CACHE.append(str(tmp_path_factory.mktemp("fleet-build-cache")))
    f = fleetlib.Fleet(str(tmp_path_factory.mktemp("fleet")))
    try:
        yield f
    finally:
        started = [i.pid for i in f.instances.values() if i.pid]
        f.close()
        left = fleetlib.sshd_pids_below(started)
        assert not left, "sshd still running after teardown: %s" % left


@pytest.fixture(scope="session")
def fleet4(fleet):
    """Four healthy hosts fq11..fq14 (group db)."""
    return [fleet.host(n) for n in (11, 12, 13, 14)]


def pytest_collection_finish(session):
    """When the tests of other Debian releases are selected, build their missing chroot
    archives in the background while the tests before them run (tests/fleet/chroots.py:
    a first build takes minutes; later sessions reuse the machine's cache, chroots.CACHE)."""
    if REASON:
        return
    if any("test_fleet_distros.py::" in item.nodeid and item.get_closest_marker("fleet") for item in session.items):
        import chroots
        chroots.prebuild()
