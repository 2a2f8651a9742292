# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Finite-number predicates and the human number, one place for both sides: the plan
(``module_utils/plan/``) runs on the host too, and the
controller code (``plugin_utils/common/stats.py``, ``plugin_utils/common/fmt.py`` and their importers)
uses the very same functions.

* :func:`is_number` / :func:`is_int`: a finite int or float (never a bool, NaN or infinity);
  an int (never a bool).
* :func:`fmt_num`: a human number: 812.4 -> ``812``, 9.83 -> ``9.8``, 0.234 -> ``0.23``,
  20 -> ``20`` (3 significant figures below 100, integers kept). The other formatters
  (controller only) are ``plugin_utils/common/fmt.py``'s.
"""

import math


def is_number(value):
    """True for a finite int or float (not bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def scaled(value, steps, small):
    """``pattern % (value / divisor)`` of the first ``(low, pattern, divisor)`` step whose
    ``low`` the magnitude reaches, else ``small % value``."""
    a = abs(value)
    for low, pattern, divisor in steps:
        if a >= low:
            return pattern % (value / divisor)
    return small % value


_NUM = ((100, "%.0f", 1), (1, "%.1f", 1))


def fmt_num(value):
    """Human number: 812.4 -> '812', 9.83 -> '9.8', 0.234 -> '0.23', 20 -> '20'."""
    if value is None:
        return "n/a"
    if is_int(value) or not is_number(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return scaled(value, _NUM, "%.2g")


# scaled is plugin_utils/common/fmt.py's too (its other formatters' steps)
__all__ = ["is_number", "is_int", "fmt_num"]
