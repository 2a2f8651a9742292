"""What the wait says of a job that ended without finishing its plan: the workload it was at,
or its preparation when the deadline (or a stop) came before the first workload began."""
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote.job_wait import JobAction

WORKLOADS = [{"id": "cache-rndrd-t1"}, {"id": "over_cache-rndwr-t4"}]


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["expired", "stopped", "died"]), st.integers(0, 2))
def test_a_job_that_ended_early_names_where_it_was(state, index):
    current = WORKLOADS[index - 1]["id"] if index else None
    st_ = {"state": state, "index": index, "current": current, "pid": 42, "results": []}
    got = JobAction._finish(None, st_, WORKLOADS)
    task, msg = got["error"]["task"], got["error"]["msg"]
    if index:
        assert task == "Workload %d/2: %s" % (index, current), got["error"]
    else:
        assert task == "Before workload 1/2", got["error"]
    if state == "expired":
        assert msg == "the measurement job was stopped by its deadline %s" % (
            "at workload %d/2 (%s)" % (index, current) if index else "before its first workload began (preparing)")
    assert "None" not in task + msg, got["error"]
