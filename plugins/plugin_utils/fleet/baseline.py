# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet against its past (controller side, pure Python): an earlier fleet.json as the
baseline (``load_baseline``), each workload's change against it and the regressions
(``baseline_deltas``), and the run's lines of ``history.jsonl`` (``append_history``)."""

from __future__ import annotations

import json
import os

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import SCHEMA, SCHEMA_VERSION
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.rows import row_key
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.outliers import JUDGED_METRICS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key, rounded
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float as num


DELTA_METRICS = {"iops": "higher", "mibps": "higher", "p99_ms": "lower"}


def load_baseline(path):
    """Read an earlier fleet.json (a file, or a run directory holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "fleet.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("hosts"), list):
        raise ValueError("%s is not a fleetqual fleet.json (schema %r)" % (path, SCHEMA))
    if int(data.get("schema_version") or 0) > SCHEMA_VERSION:
        raise ValueError("%s has schema_version %s, newer than this reader (%s)"
                         % (path, data.get("schema_version"), SCHEMA_VERSION))
    data["_path"] = path
    return data


def baseline_deltas(hosts, baseline, tolerance_pct=10.0):
    """Per host and workload: change of iops, mibps, p99_ms against the baseline.

    A regression is an IOPS drop or p99 rise beyond ``tolerance_pct``."""
    base = {}
    for bh in baseline.get("hosts") or []:
        if not isinstance(bh, dict):
            continue
        for bw in bh.get("workloads") or []:
            if isinstance(bw, dict) and bw.get("id"):
                base[(bh.get("host"), row_key(bw))] = bw
    base_hosts = {bh.get("host") for bh in baseline.get("hosts") or [] if isinstance(bh, dict)}
    regressions = []
    compared = 0
    for h in hosts:
        for w in h["workloads"]:
            bw = base.get((h["host"], row_key(w)))
            if bw is None:
                w["baseline"] = {"status": "new"}
                continue
            compared += 1
            deltas = {}
            for metric, better in DELTA_METRICS.items():
                cur, old = w.get(metric), num(bw.get(metric))
                pct = None
                if cur is not None and old:
                    pct = (cur - old) / abs(old) * 100.0
                worse = None
                if pct is not None:
                    worse = -pct if better == "higher" else pct
                regressed = bool(worse is not None and worse > tolerance_pct and metric in JUDGED_METRICS)
                deltas[metric] = {"baseline": rounded(old), "current": rounded(cur),
                                  "delta_pct": rounded(pct, 1), "regression": regressed}
                if regressed:
                    r = {"host": h["host"], "workload": w["id"], "target": w.get("target"), "metric": metric,
                         "baseline": rounded(old), "current": rounded(cur), "delta_pct": rounded(pct, 1),
                         "tolerance_pct": tolerance_pct}
                    r["text"] = ("%s %s %s -> %s (%+.1f %%, tolerance %g %%)"
                                 % (row_key(w), metric, fmt_num(old), fmt_num(cur), pct, tolerance_pct))
                    regressions.append(r)
                    h["regressions"].append(r)
            w["baseline"] = {"status": "compared", "deltas": deltas}
    current = {h["host"] for h in hosts}
    return {
        "path": baseline.get("_path"),
        "run_id": baseline.get("run_id"),
        "generated_at": baseline.get("generated_at"),
        "tolerance_pct": tolerance_pct,
        "compared_workloads": compared,
        "missing_hosts": sorted((str(x) for x in base_hosts - current if x), key=natural_key),
        "new_hosts": sorted((h["host"] for h in hosts if h["host"] not in base_hosts and h["workloads"]),
                            key=natural_key),
        "regressions": regressions,
    }


def history_lines(fleet):
    out = []
    for h in fleet["hosts"]:
        out.append({
            "run_id": fleet["run_id"], "generated_at": fleet["generated_at"], "host": h["host"],
            "verdict": h["verdict"], "record_verdict": h["record_verdict"], "group": h["group"],
            "profile": h["profile"],
            "workloads": {row_key(w): {"iops": rounded(w["iops"], 2), "mibps": rounded(w["mibps"], 3),
                                       "p99_ms": rounded(w["p99_ms"]), "util_pct": rounded(w["util_pct"], 1)}
                          for w in h["workloads"]},
        })
    return out


def append_history(path, fleet):
    """Append one JSON line per host (a single write call, O_APPEND)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = "".join(json.dumps(line, sort_keys=True, allow_nan=False) + "\n" for line in history_lines(fleet))
    with open(path, "a", encoding="utf-8") as f:
        f.write(data)
    return path
