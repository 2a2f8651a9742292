"""What each test costs (tests/suitecost.py, docs/testing.md "What the suite costs"): with
FLEETQUAL_COST_TESTS set (`make test` sets it per stream), each pytest process writes, per
test, its wall seconds and the CPU seconds its stream's control group was charged while the
test ran: setup, call and teardown, the playbooks, hosts, iobench runs and guests it drove,
and whatever else ran in the same stream meanwhile (a guest booting for a later test).
Loaded by tests/conftest.py; a pytest process of its own loads it with ``-p costplugin``."""
import json
import os
import time

import pytest

import suitecost

_TESTS = []


def _enabled():
    return bool(os.environ.get(suitecost.ENV_TESTS))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    if not _enabled():
        yield
        return
    cpu0, method = suitecost.current_cpu()
    t0 = time.monotonic()
    yield
    cpu1 = suitecost.current_cpu()[0]
    _TESTS.append({"nodeid": item.nodeid, "cpu_s": round(cpu1 - cpu0, 2), "wall_s": round(time.monotonic() - t0, 2),
                   "method": method})


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    if _enabled() and _TESTS:
        path = "%s.%d.json" % (os.environ[suitecost.ENV_TESTS], os.getpid())
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as fh:
            json.dump({"tests": _TESTS}, fh)
