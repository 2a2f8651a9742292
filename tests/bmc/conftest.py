"""Fixtures of the BMC lab tests (docs/testing.md, "The BMC lab"): one lab per module, with a
domain for each power method, skipped with the reason where the machine cannot run it."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import bmclab  # noqa: E402
import labs  # noqa: E402


@pytest.fixture(scope="module")
def lab():
    lacking = bmclab.missing()
    if lacking:
        labs.unavailable("the BMC lab needs: %s" % "; ".join(lacking))
    lab = bmclab.Lab(["fq-redfish", "fq-ipmi", "fq-refused"])
    try:
        lab.start()
    except Exception:
        logs = "\n".join("--- %s\n%s" % (n, lab.log(n)) for n in ("libvirtd", "sushy", "vbmcd"))
        lab.stop()
        raise AssertionError("the BMC lab did not start:\n%s" % logs)
    yield lab
    lab.stop()
