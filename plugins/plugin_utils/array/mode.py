# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode, the controller side: who belongs to an array and its step schedule.

A host joins an array with ``fleetqual_array: NAME`` (usually in the group_vars of the
array's initiators). ``fleetqual_arrays: {NAME: {...}}`` holds each array's schedule and rules.

:func:`members` gives an array's hosts in *rank order* (natural sort of the inventory names:
``h2`` before ``h10``); a host of rank ``r`` (0-based) is active in a step when
``r < initiators``. :func:`plan_steps` gives the ordered step list, fixed in advance from
a common start ``T0`` (the controller's clock), so no controller round trip is needed per step:

* order: modes (outer), then initiators, then threads (inner), as listed in the config;
* each step runs ``warmup`` seconds, then its measured window of ``time`` seconds;
* step 1's warm-up starts at ``T0 + LEAD_S``; between the end of one measured window and
  the start of the next step's warm-up there is a gap of ``step_gap_s`` seconds (the
  config's, default ``STEP_GAP_S``: iobench exits, its result is saved, the next iobench
  starts and lays out its workers; the failover step's read-back runs in it too);
* ``offset_s``: seconds from ``T0`` at which the step's *measured* window opens;
  ``end_s = offset_s + time``.

Each step's figures, the curve, the knee and the bounded maximum are ``plugin_utils/array/figures.py``'s;
this module judges the array from them (:func:`judge_array`) and builds its fleet.json
entry (:func:`build_array`).
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array.figures import (
    step_bench,
    array_knee,
    bounded_max,
    curve,
    flag_outliers,
    step_figures,
    step_label,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import compare
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key, rounded
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import selector_match, selector_value_text
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import dig
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size, parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num, is_int
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.profiles import DEFAULT_CACHE_SIZE
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, median

ARRAY_VAR = "fleetqual_array"
ARRAYS_VAR = "fleetqual_arrays"

# schedule constants (seconds), see the module docstring and docs/arrays.md
LEAD_S = 0.0
STEP_GAP_S = 2.0

ARRAY_DEFAULTS = {
    "initiators": None,    # default: [all members]
    "threads": [1],
    "modes": ["rndrd", "rndwr", "rndrw"],
    "time": 10,
    "warmup": 2,
    "block_size": 16384,
    "rw_ratio": 1.5,       # reads per write of rndrw (sysbench's default)
    "direct": True,
    "iodepth": 1,
    "engine": "sync",
    "file_num": 1,
    "step_gap_s": STEP_GAP_S,   # from a window's end to the next step's warm-up (seconds)
}


def array_names_of(host_vars):
    """The array names a host's vars put it in (``fleetqual_array`` as a string or a list)."""
    value = (host_vars or {}).get(ARRAY_VAR)
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v is not None and v != ""]
    return [value]


def _group_names(host_vars):
    groups = (host_vars or {}).get("group_names") or []
    return list(groups) if isinstance(groups, (list, tuple)) else []


def joins(name, host_vars, cfg=None):
    """True when the host with these vars belongs to array ``name``: it names the array in
    ``fleetqual_array``, or it is in one of the inventory groups the array's ``groups`` key lists."""
    if name in array_names_of(host_vars):
        return True
    groups = (cfg or {}).get("groups") or []
    if isinstance(groups, str):
        groups = [groups]
    return bool(set(groups) & set(_group_names(host_vars)))


def members(name, hosts_vars, arrays=None):
    """The hosts of array ``name`` in rank order, from ``{host: its vars}``.

    ``arrays`` is ``fleetqual_arrays`` (default: read from the first host's vars that has it),
    used for the array's optional ``groups`` key."""
    if arrays is None:
        arrays = next((v.get(ARRAYS_VAR) for v in (hosts_vars or {}).values()
                       if isinstance(v, dict) and isinstance(v.get(ARRAYS_VAR), dict)), None) or {}
    cfg = arrays.get(name) if isinstance(arrays, dict) else None
    cfg = cfg if isinstance(cfg, dict) else {}
    return sorted((h for h, v in (hosts_vars or {}).items() if joins(name, v if isinstance(v, dict) else {}, cfg)),
                  key=natural_key)


def _as_list(value):
    if value is None:
        return None
    return list(value) if isinstance(value, (list, tuple)) else [value]


def data_set_per_host(cfg, n_members=None, cache_size=None):
    """``(bytes, how)``: the data set each initiator prepares and the sizing line.

    An explicit ``total_size`` (per initiator) is used as given. Otherwise the array's cache
    (``cache_size``, default ``fleetqual_cache_size``) sizes it, like the plan's working sets (module_utils/plan/profiles.py)
    but against the *fewest* initiators of the sweep, since a step only touches the data of
    its active initiators:

    * ``over_cache`` (default): ``ceil(4 x cache / min(initiators))`` per initiator, so even
      the smallest step's working set is four times the cache;
    * ``cache``: ``cache / 2 / max(initiators)``, so even the largest step fits in half the cache.

    Rounded up to whole blocks of every file (``file_num x block_size``)."""
    cfg = cfg or {}
    block = parse_size(cfg.get("block_size", ARRAY_DEFAULTS["block_size"]))
    file_num = cfg.get("file_num", ARRAY_DEFAULTS["file_num"])
    if cfg.get("total_size") is not None:
        n = parse_size(cfg["total_size"])
        return n, "total_size %s per initiator (given)" % human_size(n)
    cache = parse_size(cfg.get("cache_size") or cache_size or DEFAULT_CACHE_SIZE)
    counts = _as_list(cfg.get("initiators")) or ([n_members] if n_members else [1])
    mode = cfg.get("working_set", "over_cache")
    if mode == "cache":
        raw = cache // 2 // max(counts)
        how = "cache / 2 / %d initiators (cache %s)" % (max(counts), human_size(cache))
    else:
        raw = -(-4 * cache // min(counts))
        plural = "" if min(counts) == 1 else "s"
        how = "4 x cache / %d initiator%s (cache %s)" % (min(counts), plural, human_size(cache))
    unit = max(1, file_num * block)
    n = max(unit, -(-raw // unit) * unit)
    return n, "%s per initiator: %s" % (human_size(n), how)


def plan_steps(cfg, n_members=None, cache_size=None):
    """The ordered step list of an (already validated) array config.

    Each step: ``{index (1-based), initiators, threads, mode, block_size (bytes), time, warmup,
    rw_ratio, direct, offset_s, end_s}`` plus ``iodepth``, ``engine``, ``file_num`` and
    ``total_size`` (bytes per initiator, :func:`data_set_per_host`); ``rw_ratio`` is None
    except for ``rndrw``. ``initiators`` defaults to ``[n_members]`` (every host)."""
    cfg = dict(cfg or {})
    initiators = _as_list(cfg.get("initiators"))
    if not initiators:
        if n_members is None:
            raise ValueError("plan_steps: the config has no initiators and n_members is not given")
        initiators = [n_members]
    threads = _as_list(cfg.get("threads")) or ARRAY_DEFAULTS["threads"]
    modes = _as_list(cfg.get("modes")) or ARRAY_DEFAULTS["modes"]
    time_s = cfg.get("time", ARRAY_DEFAULTS["time"])
    warmup = cfg.get("warmup", ARRAY_DEFAULTS["warmup"])
    block_size = parse_size(cfg.get("block_size", ARRAY_DEFAULTS["block_size"]))
    rw_ratio = cfg.get("rw_ratio", ARRAY_DEFAULTS["rw_ratio"])
    direct = cfg.get("direct", ARRAY_DEFAULTS["direct"])
    iodepth = cfg.get("iodepth", ARRAY_DEFAULTS["iodepth"])
    engine = cfg.get("engine", ARRAY_DEFAULTS["engine"])
    file_num = cfg.get("file_num", ARRAY_DEFAULTS["file_num"])
    gap = float(cfg.get("step_gap_s", ARRAY_DEFAULTS["step_gap_s"]))
    total_size = data_set_per_host(dict(cfg, initiators=initiators), n_members, cache_size)[0]
    steps = []
    start = LEAD_S   # warm-up start of the next step, seconds from T0
    for mode in modes:
        for n in initiators:
            for t in threads:
                offset = start + warmup
                end = offset + time_s
                steps.append({
                    "index": len(steps) + 1, "initiators": n, "threads": t, "mode": mode,
                    "block_size": block_size, "time": time_s, "warmup": warmup,
                    "rw_ratio": rw_ratio if mode == "rndrw" else None, "direct": direct,
                    "offset_s": offset, "end_s": end, "iodepth": iodepth, "engine": engine,
                    "file_num": file_num, "total_size": total_size,
                })
                start = end + gap
    return steps


def active(rank, step):
    """True when the host of 0-based ``rank`` runs in ``step``."""
    return rank < step["initiators"]


def schedule_seconds(steps):
    """Seconds from T0 to the end of the last measured window."""
    return max((s["end_s"] for s in steps), default=0.0)


# --------------------------------------------------------------------------- array rules

RULE_SELECTORS = ("initiators", "threads", "mode")
# limit -> (step figure path, comparison, text); min_share_pct: no initiator below X % of the median
STEP_LIMITS = {
    "min_aggregate_iops": (("aggregate", "iops"), ">=", "aggregate IOPS"),
    "min_aggregate_mibps": (("aggregate", "mib_per_sec"), ">=", "aggregate MiB/s"),
    "max_p50_ms": (("aggregate", "p50_ms"), "<=", "p50 ms"),
    "max_p99_ms": (("aggregate", "p99_ms"), "<=", "p99 ms"),
    "min_fairness": (("fairness", "jain"), ">=", "Jain's fairness index"),
    "min_share_pct": (("fairness", "min_share_pct"), ">=", "slowest initiator, % of the median"),
}
# limits on the whole sweep of a mode (selector: mode only)
ARRAY_LIMITS = {
    "min_bounded_iops": "latency-bounded maximum IOPS",
}
RULE_LIMITS = tuple(STEP_LIMITS) + tuple(ARRAY_LIMITS)
RULE_KEYS = ("name", "description") + RULE_SELECTORS + RULE_LIMITS


def array_rule_name(rule, limit):
    """A rule's ``name``, else ``<limit>@<mode>/i<initiators>/t<threads>`` (``*`` = any,
    trailing ``*`` dropped), e.g. ``min_aggregate_iops@rndrd/i16/t16``."""
    if rule.get("name"):
        return str(rule["name"])
    parts = [selector_value_text(rule["mode"]) if "mode" in rule else "*",
             selector_value_text(rule["initiators"], "i") if "initiators" in rule else "*",
             selector_value_text(rule["threads"], "t") if "threads" in rule else "*"]
    while len(parts) > 1 and parts[-1] == "*":
        parts.pop()
    return "%s@%s" % (limit, "/".join(parts))


def array_rule_matches(rule, step):
    """True when every selector of an array rule matches the step."""
    return all(selector_match(rule[k], step.get(k)) for k in RULE_SELECTORS if k in rule)


def array_rule_limits(rule):
    """``[(limit, op, value)]`` of an array rule in canonical order."""
    out = []
    for key in RULE_LIMITS:
        if key in rule:
            op = STEP_LIMITS[key][1] if key in STEP_LIMITS else ">="
            out.append((key, op, rule[key]))
    return out


# --------------------------------------------------------------------------- rules and verdict


def incomplete_why(step):
    """Why a step is incomplete: each missing host and its reason, else the step's problem."""
    return "; ".join("%s: %s" % (h, step["missing"][h]) for h in step["missing_hosts"]) or step["problem"] or "?"


def judge_array(steps, rules, bounded):
    """``(checks, verdict, reasons, notes)`` of an array from its step figures, its rules
    (``thresholds``) and its bounded maxima per mode.

    A check is ``{rule, limit, op, value_limit, step, mode, value, passed}``: ``passed`` None
    when the step a rule needs is incomplete (or its figure is missing): that check is an
    error, never a pass. Verdict: ERROR if a check is an error or no step completed, else
    FAIL if a check failed, else PASS (the judge's order, plugin_utils/judge/host.py)."""
    checks, reasons, notes = [], [], []
    needed = set()
    for rule in rules or []:
        if not isinstance(rule, dict):
            continue
        for limit, op, value_limit in array_rule_limits(rule):
            name = array_rule_name(rule, limit)
            if limit in ARRAY_LIMITS:
                modes = [m for m in bounded if "mode" not in rule or selector_match(rule["mode"], m)]
                for mode in modes:
                    b = bounded[mode]
                    if b["bound_ms"] is None:
                        checks.append({"rule": name, "limit": limit, "op": op, "value_limit": value_limit, "step": None,
                                       "mode": mode, "value": None, "passed": None,
                                       "text": "%s: no latency bound is known for %s (set latency_bound_ms on the array)"
                                       % (name, ARRAY_LIMITS[limit])})
                        continue
                    value = b["iops"] if b["iops"] is not None else 0.0
                    passed = compare(value, op, value_limit)
                    text = ("%s: %s of %s under p99 %s ms: %s (step %s), limit %s %s"
                            % (name, ARRAY_LIMITS[limit], mode, fmt_num(b["bound_ms"]), fmt_num(value),
                               b["index"] if b["index"] is not None else "none", op, fmt_num(value_limit)))
                    if not passed and b["steps_incomplete"]:
                        passed = None
                        text += "; %d step(s) of %s incomplete, so the maximum is not known" % (
                            b["steps_incomplete"], mode)
                    checks.append({"rule": name, "limit": limit, "op": op, "value_limit": value_limit, "step": b["index"],
                                   "mode": mode, "value": value, "passed": passed, "text": text})
                continue
            path, _op, what = STEP_LIMITS[limit]
            for s in steps:
                if not array_rule_matches(rule, s):
                    continue
                needed.add(s["index"])
                value = dig(s, *path)
                if not s["complete"]:
                    why = incomplete_why(s)
                    passed, text = None, ("%s: %s is incomplete (%s), so %s is not known"
                                          % (name, step_label(s), why, what))
                elif value is None:
                    passed, text = None, "%s: %s has no %s" % (name, step_label(s), what)
                else:
                    passed = compare(value, op, value_limit)
                    text = "%s: %s: %s %s, limit %s %s" % (name, step_label(s), what, fmt_num(value), op,
                                                           fmt_num(value_limit))
                    if s["outlier"]:
                        text += " (an outlier against its neighbours)"
                checks.append({"rule": name, "limit": limit, "op": op, "value_limit": value_limit, "step": s["index"],
                               "mode": s["mode"], "value": value, "passed": passed, "text": text})
    errors = [c["text"] for c in checks if c["passed"] is None]
    failed = [c["text"] for c in checks if c["passed"] is False]
    if not any(s["complete"] for s in steps):
        # the first step's cause is named: most often all steps share it (a host not ready)
        errors.insert(0, "no step of the array completed" + (" (%s: %s)" % (step_label(steps[0]), incomplete_why(steps[0]))
                                                             if steps else ""))
    for s in steps:
        if not s["complete"] and s["index"] not in needed:
            why = incomplete_why(s)
            notes.append("%s incomplete (%s); no rule needs it" % (step_label(s), why))
        if s["outlier"]:
            notes.append(s["outlier_text"])
    verdict = "ERROR" if errors else "FAIL" if failed else "PASS"
    reasons = errors + failed
    return checks, verdict, reasons, notes


# --------------------------------------------------------------------------- one array from the hosts' records

def array_runs(records):
    """``{array name: {host: its array_run}}`` of ``{host: host record}``."""
    out = {}
    for host, rec in (records or {}).items():
        run = rec.get("array_run") if isinstance(rec, dict) else None
        if isinstance(run, dict) and run.get("name"):
            out.setdefault(str(run["name"]), {})[str(host)] = run
    return out


def _majority(values):
    seen = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return max(seen, key=lambda v: (seen[v], v is not None)) if seen else None


def _planned(cfg, n_members, runs):
    """Planned steps: from the stored config when it plans, else from the step entries."""
    if isinstance(cfg, dict):
        try:
            return plan_steps(cfg, n_members)
        except (TypeError, ValueError, KeyError):
            pass
    by_index = {}
    for run in runs.values():
        for e in run.get("steps") or []:
            if isinstance(e, dict) and is_int(e.get("index")):
                cur = by_index.setdefault(int(e["index"]), {"index": int(e["index"])})
                for key in ("initiators", "threads", "mode", "time", "warmup", "offset_s", "end_s"):
                    if cur.get(key) is None and e.get(key) is not None:
                        cur[key] = e[key]
                if cur.get("threads") is None or cur.get("mode") is None:
                    cfg_b = dig(step_bench(e), "config") or {}
                    cur.setdefault("threads", cfg_b.get("threads"))
                    cur.setdefault("mode", cfg_b.get("mode"))
    steps = [by_index[i] for i in sorted(by_index)]
    for s in steps:
        if s.get("initiators") is None:
            s["initiators"] = sum(1 for run in runs.values() for e in run.get("steps") or []
                                  if isinstance(e, dict) and e.get("index") == s["index"] and e.get("active"))
    return steps


def build_array(name, runs, latency_bound_ms=None):
    """The fleet.json entry of array ``name`` from its member hosts' ``array_run``
    (``{host: array_run}``, one run: the hosts whose ``t0`` is the most common one;
    a host whose t0 differs ran another schedule and counts as missing).

    ``latency_bound_ms``: the bound when the array's config has no ``latency_bound_ms``
    (``fleetqual_latency_bound_ms``)."""
    runs = {h: r for h, r in (runs or {}).items() if isinstance(r, dict)}
    t0 = _majority([as_number(r.get("t0")) for r in runs.values() if as_number(r.get("t0")) is not None])
    # a host without t0 never got the common start: its step entries say why
    other_run = sorted((h for h, r in runs.items() if as_number(r.get("t0")) not in (None, t0)), key=natural_key)
    same = {h: r for h, r in runs.items() if h not in other_run}
    cfg = next((r.get("config") for r in same.values() if isinstance(r.get("config"), dict)), None) or {}
    listed = next((r.get("members") for r in same.values() if isinstance(r.get("members"), list)), None)
    if listed:
        hosts = [str(h) for h in listed]
        hosts += sorted((h for h in runs if h not in hosts), key=natural_key)
    else:
        hosts = sorted(runs, key=lambda h: (as_number(runs[h].get("rank")) if as_number(runs[h].get("rank")) is not None
                                            else 1e9, natural_key(h)))
    rank_of = {h: i for i, h in enumerate(hosts)}
    offsets = {h: as_number(dig(r, "clock", "offset_s")) for h, r in same.items()}
    bound = as_number(cfg.get("latency_bound_ms"))
    bound = bound if bound is not None else as_number(latency_bound_ms)
    planned = _planned(cfg, len(hosts), same)
    steps = []
    for step in planned:
        entries = {}
        for h, r in same.items():
            entries[h] = next((e for e in r.get("steps") or [] if isinstance(e, dict) and e.get("index") == step["index"]),
                              None)
        n = step.get("initiators") or 0
        expected = hosts[:n]
        fig = step_figures(step, entries, expected, offsets, rank_of)
        for h in other_run:
            if h in fig["missing"]:
                fig["missing"][h] = "ran another schedule (t0 %s, not %s)" % (runs[h].get("t0"), t0)
        steps.append(fig)
    modes = list(dict.fromkeys(s["mode"] for s in steps))
    for mode in modes:
        flag_outliers([s for s in steps if s["mode"] == mode])
    curves = {m: curve([s for s in steps if s["mode"] == m]) for m in modes}
    knees = {m: array_knee([s for s in steps if s["mode"] == m]) for m in modes}
    bounded = {m: bounded_max([s for s in steps if s["mode"] == m], bound) for m in modes}
    checks, verdict, reasons, notes = judge_array(steps, cfg.get("thresholds"), bounded)
    # failover under load (docs/san.md): the step's initiators through the cut and the restore
    log = next((r["failover"] for r in same.values() if isinstance(r.get("failover"), dict)), None)
    failover = None
    if log and isinstance(log.get("spec"), dict):
        spec = log["spec"]
        entries = {h: next((e for e in r.get("steps") or [] if isinstance(e, dict) and e.get("index") == spec.get("step")),
                           None) for h, r in same.items()}
        failover = _failover.judge_failover(next((s for s in steps if s["index"] == spec.get("step")), {}), entries, log, spec)
        reasons = reasons + failover["reasons"]
        order = ("PASS", "FAIL", "ERROR")
        verdict = max(verdict, failover["verdict"], key=order.index)
    clocks = {h: {k: dig(r, "clock", k) for k in ("offset_s", "uncertainty_s", "method", "synchronized", "source")}
              for h, r in sorted(same.items(), key=lambda kv: natural_key(kv[0]))}
    spreads = [s["window"]["start_spread_ms"] for s in steps if s["window"]["start_spread_ms"] is not None]
    # the data set each member measured on (iobench's own config), and the total working set (docs/arrays.md)
    data_set = max([as_number(dig(step_bench(e), "config", "total_size")) or 0 for r in same.values()
                    for e in r.get("steps") or [] if isinstance(e, dict)] or [0]) or None
    return {
        "name": str(name), "verdict": verdict, "reasons": reasons, "notes": notes, "hosts": hosts, "t0": t0,
        "config": {k: cfg.get(k) for k in ("initiators", "threads", "modes", "time", "warmup", "block_size", "target")
                   if k in cfg},
        "latency_bound_ms": bound, "clocks": clocks, "data_set_bytes": data_set,
        "total_working_set_bytes": data_set * len(hosts) if data_set else None,
        "start_spread_ms": {"median": rounded(median(spreads), 3), "max": max(spreads) if spreads else None},
        "steps_total": len(steps), "steps_complete": sum(1 for s in steps if s["complete"]),
        "steps": steps, "curves": curves, "knee": knees, "bounded_max": bounded, "checks": checks,
        "failover": failover,
    }


def fleet_arrays(records, latency_bound_ms=None):
    """fleet.json's ``arrays``: one entry per array found in the hosts' records
    (``{host: record}``), by name."""
    return [build_array(name, runs, latency_bound_ms)
            for name, runs in sorted(array_runs(records).items(), key=lambda kv: natural_key(kv[0]))]


def fleet_arrays_of(hosts, runs, loader=None):
    """fleet.json's ``arrays`` at aggregation time: ``runs`` is ``{host: array_run}`` of the
    records read in this aggregation; a host entry stored earlier (fleet.d/, a merge of
    slices) that names an ``array`` has its record read again with ``loader``, so a report
    merged from slices keeps its arrays."""
    runs = dict(runs or {})
    for h in hosts:
        if h.get("array") and h["host"] not in runs and loader is not None:
            rec = loader(h["host"])
            if isinstance(rec, dict) and isinstance(rec.get("array_run"), dict):
                runs[h["host"]] = rec["array_run"]
    return fleet_arrays({host: {"array_run": run} for host, run in runs.items()})


def host_arrays(arrays, host):
    """The arrays (fleet.json entries) the host belongs to: what ``verdict.final_verdict``
    takes so an array's verdict gates its hosts."""
    return [a for a in arrays or [] if host in (a.get("hosts") or [])]


__all__ = ["ARRAY_VAR", "ARRAYS_VAR", "LEAD_S", "STEP_GAP_S", "ARRAY_DEFAULTS", "array_names_of", "joins",
           "members", "data_set_per_host", "plan_steps", "active", "schedule_seconds", "RULE_SELECTORS",
           "STEP_LIMITS", "ARRAY_LIMITS", "RULE_LIMITS", "RULE_KEYS", "array_rule_name", "array_rule_matches",
           "array_rule_limits", "judge_array", "array_runs", "build_array", "fleet_arrays", "fleet_arrays_of",
           "host_arrays"]
