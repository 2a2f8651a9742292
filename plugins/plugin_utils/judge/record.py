# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's record: judged, assembled and stored once, on the controller, by the action that
receives the job's results (``plugins/action/qualify_host.py``).

Before, the role did this with a task per step and per host (diagnostics, judge,
record, results directory, JSON copy, set_stats, verdict line): three local module runs
and seven task events per host. Now the action calls :func:`judged` and :func:`store` in
the worker that already holds the results; the record's shape is docs/contracts.md
section 6, unchanged.
"""

import json
import os
import shutil
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.errors import filter_errors
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.diagnose import diagnose_checked
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.device import collector_devices

RECORD_SCHEMA_VERSION = 1   # the host record (docs/contracts.md section 6)


def slice_of(host_vars):
    """The host's slice of an AWX sliced job (or of several controllers given ``--limit`` and
    ``fleetqual_slice_number``): ``{number, count, job}``, None outside one."""
    number = host_vars.get("fleetqual_slice_number")
    if number is None:
        number = host_vars.get("awx_job_slice_number")
    if number is None:
        return None
    count = host_vars.get("fleetqual_slice_count")
    if count is None:
        count = host_vars.get("awx_job_slice_count")
    return {"number": int(number), "count": count, "job": host_vars.get("awx_job_id")}


def judged(records, plan, thresholds, latency_bound_ms, error=None, drives=None, kernel=None, kernel_log=None,
           drives_after=None):
    """``(diagnostics, judgement)`` of a host's workload records: the role's filters
    ``fleetqual.storage.diagnostics`` and ``fleetqual.storage.judge``, the same code.
    ``kernel``: the job's kernel section, ``kernel_log``: ``fleetqual_kernel_log``
    (docs/kernel-log.md); ``drives_after``: the drives read again after a burn-in
    (docs/integrity.md)."""
    diagnostics = filter_errors("diagnostics", diagnose_checked)(records, latency_bound_ms=latency_bound_ms,
                                                                 drives=drives)
    extra = {"kernel": kernel, "kernel_log": kernel_log} if kernel is not None else {}
    if drives_after is not None:
        extra["drives_after"] = drives_after
    judgement = filter_errors("judge", judge)(records, thresholds, expected_ids=plan, error=error, diagnostics=diagnostics,
                                              drives=drives, **extra)
    return diagnostics, judgement


def assemble(host, inputs, started, records, diagnostics, judgement, error=None, array_run=None, kernel=None,
             job=None):
    """The host record (docs/contracts.md section 6).

    ``inputs``: ``{run_id, profile, groups, test_dir, drift, retention, results_dir, slice}``
    (the role's variables); ``started``: the start's result (facts, preflight, targets,
    drives; ``{}`` when the host failed before it); ``job``: the job that measured it
    (:func:`resume.job_of` of its last status)."""
    facts = (started or {}).get("facts") or {}
    devices = collector_devices(records)
    models = facts.get("device_models") or {}
    disk_model = next((models[d] for d in devices if models.get(d)), None)
    preflight = (started or {}).get("preflight") or {}
    drives = (started or {}).get("drives")
    results_path = os.path.join(inputs["results_dir"], inputs["run_id"])
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "host": host,
        "run_id": inputs["run_id"],
        "profile": inputs["profile"],
        # "custom" when the matrix was the user's (fleetqual_matrix): the profile keeps its name and its rules
        "matrix": inputs.get("matrix"),
        "groups": list(inputs.get("groups") or []),
        "facts": {
            "architecture": facts.get("architecture"),
            "product_name": facts.get("product_name"),
            "disk_model": disk_model,
            "memtotal_mb": facts.get("memtotal_mb"),
            "kernel": facts.get("kernel"),
            "processor_vcpus": facts.get("processor_vcpus"),
        },
        "test_dir": inputs["test_dir"],
        "device": {
            "filesystem": preflight.get("filesystem"),
            "mount_point": preflight.get("mount_point"),
            "devices": devices,
        },
        "workloads": list(records or []),
        "verdict": judgement["verdict"],
        "reasons": judgement["reasons"],
        "checks": judgement["checks"],
        "warnings": judgement.get("warnings") or [],
        "slice": inputs.get("slice"),
        # resolved targets [{name, kind: path|device, path|device, serial}]; [] = the fleetqual_test_dir shorthand
        "targets": list((started or {}).get("targets") or []),
        # the drives module's drives (docs/contracts.md section 7); null without an inventory
        "drives": drives.get("drives") if isinstance(drives, dict) else None,
        "diagnostics": diagnostics,
        "error": error,
        # the previous run's job found in fleetqual_test_dir by the preflight
        "previous_job": preflight.get("previous_job"),
        # the job that measured the host: {run_id, pid, state, started_epoch, finished_epoch,
        # fingerprint}; how the next run knows a record its killed controller stored (judge/resume.py)
        "job": job,
        # the kernel's word on the drives: the job's kernel log section (module_utils/collect/kmsg.py,
        # docs/kernel-log.md); null when no job ran or its status carried none
        "kernel": kernel,
        # array mode: this host's part of its array's lock-step run; null outside one
        "array_run": array_run,
        # compliance: read by the report (history.host_drift, retention.fleet_policy)
        "drift": inputs.get("drift"),
        "retention": inputs.get("retention"),
        "results_file": os.path.join(results_path, host + ".json"),
    }


def store(record, keep_replaced=True):
    """Write the record as ``<results>/<run_id>/<host>.json`` (mode 0600, atomically; the
    directory 0700). A re-run with the same run id replaces it and keeps the replaced one
    beside it as ``<host>.json.<pid>.<date>~``, which the fleet report does not read;
    ``keep_replaced=False`` replaces this run's own earlier store (the record stored before
    the cleanup, judged again after it) without a copy."""
    path = record["results_file"]
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    if keep_replaced and os.path.exists(path):
        shutil.copy2(path, "%s.%d.%s~" % (path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S")))
    write_atomic(path, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n", mode=0o600)
    return path
