"""pytest fixture ``faultdrive``: a factory of fault-injecting drives (docs/testing.md, "The
fault-injecting drive"). Import it into a conftest: ``from faultdrive.fixtures import faultdrive``.

    def test_x(faultdrive):
        fd = faultdrive(size=32 << 20)          # started; stopped after the test
        fd.set([{"kind": "eio", "start": 0, "length": 4096}])

The test is skipped, with the reason, where a fault drive cannot be made (faultdrive_available).
"""
import pytest

from faultdrive import FaultDrive, faultdrive_available


@pytest.fixture
def faultdrive(tmp_path):
    ok, reason = faultdrive_available()
    if not ok:
        pytest.skip(reason)
    made = []

    def make(size=64 << 20, name=None, **kwargs):
        drive = FaultDrive(size=size, workdir=tmp_path, name=name or "fd%d" % (len(made) + 1), **kwargs)
        made.append(drive)
        return drive.start()

    yield make
    errors = []
    for drive in reversed(made):
        errors += drive.stop(raise_errors=False)
    assert not errors, "fault drives did not stop cleanly: %s" % "; ".join(errors)
