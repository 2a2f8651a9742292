"""The next run finds the host record a killed controller stored and never reported
(plugin_utils/judge/resume.py), and the host's start takes it only for the same plan with no
job left (module_utils/host/start.py ``resumes``): real files in a results directory."""
import json
import os
import time

from hypothesis import given, settings, strategies as st
import unitpaths  # noqa: F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.module_utils.host.start import resumes
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import resume

HOST = "db1"
FP = "f" * 64


def record(run_id, host=HOST, state="done", fingerprint=FP, error=None):
    job = {"run_id": run_id, "pid": 4242, "state": state, "started_epoch": 1.0e9, "finished_epoch": 1.0e9 + 40,
           "fingerprint": fingerprint}
    return {"host": host, "run_id": run_id, "verdict": "PASS", "error": error, "job": job, "warnings": [],
            "results_file": "/elsewhere/%s/%s.json" % (run_id, host)}


def store(root, run_id, rec, age_days=0.0, reported=False, taken=False):
    directory = os.path.join(root, run_id)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, rec["host"] + ".json")
    with open(path, "w") as fh:
        json.dump(rec, fh)
    when = time.time() - age_days * 86400
    os.utime(path, (when, when))
    if reported:
        with open(os.path.join(directory, resume.REPORT), "w") as fh:
            fh.write("{}")
    if taken:
        resume.mark_taken(path, "someone")
    return path


@settings(max_examples=60, deadline=None)
@given(reported=st.booleans(), taken=st.booleans(), state=st.sampled_from(["done", "stopped", "died", "running"]),
       fingerprint=st.sampled_from([FP, None]), error=st.sampled_from([None, {"task": "t", "msg": "m"}]),
       age_days=st.sampled_from([0.0, 6.5, 7.5]), same_run=st.booleans(), other_host=st.booleans())
def test_a_record_is_found_exactly_when_its_run_died_before_its_report_and_it_measured_to_the_end(
        tmp_path_factory, reported, taken, state, fingerprint, error, age_days, same_run, other_host):
    root = str(tmp_path_factory.mktemp("results"))
    rec = record("killed", host="db2" if other_host else HOST, state=state, fingerprint=fingerprint, error=error)
    path = store(root, "killed", rec, age_days=age_days, reported=reported, taken=taken)
    got = resume.unfinished_record(root, "killed" if same_run else "now", HOST, max_age_days=7)
    wanted = (not reported and not taken and state == "done" and fingerprint and error is None and age_days < 7
              and not same_run and not other_host)
    assert (got is not None) == bool(wanted)
    if wanted:
        assert got == (path, rec)


def test_the_newest_unreported_record_wins_and_a_taken_one_is_found_no_more(tmp_path):
    root = str(tmp_path)
    store(root, "older", record("older"), age_days=2)
    newest = store(root, "newer", record("newer"), age_days=1)
    store(root, "reported", record("reported"), reported=True)
    path, rec = resume.unfinished_record(root, "now", HOST)
    assert (path, rec["run_id"]) == (newest, "newer")
    resume.mark_taken(path, "now")
    assert oct(os.stat(path + resume.TAKEN).st_mode & 0o777) == "0o600"
    assert resume.unfinished_record(root, "now", HOST)[1]["run_id"] == "older"
    assert resume.unfinished_record(os.path.join(root, "missing"), "now", HOST) is None
    # a dot directory of the results is no run's (the power-cut test's witnesses), whatever it holds
    resume.mark_taken(resume.unfinished_record(root, "now", HOST)[0], "now")
    store(root, ".durability", record("hidden"))
    assert resume.unfinished_record(root, "now", HOST) is None


def test_the_resumed_record_is_this_runs_and_says_where_it_came_from():
    rec = record("killed")
    out = resume.resumed(rec, {"run_id": "now", "results_dir": "/r", "slice": None}, "collected from run killed")
    assert (out["run_id"], out["results_file"]) == ("now", "/r/now/db1.json")
    assert out["collected_from"] == {k: rec["job"][k] for k in resume.JOB_KEYS}
    assert out["warnings"] == ["collected from run killed"] and rec["warnings"] == []
    assert out["verdict"] == rec["verdict"] and out["job"] == rec["job"]


def test_job_of_keeps_the_fingerprint_and_needs_a_job():
    status = {"run_id": "r", "pid": 7, "state": "done", "started_epoch": 1, "finished_epoch": 2, "fingerprint": FP,
              "results": [1, 2]}
    assert resume.job_of(status) == {"run_id": "r", "pid": 7, "state": "done", "started_epoch": 1,
                                     "finished_epoch": 2, "fingerprint": FP}
    assert resume.job_of(None) is None and resume.job_of({"state": "done"}) is None


@given(previous=st.sampled_from([None, {"run_id": "killed", "pid": 1}]),
       given_fp=st.sampled_from([FP, "0" * 64, None]), run_id=st.sampled_from(["killed", "", None]))
def test_the_start_resumes_only_with_no_job_left_and_the_same_plan(previous, given_fp, run_id):
    ask = {"run_id": run_id, "fingerprint": given_fp}
    assert resumes(previous, ask, FP) == (previous is None and bool(run_id) and given_fp == FP)
    assert resumes(None, None, FP) is False


def test_a_taken_record_is_in_the_history_of_the_run_that_took_it_only(tmp_path):
    """The compliance history (history/store.py) counts a measurement once: the killed run's
    record, once a later run reported it as its own, is not a run of the host's history."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import store as history

    def full(run_id):
        rec = dict(record(run_id), schema_version=1, workloads=[], profile="quick")
        return rec
    root = str(tmp_path)
    path = store(root, "20261101T000000Z", full("20261101T000000Z"), age_days=1)
    assert [s["run_id"] for s in history.host_history(root, HOST)] == ["20261101T000000Z"]
    resume.mark_taken(path, "20261102T000000Z")
    assert history.host_history(root, HOST) == []
