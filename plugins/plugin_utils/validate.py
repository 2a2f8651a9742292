# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of a host's qualification variables, before any host is contacted.

The role's validation play (roles/qualify/tasks/validate.yml, filter
``fleetqual.storage.validate_inputs``) calls :func:`validate_inputs` once per targeted
host with that host's variables. Every problem comes back as one string naming the
variable path and, where one exists, the closest valid value:

* the profile choice and every workload setting (:func:`validate_profile`, built on
  ``plan.resolve``), the seed and the latency bound;
* the test directory (absolute, no ``..``, not a system directory itself);
* the targets (``fleetqual_targets``, issue 11; :func:`resolve_targets`): exactly one of
  ``path``/``device`` each, absolute paths, devices under /dev, ``destroy_data: true``
  (literally) on every device target, sizes that parse, unique names, no target twice;
  with a valid plan, a device ``size:`` too small for a workload's working set;
* the threshold rules (``rules.validate_rules``) and, issue 10.2, every workload rule
  whose selectors match no workload of this host's plan (:func:`unmatched_rules`): a
  misspelled ``workload: overcache`` would otherwise open the gate it was meant to close.
"""

import difflib
import re

from ansible_collections.fleetqual.storage.plugins.plugin_utils import plan as _plan
from ansible_collections.fleetqual.storage.plugins.plugin_utils import rules as _rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils._common import parse_size, type_name
from ansible_collections.fleetqual.storage.plugins.plugin_utils.stats import is_int, is_number

VAR_NAMES = _plan.VAR_NAMES

UNSAFE_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
               "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/tmp")


def validate_profile(profiles, profile, matrix=None, cache_size=_plan.DEFAULT_CACHE_SIZE, overrides=None,
                     names=None):
    """Error strings (empty when fine) for the profile choice and workload settings.

    Everything ``plan.plan`` would reject except a missing RAM figure (the preflight runs
    once on the controller, before host facts matter). Messages name the variable path,
    e.g. ``fleetqual_matrix[1].threads: must be an integer between 1 and 1024, got 0``.
    """
    return _profile_plan(profiles, profile, matrix, cache_size, overrides, names)[1]


def _profile_plan(profiles, profile, matrix, cache_size, overrides, names):
    nm = dict(VAR_NAMES, **(names or {}))
    if not isinstance(profiles, dict):
        return [], ["%s: must be a mapping of profile name -> profile, got %s" % (nm["profiles"], type_name(profiles))]
    if not isinstance(profile, str):
        return [], ["%s: must be a profile name (string); known: %s" % (nm["profile"], ", ".join(sorted(profiles)))]
    return _plan.resolve(profile, cache_size=cache_size, overrides=overrides, profiles=profiles, matrix=matrix,
                         names=names)


def check_test_dir(path, var_name=VAR_NAMES["test_dir"]):
    """Errors of a test directory: absolute, no ``..``, not a system directory itself."""
    if not isinstance(path, str) or not path.startswith("/"):
        return ["%s: must be an absolute path, got %r" % (var_name, path)]
    if ".." in path.split("/"):
        return ["%s: must not contain '..' components, got %r" % (var_name, path)]
    if path.rstrip("/") in UNSAFE_DIRS or path == "/":
        return ["%s: %r is a system directory; use a directory of its own such as /var/tmp/fleetqual"
                % (var_name, path)]
    return []


# --------------------------------------------------------------------------- rules vs plan

def _values(sel):
    return sel if isinstance(sel, list) else [sel]


def _closeness(rule, spec):
    """How near a workload is to a rule's selectors: exact selector matches count 1,
    string selectors a difflib ratio."""
    score = 0.0
    for key in _rules.SELECTOR_KEYS:
        if key not in rule:
            continue
        have = spec.get(key)
        best = 0.0
        for want in _values(rule[key]):
            if want == have:
                best = 1.0
            elif isinstance(want, str) and isinstance(have, str):
                best = max(best, difflib.SequenceMatcher(None, want, have).ratio())
        score += best
    return score


def unmatched_rule_problem(rule, plan_list, where, plan_label):
    """The error of one workload rule that matches no workload of ``plan_list``, else None.

    Names the rule (its path and name), says which selector value is in no workload (with a
    did-you-mean from the plan's values) and lists the closest workloads of the plan."""
    if not isinstance(rule, dict) or _rules.is_diagnostic_rule(rule) or _rules.is_drive_rule(rule):
        return None
    limits = _rules.rule_limits(rule)
    label = rule.get("name") or _rules.rule_name(rule, limits[0][0] if limits else "rule")
    matched = [spec for spec in plan_list if _rules.rule_matches(rule, spec)]
    if matched:
        if rule.get("require_steady_state") is True and not any(s.get("steady_state") for s in matched):
            return ("%s (%s): requires steady state, but no workload it matches runs with steady_state: true "
                    "(%s); set it in the matrix or in fleetqual_workload_overrides"
                    % (where, label, ", ".join(str(s.get("id")) for s in matched)))
        return None
    hints = []
    for key in _rules.SELECTOR_KEYS:
        if key not in rule:
            continue
        have = list(dict.fromkeys(spec.get(key) for spec in plan_list if spec.get(key) is not None))
        for want in _values(rule[key]):
            if want in have:
                continue
            text = "no workload has %s %r" % (key, want)
            if isinstance(want, str):
                close = difflib.get_close_matches(want, [str(h) for h in have], n=1, cutoff=0.6)
                if close:
                    text += " (did you mean %s?)" % close[0]
            elif key == "threads":
                text += " (thread counts in the plan: %s)" % ", ".join(str(h) for h in sorted(have))
            hints.append(text)
    if not hints:
        hints.append("no workload has all of its selectors at once")
    ranked = sorted(plan_list, key=lambda s: -_closeness(rule, s))
    closest = [s.get("id") for s in ranked[:3]]
    return ("%s (%s): matches no workload of the plan (%s): %s; closest workloads: %s"
            % (where, label, plan_label, "; ".join(hints), ", ".join(str(c) for c in closest)))


def unmatched_rules(rules, plan_list, var_name=_rules.DEFAULT_VAR, plan_label="plan"):
    """Errors for every workload rule of ``rules`` that matches no workload of the plan."""
    if not isinstance(rules, list) or not plan_list:
        return []
    out = []
    for i, rule in enumerate(rules):
        problem = unmatched_rule_problem(rule, plan_list, "%s[%d]" % (var_name, i), plan_label)
        if problem:
            out.append(problem)
    return out


# --------------------------------------------------------------------------- targets (issue 11)

TARGET_KEYS = ("name", "path", "device", "destroy_data", "serial", "size")
SHORTHAND_TARGET = "test_dir"
_TARGET_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _norm_path(path):
    """``/data1//fq/`` -> ``/data1/fq`` (no resolution of links: the host does that)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _derived_target_names(paths):
    """Names for targets without one: the basename, or more of the path when basenames
    collide (``/data1/fq``, ``/data2/fq`` -> ``data1-fq``, ``data2-fq``)."""
    def label(p, depth):
        parts = [x for x in p.split("/") if x] or ["root"]
        return re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts[-depth:]))

    depth = {i: 1 for i in range(len(paths))}
    for _round in range(8):
        names = {i: label(p, depth[i]) for i, p in enumerate(paths)}
        clash = [i for i in names if list(names.values()).count(names[i]) > 1]
        if not clash:
            break
        for i in clash:
            depth[i] += 1
    return names


def _target_where(var_name, i, host):
    return "%s%s[%d]" % ("host %s: " % host if host else "", var_name, i)


def _check_one_target(entry, where, errors):
    """Checked copy of one target entry (None when it cannot be used)."""
    if not isinstance(entry, dict):
        errors.append("%s: must be a mapping with path (a directory) or device (a block device), got %s: "
                      "for example {path: /data1/fleetqual} or {device: /dev/disk/by-id/nvme-..., "
                      "destroy_data: true}" % (where, type_name(entry)))
        return None
    start = len(errors)
    for key in entry:
        if key not in TARGET_KEYS:
            guess = difflib.get_close_matches(str(key), TARGET_KEYS, n=1, cutoff=0.6)
            errors.append("%s.%s: unknown key%s; known: %s" % (
                where, key, " (did you mean %s?)" % guess[0] if guess else "", ", ".join(TARGET_KEYS)))
    has_path, has_device = "path" in entry, "device" in entry
    if has_path == has_device:
        errors.append("%s: give exactly one of path (a directory on a filesystem) or device (a whole block "
                      "device), got %s" % (where, "both" if has_path else "neither"))
        return None
    out = {}
    if "name" in entry:
        name = entry["name"]
        if not isinstance(name, str) or not _TARGET_NAME_RE.match(name):
            close = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name)) if isinstance(name, str) and name else "data1"
            errors.append("%s.name: must be letters, digits, '_', '.' or '-' (it names the report's rows and "
                          "files), got %r; for example %s" % (where, name, close))
        else:
            out["name"] = name
    if has_path:
        path = entry["path"]
        out["kind"] = "path"
        problems = check_test_dir(path, "%s.path" % where)
        errors.extend(problems)
        if not problems:
            out["path"] = _norm_path(path)
        for key in ("destroy_data", "serial", "size"):
            if key in entry:
                errors.append("%s.%s: only for a device target; a directory target is sized by the profile "
                              "(remove %s, or use device: instead of path:)" % (where, key, key))
    else:
        dev = entry["device"]
        out["kind"] = "device"
        if not isinstance(dev, str) or not dev.startswith("/"):
            hint = ("did you mean /%s?" % dev.lstrip("./") if isinstance(dev, str) and dev.lstrip("./").startswith(
                "dev/") else "for example /dev/disk/by-id/nvme-<model>_<serial>")
            errors.append("%s.device: must be an absolute path under /dev, got %r; %s" % (where, dev, hint))
        elif ".." in dev.split("/"):
            errors.append("%s.device: must not contain '..' components, got %r" % (where, dev))
        elif not _norm_path(dev).startswith("/dev/") or _norm_path(dev) in ("/dev/disk", "/dev/disk/by-id"):
            base = dev.rstrip("/").rsplit("/", 1)[-1] or "sdX"
            errors.append("%s.device: must be a block device under /dev, got %r; did you mean /dev/%s?"
                          % (where, dev, base))
        else:
            out["device"] = _norm_path(dev)
        if entry.get("destroy_data") is not True:
            got = "missing" if "destroy_data" not in entry else "%s %r" % (type_name(entry["destroy_data"]),
                                                                           entry["destroy_data"])
            errors.append("%s.destroy_data: a raw device target destroys the device's contents and must say "
                          "destroy_data: true on that target (there is no global switch), got %s"
                          % (where, got))
        out["destroy_data"] = entry.get("destroy_data") is True
        serial = entry.get("serial")
        if "serial" in entry and (not isinstance(serial, str) or not serial.strip()):
            errors.append("%s.serial: must be the drive's serial number (a non-empty string), got %s %r"
                          % (where, type_name(serial), serial))
        else:
            out["serial"] = serial.strip() if isinstance(serial, str) else None
        out["size"] = None
        if "size" in entry:
            try:
                n = parse_size(entry["size"])
            except ValueError as exc:
                errors.append("%s.size: %s" % (where, exc))
            else:
                if n <= 0 or n % _plan.DEVICE_ALIGN:
                    up = max(_plan.DEVICE_ALIGN, -(-n // _plan.DEVICE_ALIGN) * _plan.DEVICE_ALIGN)
                    errors.append("%s.size: must be a multiple of %d bytes greater than 0 (the part of the device "
                                  "the workloads use), got %r; closest: %s"
                                  % (where, _plan.DEVICE_ALIGN, entry["size"], _plan._compact_size(up)))
                else:
                    out["size"] = n
    return None if len(errors) > start else out


def resolve_targets(targets, test_dir=None, host=None, names=None):
    """``(targets, errors)``: ``fleetqual_targets`` checked and resolved, or the shorthand.

    Each target: ``{name, kind: path|device, path | device, ...}`` (module comment above).
    Messages name the host (when given), ``fleetqual_targets[i]`` and the closest valid
    value. An empty or absent list gives the one shorthand target ``fleetqual_test_dir``
    (``shorthand: true``, named ``test_dir``).
    """
    nm = dict(VAR_NAMES, **(names or {}))
    var = nm.get("targets", _plan.TARGET_VAR)
    if targets is None or targets == [] or targets == "":
        if test_dir is None:
            return [], []
        errs = check_test_dir(test_dir, nm["test_dir"])
        if host:
            errs = ["host %s: %s" % (host, e) for e in errs]
        return ([] if errs else [{"name": SHORTHAND_TARGET, "kind": "path", "path": test_dir,
                                  "shorthand": True}]), errs
    if not isinstance(targets, list):
        return [], ["%s%s: must be a list of targets ({path: ...} or {device: ..., destroy_data: true}), got %s"
                    % ("host %s: " % host if host else "", var, type_name(targets))]
    errors, checked = [], []
    for i, entry in enumerate(targets):
        t = _check_one_target(entry, _target_where(var, i, host), errors)
        if t is not None:
            checked.append((i, t))
    # names: explicit ones first, then derived ones made unique against them
    taken = {}
    for i, t in checked:
        if "name" in t:
            if t["name"] in taken:
                errors.append("%s.name: duplicate target name %r (also %s[%d]); for example %s-%d"
                              % (_target_where(var, i, host), t["name"], var, taken[t["name"]], t["name"], i + 1))
            taken.setdefault(t["name"], i)
    unnamed = [(i, t) for i, t in checked if "name" not in t]
    derived = _derived_target_names([t.get("path") or t.get("device") or "" for _i, t in unnamed])
    for k, (i, t) in enumerate(unnamed):
        name, n = derived[k], 2
        while name in taken:
            name, n = "%s-%d" % (derived[k], n), n + 1
        t["name"] = name
        taken[name] = i
    # no two targets the same (same directory, same device path, same serial)
    seen = {}
    for i, t in checked:
        for key in ("path", "device", "serial"):
            val = t.get(key)
            if not val:
                continue
            if (key, val) in seen:
                j = seen[(key, val)]
                errors.append("%s: the same %s %s as %s[%d]; each target must be a different %s"
                              % (_target_where(var, i, host), key, val, var, j,
                                 "drive" if key == "serial" else "directory" if key == "path" else "device"))
            seen.setdefault((key, val), i)
    if errors:
        return [], errors
    return [dict(t, shorthand=False) for _i, t in checked], []


# --------------------------------------------------------------------------- all inputs

def validate_inputs(inputs, names=None, host=None):
    """All preflight problems of a host's qualification variables, as strings.

    ``inputs`` maps variable names to values: ``fleetqual_profile``, ``fleetqual_profiles``,
    ``fleetqual_matrix``, ``fleetqual_cache_size``, ``fleetqual_workload_overrides``,
    ``fleetqual_test_dir``, ``fleetqual_thresholds``, ``fleetqual_seed``,
    ``fleetqual_latency_bound_ms`` (absent ones are not checked). When the plan and the
    rules are valid, a workload rule that matches no workload of the plan is an error too.
    ``fleetqual_targets`` is checked with :func:`resolve_targets`; ``host`` (optional)
    prefixes the target messages with ``host <name>:``.
    """
    nm = dict(VAR_NAMES, **(names or {}))
    if not isinstance(inputs, dict):
        return ["inputs: must be a mapping of variable name -> value, got %s" % type_name(inputs)]
    errors = []
    specs, plan_label = None, None
    if nm["profile"] in inputs or nm["profiles"] in inputs or nm["matrix"] in inputs:
        profiles = inputs.get(nm["profiles"]) or {}
        profile = inputs.get(nm["profile"])
        matrix = inputs.get(nm["matrix"])
        if matrix and profile not in (profiles if isinstance(profiles, dict) else {}):
            # a custom matrix needs no valid profile name
            specs, errs = _plan.resolve(matrix, cache_size=inputs.get(nm["cache_size"]),
                                        overrides=inputs.get(nm["overrides"]), profiles=profiles, names=names)
            plan_label = nm["matrix"]
        else:
            specs, errs = _profile_plan(profiles, profile, matrix, inputs.get(nm["cache_size"]),
                                        inputs.get(nm["overrides"]), names)
            plan_label = nm["matrix"] if matrix else "profile %s" % profile
        errors.extend(errs)
        if errs:
            specs = None
        seed = inputs.get(nm["seed"])
        if seed is not None and (not is_int(seed) or seed < 0):
            errors.append("%s: must be an integer >= 0, got %r" % (nm["seed"], seed))
    if nm["test_dir"] in inputs:
        errors.extend(check_test_dir(inputs[nm["test_dir"]], nm["test_dir"]))
    if nm["targets"] in inputs and inputs[nm["targets"]] not in (None, [], ""):
        resolved, target_errors = resolve_targets(inputs[nm["targets"]], host=host, names=names)
        errors.extend(target_errors)
        if not target_errors and specs:
            try:
                _plan.plan_targets(specs, resolved, host=host, names=names)
            except _plan.PlanError as exc:
                errors.extend(exc.errors)
    if nm["latency_bound_ms"] in inputs:
        bound = inputs[nm["latency_bound_ms"]]
        if not is_number(bound) or bound <= 0:
            errors.append("%s: must be a number of milliseconds > 0, got %r" % (nm["latency_bound_ms"], bound))
    if nm["thresholds"] in inputs:
        rule_errors = _rules.validate_rules(inputs[nm["thresholds"]], var_name=nm["thresholds"])
        errors.extend(rule_errors)
        if not rule_errors and specs:
            errors.extend(unmatched_rules(inputs[nm["thresholds"]], specs, nm["thresholds"], plan_label))
    return errors


__all__ = ["validate_inputs", "validate_profile", "resolve_targets", "TARGET_KEYS", "unmatched_rules",
           "unmatched_rule_problem",
           "check_test_dir", "UNSAFE_DIRS"]
