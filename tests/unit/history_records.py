# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host records as the role stores them (docs/contracts.md section 6), for the history,
drift and retention tests: the workloads are the real controller fixtures turned into
records by metrics.workload_record, the drives the drives module's shape (section 7)."""
from __future__ import annotations

import functools
import json
import os

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_record

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "controller")
IDS = ("cache-rndrd-t1", "over_cache-rndrd-t64", "over_cache-rndwr-t64")


def _fixture_record(wid):
    with open(os.path.join(FIX, "nvme_%s.json" % wid), encoding="utf-8") as f:
        doc = json.load(f)
    return workload_record(doc, doc.pop("result"))


@functools.lru_cache(maxsize=1)
def _records():
    """The fixture records, each as its JSON text: a record is a fresh copy of one, made by
    json's C decoder (copy.deepcopy of these records was a third of the history tests' CPU)."""
    return [json.dumps(_fixture_record(wid)) for wid in IDS]


def drive(name="nvme0n1", serial="S64GNE0R600001", firmware="GDC5602Q", size=1920383410176, used=2,
          media_errors=0, reallocated=None, pending=None):
    slot = "/dev/disk/by-path/pci-0000:01:00.0-nvme-1" if name == "nvme0n1" else "/dev/disk/by-path/%s" % name
    return {"name": name, "path": "/dev/%s" % name, "by_path": [slot],
            "model": "SAMSUNG MZQL21T9HCJR-00A07", "serial": serial, "firmware": firmware, "size_bytes": size,
            "transport": "nvme", "targets": [],
            "health": {"collected": True, "tool": "smartctl", "reason": None, "passed": True, "critical_warning": 0,
                       "media_errors": media_errors, "percentage_used": used, "available_spare": 100,
                       "reallocated_sectors": reallocated, "pending_sectors": pending, "problems": []}}


def make_record(host, run_id, verdict="PASS", iops=1.0, p99=1.0, drives=None, profile="compliance",
                block_size=None, slim=False):
    """A host record; every workload's IOPS times ``iops``, its p99 times ``p99``; ``slim``:
    without the module results (iostat samples, the benchmark's JSON), metrics kept."""
    wls = []
    for base in _records():
        w = json.loads(base)
        if slim:
            w["result"] = {}
        m = w["metrics"]
        if m.get("iops"):
            m["iops"] = m["iops"] * iops
        if m.get("lat_p99_ms"):
            m["lat_p99_ms"] = m["lat_p99_ms"] * p99
        if block_size:
            w["block_size"] = block_size
        wls.append(w)
    return {
        "schema_version": 1, "host": host, "run_id": run_id, "profile": profile, "groups": ["db"],
        "facts": {"architecture": "x86_64"}, "test_dir": "/var/tmp/fleetqual",
        "device": {"devices": ["nvme0n1"], "filesystem": "ext4"}, "workloads": wls, "verdict": verdict,
        "reasons": [] if verdict == "PASS" else ["cache-rndrd-t1: iops below 5000"], "checks": [], "warnings": [],
        "diagnostics": {}, "slice": None, "targets": [], "error": None,
        "drives": [drive()] if drives is None else drives,
    }


def store(root, rec):
    """What store.yml does: <root>/<run_id>/<host>.json, the same JSON document, without
    to_nice_json's indentation: json's C encoder writes no indentation, and the pure-Python
    one that indent= needs was half of the history tests' CPU (the readers parse JSON, never
    its layout)."""
    directory = os.path.join(str(root), rec["run_id"])
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s.json" % rec["host"])
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    return path


def run_id(day, hour=2):
    """Nightly run ids: day 0 is 2026-10-01."""
    import datetime
    t = datetime.datetime(2026, 10, 1, hour, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=day)
    return t.strftime("%Y%m%dT%H%M%SZ")
