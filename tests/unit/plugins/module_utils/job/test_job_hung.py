"""A device that never completes a request (a fault drive's stall): iobench's threads sleep
uninterruptibly and even SIGKILL cannot end them; the job must not hang with them
(module_utils/job/hung.py). The run returns by its bound, names the threads asleep, and the
cleanup asks nothing more of that device."""
import os
import time

import pytest
from hypothesis import given, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.job import cleanup, hung, workload
from faultdrive.fixtures import faultdrive  # noqa: F401  pylint: disable=unused-import
from test_module_iobench import iobench_binary  # noqa: F401  pylint: disable=unused-import


@given(st.lists(st.tuples(st.integers(1, 10 ** 6), st.sampled_from("RSDZTI"),
                          st.sampled_from(["", "io_schedule", "blk_mq_get_tag", "fuse_wait"])), max_size=70))
def test_describe_counts_the_threads_asleep_and_where(states):
    msg = hung.describe(states, "iobench", 42, 10)
    assert msg.startswith("iobench (pid 42) did not end 10 s after SIGKILL")
    asleep = [s for s in states if s[1] == "D"]
    if asleep:
        assert "%d of %d threads in uninterruptible sleep (D)" % (len(asleep), len(states)) in msg
        for wchan in set(s[2] for s in asleep if s[2]):
            assert wchan in msg
    else:
        assert "uninterruptible" not in msg


def running(pid):
    """Whether ``pid`` still runs (a zombie has ended: its parent, this test, reaps it)."""
    return any(state != "Z" for _tid, state, _wchan in hung.thread_states(pid))


def wait_gone(pid, seconds=60):
    end = time.monotonic() + seconds
    while running(pid) and time.monotonic() < end:
        time.sleep(0.2)
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return not running(pid)


@pytest.mark.slow
def test_a_stalled_device_does_not_hold_the_run_nor_the_cleanup(iobench_binary, faultdrive, monkeypatch):  # noqa: F811
    monkeypatch.setattr(workload, "KILL_GRACE_S", 2)
    monkeypatch.setattr(hung, "HUNG_GRACE_S", 2)
    fd = faultdrive(size=32 << 20)
    fd.set([{"kind": "stall", "for_s": 600}])
    argv = [iobench_binary, "run", "--device", fd.device, "--size", str(16 << 20), "--mode", "rndrd",
            "--threads", "4", "--time", "2", "--direct"]
    began = time.monotonic()
    rc, _out, err, timed_out, _s, _e = workload.run_bench(argv, 3)
    took = time.monotonic() - began
    pids = [int(w) for w in err.split("(pid ", 1)[1].split(")", 1)[:1]]
    try:
        assert rc is None and timed_out, (rc, err)
        assert "did not end 2 s after SIGKILL" in err and "uninterruptible sleep (D)" in err, err
        assert took < 600, "the run waited for the stall to end"
        # the cleanup of that device is left, not attempted; another device's still runs
        spec = {"path": "/nonexistent-fq", "datasets": [], "binary": iobench_binary,
                "workloads": [{"target_kind": "device", "target_device": fd.device, "device_size": 1 << 20}]}
        removed, left, warnings = cleanup.clean_all(spec, hung={fd.device})
        assert removed == [] and left and fd.device in left[0], (removed, left)
        assert any("not zeroed: the device stopped completing requests" in w for w in warnings), warnings
        # any bounded command on the stalled device returns too, and says so (iobench itself
        # would be refused at once: the process left behind still holds the device, O_EXCL)
        rc2, _o, _e2, said = hung.run_bounded(["dd", "if=" + fd.device, "of=/dev/null", "bs=4096", "count=1",
                                               "iflag=direct"], 2, "dd")
        assert rc2 is None and "dd (pid" in said and "uninterruptible sleep (D)" in said, (rc2, said)
        pids.append(int(said.split("(pid ", 1)[1].split(")", 1)[0]))
    finally:
        fd.clear()      # the stall ends: the processes left to the kernel complete and exit
        assert all(wait_gone(pid) for pid in pids), [hung.thread_states(p) for p in pids]
