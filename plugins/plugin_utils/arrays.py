# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode (issue 16), the controller side: who belongs to an array and its step schedule.

A host joins an array with ``fleetqual_array: NAME`` (usually in the group_vars of the
array's initiators). ``fleetqual_arrays: {NAME: {...}}`` holds each array's schedule and rules.

:func:`members` gives an array's hosts in *rank order* (natural sort of the inventory names:
``h2`` before ``h10``); a host of rank ``r`` (0-based) is active in a step when
``r < initiators``. :func:`plan_steps` gives the ordered step list, fixed in advance from
a common start ``T0`` (the controller's clock), so no controller round trip is needed per step:

* order: modes (outer), then initiators, then threads (inner), as listed in the config;
* each step runs ``warmup`` seconds, then its measured window of ``time`` seconds;
* step 1's warm-up starts at ``T0 + LEAD_S``; between the end of one measured window and
  the start of the next step's warm-up there is a fixed gap of ``STEP_GAP_S`` seconds
  (iobench exits, its result is saved, the next iobench starts and lays out its workers);
* ``offset_s``: seconds from ``T0`` at which the step's *measured* window opens;
  ``end_s = offset_s + time``.
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils._common import human_size, parse_size
from ansible_collections.fleetqual.storage.plugins.plugin_utils.plan import DEFAULT_CACHE_SIZE

ARRAY_VAR = "fleetqual_array"
ARRAYS_VAR = "fleetqual_arrays"

# schedule constants (seconds), see the module docstring and docs/arrays.md
LEAD_S = 0.0
STEP_GAP_S = 2.0

DEFAULTS = {
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
}


def _natural_key(text):
    # one natural sort in the collection: fleet.natural_key (imported late: fleet imports this module)
    from ansible_collections.fleetqual.storage.plugins.plugin_utils import fleet as fleetmod
    return fleetmod.natural_key(text)


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
                  key=_natural_key)


def _as_list(value):
    if value is None:
        return None
    return list(value) if isinstance(value, (list, tuple)) else [value]


def data_set_per_host(cfg, n_members=None, cache_size=None):
    """``(bytes, how)``: the data set each initiator prepares and the sizing line.

    An explicit ``total_size`` (per initiator) is used as given. Otherwise the array's cache
    (``cache_size``, default ``fleetqual_cache_size``) sizes it, like plan.py's working sets
    but against the *fewest* initiators of the sweep, since a step only touches the data of
    its active initiators:

    * ``over_cache`` (default): ``ceil(4 x cache / min(initiators))`` per initiator, so even
      the smallest step's working set is four times the cache;
    * ``cache``: ``cache / 2 / max(initiators)``, so even the largest step fits in half the cache.

    Rounded up to whole blocks of every file (``file_num x block_size``)."""
    cfg = cfg or {}
    block = parse_size(cfg.get("block_size", DEFAULTS["block_size"]))
    file_num = cfg.get("file_num", DEFAULTS["file_num"])
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
        how = "4 x cache / %d initiator%s (cache %s)" % (min(counts), "" if min(counts) == 1 else "s",
                                                        human_size(cache))
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
    threads = _as_list(cfg.get("threads")) or DEFAULTS["threads"]
    modes = _as_list(cfg.get("modes")) or DEFAULTS["modes"]
    time_s = cfg.get("time", DEFAULTS["time"])
    warmup = cfg.get("warmup", DEFAULTS["warmup"])
    block_size = parse_size(cfg.get("block_size", DEFAULTS["block_size"]))
    rw_ratio = cfg.get("rw_ratio", DEFAULTS["rw_ratio"])
    direct = cfg.get("direct", DEFAULTS["direct"])
    iodepth = cfg.get("iodepth", DEFAULTS["iodepth"])
    engine = cfg.get("engine", DEFAULTS["engine"])
    file_num = cfg.get("file_num", DEFAULTS["file_num"])
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
                start = end + STEP_GAP_S
    return steps


def active(rank, step):
    """True when the host of 0-based ``rank`` runs in ``step``."""
    return rank < step["initiators"]


def schedule_seconds(steps):
    """Seconds from T0 to the end of the last measured window."""
    return max((s["end_s"] for s in steps), default=0.0)
