"""Fixtures for the iobench tests; helpers live in iobench_helpers.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from iobench_helpers import BIN, SMALL, make, run  # noqa: E402


@pytest.fixture(scope="session")
def iobench():
    make("iobench")
    return BIN


@pytest.fixture
def ib(iobench):
    def _run(*args, **kw):
        return run(iobench, *args, **kw)
    return _run


@pytest.fixture(scope="module")
def prepared(iobench, tmp_path_factory):
    """A directory prepared once per module with 4 files of 4 MiB."""
    d = tmp_path_factory.mktemp("prepared") / "bench"
    d.mkdir()
    r = run(iobench, "prepare", "--dir", d, *SMALL)
    assert r.rc == 0, r
    yield str(d)
    run(iobench, "cleanup", "--dir", d)
