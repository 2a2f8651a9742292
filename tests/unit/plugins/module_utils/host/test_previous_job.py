# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a start does with a job an earlier run left in the test directory
(module_utils/host/start.py ``previous_decision``, ``fleetqual_previous``; docs/operations.md):
the whole space of jobs (running or not, its state, its plan, its age, collected or not, an
array member's) and settings, against the rule written out once more here."""
import os

from hypothesis import given, settings, strategies as st
import unitpaths  # noqa: F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.module_utils.host import start
from ansible_collections.fleetqual.storage.plugins.module_utils.job import status as job_status

NOW = 2_000_000_000.0
PLAN = [{"id": "cache-rndrd-t1", "mode": "rndrd", "threads": 1, "time": 4, "seed": 7}]


def _status(alive, state, same_plan, age_days, collected):
    pid = os.getpid() if alive else 2 ** 22 + 17
    return {"run_id": "first", "pid": pid, "pid_start": job_status.pid_start(pid) if alive else 1,
            "state": "running" if alive else state, "started_epoch": NOW - age_days * 86400 - 60,
            "finished_epoch": None if alive else NOW - age_days * 86400, "of": 1,
            "results": [{"index": 1}], "collected": collected,
            "fingerprint": start.plan_fingerprint(PLAN if same_plan else PLAN + PLAN, "abc")}


@settings(max_examples=400, deadline=None)
@given(alive=st.booleans(), state=st.sampled_from(["done", "failed", "expired", "stopped", "running"]),
       same_plan=st.booleans(), age_days=st.floats(0, 30), days=st.integers(1, 14), collected=st.booleans(),
       previous=st.sampled_from(start.PREVIOUS), array=st.booleans(),
       word=st.sampled_from([None, {"run_id": None, "why": "an array is attached whole or not at all: fq2 has none"},
                             {"run_id": "first", "why": "every member's job of run first ran this array"},
                             {"run_id": "other", "why": "every member's job of run other ran this array"}]))
def test_a_job_is_attached_refused_or_cleared_by_one_rule(
        alive, state, same_plan, age_days, days, collected, previous, array, word):
    st_ = _status(alive, state, same_plan, age_days, collected)
    got, why = start.previous_decision(st_, start.plan_fingerprint(PLAN, "abc"), previous, array, now=NOW,
                                       uncollected_days=days, array_previous=word)
    finished = not alive and state == "done"
    candidate = alive or finished
    attachable = same_plan and (alive or (finished and age_days <= days))
    whole = (word or {}).get("run_id")
    if previous == "restart" or collected:
        want = "clear"
    elif previous == "refuse" and candidate:
        want = "refuse"
    elif previous != "attach":
        want = "clear"
    elif not array:
        want = "attach" if attachable else "clear"
    elif not whole:
        # an array member's job without its whole array: cleared, saying why
        want = "clear"
    else:
        # the whole array is attached: this member's job too, or it is refused naming the run
        want = "attach" if attachable and whole == "first" else "refuse"
    assert got == want, (got, why)
    assert why or got == "clear"
    if got == "refuse":
        assert ("run first" in why and "fleetqual_previous" in why) or ("run %s" % whole in why and "restart" in why)
    if array and got == "clear" and previous == "attach" and not collected:
        assert why == ((word or {}).get("why") or "an array member's job is attached only with its whole array")


def test_no_job_is_cleared_silently_and_the_seed_is_not_the_plan():
    assert start.previous_decision(None, "x") == ("clear", None)
    assert start.previous_decision({}, "x") == ("clear", None)
    other_seed = [dict(PLAN[0], seed=8)]
    assert start.plan_fingerprint(PLAN, "abc") == start.plan_fingerprint(other_seed, "abc")
    assert start.plan_fingerprint(PLAN, "abc") != start.plan_fingerprint(PLAN, "abd")
    assert start.plan_fingerprint(PLAN, "abc") != start.plan_fingerprint([dict(PLAN[0], time=5)], "abc")
