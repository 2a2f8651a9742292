# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An array is attached whole or not at all (plugin_utils/remote/array_start.py ``whole_array``,
docs/operations.md "Arrays"): over the space of what an earlier run left on each member, the
decision against the rule written out once more here, and the probe files it is read from."""
from hypothesis import given, settings, strategies as st
import unitpaths  # noqa: F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import array_start

NOW = 2_000_000_000.0
MEMBERS = ["fq1", "fq2", "fq3"]
CONFIG = {"initiators": [1, 3], "threads": [2], "modes": ["rndrd"], "time": 2, "warmup": 1}
SPECS = dict((m, {"name": "san1", "rank": i, "members": MEMBERS, "config": CONFIG, "failover_step": None})
             for i, m in enumerate(MEMBERS))

# what one member may hold: nothing, or a job whose every property the rule looks at varies
member = st.one_of(st.none(), st.fixed_dictionaries({
    "run": st.sampled_from(["killed", "older"]),
    "state": st.sampled_from(["running", "done", "failed", "died", "stopped"]),
    "same_array": st.booleans(), "started": st.booleans(), "collected": st.booleans(),
    "age_days": st.floats(0, 20), "failover": st.booleans()}))


def status(m, h):
    if h is None:
        return None
    spec = SPECS[m]
    arr = {"name": spec["name"] if h["same_array"] else "san2", "rank": spec["rank"], "members": MEMBERS,
           "config": CONFIG, "spec": {"seed": 7, "failover_step": 1 if h["failover"] else None},
           "start": {"t0": NOW - 100} if h["started"] else None}
    return {"run_id": h["run"], "state": h["state"], "collected": h["collected"], "array": arr,
            "started_epoch": NOW - h["age_days"] * 86400 - 60, "finished_epoch": NOW - h["age_days"] * 86400}


@settings(max_examples=400, deadline=None)
@given(held=st.fixed_dictionaries(dict((m, member) for m in MEMBERS)), days=st.integers(1, 14))
def test_the_earlier_runs_jobs_are_attached_all_or_none(held, days):
    probes = dict((m, status(m, held[m])) for m in MEMBERS)
    run_id, why = array_start.whole_array(SPECS, probes, now=NOW, uncollected_days=days)
    jobs = [h for h in held.values() if h is not None]
    usable = len(jobs) == len(MEMBERS) and len({h["run"] for h in jobs}) == 1 and all(
        h["same_array"] and h["started"] and not h["collected"] and not h["failover"]
        and (h["state"] == "running" or (h["state"] == "done" and h["age_days"] <= days)) for h in jobs)
    assert (run_id is not None) == usable, (run_id, why)
    if usable:
        assert run_id == jobs[0]["run"] and "run %s" % run_id in why
    elif jobs:
        # cleared, saying why in words that name a member or the runs
        assert why.startswith("an array is attached whole or not at all: ") and (
            any(m in why for m in MEMBERS) or "runs" in why or "failover" in why), why
    else:
        assert why is None


def test_a_probe_is_kept_small_and_read_back_per_member(tmp_path):
    adir = str(tmp_path)
    job = status("fq1", {"run": "killed", "state": "running", "same_array": True, "started": True,
                         "collected": False, "age_days": 0, "failover": False})
    job["results"] = [{"bench": {"x": 1}}]
    job["array"]["steps"] = [{"index": 1, "result": {"bench": {}}}]
    array_start.write_previous(adir, "fq1", job)
    array_start.write_previous(adir, "fq2", None)
    got = array_start.read_previous(adir, MEMBERS)
    # fq3 was never probed (unreachable): absent, not "no job"
    assert sorted(got) == ["fq1", "fq2"] and got["fq2"] is None
    assert got["fq1"]["results"] is None and got["fq1"]["array"]["steps"] is None
    assert got["fq1"]["array"]["start"] == job["array"]["start"] and got["fq1"]["run_id"] == "killed"
    # a member never probed makes the array not attachable
    assert array_start.whole_array(SPECS, got, now=NOW)[0] is None
