"""A host's record that a killed controller stored, found again by the next run.

A run stores each host's record (``<results>/<run_id>/<host>.json``, :func:`record.store`)
before its cleanup removes the job from the host, and writes its fleet report
(``fleet.json``) after every host. A controller that dies in between (SIGKILL, an evicted AWX
pod) leaves records of hosts whose jobs are gone: the same command again would measure those
hosts anew. Instead the next run's start looks here for such a record of the host: stored by
another run that wrote no fleet report, measured to its end (its job ``done``, no error),
within ``fleetqual_uncollected_days``, not taken by a run since. The host's start module
compares the record's plan fingerprint with the plan it makes now and, when they are equal and
no job is left in the test directory, starts nothing: the record is this run's result for the
host, ``collected_from`` the killed run (docs/operations.md, "The same command again")."""
from __future__ import annotations

import copy
import json
import os
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.run_dir import REPORT, TAKEN
JOB_KEYS = ("run_id", "pid", "state", "started_epoch", "finished_epoch")


def job_of(status):
    """The record's ``job``: ``{run_id, pid, state, started_epoch, finished_epoch, fingerprint}``
    of the job status the host was measured by (its last status read), or None."""
    if not isinstance(status, dict) or not status.get("pid"):
        return None
    out = {k: status.get(k) for k in JOB_KEYS}
    out["fingerprint"] = status.get("fingerprint")
    return out


def _candidate(path, run_id, host, since):
    try:
        st = os.stat(path)
        if st.st_mtime < since or os.path.exists(path + TAKEN):
            return None
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    job = record.get("job") if isinstance(record, dict) else None
    if not (isinstance(job, dict) and job.get("state") == "done" and job.get("fingerprint")):
        return None
    if record.get("host") != host or record.get("run_id") == run_id or record.get("error") is not None:
        return None
    return st.st_mtime, path, record


def unfinished_record(results_dir, run_id, host, max_age_days=7, now=None):
    """``(path, record)``: the newest record of ``host`` in ``results_dir`` that a run other than
    ``run_id`` stored and did not report (no ``fleet.json`` beside it), whose job finished its
    plan (``job.state`` done, a fingerprint, no error), stored within ``max_age_days`` and not
    taken by a later run; else None."""
    if not results_dir or not os.path.isdir(results_dir):
        return None
    since = (time.time() if now is None else now) - float(max_age_days) * 86400
    found = []
    try:
        entries = list(os.scandir(results_dir))
    except OSError:
        return None
    for entry in entries:
        # (a dot directory is no run's: the power-cut test's witnesses, docs/durability.md)
        if entry.name == run_id or entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        if os.path.exists(os.path.join(entry.path, REPORT)):
            continue
        got = _candidate(os.path.join(entry.path, host + ".json"), run_id, host, since)
        if got:
            found.append(got)
    if not found:
        return None
    _mtime, path, record = max(found, key=lambda c: c[0])
    return path, record


def resumed(record, inputs, note):
    """This run's record for the host: the killed run's ``record`` with this run's identity
    (``inputs``: run_id, results_dir, slice), ``collected_from`` its job and ``note`` (the
    warning that says so) added."""
    out = copy.deepcopy(record)
    out["run_id"] = inputs["run_id"]
    out["slice"] = inputs.get("slice")
    out["results_file"] = os.path.join(inputs["results_dir"], inputs["run_id"], record["host"] + ".json")
    out["collected_from"] = {k: (record.get("job") or {}).get(k) for k in JOB_KEYS}
    out["warnings"] = list(out.get("warnings") or []) + [note]
    return out


def mark_taken(path, run_id):
    """Note beside the killed run's record that run ``run_id`` reported it (the run after that
    measures anew)."""
    write_atomic(path + TAKEN, json.dumps({"run_id": run_id, "epoch": round(time.time(), 3)}) + "\n", mode=0o600)
