# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of array mode's inputs on the controller, before any host is touched.

:func:`validate_arrays` looks at every targeted host's ``fleetqual_array`` and
``fleetqual_arrays`` together (an array is a property of several hosts) and returns every
problem as one string naming the variable, the host(s) and the closest valid value:

* a host naming an array that ``fleetqual_arrays`` does not define (did-you-mean);
* a host in two arrays: ``fleetqual_array`` given as a list of two names, or a host that
  names one array and is in an inventory group another array lists in its ``groups``;
* an array that no host of the play joins, or whose ``groups`` names a group with no host;
* an array defined differently on its hosts (it has one schedule: define it once);
* unknown keys (did-you-mean), bad values, unknown modes, initiator counts above the
  array's number of hosts;
* steps that exceed a target: the data set per initiator against a device target's
  ``size``, the total working set (data set x hosts) against the array's ``capacity``;
  an unknown ``target``;
* the array's rules (``thresholds``): unknown keys, bad limits, and a rule naming a step
  that is not planned (initiators, threads or mode not in the sweep);
* an array whose hosts ``fleetqual_serial`` would put in two batches of the qualify play
  (:func:`serial_batches`): the array's T0 is fixed once per playbook run
  (plugins/action/lockstep.py), so the members of a later batch would miss every step.

Also one cross-host check that is not the array's own (:func:`shared_luns`): a SAN LUN
(a target named by ``wwid``) in the targets of several hosts.
"""

import difflib

from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import BY_NAME as _OPTIONS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import failover as _failover
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as _arrays
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as _plan
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as _targets
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import inputs as _validate
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import MODES
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import human_size, parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int, is_number

ARRAY_VAR = _arrays.ARRAY_VAR
ARRAYS_VAR = _arrays.ARRAYS_VAR
SERIAL_VAR = "fleetqual_serial"     # playbooks/qualify.yml: serial: "{{ fleetqual_serial | default('100%') }}"
CONFIG_KEYS = ("description", "groups", "initiators", "threads", "modes", "time", "warmup", "block_size", "rw_ratio",
               "direct", "iodepth", "engine", "file_num", "total_size", "working_set", "cache_size", "capacity",
               "target", "latency_bound_ms", "max_clock_uncertainty_ms", "step_gap_s", "thresholds")
ENGINES = tuple(_OPTIONS["engine"]["choices"])   # the option table's (the binary's own)
MIN_STEP_GAP_S = 1
SIZE_KEYS = ("block_size", "total_size", "cache_size", "capacity")
# host rule names a user may carry over to an array rule
RULE_ALIASES = {"min_iops": "min_aggregate_iops", "min_mibps": "min_aggregate_mibps", "max_read_p99_ms": "max_p99_ms",
                "max_write_p99_ms": "max_p99_ms", "max_read_p50_ms": "max_p50_ms", "max_write_p50_ms": "max_p50_ms",
                "min_jain": "min_fairness", "workload": None, "id": None}


def _guess(word, choices, cutoff=0.6):
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=cutoff)
    return " (did you mean %s?)" % close[0] if close else ""


def _hosts_text(hosts, limit=4):
    hosts = list(hosts)
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return "%s and %d more" % (", ".join(hosts[:limit]), len(hosts) - limit)


def _nearest(value, choices):
    return min(choices, key=lambda c: (abs(c - value), c)) if choices else None


def _int_list(cfg, key, where, errors, low, high=None, high_text=None):
    """A list of distinct integers in [low, high] (a scalar is a list of one)."""
    value = cfg[key]
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        errors.append("%s.%s: list must not be empty" % (where, key))
        return None
    good = []
    for i, v in enumerate(values):
        path = "%s.%s[%d]" % (where, key, i) if isinstance(value, list) else "%s.%s" % (where, key)
        if not is_int(v) or v < low:
            errors.append("%s: must be an integer >= %d, got %r" % (path, low, v))
        elif high is not None and v > high:
            errors.append("%s: %d %s; closest valid value: %d" % (path, v, high_text or "is too large", high))
        elif v in good:
            errors.append("%s: %d is listed twice (each value is one step of the sweep)" % (path, v))
        else:
            good.append(v)
    return good if len(good) == len(values) else None


def _check_config(name, cfg, hosts, errors):
    """Check one array's config; returns the config normalised for plan_steps, or None."""
    where = "%s.%s" % (ARRAYS_VAR, name)
    if not isinstance(cfg, dict):
        errors.append("%s: must be a mapping (initiators, threads, modes, time, warmup, block_size, thresholds, ...), "
                      "got %s" % (where, type_name(cfg)))
        return None
    start = len(errors)
    for key in cfg:
        if key not in CONFIG_KEYS:
            errors.append("%s.%s: unknown key%s; known: %s" % (where, key, _guess(key, CONFIG_KEYS), ", ".join(CONFIG_KEYS)))
    n = len(hosts)
    if "initiators" in cfg:
        _int_list(cfg, "initiators", where, errors, 1, n,
                  "initiators, but the array has %d host%s (%s)" % (n, "" if n == 1 else "s", _hosts_text(hosts)))
    if "threads" in cfg:
        _int_list(cfg, "threads", where, errors, 1, _plan.MAX_THREADS, "threads is above iobench's limit")
    if "modes" in cfg:
        modes = cfg["modes"] if isinstance(cfg["modes"], list) else [cfg["modes"]]
        if not modes:
            errors.append("%s.modes: list must not be empty" % where)
        for i, m in enumerate(modes):
            if m not in MODES:
                errors.append("%s.modes[%d]: unknown mode %r%s; known: %s" % (where, i, m, _guess(m, MODES), ", ".join(MODES)))
        if len(set(map(str, modes))) != len(modes):
            errors.append("%s.modes: a mode is listed twice" % where)
    for key, low in (("time", 1), ("warmup", 0), ("iodepth", 1), ("file_num", 1)):
        if key in cfg and (not is_int(cfg[key]) or cfg[key] < low):
            closest = max(low, int(cfg[key])) if is_number(cfg[key]) and not isinstance(cfg[key], bool) else low
            errors.append("%s.%s: must be an integer >= %d, got %r; closest valid value: %d"
                          % (where, key, low, cfg[key], closest))
    for key in SIZE_KEYS:
        if key in cfg:
            try:
                if parse_size(cfg[key]) <= 0:
                    errors.append("%s.%s: must be greater than 0, got %r" % (where, key, cfg[key]))
            except ValueError as exc:
                errors.append("%s.%s: %s" % (where, key, exc))
    for key in ("rw_ratio", "latency_bound_ms", "max_clock_uncertainty_ms"):
        if key in cfg and cfg[key] is not None and (not is_number(cfg[key]) or cfg[key] <= 0):
            errors.append("%s.%s: must be a number > 0, got %r" % (where, key, cfg[key]))
    if "step_gap_s" in cfg and (not is_number(cfg["step_gap_s"]) or cfg["step_gap_s"] < MIN_STEP_GAP_S):
        errors.append("%s.step_gap_s: must be a number of seconds >= %s (the host saves one step's result and "
                      "starts the next iobench in it), got %r; closest valid value: %s"
                      % (where, MIN_STEP_GAP_S, cfg["step_gap_s"], MIN_STEP_GAP_S))
    if "direct" in cfg and not isinstance(cfg["direct"], bool):
        errors.append("%s.direct: must be true or false, got %s %r" % (where, type_name(cfg["direct"]), cfg["direct"]))
    if "engine" in cfg and cfg["engine"] not in ENGINES:
        errors.append("%s.engine: unknown engine %r%s; known: %s"
                      % (where, cfg["engine"], _guess(cfg["engine"], ENGINES), ", ".join(ENGINES)))
    if is_int(cfg.get("iodepth")) and cfg["iodepth"] > 1 and cfg.get("engine", "sync") != "io_uring":
        errors.append("%s.iodepth: %d needs engine: io_uring (the sync engine has one request in flight per thread); "
                      "closest valid value: 1" % (where, cfg["iodepth"]))
    if "working_set" in cfg and cfg["working_set"] not in _plan.WORKING_SETS:
        errors.append("%s.working_set: must be one of %s (or give total_size instead), got %r"
                      % (where, ", ".join(_plan.WORKING_SETS), cfg["working_set"]))
    if "working_set" in cfg and "total_size" in cfg:
        errors.append("%s: give total_size or working_set, not both" % where)
    if "groups" in cfg:
        groups = cfg["groups"] if isinstance(cfg["groups"], list) else [cfg["groups"]]
        if not all(isinstance(g, str) and g for g in groups):
            errors.append("%s.groups: must be a list of inventory group names, got %r" % (where, cfg["groups"]))
    if "target" in cfg and (not isinstance(cfg["target"], str) or not cfg["target"]):
        errors.append("%s.target: must be the name of a fleetqual_targets entry, got %r" % (where, cfg["target"]))
    if "description" in cfg and not isinstance(cfg["description"], str):
        errors.append("%s.description: must be a string, got %s" % (where, type_name(cfg["description"])))
    return dict(cfg) if len(errors) == start else None


# --------------------------------------------------------------------------- rules

def _check_rule_values(rule, path, errors):
    for key, value in rule.items():
        p = "%s.%s" % (path, key)
        if key not in _arrays.RULE_KEYS:
            alias = RULE_ALIASES.get(key, "")
            hint = (" (did you mean %s?)" % alias if alias else " (array rules select steps by initiators, threads "
                    "and mode)" if key in RULE_ALIASES else _guess(key, _arrays.RULE_KEYS))
            errors.append("%s: unknown key%s; known: %s" % (p, hint, ", ".join(_arrays.RULE_KEYS)))
        elif key in ("name", "description"):
            if not isinstance(value, str) or not value.strip():
                errors.append("%s: must be a non-empty string, got %s %r" % (p, type_name(value), value))
        elif key in ("initiators", "threads"):
            for v in value if isinstance(value, list) else [value]:
                if not is_int(v) or v < 1:
                    errors.append("%s: must be a count >= 1 (or a list of them), got %r" % (p, v))
        elif key == "mode":
            for v in value if isinstance(value, list) else [value]:
                if v not in MODES:
                    errors.append("%s: unknown mode %r%s; known: %s" % (p, v, _guess(v, MODES), ", ".join(MODES)))
        elif not is_number(value) or isinstance(value, bool):
            errors.append("%s: must be a number, got %s %r" % (p, type_name(value), value))
        elif key == "min_fairness" and not 0 < value <= 1:
            errors.append("%s: Jain's index is between 1/n and 1, got %r; closest valid value: %s"
                          % (p, value, 1 if value > 1 else 0.5))
        elif key == "min_share_pct" and not 0 <= value <= 100:
            errors.append("%s: a percentage of the median, 0 to 100, got %r; closest valid value: %d"
                          % (p, value, 100 if value > 100 else 0))
        elif key.startswith("max_") and value <= 0:
            errors.append("%s: a latency limit must be greater than 0 ms, got %r" % (p, value))
        elif value < 0:
            errors.append("%s: must not be negative, got %r" % (p, value))


def _rule_vs_plan(rule, path, steps, errors):
    """A rule whose selectors name a step the sweep does not plan."""
    label = rule.get("name") or _arrays.array_rule_name(rule, (_arrays.array_rule_limits(rule) or [("rule",)])[0][0])
    bad = False
    for key in _arrays.RULE_SELECTORS:
        if key not in rule:
            continue
        planned = list(dict.fromkeys(s[key] for s in steps))
        for want in rule[key] if isinstance(rule[key], list) else [rule[key]]:
            if want in planned:
                continue
            bad = True
            if key == "mode":
                hint = _guess(want, planned) or "; planned modes: %s" % ", ".join(planned)
            else:
                hint = "; planned: %s; closest valid value: %s" % (", ".join(map(str, sorted(planned))),
                                                                   _nearest(want, planned))
            errors.append("%s (%s): %s %r is not a planned step%s" % (path, label, key, want, hint))
    if not bad and not any(_arrays.array_rule_matches(rule, s) for s in steps):
        errors.append("%s (%s): no planned step has all of its selectors at once" % (path, label))
    if any(k in rule for k in _arrays.ARRAY_LIMITS) and any(k in rule for k in ("initiators", "threads")):
        errors.append("%s (%s): min_bounded_iops judges a mode's whole sweep; select it by mode only" % (path, label))


def validate_array_rules(rules, where, steps=None, bound=None):
    """Errors of an array's ``thresholds``; with ``steps`` (the planned steps), a rule that
    names a step that is not planned is an error too."""
    if rules is None:
        return []
    if not isinstance(rules, list):
        return ["%s: must be a list of array rules, got %s" % (where, type_name(rules))]
    errors, names = [], {}
    for i, rule in enumerate(rules):
        path = "%s[%d]" % (where, i)
        if not isinstance(rule, dict):
            errors.append("%s: must be a mapping (an array rule), got %s" % (path, type_name(rule)))
            continue
        start = len(errors)
        _check_rule_values(rule, path, errors)
        if not _arrays.array_rule_limits(rule):
            errors.append("%s: rule sets no limit; give one of %s" % (path, ", ".join(_arrays.RULE_LIMITS)))
        if isinstance(rule.get("name"), str):
            if rule["name"] in names:
                errors.append("%s.name: duplicate rule name %r (also %s[%d])" % (path, rule["name"], where, names[rule["name"]]))
            names.setdefault(rule["name"], i)
        if "min_bounded_iops" in rule and bound is None:
            errors.append("%s.min_bounded_iops: needs a latency bound: set latency_bound_ms on the array "
                          "(or fleetqual_latency_bound_ms)" % path)
        if steps and len(errors) == start:
            _rule_vs_plan(rule, path, steps, errors)
    return errors


# --------------------------------------------------------------------------- targets and sizes

def _target_of(cfg, host, host_vars, errors, where):
    """The member's resolved target the array uses (``plan.targets.array_target``, the rule
    the host's job applies too), or None (the test directory, or errors appended)."""
    targets, terrs = _validate.resolve_targets(host_vars.get("fleetqual_targets"), host_vars.get("fleetqual_test_dir"),
                                               host=host)
    if terrs:
        return None     # the per-host validation reports them
    try:
        return _targets.array_target(cfg.get("target"), targets, where)
    except ValueError as exc:
        errors.append("host %s: %s" % (host, exc))
        return None


def _size_problems(name, cfg, hosts, hosts_vars, default_cache, errors):
    where = "%s.%s" % (ARRAYS_VAR, name)
    per_host, how = _arrays.data_set_per_host(cfg, len(hosts), default_cache)
    unit = max(1, cfg.get("file_num", _arrays.ARRAY_DEFAULTS["file_num"]) * parse_size(cfg.get("block_size", _arrays.ARRAY_DEFAULTS["block_size"])))
    if "total_size" in cfg and per_host < unit:
        errors.append("%s.total_size: %s holds no whole block in each of its %s file(s); closest valid value: %s"
                      % (where, human_size(per_host), cfg.get("file_num", 1), human_size(unit)))
    if "capacity" in cfg:
        cap = parse_size(cfg["capacity"])
        total = per_host * len(hosts)
        if total > cap:
            fit = cap // len(hosts) // unit * unit
            errors.append("%s.capacity: the total working set %d hosts x %s = %s (%s) exceeds the array's capacity %s; "
                          "closest valid value: total_size: %s per initiator"
                          % (where, len(hosts), human_size(per_host), human_size(total), how, human_size(cap),
                             human_size(fit) if fit else "none (fewer hosts)"))
    for host in hosts:
        target = _target_of(cfg, host, hosts_vars[host], [], where)    # its errors: _target_problems
        if not target or target.get("kind") != "device" or target.get("size") is None:
            continue
        try:
            size = parse_size(target["size"])
        except ValueError:
            continue
        if per_host > size:
            fit = size // unit * unit
            errors.append("host %s: %s: the data set per initiator %s (%s) exceeds target %s's size %s; "
                          "closest valid value: total_size: %s"
                          % (host, where, human_size(per_host), how, target.get("name"), human_size(size), human_size(fit)))


# --------------------------------------------------------------------------- serial batches

def _batch_size(value, total):
    """One ``serial`` item as Ansible reads it (ansible.utils.helpers.pct_to_int)."""
    if isinstance(value, str) and value.endswith("%"):
        return int((int(value.replace("%", "")) / 100.0) * total) or 1
    return int(value)


def serial_batches(hosts, serial):
    """The batches Ansible runs ``hosts`` (the play's hosts, in inventory order) in for the
    play keyword ``serial: <serial>`` -- a count, a percentage (``"30%"``) or a list of them,
    the last one repeated (PlaybookExecutor._get_serialized_batches). None (or empty): one
    batch. Returns None for a value Ansible itself refuses (it reports it)."""
    left = list(hosts)
    sizes = serial if isinstance(serial, list) else [serial]
    if serial in (None, "") or not sizes:
        return [left] if left else []
    total, batches, i = len(left), [], 0
    while left:
        try:
            n = _batch_size(sizes[i], total)
        except (TypeError, ValueError):
            return None
        if n <= 0:
            batches.append(left)
            break
        batches.append(left[:n])
        left = left[n:]
        i = min(i + 1, len(sizes) - 1)
    return batches


def _split(batches, members):
    """{batch number: [members in it]} when the members are in more than one batch, else None."""
    where = {}
    for number, batch in enumerate(batches, 1):
        mine = [h for h in batch if h in members]
        if mine:
            where[number] = mine
    return where if len(where) > 1 else None


def _serial_problems(serial, order, joined):
    """An error per array whose hosts ``serial`` would split across batches, with the
    closest count that keeps every array in one batch."""
    batches = serial_batches(order, serial)
    if not batches:
        return []
    split = {name: _split(batches, set(hosts)) for name, hosts in joined.items()}
    split = {name: where for name, where in split.items() if where}
    if not split:
        return []
    fits = [n for n in range(1, len(order) + 1)
            if not any(_split(serial_batches(order, n), set(hosts)) for hosts in joined.values())]
    first = len(batches[0])
    closest = min(fits, key=lambda n: (abs(n - first), -n))
    errors = []
    for name in sorted(split, key=natural_key):
        hosts = sorted(joined[name], key=natural_key)
        errors.append("%s.%s: its hosts %s would be in %d of the play's %d batches (%s: %r puts %s); the array's common start "
                      "(T0) is fixed once per playbook run, so the hosts of a later batch would miss every step: "
                      "an array's hosts must be in one batch; closest valid value: %s: %d"
                      % (ARRAYS_VAR, name, _hosts_text(hosts), len(split[name]), len(batches), SERIAL_VAR, serial,
                         "; ".join("%s in batch %d" % (_hosts_text(h), number) for number, h in sorted(split[name].items())),
                         SERIAL_VAR, closest))
    return errors


# --------------------------------------------------------------------------- all arrays

def _describe_join(name, host_vars):
    if name in _arrays.array_names_of(host_vars):
        return "%s (%s)" % (name, ARRAY_VAR)
    return "%s (%s.%s.groups)" % (name, ARRAYS_VAR, name)


def _first_difference(a, b):
    for key in sorted(set(a) | set(b), key=str):
        if a.get(key) != b.get(key):
            return key, a.get(key), b.get(key)
    return None


def shared_luns(hv):
    """A LUN ``wwid`` (a name that is the same on every initiator) that several hosts list in
    ``fleetqual_targets`` must give each host a region of its own (``offset`` and ``size``,
    the regions apart): each host's workloads use its region's blocks and each host's
    cleanup zeroes them, on its own schedule, so two hosts in one region would read each
    other's writes and zeros as corrupt blocks (two iSCSI initiators of one LUN: the second
    read 46 blocks zeroed under it, a FAIL of a good LUN). ``hv``: ``{host: merged
    variables}``. Returns the problems."""
    seen = {}
    for host in sorted(hv, key=natural_key):
        targets = hv[host].get("fleetqual_targets")
        for i, t in enumerate(targets if isinstance(targets, list) else []):
            wwid = t.get("wwid") if isinstance(t, dict) else None
            if not (isinstance(wwid, str) and wwid.strip()):
                continue
            try:
                offset = parse_size(t.get("offset") or 0)
                size = parse_size(t["size"]) if t.get("size") not in (None, "", 0) else None
            except (ValueError, TypeError):
                continue            # the target's own check says what is wrong with it
            seen.setdefault(wwid.strip().lower(), []).append((host, i, offset, size))
    problems = []
    for wwid, users in sorted(seen.items()):
        if len(users) < 2:
            continue
        where = ", ".join("%s (fleetqual_targets[%d])" % (h, i) for h, i, _o, _s in users)
        unsized = [h for h, _i, _o, size in users if size is None]
        spans = sorted((o, o + s, h) for h, _i, o, s in users if s is not None)
        overlap = [(a[2], b[2]) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
        if not unsized and not overlap:
            continue
        size = max([s for _h, _i, _o, s in users if s] or [64 << 30])
        fix = "; ".join("%s: offset: %s, size: %s" % (h, human_size(k * size), human_size(size))
                        for k, (h, _i, _o, _s) in enumerate(users))
        why = ("%s give%s no size (each region must end where the next begins)" % (
            " and ".join(unsized), "s" if len(unsized) == 1 else "") if unsized else
            "the regions of %s overlap" % ", ".join("%s and %s" % pair for pair in overlap))
        problems.append("hosts %s: the LUN WWID %s is a target of %d hosts and %s; each host's workloads use its "
                        "region and each host's cleanup zeroes it on its own schedule, so two hosts in one region "
                        "would read each other's writes as corrupt blocks. Give each host a region of its own, for "
                        "example %s (docs/san.md)" % (where, wwid, len(users), why, fix))
    return problems


def validate_arrays(hosts_inputs, group_names=None, defaults=None, serial=None):
    """Every problem of array mode across the targeted hosts, as strings (empty: fine).

    ``hosts_inputs``: ``{host: {variable: value}}`` (each host's fleetqual_* variables), in
    the qualify play's host order (inventory order: its serial batches are cut in it);
    ``group_names``: ``{host: [its inventory groups]}``; ``defaults``: values of the
    variables a host does not set (the role's defaults) and the playbook's
    ``fleetqual_serial``; ``serial``: ``fleetqual_serial`` given directly (it wins)."""
    if not isinstance(hosts_inputs, dict):
        return ["inputs: must be a mapping of host -> its variables, got %s" % type_name(hosts_inputs)]
    defaults = defaults or {}
    group_names = group_names or {}
    if serial is None:
        serial = defaults.get(SERIAL_VAR)
    hv = {}
    for host, inputs in hosts_inputs.items():
        merged = dict(defaults)
        merged.update(inputs if isinstance(inputs, dict) else {})
        merged["group_names"] = list(group_names.get(host) or merged.get("group_names") or [])
        hv[str(host)] = merged
    errors = shared_luns(hv)
    # the definitions: one per array name (they must agree across the hosts)
    defs, where_def = {}, {}
    for host in sorted(hv, key=natural_key):
        arrays_var = hv[host].get(ARRAYS_VAR)
        if arrays_var in (None, ""):
            continue
        if not isinstance(arrays_var, dict):
            errors.append("host %s: %s: must be a mapping of array name -> its schedule and rules, got %s"
                          % (host, ARRAYS_VAR, type_name(arrays_var)))
            continue
        for name, cfg in arrays_var.items():
            if name not in defs:
                defs[name], where_def[name] = cfg, host
    known = sorted(defs, key=natural_key)
    # each host: the arrays it names exist, and it is in one array at most
    joined = {}
    for host in sorted(hv, key=natural_key):
        named = hv[host].get(ARRAY_VAR)
        if named not in (None, "") and not isinstance(named, (str, list)):
            errors.append("host %s: %s: must be an array name, got %s" % (host, ARRAY_VAR, type_name(named)))
            continue
        for n in _arrays.array_names_of(hv[host]):
            if n not in defs:
                errors.append("host %s: %s: unknown array %r%s; %s defines: %s"
                              % (host, ARRAY_VAR, n, _guess(n, known), ARRAYS_VAR, ", ".join(map(str, known)) or "none"))
        ins = [n for n in known if _arrays.joins(n, hv[host], defs[n] if isinstance(defs[n], dict) else {})]
        if len(ins) > 1:
            errors.append("host %s: in %d arrays, %s; a host belongs to one array (its initiator is measured with that "
                          "array's steps): remove it from all but one" % (host, len(ins), " and ".join(
                              _describe_join(n, hv[host]) for n in ins)))
        for n in ins:
            joined.setdefault(n, []).append(host)
    all_groups = sorted({g for v in hv.values() for g in v["group_names"]})
    errors.extend(_serial_problems(serial, list(hv), {n: h for n, h in joined.items() if n in defs}))
    for name in known:
        where = "%s.%s" % (ARRAYS_VAR, name)
        cfg = defs[name]
        hosts = sorted(joined.get(name, []), key=natural_key)
        if isinstance(cfg, dict) and cfg.get("groups"):
            groups = cfg["groups"] if isinstance(cfg["groups"], list) else [cfg["groups"]]
            for i, g in enumerate(groups):
                if isinstance(g, str) and g not in all_groups:
                    errors.append("%s.groups[%d]: no targeted host is in inventory group %r%s"
                                  % (where, i, g, _guess(g, all_groups)))
        if not hosts:
            errors.append("%s: no targeted host joins this array; set %s: %s on its initiators (e.g. in the group_vars "
                          "of their group) or list their inventory group in %s.groups" % (where, ARRAY_VAR, name, where))
            continue
        for host in hosts:
            mine = (hv[host].get(ARRAYS_VAR) or {}).get(name)
            if mine != cfg:
                diff = _first_difference(cfg, mine) if isinstance(cfg, dict) and isinstance(mine, dict) else None
                errors.append("%s: defined differently on hosts %s and %s%s; an array has one schedule: define it once "
                              "(e.g. group_vars/all)" % (where, where_def[name], host,
                                                         " (key %s: %r vs %r)" % diff if diff else ""))
                break
        start = len(errors)
        if isinstance(cfg, dict):
            for host in hosts:
                _target_of(cfg, host, hv[host], errors, where)
        checked = _check_config(name, cfg, hosts, errors)
        if checked is not None:
            first = hv[hosts[0]]
            bound = checked.get("latency_bound_ms", first.get("fleetqual_latency_bound_ms"))
            steps = _arrays.plan_steps(checked, len(hosts), first.get("fleetqual_cache_size"))
            errors.extend(validate_array_rules(checked.get("thresholds"), "%s.thresholds" % where, steps, bound))
            _size_problems(name, checked, hosts, hv, first.get("fleetqual_cache_size"), errors)
            errors.extend(_failover_problems(name, hosts, hv, steps))
        # name the hosts an array-wide problem concerns
        errors[start:] = [e if e.startswith("host ") else "%s (array %s: hosts %s)" % (e, name, _hosts_text(hosts))
                          for e in errors[start:]]
    in_arrays = {h for n in known for h in joined.get(n, [])}
    for host in sorted(hv, key=natural_key):
        if host not in in_arrays and hv[host].get(_failover.FAILOVER_VAR) not in (None, {}, ""):
            var = _failover.FAILOVER_VAR
            errors.append("host %s: %s: set on a host in no array; a failover is cut while an array's step runs on "
                          "its initiators: set %s on the host too, or remove %s" % (host, var, ARRAY_VAR, var))
    return errors


def _failover_problems(name, hosts, hv, steps):
    """``fleetqual_failover`` of an array's members: one value for all (a path is cut once),
    valid against the array's steps (failover.check)."""
    values = [(h, hv[h].get(_failover.FAILOVER_VAR)) for h in hosts]
    given = [(h, v) for h, v in values if v not in (None, {}, "")]
    if not given:
        return []
    differ = [h for h, v in values if v != given[0][1]]
    if differ:
        return ["%s: differs between hosts %s and %s of array %s; a failover is one cut for the whole array: define it "
                "once (e.g. in the group_vars of the array's initiators)" % (_failover.FAILOVER_VAR, given[0][0],
                                                                             differ[0], name)]
    return ["host %s: %s" % (given[0][0], e) for e in _failover.check(given[0][1], steps)[1]]


__all__ = ["validate_arrays", "validate_array_rules", "shared_luns", "serial_batches", "CONFIG_KEYS", "SERIAL_VAR"]
