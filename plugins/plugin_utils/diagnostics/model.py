# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model every diagnostic shares (``diagnose.py`` and ``sweep.py`` beside it read it):
the names, titles, statuses, conclusions and default thresholds of the diagnostics, the
shape of an entry (``diag_entry``, ``na_entry``) and the workload view they read (``WorkloadView``, one
record with its ``metrics``). Pure Python, no other diagnostics module imported."""

from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import dig
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import record_metrics

NAMES = ("cache_proof", "write_amplification", "write_serialization", "write_cache",
         "tipping_point", "bounded_max", "db_pattern", "readahead", "stability")

TITLES = {
    "cache_proof": "cache proof",
    "write_amplification": "write amplification",
    "write_serialization": "O_DIRECT write serialization",
    "write_cache": "write cache",
    "tipping_point": "tipping point",
    "bounded_max": "latency-bounded maximum",
    "db_pattern": "database pattern",
    "readahead": "read-ahead",
    "stability": "stability",
}

STATUSES = ("pass", "warn", "fail", "unproven", "info", "n/a")

CONCLUSIONS = {
    "cache_proof": ("disk", "cache", "unproven", "n/a"),
    "write_amplification": ("amplified", "normal", "deferred", "unproven", "n/a"),
    "write_serialization": ("serialized", "parallel", "n/a"),
    "write_cache": ("write-back", "write-through", "unclear", "n/a"),
    "tipping_point": ("within_bound", "exceeds_bound", "n/a"),
    "bounded_max": ("within_bound", "exceeds_bound", "n/a"),
    "db_pattern": ("measured", "n/a"),
    "readahead": ("significant", "small", "unproven", "n/a"),
    "stability": ("slowed", "steady", "n/a"),
}

DEFAULTS = {
    # cache proof: device bytes (and requests) must reach this share of the benchmark's
    "cache_proof_min_ratio": 0.8,
    # write amplification: device bytes / benchmark bytes
    "amplified_ratio": 2.0,
    "deferred_ratio": 0.5,
    # write serialization: one-file IOPS / many-files IOPS below this = serialized
    "serial_ratio": 0.5,
    # write cache (single-thread O_DIRECT random write p50 latency)
    "wb_fast_ms": 0.2,          # answered at or under this: a cache acknowledged it
    "wt_slow_ms": 1.0,          # at or over this: media latency
    "wb_set_ratio": 0.5,        # cache-set latency / over-cache latency at or under this: cache
    "wb_thread_gain": 2.0,      # IOPS(most threads) / IOPS(1 thread) at or under this: barely gains
    # tipping point / bounded maximum
    "latency_bound_ms": 50.0,
    "sweep_min_steps": 3,
    "saturation_gain": 0.10,    # IOPS rising more than 10 % past 100 %util: a parallel device
    "knee_share": 0.9,          # the knee: fewest threads reaching 90 % of the sweep's best IOPS
    "util_full_pct": 99.0,
    "little_tolerance": 0.5,    # |aqu-sz / (IOPS x await) - 1| above this: figures disagree
    # read-ahead: buffered MiB/s / O_DIRECT MiB/s at or over this = significant
    "readahead_ratio": 1.5,
    # stability: last third of a run's intervals this share below its first third = slowed
    "stability_drop": 0.2,
}

OVER_CACHE_LABELS = ("over_cache",)


# --------------------------------------------------------------------------- helpers


def diag_entry(status, conclusion, sentence, evidence=None, workloads=None):
    return {"status": status, "conclusion": conclusion, "sentence": sentence,
            "evidence": evidence or {}, "workloads": list(workloads or [])}


def _cap(text):
    return text[:1].upper() + text[1:]


def na_entry(name, why):
    return diag_entry("n/a", "n/a", "%s: not measured (%s)." % (_cap(TITLES[name]), why))


class WorkloadView:
    """A workload record with its metrics (the only figures diagnostics read)."""

    __slots__ = ("rec", "id", "m", "mode", "threads", "direct", "block", "file_num", "total", "label",
                 "ok", "fkey")

    def __init__(self, rec, index):
        self.rec = rec
        self.id = str(rec.get("id") or "workload[%d]" % index)
        self.m = record_metrics(rec)
        self.mode = rec.get("mode")
        self.threads = as_number(rec.get("threads")) or as_number((self.m.get("concurrency") or {}).get("threads"))
        self.direct = rec.get("direct")
        self.block = as_number(rec.get("block_size"))
        self.file_num = as_number(rec.get("file_num"))
        self.total = as_number(rec.get("total_size"))
        self.label = rec.get("workload")
        result = rec.get("result")
        self.ok = (not self.m.get("errors")) and not self.m.get("interrupted") and bool(self.m.get("measured")) \
            and not (isinstance(result, dict) and result.get("failed"))
        self.fkey = None

    @property
    def measured(self):
        return bool(self.m.get("measured"))

    def get(self, key):
        return as_number(self.m.get(key))

    def kb_s(self, op):
        """Benchmark KiB/s of an op (its MiB/s, else its bytes over the run)."""
        mib = self.get("%s_mibps" % op)
        if mib is not None:
            return mib * 1024.0
        nbytes, el = self.get("bench_%s_bytes" % op), self.get("elapsed_s")
        if nbytes is not None and el:
            return nbytes / el / 1024.0
        return None

    def has_device(self):
        return any(self.get(k) is not None for k in ("dev_r_s", "dev_w_s", "dev_rkb_s", "dev_wkb_s"))

    def over_cache(self):
        return self.rec.get("working_set") == "over_cache" or self.label in OVER_CACHE_LABELS

    def cache_set(self):
        return self.rec.get("working_set") == "cache" or self.label == "cache"

    def device(self):
        return self.m.get("device")

    def no_device_reason(self):
        source = dig(self.rec, "result", "collector", "source") or "none"
        reason = dig(self.rec, "result", "collector", "reason")
        fs = self.m.get("filesystem")
        text = "collector %s" % source
        if fs:
            text += ", filesystem %s" % fs
        if reason:
            text += ": %s" % reason
        if self.m.get("device_note"):
            text += "; %s" % self.m["device_note"]
        return text

    def p(self, op, pct):
        return self.get("%s_%s_ms" % (op, pct))


def workload_views(workloads):
    out = []
    for i, rec in enumerate(workloads or []):
        if isinstance(rec, dict):
            out.append(WorkloadView(rec, i))
    return out


def diag_options(options):
    o = dict(DEFAULTS)
    for k, v in (options or {}).items():
        if k in DEFAULTS and is_number(v):
            o[k] = float(v)
    return o
