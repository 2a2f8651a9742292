"""Issue 17 end to end: the qualify playbook on this machine, its test directory on an ext4
on a loop device of its own (tests/unit/loopdev.py). A quiet disk passes; the same run while
a neighbour (a process of this test reading its own file on that device with O_DIRECT,
bounded in time, ended by PID) shares the disk is INCONCLUSIVE -- not PASS, not FAIL --,
is counted apart in the fleet summary, and fails the verdict gate (the default exit-code
policy for INCONCLUSIVE); with ``fleetqual_inconclusive: warn`` the same shared run exits 0,
and both print the host's verdict and reasons."""
import json
import os
import sys

import pytest

from playbook_run import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))

import loopdev  # noqa: E402
from test_foreign_io import Neighbour, neighbour_file  # noqa: E402

pytestmark = pytest.mark.slow

MATRIX = [{"workload": "cache", "mode": "rndrd", "threads": 2, "file_num": 4, "total_size": "64M",
           "block_size": "16K", "direct": True, "time": 6, "warmup": 1}]


def test_a_shared_disk_is_inconclusive_and_a_quiet_one_passes(playbook):
    if loopdev.missing_tools():
        pytest.skip(loopdev.missing_tools())
    with loopdev.loop_ext4(384, prefix="fq-compliance-") as loop:
        other = neighbour_file(os.path.join(loop["mnt"], "neighbour.dat"), 64)
        ev = {"fleetqual_matrix": MATRIX, "fleetqual_test_dir": os.path.join(loop["mnt"], "fq"),
              # no quiet wait: the neighbour shares the measured window
              "fleetqual_foreign_io": {"sample_s": 1, "wait_s": 5, "quiet_util_pct": 100},
              "fleetqual_impact": {"ioprio": "idle", "nice": 5}}
        quiet = playbook(extra_vars=ev)
        assert quiet.rc == 0, quiet.out[-3000:]
        rec = quiet.record()
        (wl,) = rec["workloads"]
        assert rec["verdict"] == "PASS" and wl["metrics"]["foreign_source"].startswith("cgroup")
        assert wl["metrics"]["foreign_share"] < 0.05
        assert wl["metrics"]["impact"]["nice"] == 5

        with Neighbour(other, threads=1, seconds=900) as nb:
            nb.started()
            busy = playbook(extra_vars=ev)
            warned = playbook(extra_vars=dict(ev, fleetqual_inconclusive="warn"))
        assert busy.rc != 0, busy.out[-3000:]
        rec = busy.record()
        (wl,) = rec["workloads"]
        assert rec["verdict"] == "INCONCLUSIVE", rec["reasons"]
        assert wl["metrics"]["foreign_share"] > 0.1 and "shared window" in rec["reasons"][0]
        with open(os.path.join(busy.results_dir(), "fleet.json")) as fh:
            summary = json.load(fh)["summary"]
        assert summary["by_verdict"]["INCONCLUSIVE"] == 1 and summary["by_verdict"]["FAIL"] == 0
        assert "INCONCLUSIVE 1" in busy.out
        # the gate failed the host with its verdict and reasons
        said = "localhost: INCONCLUSIVE %s" % "; ".join(rec["reasons"])
        assert '"msg": "%s"' % " ".join(said.split()) in " ".join(busy.out.split()), busy.out[-3000:]

        # fleetqual_inconclusive: warn -- the same shared disk: exit 0, the verdict and reasons printed
        assert warned.rc == 0, warned.out[-3000:]
        rec = warned.record()
        assert rec["verdict"] == "INCONCLUSIVE" and "shared window" in rec["reasons"][0], rec["reasons"]
        said = "localhost: INCONCLUSIVE %s (not failed: fleetqual_inconclusive is warn)" % "; ".join(rec["reasons"])
        assert '"msg": "%s"' % " ".join(said.split()) in " ".join(warned.out.split()), warned.out[-3000:]
        assert "FAILED!" not in warned.out and "INCONCLUSIVE 1" in warned.out
