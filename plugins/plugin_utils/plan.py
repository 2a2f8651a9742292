# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workload plan: turn a profile (or a user matrix) into resolved workload specs.

A *profile* (an entry of ``fleetqual_profiles``) is a mapping::

    description: text
    extends: standard          # optional: start from another profile
    defaults: {time: 60, ...}  # optional: values for every entry of the matrix
    matrix:                    # list of workload entries
      - {workload: over_cache, mode: rndrd, threads: [1, 64], working_set: over_cache}

``extends`` merges the parent's ``defaults`` under this profile's ``defaults`` and puts
the parent's ``matrix`` before this profile's entries. A user matrix
(``fleetqual_matrix``) replaces the profile's matrix but keeps its defaults.

Precedence, lowest first: built-in defaults (threads 1, block_size 16K, direct true,
time 60, warmup 5), profile defaults, the matrix entry, ``overrides``
(``fleetqual_workload_overrides``). Overrides are a mapping of settings applied to every
workload, and may hold, under a workload id, a mapping of settings for that workload only
(applied last; any setting but those that name it or size its data set: mode, threads,
rw_ratio, file_num, total_size, block_size)::

    fleetqual_workload_overrides:
      time: 30                                  # every workload
      over_cache-rndrd-t64: {time: 120, steady_state: true}

An id no workload of the plan has is an error with the closest id.

An entry's ``threads`` and ``rw_ratio`` may be lists: the entry expands to one workload
per value (threads outer, rw_ratio inner). Expanded workloads whose derived id and
resolved spec equal an earlier workload are dropped (``san`` sweeps 1..64 threads
without running ``standard``'s t1 and t64 twice); the same derived id with a different
spec gets a ``-2`` suffix. Explicit ``id`` values must be unique.

Working-set sizing rule (``working_set`` keyword; an entry may give ``total_size``
instead, never both):

* ``fleetqual_cache_size`` is the declared controller / SAN cache (default 256M).
* ``cache``: half the cache, in one file by default (``file_num: 1``): the working set
  fits in the controller cache, so the run measures the cache path.
* ``over_cache``: ``max(4 x cache, 2 x host RAM)`` where the RAM term only applies to
  buffered runs (``direct: false``), from ``ansible_memtotal_mb``; 128 files by default.
  With O_DIRECT the page cache is bypassed, so only the controller cache must be beaten.
* Sized working sets are rounded *up* to a multiple of ``file_num x block_size`` so
  every file holds whole blocks. Explicit ``total_size`` values are used as given.

Each resolved spec has the shape of docs/contracts.md section 4: ``id``, ``workload``,
``mode``, ``threads``, ``file_num``, ``total_size`` (bytes), ``block_size`` (bytes),
``direct``, ``time``, ``warmup``, other iobench options by module parameter name,
``index`` (1-based), ``of``, plus ``working_set`` (cache | over_cache | explicit) and
``sizing`` (one line saying how ``total_size`` was obtained). Use :func:`module_args`
to keep only the ``fleetqual.storage.iobench`` parameters.
"""

import copy
import difflib
import math
import re

from ansible_collections.fleetqual.storage.plugins.module_utils import iobench_options
from ansible_collections.fleetqual.storage.plugins.plugin_utils._common import (
    MODES,
    human_size,
    parse_size,
    type_name,
)
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fmt import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import is_int, is_number

MIB = 1024 ** 2
DEFAULT_CACHE_SIZE = "256M"

VAR_NAMES = {
    "profile": "fleetqual_profile",
    "profiles": "fleetqual_profiles",
    "matrix": "fleetqual_matrix",
    "cache_size": "fleetqual_cache_size",
    "overrides": "fleetqual_workload_overrides",
    "mem_total_mb": "ansible_memtotal_mb",
    "seed": "fleetqual_seed",
    "test_dir": "fleetqual_test_dir",
    "thresholds": "fleetqual_thresholds",
    "latency_bound_ms": "fleetqual_latency_bound_ms",
    "targets": "fleetqual_targets",
}

BUILTIN_DEFAULTS = {"threads": 1, "block_size": 16384, "direct": True, "time": 60, "warmup": 5}
DEFAULT_FILE_NUM = {"cache": 1, "over_cache": 128, "explicit": 1}
WORKING_SETS = ("cache", "over_cache")
_OPT = iobench_options.BY_NAME
MAX_THREADS = _OPT["threads"]["max"]     # every range: the option table (the binary's own)

# Steady state (issue 10.4; iobench --steady-state, --ss-*) and preconditioning: plan keys
# validated here; passed to the module once the option table has their rows (H1/H3).
STEADY_STATE_KEYS = ("steady_state", "ss_round_time", "ss_window", "ss_range_pct", "ss_slope_pct",
                     "ss_max_rounds", "ss_metric")
SS_DEFAULTS = {k: iobench_options.BINARY_DEFAULTS[k] for k in STEADY_STATE_KEYS if k != "steady_state"}
# keys of the option table the role sets itself, never a workload entry
RUNNER_KEYS = ("prepare",)

# parameters of the fleetqual.storage.iobench module a spec may carry: the option table's
# plan keys (plugins/module_utils/iobench_options.py), in command-line order
MODULE_PARAMS = tuple(k for k in iobench_options.PLAN_KEYS if k not in RUNNER_KEYS) + tuple(
    k for k in STEADY_STATE_KEYS if k not in iobench_options.PLAN_KEYS)
SEARCH_DEFAULTS = {k: iobench_options.BINARY_DEFAULTS[k] for k in ("search_max", "search_step_time")}
DB_LOG_SIZE_DEFAULT = iobench_options.BINARY_DEFAULTS["db_log_size"]
RANDOM_MODES = iobench_options.RANDOM_MODES
SPEC_KEYS = ("id", "workload", "description", "working_set", "precondition") + MODULE_PARAMS
PROFILE_KEYS = ("description", "extends", "defaults", "matrix")
# keys the overrides of one workload id may set: not those that name it or size its data set
PER_ID_OVERRIDE_KEYS = tuple(k for k in MODULE_PARAMS + ("precondition", "description")
                             if k not in ("mode", "threads", "rw_ratio", "file_num", "total_size", "block_size"))
# keys that identify a workload and cannot be defaulted or overridden
IDENTITY_KEYS = ("id", "workload", "mode", "description")
LIST_KEYS = ("threads", "rw_ratio")

_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.]+$")


class PlanError(ValueError):
    """Raised by :func:`plan` with every problem found; ``errors`` holds the list."""

    def __init__(self, errors):
        self.errors = list(errors)
        ValueError.__init__(self, "; ".join(self.errors))


# --------------------------------------------------------------------------- validation

def _boolean():
    return (lambda v: isinstance(v, bool)), (lambda v: "must be true or false, got %s %r" % (type_name(v), v))


# key -> (accepts(value), message(value)) of the plan's own keys; every iobench option is
# checked by its row of the option table (_check_by_table: type, choices, the binary's range)
_VALUE_RULES = {
    "id": (lambda v: isinstance(v, str) and bool(_ID_RE.match(v)),
           lambda v: "must be a string of letters, digits, '_', '.', '-', got %r" % (v,)),
    "workload": (lambda v: isinstance(v, str) and bool(_LABEL_RE.match(v)),
                 lambda v: "must be a label of letters, digits, '_' or '.' (e.g. cache, over_cache, log), got %r"
                 % (v,)),
    "description": (lambda v: isinstance(v, str), lambda v: "must be a string, got %s" % type_name(v)),
    "mode": (lambda v: v in MODES, lambda v: "unknown mode %r; known: %s" % (v, ", ".join(MODES))),
    "working_set": (lambda v: v in WORKING_SETS,
                    lambda v: "must be one of %s (or give total_size instead), got %r" % (", ".join(WORKING_SETS), v)),
    # iobench precondition --passes N (0 = none)
    "precondition": (lambda v: is_int(v) and 0 <= v <= iobench_options.PRECONDITION_MAX_PASSES,
                     lambda v: "must be an integer between 0 and %d (passes; 0 = none), got %r"
                     % (iobench_options.PRECONDITION_MAX_PASSES, v)),
}
SIZE_KEYS = iobench_options.SIZE_OPTS


def _check_value(key, value, path, errors):
    """Type/range check of one spec key. Returns the normalised value or None."""
    where = "%s.%s" % (path, key)

    def bad(msg):
        errors.append("%s: %s" % (where, msg))

    if key in SIZE_KEYS:
        try:
            n = parse_size(value)
        except ValueError as exc:
            bad(str(exc))
            return None
        if n <= 0:
            bad("must be greater than 0, got %r" % (value,))
            return None
        msg = iobench_options.range_error(key, n, repr(value))
        if msg:
            bad(msg)
            return None
        return n
    rule = _VALUE_RULES.get(key)
    if rule is None:
        return _check_by_table(key, value, bad)
    accepts, message = rule
    if not accepts(value):
        bad(message(value))
        return None
    return list(value) if isinstance(value, list) else value


def _check_by_table(key, value, bad):
    """An iobench option: checked by its row of the option table (type, choices and the
    binary's own range, ``iobench_options.value_error``)."""
    if key not in iobench_options.BY_NAME:
        bad("unknown key")  # pragma: no cover - callers filter unknown keys first
        return None
    msg = iobench_options.value_error(key, value)
    if msg:
        bad(msg)
        return None
    return list(value) if isinstance(value, list) else value


def _check_entry(entry, path, errors, allowed=SPEC_KEYS, allow_lists=False):
    """Validate a spec-like mapping; returns a normalised copy (bad keys dropped)."""
    if not isinstance(entry, dict):
        errors.append("%s: must be a mapping, got %s" % (path, type_name(entry)))
        return None
    out = {}
    for key, value in entry.items():
        if key not in allowed:
            hint = ""
            if key in SPEC_KEYS:
                hint = " (not allowed here)"
            else:
                guess = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.75)
                hint = " (did you mean %s?)" % guess[0] if guess else ""
            errors.append("%s.%s: unknown key%s; known: %s" % (path, key, hint, ", ".join(allowed)))
            continue
        if allow_lists and key in LIST_KEYS and isinstance(value, list):
            if not value:
                errors.append("%s.%s: list must not be empty" % (path, key))
                continue
            vals = []
            for i, v in enumerate(value):
                nv = _check_value(key, v, "%s.%s[%d]" % (path, key, i), errors)
                # _check_value appends ".key" itself; rewrite to path.key[i]
                if nv is not None:
                    vals.append(nv)
            if len(vals) == len(value):
                out[key] = vals
            continue
        nv = _check_value(key, value, path, errors)
        if nv is not None:
            out[key] = nv
    return out


def _fix_list_paths(errors, start):
    # "x.threads[1].threads: ..." -> "x.threads[1]: ..."
    for i in range(start, len(errors)):
        errors[i] = re.sub(r"\.(threads|rw_ratio)\[(\d+)\]\.(threads|rw_ratio):", r".\1[\2]:", errors[i])


# --------------------------------------------------------------------------- profiles

def _resolve_profile(profiles, name, names, errors, seen=None):
    """Return (defaults, [(entry, path), ...]) for the named profile, following extends."""
    seen = list(seen or [])
    pvar = names["profiles"]
    if name in seen:
        errors.append("%s.%s.extends: cycle %s" % (pvar, seen[-1], " -> ".join(seen + [name])))
        return {}, []
    seen.append(name)
    prof = profiles[name]
    path = "%s.%s" % (pvar, name)
    if not isinstance(prof, dict):
        errors.append("%s: must be a mapping with matrix (and optional description, extends, defaults), "
                      "got %s" % (path, type_name(prof)))
        return {}, []
    return _resolve_profile_dict(prof, path, profiles, names, errors, seen)


def _resolve_profile_dict(prof, path, profiles, names, errors, seen):
    for key in prof:
        if key not in PROFILE_KEYS:
            errors.append("%s.%s: unknown key; known: %s" % (path, key, ", ".join(PROFILE_KEYS)))
    defaults, entries = {}, []
    parent = prof.get("extends")
    if parent is not None:
        if not isinstance(parent, str) or not isinstance(profiles, dict) or parent not in profiles:
            known = ", ".join(sorted(profiles)) if isinstance(profiles, dict) else "none"
            errors.append("%s.extends: unknown profile %r; known: %s" % (path, parent, known))
        else:
            defaults, entries = _resolve_profile(profiles, parent, names, errors, seen)
            defaults = dict(defaults)
            entries = list(entries)
    own_defaults = prof.get("defaults")
    if own_defaults is not None:
        start = len(errors)
        checked = _check_entry(own_defaults, path + ".defaults", errors,
                               allowed=tuple(k for k in SPEC_KEYS if k not in IDENTITY_KEYS))
        _fix_list_paths(errors, start)
        if checked:
            defaults.update(checked)
    matrix = prof.get("matrix")
    if matrix is None:
        if not entries and parent is None:
            errors.append("%s.matrix: missing; a profile needs a list of workloads (or extends)" % path)
    elif not isinstance(matrix, list):
        errors.append("%s.matrix: must be a list of workload specs, got %s" % (path, type_name(matrix)))
    else:
        for i, entry in enumerate(matrix):
            entries.append((entry, "%s.matrix[%d]" % (path, i)))
    return defaults, entries


# --------------------------------------------------------------------------- building

def _read_pct(ratio):
    return int(round(100.0 * ratio / (ratio + 1.0)))


def derive_id(spec):
    """The workload id of a spec without an explicit one, derived here only:
    ``<workload>-<mode>-t<threads>``, plus ``-r<read %>`` for an rndrw mix with rw_ratio."""
    wid = "%s-%s-t%d" % (spec["workload"], spec["mode"], spec["threads"])
    if spec["mode"] == "rndrw" and "rw_ratio" in spec:
        wid += "-r%d" % _read_pct(spec["rw_ratio"])
    return wid


def _size_working_set(spec, cache_bytes, mem_total_mb, path, names, errors, require_ram):
    ws = spec.get("working_set")
    block = spec["block_size"]
    if "total_size" in spec:
        spec.setdefault("file_num", DEFAULT_FILE_NUM["explicit"])
        spec["working_set"] = "explicit"
        spec["sizing"] = "explicit total_size %s" % human_size(spec["total_size"])
        return
    spec.setdefault("file_num", DEFAULT_FILE_NUM[ws])
    if cache_bytes is None:
        return  # reported once already
    if ws == "cache":
        target = cache_bytes // 2
        sizing = "cache/2 = half of the declared cache %s" % human_size(cache_bytes)
    else:
        target = 4 * cache_bytes
        sizing = "4 x cache %s" % human_size(cache_bytes)
        if not spec["direct"]:
            if mem_total_mb is None:
                if require_ram:
                    errors.append("%s: buffered (direct: false) over_cache working set needs the host RAM "
                                  "(%s) to size 2 x RAM; gather facts or set total_size"
                                  % (path, names["mem_total_mb"]))
                    return
                sizing = "max(4 x cache %s, 2 x RAM unknown)" % human_size(cache_bytes)
            else:
                ram2 = 2 * int(mem_total_mb * MIB)
                sizing = "max(4 x cache %s, 2 x RAM %s)" % (human_size(cache_bytes),
                                                            human_size(mem_total_mb * MIB))
                target = max(target, ram2)
    unit = spec["file_num"] * block
    total = int(math.ceil(target / float(unit))) * unit if target > 0 else unit
    spec["total_size"] = total
    spec["sizing"] = "%s -> %s" % (sizing, human_size(total))


def _build(profile_or_matrix, cache_size, mem_total_mb, overrides, profiles, matrix, names,
           require_ram=True, seed=None):
    """``(specs, errors)``: the steps below, in order; each appends the problems it finds."""
    names = dict(VAR_NAMES, **(names or {}))
    errors = []
    cache_bytes, mem_total_mb, seed = _host_inputs(cache_size, mem_total_mb, seed, names, errors)
    defaults, entries = _plan_entries(profile_or_matrix, profiles, matrix, names, errors)
    over, per_id = _split_overrides(overrides, names, errors)
    sizing = (cache_bytes, mem_total_mb, names, require_ram)
    workloads, explicit_ids = [], {}
    for entry, path in entries:
        merged, checked = _merged_entry(entry, path, defaults, over, seed, errors)
        if merged is not None:
            workloads.extend(_expand(merged, checked, path, sizing, explicit_ids, errors))
    out = _unique_ids(workloads, explicit_ids, errors)
    _apply_per_id(out, per_id, names, errors)
    _check_rules(out, errors)
    return _ordered(out), errors


def _host_inputs(cache_size, mem_total_mb, seed, names, errors):
    """The declared cache in bytes, the host RAM in MiB (0 or None: unknown, e.g. facts not
    gathered) and the default seed, checked: ``(cache_bytes, mem_total_mb, seed)``, None
    where unusable."""
    cache_bytes = None
    try:
        cache_bytes = parse_size(DEFAULT_CACHE_SIZE if cache_size is None else cache_size)
        if cache_bytes <= 0:
            errors.append("%s: must be greater than 0, got %r" % (names["cache_size"], cache_size))
            cache_bytes = None
    except ValueError as exc:
        errors.append("%s: %s" % (names["cache_size"], exc))
    if mem_total_mb is not None:
        if isinstance(mem_total_mb, str) and mem_total_mb.strip().isdigit():
            mem_total_mb = int(mem_total_mb)
        if not is_number(mem_total_mb) or mem_total_mb < 0:
            errors.append("%s: must be a number of MiB, got %r" % (names["mem_total_mb"], mem_total_mb))
            mem_total_mb = None
        elif mem_total_mb == 0:
            mem_total_mb = None
    # seed: a default for every workload (an entry's own seed wins)
    if seed is not None and (not is_int(seed) or seed < 0):
        errors.append("%s: must be an integer >= 0, got %r" % (names["seed"], seed))
        seed = None
    return cache_bytes, mem_total_mb, seed


def _plan_entries(profile_or_matrix, profiles, matrix, names, errors):
    """The profile's defaults and its matrix entries ``[(entry, path), ...]``; a non-empty
    ``matrix`` replaces the entries (not the defaults)."""
    defaults, entries = {}, []
    if isinstance(profile_or_matrix, str):
        if not isinstance(profiles, dict) or profile_or_matrix not in profiles:
            known = ", ".join(sorted(profiles)) if isinstance(profiles, dict) and profiles else "none defined"
            errors.append("%s: unknown profile %r; known: %s" % (names["profile"], profile_or_matrix, known))
        else:
            defaults, entries = _resolve_profile(profiles, profile_or_matrix, names, errors)
    elif isinstance(profile_or_matrix, dict):
        defaults, entries = _resolve_profile_dict(profile_or_matrix, "profile", profiles or {}, names, errors, [])
    elif isinstance(profile_or_matrix, list):
        entries = [(e, "%s[%d]" % (names["matrix"], i)) for i, e in enumerate(profile_or_matrix)]
    else:
        errors.append("%s: must be a profile name, a profile mapping or a list of workloads, got %s"
                      % (names["profile"], type_name(profile_or_matrix)))
    if matrix is not None and matrix != [] and matrix != "":
        if not isinstance(matrix, list):
            errors.append("%s: must be a list of workload specs, got %s" % (names["matrix"], type_name(matrix)))
        else:
            entries = [(e, "%s[%d]" % (names["matrix"], i)) for i, e in enumerate(matrix)]
    if not entries and not errors:
        errors.append("%s: the plan is empty (no workloads)" % names["matrix"])
    return defaults, entries


def _split_overrides(overrides, names, errors):
    """``(over, per_id)``: the settings for every workload and, under a workload id, those of
    that workload only, checked."""
    over, per_id = {}, {}
    if overrides:
        start = len(errors)
        if isinstance(overrides, dict):
            # a mapping value under a key that is not a setting: the overrides of one workload id
            per_id = {k: v for k, v in overrides.items() if k not in SPEC_KEYS and isinstance(v, dict)}
            overrides = {k: v for k, v in overrides.items() if k not in per_id}
        over = _check_entry(overrides, names["overrides"], errors,
                            allowed=tuple(k for k in SPEC_KEYS if k not in IDENTITY_KEYS)) or {}
        for wid in list(per_id):
            per_id[wid] = _check_entry(per_id[wid], "%s.%s" % (names["overrides"], wid), errors,
                                       allowed=PER_ID_OVERRIDE_KEYS) or {}
        _fix_list_paths(errors, start)
    if over.get("total_size") is not None:
        over["working_set"] = None  # an explicit size replaces any keyword
    return over, per_id


def _merged_entry(entry, path, defaults, over, seed, errors):
    """``(merged, checked)``: one matrix entry checked and laid over the built-in and profile
    defaults, under the overrides; ``merged`` is None when the entry cannot be used."""
    start = len(errors)
    checked = _check_entry(entry, path, errors, allow_lists=True)
    _fix_list_paths(errors, start)
    if checked is None or len(errors) > start:
        return None, checked
    merged = dict(BUILTIN_DEFAULTS)
    if seed is not None:
        merged["seed"] = seed
    merged.update(defaults)
    merged.update(checked)
    for k, v in over.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    missing = [k for k in ("workload", "mode") if k not in merged]
    if missing:
        errors.append("%s: missing %s" % (path, " and ".join(missing)))
        return None, checked
    if "working_set" in merged and "total_size" in merged and "total_size" not in over:
        if "working_set" in checked and "total_size" in checked:
            errors.append("%s: give either working_set or total_size, not both" % path)
            return None, checked
        # one came from defaults: the entry's own choice wins
        merged.pop("working_set" if "total_size" in checked else "total_size")
    if "working_set" not in merged and "total_size" not in merged:
        errors.append("%s: missing working_set (cache | over_cache) or total_size" % path)
        return None, checked
    if "search" in merged:
        # a search runs steps of search_step_time; iobench refuses --time/--requests
        if "requests" in checked:
            errors.append("%s.requests: a search is bounded by its steps; remove requests" % path)
            return None, checked
        merged.pop("time", None)
        merged.pop("requests", None)
        for k, v in SEARCH_DEFAULTS.items():
            merged.setdefault(k, v)
    # the rules between iobench options: _check_rules, once the spec is whole
    if "rw_ratio" in merged and merged["mode"] != "rndrw":
        errors.append("%s.rw_ratio: only meaningful with mode rndrw (mode is %s)" % (path, merged["mode"]))
        return None, checked
    return merged, checked


def _expand(merged, checked, path, sizing, explicit_ids, errors):
    """One spec per value of the entry's ``threads`` and ``rw_ratio`` lists (threads outer),
    its working set sized and its id given (explicit ids suffixed, derived ones derived)."""
    cache_bytes, mem_total_mb, names, require_ram = sizing
    threads = merged["threads"] if isinstance(merged["threads"], list) else [merged["threads"]]
    ratios = merged.get("rw_ratio")
    ratios = ratios if isinstance(ratios, list) else [ratios]
    expanded = len(threads) > 1 or len(ratios) > 1
    specs = []
    for t in threads:
        for r in ratios:
            spec = dict(merged)
            spec["threads"] = t
            if r is None:
                spec.pop("rw_ratio", None)
            else:
                spec["rw_ratio"] = r
            spec["_path"] = path
            if "total_size" in spec:
                spec.pop("working_set", None)
            _size_working_set(spec, cache_bytes, mem_total_mb, path, names, errors, require_ram)
            if "id" in checked:
                wid = checked["id"]
                if expanded:
                    wid += "-t%d" % t if len(threads) > 1 else ""
                    wid += ("-r%d" % _read_pct(r)) if len(ratios) > 1 else ""
                if wid in explicit_ids:
                    errors.append("%s.id: duplicate id %r (also %s)" % (path, wid, explicit_ids[wid]))
                    continue
                explicit_ids[wid] = path
                spec["id"] = wid
                spec["_explicit"] = True
            else:
                spec["id"] = derive_id(spec)
            specs.append(spec)
    return specs


def _unique_ids(workloads, explicit_ids, errors):
    """Derived ids made unique: a spec equal to an earlier one with its id is dropped, a
    different one gets ``-2``, ``-3``, ...; an explicit id may not be a derived one."""
    out, by_id = [], {}
    for spec in workloads:
        explicit = spec.pop("_explicit", False)
        wid = spec["id"]
        if not explicit and wid in by_id:
            if any(_same(spec, other) for other in by_id[wid]):
                continue
            n = 2
            while "%s-%d" % (wid, n) in by_id or "%s-%d" % (wid, n) in explicit_ids:
                n += 1
            by_id[wid].append(spec)
            spec["id"] = "%s-%d" % (wid, n)
            by_id.setdefault(spec["id"], [spec])
        else:
            if wid in by_id and explicit:
                errors.append("id %r is both explicit and derived; rename the explicit id" % wid)
            by_id.setdefault(wid, []).append(spec)
        out.append(spec)
    return out


def _apply_per_id(out, per_id, names, errors):
    """The overrides of one workload id, applied last; an id no workload has is an error
    with the closest id."""
    known_ids = [spec["id"] for spec in out]
    for wid, values in per_id.items():
        if wid not in known_ids:
            close = difflib.get_close_matches(str(wid), known_ids, n=1, cutoff=0.6)
            errors.append("%s.%s: no workload of the plan has this id%s; ids: %s" % (
                names["overrides"], wid, " (did you mean %s?)" % close[0] if close else "", ", ".join(known_ids)))
            continue
        out[known_ids.index(wid)].update(values)


def _check_rules(out, errors):
    """The rules between iobench options (``iobench_options.rule_errors``, the binary's own)
    on every whole spec, each error naming the entry's path, the option and the workload."""
    start = len(errors)
    for spec in out:
        for key, msg in iobench_options.rule_errors(spec):
            errors.append("%s.%s (workload %s): %s" % (spec["_path"], key, spec["id"], msg))
    errors[start:] = list(dict.fromkeys(errors[start:]))


def _ordered(out):
    """The specs with ``dataset``, ``index``/``of`` and their keys in the documented order."""
    ordered = []
    for i, spec in enumerate(out):
        spec.pop("_path", None)
        spec["dataset"] = dataset_name(spec)
        spec["index"] = i + 1
        spec["of"] = len(out)
        keys = [k for k in _OUTPUT_ORDER if k in spec]
        keys += [k for k in spec if k not in _OUTPUT_ORDER and k not in _OUTPUT_TAIL]
        keys += [k for k in _OUTPUT_TAIL if k in spec]
        ordered.append({k: spec[k] for k in keys})
    return ordered


_OUTPUT_ORDER = ("id", "workload", "description", "mode", "threads", "file_num", "total_size", "block_size",
                 "direct", "time", "warmup")
_OUTPUT_TAIL = ("working_set", "sizing", "dataset", "index", "of")


def _compact_size(n):
    for suffix, mult in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= mult and n % mult == 0:
            return "%d%s" % (n // mult, suffix)
    return str(n)


def dataset_name(spec):
    """Name of the data set (the files) a workload runs on: ``<working set or workload
    label>-<file_num>x<file size>``, e.g. ``over_cache-128x32M``. Workloads with the same
    name use the same files, so the role can prepare them once in
    ``<fleetqual_test_dir>/<dataset>``; it is a plain directory name."""
    label = spec.get("working_set") if spec.get("working_set") in WORKING_SETS else spec.get("workload")
    fn = int(spec.get("file_num") or 1)
    return "%s-%dx%s" % (label, fn, _compact_size(int(spec.get("total_size") or 0) // fn))


def _same(a, b):
    ignore = ("id", "index", "of", "description", "_path")
    return {k: v for k, v in a.items() if k not in ignore} == {k: v for k, v in b.items() if k not in ignore}


# --------------------------------------------------------------------------- public API

def plan(profile_or_matrix, cache_size=DEFAULT_CACHE_SIZE, mem_total_mb=None, overrides=None,
         profiles=None, matrix=None, names=None, seed=None):
    """Resolve a profile (name or mapping) or a matrix (list) into workload specs.

    ``profiles`` is ``fleetqual_profiles`` (needed for a name and for ``extends``);
    ``matrix`` (``fleetqual_matrix``), when a non-empty list, replaces the profile's
    matrix; ``overrides`` is a mapping applied to every workload. ``cache_size`` is
    a size (``256M``) and ``mem_total_mb`` the host RAM in MiB (``ansible_memtotal_mb``;
    0 or None = unknown). ``seed`` (``fleetqual_seed``) is the default iobench seed of
    every workload. Raises :class:`PlanError` (a ``ValueError``) listing every problem.
    """
    result, errors = _build(profile_or_matrix, cache_size, mem_total_mb, overrides, profiles,
                            matrix, names, require_ram=True, seed=seed)
    if errors:
        raise PlanError(errors)
    return result


def resolve(profile_or_matrix, cache_size=DEFAULT_CACHE_SIZE, mem_total_mb=None, overrides=None,
            profiles=None, matrix=None, names=None, seed=None):
    """``(specs, errors)`` without raising: what :func:`plan` would return and every
    problem it would raise, except a missing RAM figure (validation runs on the controller
    before host facts matter; a buffered over-cache set is then sized without RAM)."""
    return _build(profile_or_matrix, cache_size, mem_total_mb, overrides, profiles, matrix, names,
                  require_ram=False, seed=seed)


def module_args(spec):
    """Only the ``fleetqual.storage.iobench`` parameters of a resolved spec (on a device
    target without ``total_size``/``file_num``, which iobench refuses with ``--device``;
    :func:`target_args` adds where it runs)."""
    skip = ("total_size", "file_num") if spec.get("target_kind") == "device" else ()
    return {k: copy.deepcopy(v) for k, v in spec.items() if k in MODULE_PARAMS and k not in skip}


def largest_working_set(plan_list):
    """Largest ``total_size`` (bytes) in the plan: the free space the test dir needs."""
    sizes = [int(w.get("total_size") or 0) for w in plan_list or []]
    return max(sizes) if sizes else 0


def required_space(plan_list):
    """Bytes of all distinct data sets of the plan: the free space needed when data sets
    are kept until the end of the run (prepared once, shared by their workloads). A
    dbpattern workload adds its log file (db_log_size, iobench's default 64 MiB). Device
    targets need no free space and are not counted; with several path targets, call it on
    each target's workloads (``selectattr('target', 'equalto', name)``)."""
    sizes = {}
    for w in plan_list or []:
        if w.get("target_kind") == "device":
            continue
        name = w.get("dataset") or dataset_name(w)
        log = int(w.get("db_log_size") or DB_LOG_SIZE_DEFAULT) if w.get("mode") == "dbpattern" else 0
        sizes[name] = max(sizes.get(name, 0), int(w.get("total_size") or 0) + log)
    return sum(sizes.values())


def search_steps(w):
    """Number of steps a search runs: 1, 2, 4, ... up to search_max, plus max itself."""
    top = int(w.get("search_max") or SEARCH_DEFAULTS["search_max"])
    steps, k = 0, 1
    while k < top:
        steps, k = steps + 1, k * 2
    return steps + 1


def workload_duration_s(w):
    """Planned seconds of one workload: warmup + time, or warmup + steps x step time, or
    for steady state at most warmup + max rounds x round time (preconditioning not included)."""
    if w.get("steady_state"):
        return int(w.get("warmup") or 0) + int(w.get("ss_max_rounds") or SS_DEFAULTS["ss_max_rounds"]) * float(
            w.get("ss_round_time") or SS_DEFAULTS["ss_round_time"])
    if w.get("search"):
        return int(w.get("warmup") or 0) + search_steps(w) * int(w.get("search_step_time") or 0)
    return int(w.get("time") or 0) + int(w.get("warmup") or 0)


def expected_duration_s(plan_list):
    """Sum of ``warmup + time`` over the plan, in seconds (prepare/cleanup not included;
    a workload bounded by ``requests`` with ``time: 0`` counts its warmup only)."""
    return sum(workload_duration_s(w) for w in plan_list or [])


def _duration_text(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return "%d s" % seconds
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return "%d h %02d min" % (h, m)
    return "%d min %02d s" % (m, s) if s else "%d min" % m


def workload_line(w):
    """One human line for a workload spec."""
    parts = ["%s, %d thread%s" % (w["mode"], w["threads"], "" if w["threads"] == 1 else "s")]
    fn = int(w.get("file_num") or 1)
    total = int(w.get("total_size") or 0)
    if w.get("target_kind") == "device":
        parts.append("device %s, %s" % (w.get("target_device"), "the first %s" % human_size(w["device_size"])
                                        if w.get("device_size") else "the whole device"))
    elif fn == 1:
        parts.append("1 file of %s" % human_size(total))
    else:
        parts.append("%d files x %s = %s" % (fn, human_size(total // fn), human_size(total)))
    if w.get("working_set") in WORKING_SETS:
        parts[-1] += " (%s)" % w["working_set"]
    parts.append("%s blocks" % human_size(w.get("block_size")))
    parts.append("O_DIRECT" if w.get("direct") else "buffered")
    if w.get("rw_ratio") is not None:
        pct = _read_pct(w["rw_ratio"])
        parts.append("%d/%d read/write" % (pct, 100 - pct))
    if w.get("precondition"):
        parts.append("preconditioned (%d pass%s)" % (w["precondition"], "" if w["precondition"] == 1 else "es"))
    if w.get("fsync_freq"):
        parts.append("%s every %d write%s" % (w.get("fsync_mode", "fsync"), w["fsync_freq"],
                                              "" if w["fsync_freq"] == 1 else "s"))
    if w.get("engine") and w["engine"] != "sync":
        parts.append("%s iodepth %s" % (w["engine"], w.get("iodepth", 1)))
    if w.get("search"):
        parts.append("search %s 1..%s for p%s <= %s ms, %d steps x %s s + %s s warmup" % (
            w["search"], w.get("search_max"), str(w.get("search_percentile", "p99"))[1:],
            fmt_num(w.get("search_bound_ms", 50)), search_steps(w), w.get("search_step_time"),
            w.get("warmup", 0)))
    elif w.get("steady_state"):
        parts.append("steady state: rounds of %s s, up to %s, + %s s warmup" % (
            w.get("ss_round_time") or SS_DEFAULTS["ss_round_time"],
            w.get("ss_max_rounds") or SS_DEFAULTS["ss_max_rounds"], w.get("warmup", 0)))
    elif w.get("time"):
        parts.append("%s s + %s s warmup" % (w["time"], w.get("warmup", 0)))
    else:
        parts.append("%s requests + %s s warmup" % (w.get("requests"), w.get("warmup", 0)))
    where = " on %s" % w["target"] if w.get("target") else ""
    return "[%s/%s] %s%s: %s" % (w.get("index", "?"), w.get("of", "?"), w["id"], where, ", ".join(parts))


def plan_summary(plan_list):
    """Printable lines: one per workload, then a total line."""
    lines = [workload_line(w) for w in plan_list or []]
    n = len(plan_list or [])
    lines.append("%d workload%s, about %s of measurement and warmup (prepare not included), "
                 "largest working set %s" % (n, "" if n == 1 else "s",
                                             _duration_text(expected_duration_s(plan_list)),
                                             human_size(largest_working_set(plan_list))))
    return lines


__all__ = ["plan", "resolve", "derive_id", "module_args", "largest_working_set",
           "required_space", "dataset_name", "expected_duration_s",
           "plan_summary", "workload_line", "workload_duration_s", "search_steps", "human_size", "PlanError",
           "MODULE_PARAMS",
           "plan_targets", "TARGET_SPEC_KEYS", "workload_key", "target_args"]


# --------------------------------------------------------------------------- targets (issue 11)
#
# ``fleetqual_targets``: where a host's plan runs, one target after the other. Checked and
# resolved by ``validate.resolve_targets`` (validation before any host is contacted, and
# the filter before the plan is expanded here):
#
#   {name, kind: path, path, shorthand}                              a directory
#   {name, kind: device, device, destroy_data: true, serial, size}   a whole block device
#
# An empty list is the shorthand: one path target, ``fleetqual_test_dir``; the plan of a
# shorthand target is the plan as it always was (no target keys at all).

TARGET_VAR = "fleetqual_targets"
DEVICE_ALIGN = 512
# keys plan_targets adds to a spec (and so to its record)
TARGET_SPEC_KEYS = ("target", "target_kind", "target_path", "target_device", "target_serial", "key", "device_size")


def _capacity_map(capacities):
    """``{device path: bytes}`` from a mapping, or from the drives module's result
    (``guard`` entries' ``device``/``resolved``/``size_bytes``, ``drives``' paths)."""
    if not isinstance(capacities, dict):
        return {}
    if not any(k in capacities for k in ("guard", "drives")):
        return {k: v for k, v in capacities.items() if is_int(v) and v > 0}
    out = {}
    for d in capacities.get("drives") or []:
        if isinstance(d, dict) and is_int(d.get("size_bytes")):
            for p in [d.get("path"), d.get("id_path")] + list(d.get("by_id") or []):
                if p:
                    out[p] = d["size_bytes"]
    for g in capacities.get("guard") or []:
        if isinstance(g, dict) and is_int(g.get("size_bytes")):
            for p in (g.get("device"), g.get("resolved")):
                if p:
                    out[p] = g["size_bytes"]
    return out


def _device_spec(spec, target, region, region_text, where, errors):
    """A workload spec on a device target: one region from offset 0 (iobench --device
    --size), no files. Over-cache working sets use the whole region; cache and explicit
    ones keep their size and must fit in it."""
    s = dict(spec)
    planned = int(spec.get("total_size") or 0)
    s["file_num"] = 1
    if not s.get("direct"):
        s["direct"] = True
        note = "; O_DIRECT (a block device is always measured with O_DIRECT)"
    else:
        note = ""
    if spec.get("working_set") == "over_cache":
        if region is None:
            s["total_size"] = None
            s["device_size"] = 0
            s["sizing"] = "the whole device %s (capacity not known to the plan; at least %s for over_cache)%s" % (
                target["device"], human_size(planned), note)
        else:
            usable = region - region % int(spec["block_size"])
            if usable < planned:
                errors.append("%s: %s is smaller than workload %s's over_cache working set %s (%s); give a larger "
                              "size: (at least %s) or a smaller fleetqual_cache_size"
                              % (where, region_text, spec["id"], human_size(planned), spec.get("sizing"),
                                 _compact_size(-(-planned // DEVICE_ALIGN) * DEVICE_ALIGN)))
                return None
            s["total_size"] = usable
            s["device_size"] = usable
            s["sizing"] = "%s -> %s%s" % (region_text, human_size(usable), note)
    else:
        if region is not None and planned > region:
            errors.append("%s: %s is smaller than workload %s's working set %s; give a larger size: (at least %s)"
                          % (where, region_text, spec["id"], human_size(planned),
                             _compact_size(-(-planned // DEVICE_ALIGN) * DEVICE_ALIGN)))
            return None
        s["device_size"] = planned
        s["sizing"] = "%s, the first %s of %s%s" % (spec.get("sizing"), human_size(planned), target["device"], note)
    s["dataset"] = "%s@0+%s" % (target["name"], _compact_size(int(s["device_size"])) if s["device_size"] else "all")
    return s


def plan_targets(plan_list, targets, capacities=None, host=None, names=None):
    """The host's plan run on each of its targets, one target after the other.

    ``plan_list``: the resolved plan (:func:`plan`); ``targets``: the resolved targets
    (``validate.resolve_targets``; empty or the one shorthand target: the plan as it is);
    ``capacities``: device sizes from the host's facts (a mapping ``{device path: bytes}``
    or the ``fleetqual.storage.drives`` result).

    With the shorthand target the plan is returned unchanged. Otherwise every spec gains
    ``target`` (name), ``target_kind`` (path | device), ``target_path`` or
    ``target_device`` (+ ``target_serial`` when given), ``key`` (``<id>@<target>``: unique
    in the expanded plan; the record key is (host, target, id)) and new ``index``/``of``.
    Device specs also get ``device_size`` (iobench ``--size``, 0 = the whole device),
    ``file_num: 1``, ``direct: true`` and a ``dataset`` naming the region
    (``<target>@0+<size>``: offsets, not files). Raises :class:`PlanError`.
    """
    resolved, errors = list(targets or []), []
    if not resolved or (len(resolved) == 1 and resolved[0].get("shorthand")):
        return list(plan_list or [])
    caps = _capacity_map(capacities)
    var = dict(VAR_NAMES, **(names or {})).get("targets", TARGET_VAR)
    out = []
    for ti, target in enumerate(resolved):
        where = "%s%s[%d] (%s)" % ("host %s: " % host if host else "", var, ti, target["name"])
        if target["kind"] == "device":
            cap = caps.get(target["device"])
            if target.get("size") is not None:
                if cap is not None and target["size"] > cap:
                    errors.append("%s.size: %s is larger than the device (%s); at most %s"
                                  % (where, human_size(target["size"]), human_size(cap), _compact_size(cap)))
                    continue
                region, region_text = target["size"], "size: %s" % human_size(target["size"])
            elif cap is not None:
                region, region_text = cap, "the whole device (%s)" % human_size(cap)
            else:
                region, region_text = None, None
        for spec in plan_list or []:
            if target["kind"] == "device":
                s = _device_spec(spec, target, region, region_text, where, errors)
                if s is None:
                    continue
                s["target_device"] = target["device"]
                if target.get("serial"):
                    s["target_serial"] = target["serial"]
            else:
                s = dict(spec)
                s["target_path"] = target["path"]
            s["target"] = target["name"]
            s["target_kind"] = target["kind"]
            s["key"] = workload_key(s)
            out.append(s)
    if errors:
        raise PlanError(errors)
    for i, s in enumerate(out):
        s["index"] = i + 1
        s["of"] = len(out)
    return out


def workload_key(spec):
    """The key of a workload in the host's expanded plan and of its record: ``<id>@<target>``,
    or the ``id`` alone for the shorthand target (the record key is (host, target, id))."""
    return "%s@%s" % (spec["id"], spec["target"]) if spec.get("target") else spec["id"]


def target_args(spec):
    """Where the benchmark of a spec runs, as module parameters: ``{dir: <path>/<dataset>}``
    for a path target, ``{device, size}`` for a device target, ``{}`` for the shorthand
    (the role passes ``fleetqual_test_dir`` as it always did)."""
    if spec.get("target_kind") == "device":
        return {"device": spec["target_device"], "size": int(spec.get("device_size") or 0)}
    if spec.get("target_kind") == "path":
        return {"dir": "%s/%s" % (spec["target_path"].rstrip("/"), spec["dataset"])}
    return {}
