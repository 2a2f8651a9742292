# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Exact fleet latency percentiles (controller side, pure Python): each workload's latency
histogram (``latency_histogram``) and their sum per group and workload id
(``HistogramAccumulator``), from which fleet.json's ``latency`` section is computed. The
bucket arithmetic is plugin_utils/common/histogram.py's."""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import histogram as histmod
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key


def latency_histogram(row, spec):
    """{op, bits, buckets} of a workload's latency op, None when the record has none or the
    workload had errors / was interrupted."""
    if row["errors"] or row["interrupted"]:
        return None
    op = row["latency_op"]
    h = histmod.workload_histogram(spec, op) if op else None
    if not h:
        return None
    # flat [index, count, index, count, ...]: a stored entry parses faster than pairs
    return {"op": op, "bits": int(h.get("sub_bucket_bits", histmod.DEFAULT_BITS)),
            "buckets": [x for pair in h["buckets"] for x in pair]}


class HistogramAccumulator:
    """Exact fleet latency percentiles: merges the latency histogram of every workload
    (plugin_utils/common/histogram.py), per group and workload id; the fleet's are the sum of
    its groups'."""

    def __init__(self):
        self.groups = {}     # (group, wid) -> {"op", "bits", "hosts", "buckets": {idx: count}, "mismatch"}

    def add_host(self, group, histograms, sign=1):
        """Add (sign -1: take away again) one host's {wid: {op, bits, buckets}}."""
        for key, h in (histograms or {}).items():
            self._add(group, h.get("workload") or key, h["op"], h["bits"], h["buckets"], sign, 1)

    def _add(self, group, wid, op, bits, flat_buckets, sign, hosts):
        key = (group, wid)
        slot = self.groups.get(key)
        if slot is None:
            slot = self.groups[key] = {"op": op, "bits": bits, "hosts": 0, "buckets": {}, "mismatch": False}
        if slot["bits"] != bits:
            slot["mismatch"] = True
            return
        acc = slot["buckets"]
        get = acc.get
        flat = iter(flat_buckets)
        for idx, cnt in zip(flat, flat):
            acc[idx] = get(idx, 0) + sign * cnt
        slot["hosts"] += sign * hosts

    def state(self):
        """JSON-able content (EntryWriter's .sum file)."""
        return [[g, wid, slot["op"], slot["bits"], slot["hosts"], slot["mismatch"],
                 [x for idx in sorted(slot["buckets"]) for x in (idx, slot["buckets"][idx])]]
                for (g, wid), slot in self.groups.items()]

    def add_state(self, state):
        for g, wid, op, bits, hosts, mismatch, flat in state:
            self._add(g, wid, op, bits, flat, 1, hosts)
            if mismatch:
                self.groups[(g, wid)]["mismatch"] = True

    @staticmethod
    def _summary(slot):
        pairs = sorted((i, c) for i, c in slot["buckets"].items() if c)
        out = {"latency_op": slot["op"], "hosts": slot["hosts"], "count": sum(c for _idx, c in pairs)}
        for pct, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
            v = histmod.percentile(pairs, p, slot["bits"])
            out["%s_ms" % pct] = None if v is None else round(v / 1e6, 6)
        if slot["mismatch"]:
            out["note"] = "histograms with other sub_bucket_bits left out"
        return out

    def result(self):
        fleet = {}
        for (_g, wid), slot in self.groups.items():
            f = fleet.get(wid)
            if f is None:
                f = fleet[wid] = {"op": slot["op"], "bits": slot["bits"], "hosts": 0, "buckets": {},
                                  "mismatch": slot["mismatch"]}
            if f["bits"] != slot["bits"]:
                f["mismatch"] = True
                continue
            acc = f["buckets"]
            for idx, cnt in slot["buckets"].items():
                acc[idx] = acc.get(idx, 0) + cnt
            f["hosts"] += slot["hosts"]
            f["mismatch"] = f["mismatch"] or slot["mismatch"]
        return {"fleet": [dict(workload=wid, **self._summary(fleet[wid])) for wid in sorted(fleet)],
                "groups": [dict(group=g, workload=wid, **self._summary(slot))
                           for (g, wid), slot in sorted(self.groups.items(),
                                                        key=lambda kv: (natural_key(kv[0][0]), kv[0][1]))]}
