"""What a host lacks is answered by the start's one module run before it changes anything
(module_utils/host_start.start): with ``manage_packages`` a host without iostat
whose ``collect`` would use it gets ``packages_needed`` (the role installs sysstat and starts
again, roles/qualify/tasks/after_start.yml), a host that builds its own binary gets
``build_needed``, and a host that lacks both is told both at once. Every combination of
manage_packages, collect and iostat installed or not, on this host's real facts, with a real
PATH that has (or has not) an iostat; nothing is created."""
import itertools
import os
import stat

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import collector
from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as host_start

COLLECT = ("auto", "sysstat", "procfs", "none")


def path_dir(tmp_path, with_iostat):
    """A directory for PATH, with an executable ``iostat`` or without one."""
    d = tmp_path / ("bin-with" if with_iostat else "bin-without")
    d.mkdir()
    if with_iostat:
        tool = d / "iostat"
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(d)


@pytest.mark.parametrize("manage,collect,with_iostat", list(itertools.product((True, False), COLLECT, (True, False))))
@pytest.mark.parametrize("build_on_host", (True, False))
def test_the_start_says_what_the_host_lacks_and_changes_nothing(
        tmp_path, monkeypatch, manage, collect, with_iostat, build_on_host):
    monkeypatch.setenv("PATH", path_dir(tmp_path, with_iostat))
    test_dir = tmp_path / "test"
    binary = tmp_path / "iobench"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    missing = manage and collect in ("auto", "sysstat") and not with_iostat
    p = {"path": str(test_dir), "binary": str(binary), "build_on_host": build_on_host, "manage_packages": manage,
         "collect": collect}
    if not (missing or build_on_host):
        # the start goes on to the drives and the plan (not this test's part): its package step lets it
        out = {}
        assert host_start._packages(p, out) is True and out == {}
        assert collector.sysstat_missing(collect) is (collect in ("auto", "sysstat") and not with_iostat)
        return
    out = host_start.start(p)
    assert out.get("packages_needed", []) == (["sysstat"] if missing else [])
    assert bool(out.get("build_needed")) is build_on_host
    assert out["changed"] is False and "status" not in out and "plan" not in out
    assert not test_dir.exists() and sorted(os.listdir(tmp_path)) == sorted(
        ["iobench", "bin-with" if with_iostat else "bin-without"])
    # the facts are read all the same (the record of a host stopped here still names it)
    assert out["facts"]["memtotal_mb"] > 0
