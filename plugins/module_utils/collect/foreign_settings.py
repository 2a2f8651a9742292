# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The foreign-I/O and impact settings (docs/compliance.md): their defaults (``FOREIGN_DEFAULTS``,
``IMPACT_DEFAULTS``) and their validation, on the host (``foreign.Run``, before a workload
runs) and on the controller (``plugin_utils/validate/inputs.py``, before any host is contacted).
What the settings do: ``foreign.py`` (the cgroup, samples, quiet wait, guard) and
``impact.py`` (the impact limits)."""

import difflib

FOREIGN_DEFAULTS = dict(enabled=True, max_share=0.1, wait_s=120, on_busy="inconclusive", sample_s=3.0,
                        quiet_util_pct=10.0, interval=1.0, guard_await_ms=0.0, guard_samples=2,
                        guard_min_iops=5.0, min_foreign_iops=5.0, cgroup="auto")
IMPACT_DEFAULTS = dict(ioprio="none", nice=0, max_iops=0.0, max_mibps=0.0, max_threads=0, max_free_share=0.0,
                       budget_s=0)
ON_BUSY = ("inconclusive", "fail", "warn")


def options(given, defaults):
    """``given`` over ``defaults`` (None values take the default); ``(options, errors)``."""
    out = dict(defaults)
    errors = []
    if given is not None and not isinstance(given, dict):
        return out, ["must be a mapping, got %s" % type(given).__name__]
    for k, v in (given or {}).items():
        if k not in defaults:
            close = difflib.get_close_matches(str(k), sorted(defaults), n=1)
            hint = " (did you mean %s?)" % close[0] if close else ""
            errors.append("%s: unknown key%s; known: %s" % (k, hint, ", ".join(sorted(defaults))))
        elif v is not None:
            out[k] = v
    return out, errors


def settings_errors(foreign_io, impact, host=None):
    """Every problem of the role's ``fleetqual_foreign_io`` / ``fleetqual_impact`` (after the
    profile's), as sentences naming the host and the variable, for the controller's
    validation before any host is contacted."""
    fopts, ferr = options(foreign_io, FOREIGN_DEFAULTS)
    iopts, ierr = options(impact, IMPACT_DEFAULTS)
    errors = ["fleetqual_foreign_io.%s" % e if ":" in e else "fleetqual_foreign_io %s" % e for e in ferr]
    errors += ["fleetqual_impact.%s" % e if ":" in e else "fleetqual_impact %s" % e for e in ierr]
    if not errors:
        try:
            errors = [e.replace("foreign_io.", "fleetqual_foreign_io.").replace("impact.", "fleetqual_impact.")
                      for e in validate(fopts, iopts)]
        except (TypeError, ValueError) as e:
            errors = ["fleetqual_foreign_io / fleetqual_impact: a value is not a number: %s" % e]
    return ["host %s: %s" % (host, e) if host else e for e in errors]


def validate(foreign, impact):
    """Errors of the ``foreign_io`` and ``impact`` settings (after :func:`options`)."""
    errors = []
    if not 0 <= float(foreign["max_share"]) <= 1:
        errors.append("foreign_io.max_share must be between 0 and 1, got %s" % foreign["max_share"])
    if foreign["on_busy"] not in ON_BUSY:
        errors.append("foreign_io.on_busy must be one of %s, got %r" % (", ".join(ON_BUSY), foreign["on_busy"]))
    for k in ("wait_s", "sample_s", "quiet_util_pct", "guard_await_ms", "guard_min_iops", "min_foreign_iops"):
        if float(foreign[k]) < 0:
            errors.append("foreign_io.%s must not be negative, got %s" % (k, foreign[k]))
    if not 0.1 <= float(foreign["interval"]) <= 60:
        errors.append("foreign_io.interval must be between 0.1 and 60 seconds, got %s" % foreign["interval"])
    if foreign["cgroup"] not in ("auto", "off"):
        errors.append("foreign_io.cgroup must be auto or off, got %r" % foreign["cgroup"])
    if impact["ioprio"] not in ("none", "idle"):
        errors.append("impact.ioprio must be none or idle, got %r" % impact["ioprio"])
    if not -20 <= int(impact["nice"]) <= 19:
        errors.append("impact.nice must be between -20 and 19, got %s" % impact["nice"])
    for k in ("max_iops", "max_mibps", "max_threads", "budget_s"):
        if float(impact[k]) < 0:
            errors.append("impact.%s must not be negative, got %s" % (k, impact[k]))
    if not 0 <= float(impact["max_free_share"]) <= 1:
        errors.append("impact.max_free_share must be between 0 and 1, got %s" % impact["max_free_share"])
    return errors
