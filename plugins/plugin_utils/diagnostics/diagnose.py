# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Diagnostics that explain a disk, computed once from a host's workload records.

``diagnose(workloads, options=None)`` returns ``{name: entry}`` for every name of
:data:`NAMES`, each entry::

    status:     pass | warn | fail | unproven | info | n/a
    conclusion: one token of the diagnostic's vocabulary (CONCLUSIONS[name])
    sentence:   one plain sentence with the numbers (the report prints it)
    evidence:   {numbers the sentence is made of, the thresholds used}
    workloads:  [ids of the workloads it used]

``status`` is the same scale for every diagnostic: ``pass`` nothing to worry about,
``warn`` a finding a database operator should know, ``fail`` the measurement is not what
it claims (only ``cache_proof``), ``unproven`` the workloads ran but the evidence is
missing (no device statistics), ``info`` figures without a judgement, ``n/a`` the plan
has no workload for it. The judge turns a failed cache proof into a FAIL check of the
workload (always), and threshold rules of kind ``diagnostic`` test any entry
(``expect`` a status or conclusion, or ``metric`` over the entry); see docs/diagnostics.md.

Used by the role (filter ``fleetqual.storage.diagnostics`` in plugin_utils/judge/record.py, result stored
as the host record's ``diagnostics``), by the judge and by the fleet report. Reads only
each record's ``metrics`` (``plugin_utils/metrics/``, the one reader of the benchmark's JSON) and its
plan keys. Pure Python, never raises on odd input.

The names, defaults, entry shape and workload view are ``plugin_utils/diagnostics/model.py``; the
thread sweep, tipping point and bounded maximum (5, 6) are ``plugin_utils/diagnostics/sweep.py``. Both
are re-exported here.
"""

import math

from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import dig
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import fmt_k, fmt_ms, fmt_x
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import declared_write_cache
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import ratio
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stability import STABILITY_MIN_INTERVALS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.model import (
    DEFAULTS,
    NAMES,
    WorkloadView,
    diag_entry,
    na_entry,
    diag_options,
    workload_views,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import rounded
from ansible_collections.fleetqual.storage.plugins.plugin_utils.diagnostics.sweep import (
    sweep_bounded_max,
    sweep_tipping_point,
)


# --------------------------------------------------------------------------- 1. cache proof

def cache_proof_of(w, opts=None):
    """Per-workload cache proof of an over-cache read workload (None when not one)."""
    o = opts or DEFAULTS
    if not w.over_cache() or not (w.get("read_count") or 0) > 0:
        return None
    tol = o["cache_proof_min_ratio"]
    bench_rps, bench_kbs = w.get("read_iops"), w.kb_s("read")
    ev = {"bench_read_iops": rounded(bench_rps, 1), "bench_read_kb_s": rounded(bench_kbs, 1),
          "dev_r_s": None, "dev_rkb_s": None, "dev_rareq_sz_kb": None,
          "block_kb": rounded(w.block / 1024.0, 1) if w.block else None,
          "ops_ratio": None, "bytes_ratio": None, "min_ratio": tol, "direct": w.direct,
          "device": w.device(), "dev_source": w.m.get("dev_source")}
    if not w.has_device() or w.get("dev_r_s") is None and w.get("dev_rkb_s") is None:
        ev["reason"] = w.no_device_reason()
        return dict(status="unproven", conclusion="unproven", evidence=ev,
                    text="%s: unproven, no device statistics (%s)" % (w.id, ev["reason"]))
    dev_rs, dev_kbs = w.get("dev_r_s"), w.get("dev_rkb_s")
    ev.update(dev_r_s=rounded(dev_rs, 1), dev_rkb_s=rounded(dev_kbs, 1), dev_rareq_sz_kb=rounded(w.get("dev_rareq_sz_kb"), 2))
    ops_ratio, bytes_ratio = ratio(dev_rs, bench_rps), ratio(dev_kbs, bench_kbs)
    ev.update(ops_ratio=rounded(ops_ratio, 3), bytes_ratio=rounded(bytes_ratio, 3))
    # bytes decide (merging lowers r/s, not bytes); r/s alone only when bytes are unknown
    decisive = bytes_ratio if bytes_ratio is not None else ops_ratio
    if decisive is None:
        ev["reason"] = "the benchmark reported no read rate"
        return dict(status="unproven", conclusion="unproven", evidence=ev,
                    text="%s: unproven, no benchmark read rate" % w.id)
    if decisive < tol:
        text = ("%s: served from a cache, not the disk: device %s read %s kB/s (%s r/s) for the "
                "benchmark's %s kB/s (%s reads/s), %s < %s; its numbers are not disk numbers"
                % (w.id, ev["device"] or "?", fmt_k(dev_kbs), fmt_k(dev_rs), fmt_k(bench_kbs), fmt_k(bench_rps),
                   fmt_x(decisive), fmt_x(tol)))
        return dict(status="fail", conclusion="cache", evidence=ev, text=text)
    text = "%s: device read %s of the benchmark's bytes (%s of its reads" % (w.id, fmt_x(bytes_ratio), fmt_x(ops_ratio))
    if ops_ratio is not None and ops_ratio < tol:
        text += "; requests merged to %s kB" % fmt_num(ev["dev_rareq_sz_kb"])
    text += ")"
    return dict(status="pass", conclusion="disk", evidence=ev, text=text)


def _cache_proof(ws, o):
    name = "cache_proof"
    per = {}
    for w in ws:
        if not w.ok and not w.measured:
            continue
        p = cache_proof_of(w, o)
        if p is not None:
            per[w.id] = p
    if not per:
        return na_entry(name, "no over-cache read workload in the plan")
    failed = [wid for wid, p in per.items() if p["status"] == "fail"]
    unproven = [wid for wid, p in per.items() if p["status"] == "unproven"]
    ev = {"min_ratio": o["cache_proof_min_ratio"],
          "workloads": {wid: p["evidence"] for wid, p in per.items()},
          "failed": failed, "unproven": unproven}
    ratios = [p["evidence"]["bytes_ratio"] for p in per.values() if p["evidence"].get("bytes_ratio") is not None]
    ev["min_bytes_ratio"] = min(ratios) if ratios else None
    ev["checked"] = sum(1 for p in per.values() if p["evidence"].get("bytes_ratio") is not None)
    if failed:
        sentence = "Cache proof failed: %s." % per[failed[0]]["text"]
        if len(failed) > 1:
            sentence = sentence[:-1] + " (also %s)." % ", ".join(failed[1:])
        return diag_entry("fail", "cache", sentence, ev, list(per))
    if unproven and len(unproven) == len(per):
        return diag_entry("unproven", "unproven",
                          "Cache proof unproven: no device statistics for the over-cache reads (%s), so "
                          "nothing shows they reached the disk." % per[unproven[0]]["evidence"].get("reason"),
                          ev, list(per))
    checked = [p for p in per.values() if p["evidence"].get("bytes_ratio") is not None]
    worst = min(checked, key=lambda p: p["evidence"]["bytes_ratio"]) if checked else None
    worst_id = next((wid for wid, p in per.items() if p is worst), None)
    if worst is not None:
        sentence = ("Cache proof: the disk served the over-cache reads (device read >= %s of their bytes, "
                    "lowest in %s; %d workload%s checked, threshold %s)."
                    % (fmt_x(worst["evidence"]["bytes_ratio"]), worst_id, len(checked),
                       "" if len(checked) == 1 else "s", fmt_x(o["cache_proof_min_ratio"])))
    else:
        sentence = "Cache proof: the disk served the over-cache reads (r/s only)."
    if unproven:
        sentence = sentence[:-1] + "; unproven for %s (no device statistics)." % ", ".join(unproven)
        return diag_entry("unproven", "unproven", sentence, ev, list(per))
    return diag_entry("pass", "disk", sentence, ev, list(per))


# --------------------------------------------------------------------------- 2. write amplification

def _wamp_of(w, o):
    if not (w.get("write_count") or 0) > 0:
        return None
    bench_kbs, bench_ws = w.kb_s("write"), w.get("write_iops")
    ev = {"bench_write_kb_s": rounded(bench_kbs, 1), "bench_write_iops": rounded(bench_ws, 1),
          "fsync_per_sec": rounded(w.get("fsync_per_sec"), 1), "block_kb": rounded(w.block / 1024.0, 1) if w.block else None,
          "direct": w.direct, "dev_source": w.m.get("dev_source"),
          "dev_wkb_s": None, "dev_w_s": None, "dev_wareq_sz_kb": None,
          "bytes_ratio": None, "ops_ratio": None}
    if not w.has_device() or w.get("dev_wkb_s") is None:
        ev["reason"] = w.no_device_reason()
        ev["class"] = "unproven"
        return ev
    dev_kbs, dev_ws = w.get("dev_wkb_s"), w.get("dev_w_s")
    ev.update(dev_wkb_s=rounded(dev_kbs, 1), dev_w_s=rounded(dev_ws, 1), dev_wareq_sz_kb=rounded(w.get("dev_wareq_sz_kb"), 2),
              bytes_ratio=rounded(ratio(dev_kbs, bench_kbs), 3), ops_ratio=rounded(ratio(dev_ws, bench_ws), 3))
    br = ev["bytes_ratio"]
    if br is None:
        ev["class"] = "unproven"
    elif br >= o["amplified_ratio"]:
        ev["class"] = "amplified"
    elif br < o["deferred_ratio"]:
        ev["class"] = "deferred"
    else:
        ev["class"] = "normal"
    return ev


def _wamp_text(wid, ev):
    text = "in %s the device wrote %s the bytes (%s the writes" % (wid, fmt_x(ev["bytes_ratio"]), fmt_x(ev["ops_ratio"]))
    if ev.get("block_kb") is not None and ev.get("dev_wareq_sz_kb") is not None:
        text += "; %s kB requests became %s kB" % (fmt_num(ev["block_kb"]), fmt_num(ev["dev_wareq_sz_kb"]))
    return text + ")"


def _write_amplification(ws, o):
    name = "write_amplification"
    per = {}
    for w in ws:
        if w.measured:
            ev = _wamp_of(w, o)
            if ev is not None:
                per[w.id] = ev
    if not per:
        return na_entry(name, "no workload writes")
    measured = {wid: ev for wid, ev in per.items() if ev["bytes_ratio"] is not None}
    ev = {"amplified_ratio": o["amplified_ratio"], "deferred_ratio": o["deferred_ratio"], "workloads": per}
    if not measured:
        reason = next(iter(per.values())).get("reason")
        return diag_entry("unproven", "unproven", "Write amplification unknown: no device statistics (%s)." % reason,
                          ev, list(per))
    hi = max(measured, key=lambda k: measured[k]["bytes_ratio"])
    lo = min(measured, key=lambda k: measured[k]["bytes_ratio"])
    ev.update(max_ratio=measured[hi]["bytes_ratio"], max_workload=hi,
              min_ratio=measured[lo]["bytes_ratio"], min_workload=lo)
    cls = measured[hi]["class"]
    sentence = "Write amplification: %s" % _wamp_text(hi, measured[hi])
    if lo != hi:
        sentence += "; lowest %s in %s" % (fmt_x(measured[lo]["bytes_ratio"]), lo)
    if cls == "amplified":
        sentence += "; journal and metadata writes multiply small synced writes"
    elif cls == "deferred":
        sentence += "; the page cache held the writes back"
    sentence += " (device figures include any other I/O on the disk)."
    status = "warn" if cls == "amplified" else "info"
    return diag_entry(status, cls, sentence, ev, list(per))


# --------------------------------------------------------------------------- 3. write serialization

def _close(a, b, tol=0.01):
    return a is not None and b is not None and abs(a - b) <= tol * max(a, b)


def _serial_pairs(ws):
    cands = [w for w in ws if w.mode == "rndwr" and w.direct and w.ok and w.get("write_iops")]
    pairs = []
    for one in cands:
        if one.file_num != 1:
            continue
        for many in cands:
            if (many is not one and (many.file_num or 0) > 1 and many.threads == one.threads
                    and (many.threads or 0) > 1 and many.block == one.block and _close(many.total, one.total)):
                pairs.append((one, many))
    # prefer a pair of one label (the serial_probe pair), with equal fsync settings, then the most threads
    pairs.sort(key=lambda p: (p[0].label == p[1].label, p[0].label == "serial_probe",
                              p[0].rec.get("fsync_freq") == p[1].rec.get("fsync_freq"), p[0].threads or 0),
               reverse=True)
    return pairs


def _write_serialization(ws, o):
    name = "write_serialization"
    pairs = _serial_pairs(ws)
    if not pairs:
        return na_entry(name, "needs random O_DIRECT writes with several threads to 1 file and to many files "
                        "of the same total size (serial_probe pair)")
    one, many = pairs[0]
    a, b = one.get("write_iops"), many.get("write_iops")
    rate_ratio = ratio(a, b)
    ev = {"one_file_iops": rounded(a, 1), "many_files_iops": rounded(b, 1), "files": int(many.file_num),
          "threads": int(one.threads), "ratio": rounded(rate_ratio, 3), "serial_ratio": o["serial_ratio"],
          "one_file_p99_ms": rounded(one.p("write", "p99"), 4), "many_files_p99_ms": rounded(many.p("write", "p99"), 4)}
    head = ("O_DIRECT random writes with %d threads: %s IOPS to 1 file vs %s over %d files (%s"
            % (ev["threads"], fmt_k(a), fmt_k(b), ev["files"], fmt_x(rate_ratio)))
    if rate_ratio is not None and rate_ratio < o["serial_ratio"]:
        return diag_entry("warn", "serialized",
                          head + " < %s): the filesystem lets one direct write per file at a time; a database "
                          "with one big tablespace file will hit that ceiling." % fmt_x(o["serial_ratio"]),
                          ev, [one.id, many.id])
    return diag_entry("pass", "parallel", head + " >= %s): direct writes to one file run in parallel."
                      % fmt_x(o["serial_ratio"]), ev, [one.id, many.id])


# --------------------------------------------------------------------------- 4. write cache

def _pick(ws, pred, threads=None, most=False):
    c = [w for w in ws if w.ok and w.mode == "rndwr" and w.direct and pred(w) and w.get("write_count")]
    if threads is not None:
        c = [w for w in c if w.threads == threads]
    if not c:
        return None
    if most:
        return max(c, key=lambda w: w.threads or 0)
    return c[0]


def _drives_named(names, drives):
    """``{device name: its drive}`` of the device names that are drives of the inventory (a
    partition names its disk)."""
    out = {}
    for name in names:
        for d in drives:
            if name == d.get("name") or name in (d.get("partitions") or []):
                out[name] = d
                break
    return out


def cache_declaration(views, drives):
    """What the drives the write workloads ran on declare of their cache: ``(declared, by,
    sources, missing)``. ``declared`` is ``write-back`` / ``write-through`` when every device
    the workloads' device figures come from (``metrics.device``) is a drive of the inventory
    ``drives`` whose kernel declares one and all agree; else None and ``missing`` says why.
    ``by``: {drive name: the kernel's words}."""
    names = list(dict.fromkeys(n for w in views for n in str(w.device() or "").split(",") if n))
    if not isinstance(drives, list):
        return None, {}, [], "no drive inventory"
    if not names:
        return None, {}, [], "no device figures name the drive the writes reached"
    named = _drives_named(names, [d for d in drives if isinstance(d, dict)])
    strangers = [n for n in names if n not in named]
    if strangers:
        verb = "is" if len(strangers) == 1 else "are"
        return None, {}, [], "%s %s not a drive of the inventory" % (", ".join(strangers), verb)
    by = {d["name"]: d.get("write_cache") for d in named.values()}
    sources = sorted({d.get("write_cache_source") or "queue/write_cache" for d in named.values()
                      if declared_write_cache(d)})
    silent = [n for n, d in sorted(named.items()) if declared_write_cache(d) is None]
    if silent:
        return None, by, [], "the kernel declares no write cache for %s" % ", ".join(silent)
    modes = {declared_write_cache(d) for d in named.values()}
    if len(modes) > 1:
        return None, by, sources, "its drives declare different caches (%s)" % ", ".join(
            "%s %s" % (n, by[n]) for n in sorted(by))
    return modes.pop(), by, sources, None


def _timing_reading(lat, set_ratio, gain, o):
    """What the write latencies alone say: ``(reading, why)``; reading is ``write-back``,
    ``write-through``, ``probably write-back`` (more threads barely help: a guess) or
    ``unclear``; ``why`` the thresholds that decided it."""
    if lat is None:
        return "unclear", ""
    fast = lat <= o["wb_fast_ms"]
    much_faster = set_ratio is not None and set_ratio <= o["wb_set_ratio"]
    flat = gain is not None and gain <= o["wb_thread_gain"]
    if fast or much_faster:
        why = []
        if fast:
            why.append("p50 <= %s" % fmt_ms(o["wb_fast_ms"]))
        if much_faster:
            why.append("cache set <= %s of over-cache" % fmt_x(o["wb_set_ratio"]))
        if flat:
            why.append("threads gain <= %s" % fmt_x(o["wb_thread_gain"]))
        return "write-back", ", ".join(why)
    if lat >= o["wt_slow_ms"]:
        return "write-through", "p50 >= %s" % fmt_ms(o["wt_slow_ms"])
    if flat:
        return "probably write-back", "gain <= %s" % fmt_x(o["wb_thread_gain"])
    return "unclear", undecided(o)


def undecided(o):
    """The thresholds a latency between them falls short of."""
    return "write-back below %s or cache set <= %s, write-through from %s" % (
        fmt_ms(o["wb_fast_ms"]), fmt_x(o["wb_set_ratio"]), fmt_ms(o["wt_slow_ms"]))


TIMING_SAYS = {
    "write-back": "small writes are acknowledged before the media",
    "write-through": "writes wait for the media",
    "probably write-back": "more threads barely help",
}
WT_COST = "; databases that flush the log at every commit suffer badly without a write-back cache"


def _declared_sentence(declared, by, sources, reading, facts, why, o):
    """The sentence of a drive that declares its cache: the declaration first, the timing as
    corroboration, or what it says instead (a thread gain alone is no proof of either)."""
    head = "Write cache: %s (the kernel's %s for %s)" % (declared, " / ".join(sources), ", ".join(sorted(by)))
    if not facts:
        return head + "; no write latency was measured to corroborate it."
    if reading == declared:
        return "%s; the timing agrees, %s (%s; %s)%s." % (head, TIMING_SAYS[reading], facts, why,
                                                          WT_COST if declared == "write-through" else "")
    if reading == "write-back":
        return ("%s; the timing disagrees, small writes were acknowledged as a cache acknowledges them (%s; %s): a "
                "power-protected buffer, a cache the kernel sends no flushes to, or the host's cache under an emulated "
                "drive." % (head, facts, why))
    if reading == "write-through":
        return ("%s; the timing disagrees, writes waited as long as media writes do (%s; %s): a full or slow cache, "
                "or the host under an emulated drive." % (head, facts, why))
    return "%s; the timing cannot tell (%s; %s)%s." % (head, facts, undecided(o),
                                                       WT_COST if declared == "write-through" else "")


def _inferred_sentence(reading, missing, facts, why):
    """The sentence of the timing rule where no drive declares its cache: said to be inferred."""
    if reading == "unclear":
        return "Write cache: unclear, inferred from the timing alone (%s), which cannot tell (%s; %s)." % (
            missing, facts, why)
    return "Write cache: %s, inferred from the timing alone (%s): %s (%s; %s)%s." % (
        reading, missing, TIMING_SAYS[reading], facts, why, WT_COST if reading == "write-through" else "")


def _write_cache(ws, o, drives=None):
    name = "write_cache"
    c1 = _pick(ws, WorkloadView.cache_set, threads=1)
    v1 = _pick(ws, WorkloadView.over_cache, threads=1)
    if c1 is None and v1 is None:
        return na_entry(name, "needs single-thread O_DIRECT random writes (rndwr, 1 thread) in the cache-sized "
                        "or over-cache set")
    base = c1 or v1
    # thread scaling on the same set as the single-thread run, else the other one
    cn = None
    for pred, one in ((WorkloadView.cache_set, c1), (WorkloadView.over_cache, v1)):
        if one is None:
            continue
        n = _pick(ws, lambda w, one=one: pred(w) and w.label == one.label and _dataset(w) == _dataset(one),
                  most=True)
        if n is not None and (n.threads or 0) > 1:
            cn = (one, n)
            break
    lat_c = c1.p("write", "p50") if c1 else None
    lat_v = v1.p("write", "p50") if v1 else None
    lat = lat_c if lat_c is not None else lat_v
    set_ratio = ratio(lat_c, lat_v)
    gain = ratio(cn[1].get("write_iops"), cn[0].get("write_iops")) if cn else None
    views = [w for w in (c1, v1, cn[1] if cn else None) if w is not None]
    declared, by, sources, missing = cache_declaration(views, drives)
    reading, why = _timing_reading(lat, set_ratio, gain, o)
    ev = {"cache_t1_p50_ms": rounded(lat_c, 4), "over_cache_t1_p50_ms": rounded(lat_v, 4), "set_ratio": rounded(set_ratio, 3),
          "t1_iops": rounded(cn[0].get("write_iops"), 1) if cn else None,
          "tn_iops": rounded(cn[1].get("write_iops"), 1) if cn else None,
          "tn_threads": int(cn[1].threads) if cn else None, "thread_gain": rounded(gain, 3),
          "fsync_p50_ms": rounded(base.p("fsync", "p50"), 4),
          "basis": "declared" if declared else "timing", "declared": declared, "declared_by": by,
          "declared_from": sources, "undeclared_reason": missing, "timing": reading,
          "timing_agrees": None if declared is None or reading in ("unclear", "probably write-back") or lat is None
          else reading == declared,
          "thresholds": {"wb_fast_ms": o["wb_fast_ms"], "wt_slow_ms": o["wt_slow_ms"],
                         "wb_set_ratio": o["wb_set_ratio"], "wb_thread_gain": o["wb_thread_gain"]}}
    used = [w.id for w in (c1, v1) if w is not None]
    if cn and cn[1].id not in used:
        used.append(cn[1].id)
    facts = []      # the evidence's rounded figures: the sentence quotes its evidence
    if lat is not None:
        facts.append("1-thread write p50 %s" % fmt_ms(rounded(lat, 4)) + (" in the cache-sized set" if lat_c is not None
                                                                          else ""))
        if set_ratio is not None:
            facts.append("%s over-cache (%s)" % (fmt_ms(ev["over_cache_t1_p50_ms"]), fmt_x(ev["set_ratio"])))
        if gain is not None:
            facts.append("%s IOPS from 1 to %s threads" % (fmt_x(ev["thread_gain"]), ev["tn_threads"]))
    facts = ", ".join(facts)
    if declared is not None:
        # the drive's own word decides; write-through costs a database unless its writes are
        # acknowledged fast all the same (a power-protected buffer)
        status = "pass" if declared == "write-back" or (lat is not None and lat <= o["wb_fast_ms"]) else "warn"
        return diag_entry(status, declared, _declared_sentence(declared, by, sources, reading, facts, why, o), ev, used)
    if lat is None:
        return diag_entry("info", "unclear", "Write cache: unclear, no drive declares its cache (%s) and no write "
                          "latency was measured." % missing, ev, used)
    conclusion = {"probably write-back": "write-back"}.get(reading, reading)
    status = {"write-back": "pass", "write-through": "warn"}.get(conclusion, "info")
    return diag_entry(status, conclusion, _inferred_sentence(reading, missing, facts, why), ev, used)


# --------------------------------------------------------------------------- 7. database pattern

def _db_pattern(ws, o):
    name = "db_pattern"
    for w in ws:
        db = w.m.get("db")
        if not isinstance(db, dict):
            continue
        commits, txns = db.get("commits") or {}, db.get("transactions") or {}
        reads, writes = db.get("page_reads") or {}, db.get("page_writes") or {}
        ev = {"workload": w.id,
              "commits_per_sec": commits.get("per_sec"),
              "transactions_per_sec": txns.get("per_sec"),
              "commit_p50_ms": commits.get("p50_ms"), "commit_p99_ms": commits.get("p99_ms"),
              "commit_p999_ms": commits.get("p999_ms"),
              "page_read_per_sec": reads.get("per_sec"),
              "page_read_p50_ms": reads.get("p50_ms"), "page_read_p99_ms": reads.get("p99_ms"),
              "page_read_p999_ms": reads.get("p999_ms"),
              "page_write_per_sec": writes.get("per_sec"), "page_write_p99_ms": writes.get("p99_ms")}
        tx = ""
        if ev["transactions_per_sec"] is not None:
            tx = " (%s transactions/s)" % fmt_k(ev["transactions_per_sec"])
        s = ("Database pattern (%s): %s commits/s%s; commit latency p50 %s, p99 %s, p99.9 %s; "
             "page reads p50 %s, p99 %s, p99.9 %s; page writes %s/s."
             % (w.id, fmt_k(ev["commits_per_sec"]), tx, fmt_ms(ev["commit_p50_ms"]), fmt_ms(ev["commit_p99_ms"]),
                fmt_ms(ev["commit_p999_ms"]), fmt_ms(ev["page_read_p50_ms"]), fmt_ms(ev["page_read_p99_ms"]),
                fmt_ms(ev["page_read_p999_ms"]), fmt_k(ev["page_write_per_sec"])))
        return diag_entry("info", "measured", s, ev, [w.id])
    return na_entry(name, "no iobench database-pattern run (bench JSON section db)")


# --------------------------------------------------------------------------- 8. read-ahead

def _dataset(w):
    return w.rec.get("dataset") or (w.file_num, w.total)


def _readahead(ws, o):
    name = "readahead"
    seq = [w for w in ws if w.mode == "seqrd" and w.ok and w.get("mibps")]
    pair = None
    for b in seq:
        if b.direct:
            continue
        for d in seq:
            if d.direct and _dataset(d) == _dataset(b) and d.threads == b.threads and d.block == b.block:
                pair = (b, d)
                break
        if pair:
            break
    if pair is None:
        return na_entry(name, "needs sequential reads buffered and with O_DIRECT on the same data set")
    b, d = pair
    rate_ratio = ratio(b.get("mibps"), d.get("mibps"))
    proof = ratio(b.get("dev_rkb_s"), b.kb_s("read"))
    ev = {"buffered_mibps": rounded(b.get("mibps"), 2), "direct_mibps": rounded(d.get("mibps"), 2), "ratio": rounded(rate_ratio, 3),
          "readahead_ratio": o["readahead_ratio"], "buffered_dev_rareq_sz_kb": rounded(b.get("dev_rareq_sz_kb"), 1),
          "direct_dev_rareq_sz_kb": rounded(d.get("dev_rareq_sz_kb"), 1),
          "block_kb": rounded(b.block / 1024.0, 1) if b.block else None, "buffered_bytes_ratio": rounded(proof, 3)}
    ids = [b.id, d.id]
    head = "Read-ahead: sequential %s kB reads buffered %s MiB/s vs O_DIRECT %s MiB/s (%s" % (
        fmt_num(ev["block_kb"]), fmt_num(ev["buffered_mibps"]), fmt_num(ev["direct_mibps"]), fmt_x(rate_ratio))
    if proof is not None and proof < o["cache_proof_min_ratio"]:
        return diag_entry("unproven", "unproven",
                          head + "), but the device read only %s of the buffered run's bytes: the page cache served "
                          "it, so the ratio measures the cache, not read-ahead." % fmt_x(proof), ev, ids)
    if ev["buffered_dev_rareq_sz_kb"] and ev["direct_dev_rareq_sz_kb"]:
        head += "; device requests %s kB vs %s kB" % (fmt_num(ev["buffered_dev_rareq_sz_kb"]),
                                                      fmt_num(ev["direct_dev_rareq_sz_kb"]))
    if rate_ratio is not None and rate_ratio >= o["readahead_ratio"]:
        return diag_entry("warn", "significant",
                          head + "): the OS read-ahead does work a database's own O_DIRECT I/O would not get.",
                          ev, ids)
    return diag_entry("pass", "small", head + "): read-ahead adds little; O_DIRECT scans run at the same speed.",
                      ev, ids)


# --------------------------------------------------------------------------- 9. stability

def _when(figures):
    """When a run's pace changed (metrics.stability ``change_at_s``), as the sentence says it."""
    at = figures.get("change_at_s")
    return "" if at is None else " from %s s into the run" % fmt_num(at)


def _stability(ws, o):
    name = "stability"
    per = {w.id: w.m["stability"] for w in ws if w.ok and isinstance(w.m.get("stability"), dict)
           and w.m["stability"].get("change_pct") is not None}
    if not per:
        return na_entry(name, "no run with %d or more intervals of its per-interval series" % STABILITY_MIN_INTERVALS)
    limit = -100.0 * o["stability_drop"]
    slowed = [wid for wid, st in per.items() if st["change_pct"] < limit]
    worst = min(per, key=lambda wid: per[wid]["change_pct"])
    ev = {"drop_pct": round(100.0 * o["stability_drop"], 1), "checked": len(per), "slowed": slowed,
          "slowed_count": len(slowed), "worst": worst, "worst_change_pct": per[worst]["change_pct"], "workloads": per}
    if slowed:
        parts = ["%s %s -> %s IOPS (%s %%)%s" % (wid, fmt_k(per[wid]["first_iops"]), fmt_k(per[wid]["last_iops"]),
                                                 fmt_num(per[wid]["change_pct"]), _when(per[wid])) for wid in slowed]
        sentence = ("Stability: %d of %d runs changed pace while they ran, the last third of their intervals "
                    "more than %s %% below the first: %s; burst credits spent, a write cache filled or thermal "
                    "throttling, so a longer run (steady_state: true) measures less."
                    % (len(slowed), len(per), fmt_num(ev["drop_pct"]), "; ".join(parts)))
        return diag_entry("warn", "slowed", sentence, ev, list(per))
    st = per[worst]
    sentence = ("Stability: every run kept its pace (no last third of its intervals more than %s %% below the "
                "first; largest change %s %% in %s, %s -> %s IOPS; %d run%s checked)."
                % (fmt_num(ev["drop_pct"]), fmt_num(st["change_pct"]), worst, fmt_k(st["first_iops"]),
                   fmt_k(st["last_iops"]), len(per), "" if len(per) == 1 else "s"))
    return diag_entry("pass", "steady", sentence, ev, list(per))


# --------------------------------------------------------------------------- public API

def diagnose(workloads, options=None, latency_bound_ms=None, drives=None):
    """All diagnostics of one host: ``{name: entry}`` in :data:`NAMES` order.

    ``workloads``: the host's workload records (spec + ``result`` + ``metrics``);
    ``options``: overrides of :data:`DEFAULTS` (e.g. ``{"latency_bound_ms": 20}``);
    ``latency_bound_ms``: shorthand for that option (the role passes
    ``fleetqual_latency_bound_ms``); ``drives``: the host's drive inventory (the drives
    module's ``drives`` list, docs/contracts.md section 7), whose declared write cache the
    write-cache diagnostic states first."""
    opts = dict(options or {})
    if latency_bound_ms is not None:
        opts["latency_bound_ms"] = latency_bound_ms
    o = diag_options(opts)
    ws = workload_views(workloads)
    out = {}
    out["cache_proof"] = _cache_proof(ws, o)
    out["write_amplification"] = _write_amplification(ws, o)
    out["write_serialization"] = _write_serialization(ws, o)
    out["write_cache"] = _write_cache(ws, o, drives)
    out["tipping_point"] = sweep_tipping_point(ws, o)
    out["bounded_max"] = sweep_bounded_max(ws, o, out["tipping_point"])
    out["db_pattern"] = _db_pattern(ws, o)
    out["readahead"] = _readahead(ws, o)
    out["stability"] = _stability(ws, o)
    return out


def diagnose_checked(workloads, latency_bound_ms=None, options=None, drives=None):
    """:func:`diagnose` after checking its options and ``latency_bound_ms`` (extra vars arrive
    as strings): ValueError naming each problem (the filter ``fleetqual.storage.diagnostics``)."""
    problems = validate_options(options)
    if latency_bound_ms is not None:
        try:  # extra vars (-e fleetqual_latency_bound_ms=20) arrive as strings
            latency_bound_ms = float(latency_bound_ms)
        except (TypeError, ValueError):
            latency_bound_ms = None
        if latency_bound_ms is None or not math.isfinite(latency_bound_ms) or latency_bound_ms <= 0:
            problems.append("latency_bound_ms (fleetqual_latency_bound_ms) must be a number of milliseconds > 0")
    if problems:
        raise ValueError("; ".join(problems))
    return diagnose(workloads, options=options, latency_bound_ms=latency_bound_ms, drives=drives)


def validate_options(options, var_name="options"):
    """Error strings for a diagnostics options mapping (unknown keys, non-numbers, <= 0)."""
    errors = []
    if options is None:
        return errors
    if not isinstance(options, dict):
        return ["%s: must be a mapping, got %s" % (var_name, type(options).__name__)]
    for k, v in options.items():
        if k not in DEFAULTS:
            errors.append("%s.%s: unknown option; known: %s" % (var_name, k, ", ".join(sorted(DEFAULTS))))
        elif not is_number(v) or v <= 0:
            errors.append("%s.%s: must be a number > 0, got %r" % (var_name, k, v))
    return errors


def cache_proof_failures(diagnostics):
    """[(workload id, sentence)] of workloads whose cache proof failed."""
    cp = (diagnostics or {}).get("cache_proof") if isinstance(diagnostics, dict) else None
    if not isinstance(cp, dict):
        return []
    per = dig(cp, "evidence", "workloads") or {}
    out = []
    for wid in dig(cp, "evidence", "failed") or []:
        ev = per.get(wid) or {}
        out.append((wid, ev))
    return out


def sentences(diagnostics, include_na=False):
    """[(name, status, sentence)] in NAMES order (n/a left out unless asked)."""
    out = []
    for name in NAMES:
        d = (diagnostics or {}).get(name)
        if not isinstance(d, dict):
            continue
        if d.get("status") == "n/a" and not include_na:
            continue
        out.append((name, d.get("status"), d.get("sentence")))
    return out


__all__ = ["diagnose", "cache_proof_of", "cache_proof_failures", "sentences", "validate_options"]
