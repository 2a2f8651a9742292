# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Numbers and small statistics, one place for the controller code (metrics, rules, judge,
diagnostics; fleet and report too).

* :func:`as_number`: a finite int or float (never a bool, NaN or infinity), else None;
  :func:`to_float` also reads a numeric string. The predicates ``is_number`` / ``is_int``
  are ``module_utils/common/numeric.py``'s (the plan runs on the host too).
* :func:`mean` / :func:`median`: of the numbers in an iterable (others skipped), None
  when there are none; the standard :mod:`statistics` module does the arithmetic.
* :func:`ratio`: ``a / b`` or None (either missing, ``b <= 0``).
* :func:`robust_scale`: the spread of values around their median for outlier scores:
  MAD x 1.4826 (Iglewicz & Hoaglin), else the mean absolute deviation x 1.2533 when the
  MAD is 0 (more than half the values equal), else 0 (all equal).
"""

import statistics

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_number


def as_number(value):
    """A finite float/int or None (missing, NaN, inf, bool, wrong type)."""
    return value if is_number(value) else None


def to_float(value):
    """A finite float from a number or a numeric string (``"12.5"``), else None (None,
    bool, NaN, inf, anything else): for figures that went through JSON or Jinja."""
    t = type(value)
    if t is float:                  # the common case first: the fleet report calls this millions of times
        return value if value - value == 0.0 else None      # NaN and inf fail this
    if t is int:
        return float(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        value = float(value)
    else:
        try:
            value = float(value)
        except (TypeError, ValueError):
            return None
    return value if is_number(value) else None


def numbers(values):
    """The finite numbers of an iterable, in order."""
    return [v for v in (values or ()) if is_number(v)]


def mean(values):
    vals = numbers(values)
    return statistics.fmean(vals) if vals else None


def median(values):
    vals = numbers(values)
    return statistics.median(vals) if vals else None


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


MAD_SCALE = 1.4826           # MAD -> sigma for normal data
MEANAD_SCALE = 1.2533        # mean absolute deviation -> sigma (used when MAD == 0)


def robust_scale(values, med):
    """``(scale, method, mad)`` of ``values`` around ``med``: method ``mad``, ``meanad`` or
    ``none`` (scale 0: all values equal ``med``)."""
    dev = [abs(v - med) for v in numbers(values)]
    mad = median(dev)
    if mad and mad > 0:
        return MAD_SCALE * mad, "mad", mad
    mean_ad = sum(dev) / len(dev) if dev else 0.0
    if mean_ad > 0:
        return MEANAD_SCALE * mean_ad, "meanad", mad or 0.0
    return 0.0, "none", mad or 0.0


__all__ = ["robust_scale", "MAD_SCALE", "MEANAD_SCALE", "as_number", "to_float", "numbers",
           "mean", "median", "ratio"]
