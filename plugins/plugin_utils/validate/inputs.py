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
* the targets (``fleetqual_targets``; ``targets.resolve_targets``): exactly one of
  ``path``/``device`` each, absolute paths, devices under /dev, ``destroy_data: true``
  (literally) on every device target, sizes that parse, unique names, no target twice;
  with a valid plan, a device ``size:`` too small for a workload's working set;
* the threshold rules (``rules.validate_rules``) and, every workload rule
  whose selectors match no workload of this host's plan (:func:`unmatched_rules`): a
  misspelled ``workload: overcache`` would otherwise open the gate it was meant to close;
* the compliance settings ``fleetqual_drift`` and ``fleetqual_retention``;
* the foreign-I/O and impact settings ``fleetqual_foreign_io`` and ``fleetqual_impact``
  as the run uses them: the profile's production safety
  (``fleetqual_profile_safety[fleetqual_profile]``) under the user's keys, the merge of
  the action qualify_host (:func:`effective_safety`), checked by
  ``module_utils/collect/foreign_settings.py`` ``settings_errors``; the exit-code policy
  ``fleetqual_inconclusive`` (``verdict.INCONCLUSIVE_POLICIES``).
"""

import difflib

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import foreign_settings as _foreign_settings
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import drift as _history
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import drives as _judge_drives
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as _plan
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history import retention as _retention
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import rules as _rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.verdict import INCONCLUSIVE_POLICIES
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import check_test_dir, resolve_targets

VAR_NAMES = _plan.VAR_NAMES
FOREIGN_VAR = "fleetqual_foreign_io"
IMPACT_VAR = "fleetqual_impact"
SAFETY_VAR = "fleetqual_profile_safety"
INCONCLUSIVE_VAR = "fleetqual_inconclusive"


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


# --------------------------------------------------------------------------- foreign I/O, impact

def effective_safety(inputs, names=None):
    """``(foreign_io, impact, errors)`` as the run gets them (plugins/action/qualify_host.py):
    ``fleetqual_profile_safety[fleetqual_profile]``'s ``foreign_io`` / ``impact`` with the
    user's ``fleetqual_foreign_io`` / ``fleetqual_impact`` keys over them (a shallow
    ``combine``). A user value that is not a mapping is returned as it is (the settings'
    check says so); a malformed profile safety is an error naming it."""
    nm = dict(VAR_NAMES, **(names or {}))
    errors = []
    safety = inputs.get(SAFETY_VAR)
    profile = inputs.get(nm["profile"])
    if safety is None:
        safety = {}
    if not isinstance(safety, dict):
        errors.append("%s: must be a mapping of profile name -> {foreign_io, impact}, got %s"
                      % (SAFETY_VAR, type_name(safety)))
        safety = {}
    mine = safety.get(profile) if isinstance(profile, str) else None
    if mine is None:
        mine = {}
    if not isinstance(mine, dict):
        errors.append("%s.%s: must be a mapping with foreign_io and impact, got %s" % (SAFETY_VAR, profile, type_name(mine)))
        mine = {}
    unknown = sorted(str(k) for k in mine if k not in ("foreign_io", "impact"))
    for key in unknown:
        close = difflib.get_close_matches(key, ["foreign_io", "impact"], n=1)
        errors.append("%s.%s.%s: unknown key%s; valid: foreign_io, impact"
                      % (SAFETY_VAR, profile, key, " (did you mean %s?)" % close[0] if close else ""))
    out = []
    for part, var in (("foreign_io", FOREIGN_VAR), ("impact", IMPACT_VAR)):
        base = mine.get(part)
        if base is None:
            base = {}
        if not isinstance(base, dict):
            errors.append("%s.%s.%s: must be a mapping, got %s" % (SAFETY_VAR, profile, part, type_name(base)))
            base = {}
        given = inputs.get(var)
        if given is None:
            given = {}
        if isinstance(given, dict):
            merged = dict(base)
            merged.update(given)
            given = merged
        out.append(given)
    return out[0], out[1], errors


def safety_errors(inputs, names=None, host=None):
    """The problems of ``fleetqual_foreign_io`` / ``fleetqual_impact`` after the profile's
    safety settings, naming the host (when given) and the variable, with the closest key."""
    foreign_io, impact, errors = effective_safety(inputs, names)
    checked = []
    for value, var, defaults in ((foreign_io, FOREIGN_VAR, _foreign_settings.FOREIGN_DEFAULTS),
                                 (impact, IMPACT_VAR, _foreign_settings.IMPACT_DEFAULTS)):
        if isinstance(value, dict):
            value = dict(value)
            for key in sorted((k for k in value if k in defaults and value[k] is not None), key=str):
                want = defaults[key]
                if isinstance(want, bool):
                    bad = not isinstance(value[key], bool)
                    if bad:
                        errors.append("%s.%s: must be true or false, got %r" % (var, key, value[key]))
                else:
                    bad = isinstance(want, (int, float)) and not is_number(value[key])
                    if bad:
                        errors.append("%s.%s: must be a number, got %r (default %s)" % (var, key, value[key], want))
                if bad:
                    value[key] = None     # the range checks below see the default
        checked.append(value)
    errors = ["host %s: %s" % (host, e) if host else e for e in errors]
    return errors + _foreign_settings.settings_errors(checked[0], checked[1], host=host)


# --------------------------------------------------------------------------- all inputs

def validate_inputs(inputs, names=None, host=None):
    """All preflight problems of a host's qualification variables, as strings.

    ``inputs`` maps variable names to values: ``fleetqual_profile``, ``fleetqual_profiles``,
    ``fleetqual_matrix``, ``fleetqual_cache_size``, ``fleetqual_workload_overrides``,
    ``fleetqual_test_dir``, ``fleetqual_thresholds``, ``fleetqual_seed``,
    ``fleetqual_latency_bound_ms``, ``fleetqual_drift`` (history.validate_drift),
    ``fleetqual_retention`` (retention.validate_retention), ``fleetqual_foreign_io`` and
    ``fleetqual_impact`` over ``fleetqual_profile_safety`` (:func:`safety_errors`),
    ``fleetqual_inconclusive`` (fail | warn), ``fleetqual_kernel_log``
    (judge_drives.validate_kernel_log); absent ones are not checked.
    When the plan and the rules are valid, a workload rule that matches no workload of the
    plan is an error too.
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
    if _history.DRIFT_VAR in inputs:
        errors.extend(_history.validate_drift(inputs[_history.DRIFT_VAR], host=host))
    if _retention.RETENTION_VAR in inputs:
        errors.extend(_retention.validate_retention(inputs[_retention.RETENTION_VAR], host=host))
    if _judge_drives.KERNEL_VAR in inputs:     # docs/kernel-log.md
        errors.extend(_judge_drives.validate_kernel_log(inputs[_judge_drives.KERNEL_VAR], host=host))
    if FOREIGN_VAR in inputs or IMPACT_VAR in inputs or SAFETY_VAR in inputs:
        errors.extend(safety_errors(inputs, names, host=host))
    if INCONCLUSIVE_VAR in inputs and inputs[INCONCLUSIVE_VAR] not in INCONCLUSIVE_POLICIES:
        value = inputs[INCONCLUSIVE_VAR]
        close = difflib.get_close_matches(str(value), INCONCLUSIVE_POLICIES, n=1, cutoff=0.5)
        errors.append("%s%s: must be %s, got %r%s" % (
            "host %s: " % host if host else "", INCONCLUSIVE_VAR, " or ".join(INCONCLUSIVE_POLICIES), value,
            " (did you mean %s?)" % close[0] if close else ""))
    return errors


__all__ = ["validate_inputs", "validate_profile", "unmatched_rules", "unmatched_rule_problem",
           "effective_safety", "safety_errors"]
