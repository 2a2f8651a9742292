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

The checks of an option's value and the rules between options come from the
option table (``module_utils/plan/options.py``: ``value_error``, ``rule_errors``, the
binary's own ranges); the targets a plan runs on live in ``targets.py`` and what a plan
costs and how it reads (durations, space, summary lines) in ``summary.py``.

The plan is module_utils so that a module can compute a host's plan on the host
(with the facts it gathers there); the controller (the ``plan`` filter, validation, the
report) uses the very same functions. :func:`plan_on_targets` is the ``plan`` filter.
"""

import copy
import difflib
import math
import re

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import burnin as _burnin
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as iobench_options
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import MODES
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size, parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.summary import (
    SEARCH_DEFAULTS,
    WORKING_SETS,
    dataset_name,
    read_pct,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import (
    PlanError,
    plan_targets,
    resolve_targets,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int, is_number

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
_OPT = iobench_options.BY_NAME
MAX_THREADS = _OPT["threads"]["max"]     # every range: the option table (the binary's own)

# Steady state (iobench --steady-state, --ss-*) and preconditioning: plan keys
# validated here; passed to the module once the option table has their rows (H1/H3).
STEADY_STATE_KEYS = ("steady_state", "ss_round_time", "ss_window", "ss_range_pct", "ss_slope_pct",
                     "ss_max_rounds", "ss_metric")
# keys of the option table the role sets itself, never a workload entry
RUNNER_KEYS = ("prepare",)

# parameters of the fleetqual.storage.iobench module a spec may carry: the option table's
# plan keys (plugins/module_utils/plan/options.py), in command-line order
MODULE_PARAMS = tuple(k for k in iobench_options.PLAN_KEYS if k not in RUNNER_KEYS) + tuple(
    k for k in STEADY_STATE_KEYS if k not in iobench_options.PLAN_KEYS)
RANDOM_MODES = iobench_options.RANDOM_MODES
SPEC_KEYS = ("id", "workload", "description", "working_set", "precondition") + MODULE_PARAMS
PROFILE_KEYS = ("description", "extends", "defaults", "matrix", "burnin")   # burnin: module_utils/plan/burnin.py
# keys the overrides of one workload id may set: not those that name it or size its data set
PER_ID_OVERRIDE_KEYS = tuple(k for k in MODULE_PARAMS + ("precondition", "description")
                             if k not in ("mode", "threads", "rw_ratio", "file_num", "total_size", "block_size"))
# keys that identify a workload and cannot be defaulted or overridden
IDENTITY_KEYS = ("id", "workload", "mode", "description")
LIST_KEYS = ("threads", "rw_ratio")

_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.]+$")


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

def derive_id(spec):
    """The workload id of a spec without an explicit one, derived here only:
    ``<workload>-<mode>-t<threads>``, plus ``-r<read %>`` for an rndrw mix with rw_ratio."""
    wid = "%s-%s-t%d" % (spec["workload"], spec["mode"], spec["threads"])
    if spec["mode"] == "rndrw" and "rw_ratio" in spec:
        wid += "-r%d" % read_pct(spec["rw_ratio"])
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
    out = _burnin.expand_rounds(out, _burnin.setting_of(profile_or_matrix, profiles), names, errors)
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
                    wid += ("-r%d" % read_pct(r)) if len(ratios) > 1 else ""
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


# The plan filter (fleetqual.storage.plan) and a host's own plan: plan(), then, when targets
# are given (fleetqual_targets), resolve_targets() and plan_targets() (the plan on each target,
# one after the other); raises PlanError with every problem.
def plan_on_targets(profile_or_matrix, cache_size=DEFAULT_CACHE_SIZE, mem_total_mb=None, overrides=None,
                    profiles=None, matrix=None, seed=None, targets=None, test_dir=None, capacities=None):
    specs = plan(profile_or_matrix, cache_size=cache_size, mem_total_mb=mem_total_mb,
                 overrides=overrides, profiles=profiles, matrix=matrix, seed=seed)
    if targets:  # fleetqual_targets: the plan on each target, one after the other
        resolved, errors = resolve_targets(targets, test_dir=test_dir)
        if errors:
            raise PlanError(errors)
        specs = plan_targets(specs, resolved, capacities=capacities)
    return _burnin.cover_data_sets(specs)


__all__ = ["plan", "plan_on_targets", "resolve", "derive_id", "module_args", "MODULE_PARAMS"]
