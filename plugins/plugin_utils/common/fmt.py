# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Number formatters for sentences and tables, one place for the controller code.

``None`` prints as ``n/a`` everywhere.

* ``fmt_num``: a human number: 812.4 -> ``812``, 9.83 -> ``9.8``, 0.234 -> ``0.23``,
  20 -> ``20`` (3 significant figures below 100, integers kept): ``module_utils/common/numeric.py``'s,
  the one number format of the plan summary on the host and of the controller.
* :func:`fmt_ms`: milliseconds with the unit: ``50 ms``, ``9.83 ms``, ``0.234 ms``.
* :func:`fmt_x`: a ratio: ``0.42x``, ``2.2x``, ``13x``.
* :func:`fmt_k`: a rate: ``812``, ``12.3k``, ``1.23M``.
* :func:`fmt_pct`: a share as a percentage: 0.9 -> ``90 %``.

Table cells (terminal table, HTML, Markdown) are narrower and print a missing value as
``-``: :func:`cell_num` (``812``, ``12.3k``, ``812k``, ``1.23M``), :func:`cell_ms`
(3 significant digits, no unit), :func:`cell_pct` (fixed decimals, no unit). They accept
numeric strings (:func:`stats.to_float`).
"""

# fmt_num (and the scaled steps every formatter uses) is module_utils/common/numeric.py's: the plan
# summary runs on the host too
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import scaled, fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import to_float

DASH = "-"
ELLIPSIS = "\u2026"


_MS = ((100, "%.0f ms", 1), (10, "%.1f ms", 1), (1, "%.2f ms", 1))
_X = ((10, "%.0fx", 1), (1, "%.1fx", 1))
_K = ((1e6, "%.2fM", 1e6), (1e4, "%.1fk", 1e3), (100, "%.0f", 1))
_CELL_NUM = ((1e9, "%.2fG", 1e9), (1e6, "%.2fM", 1e6), (1e5, "%.0fk", 1e3), (1e4, "%.1fk", 1e3),
             (100, "%.0f", 1), (10, "%.1f", 1))
_CELL_MS = ((100, "%.0f", 1), (10, "%.1f", 1), (1, "%.2f", 1))


def fmt_ms(value):
    """Milliseconds with the unit: 50 -> '50 ms', 9.834 -> '9.83 ms', 0.2345 -> '0.234 ms'."""
    if value is None:
        return "n/a"
    if value == int(value) and value >= 1:
        return "%d ms" % value
    return scaled(value, _MS, "%.3g ms")


def fmt_x(value):
    """Ratio text: 0.42x, 2.2x, 13x."""
    return "n/a" if value is None else scaled(value, _X, "%.2gx")


def fmt_pct(share):
    """A share as a percentage: 0.9 -> '90 %', 0.125 -> '12.5 %'."""
    if share is None:
        return "n/a"
    return "%s %%" % fmt_num(round(share * 100.0, 1))


def fmt_k(value):
    """IOPS / rate text: 812, 12.3k, 1.23M."""
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return scaled(value, _K, "")
    return fmt_num(round(value, 1) if abs(value) >= 1 else value)


def cell_num(value):
    """Compact table number: 812, 12.3k, 812k, 1.23M, 1.23G; '-' for missing."""
    v = to_float(value)
    if v is None:
        return DASH
    return "0" if v == 0 else scaled(v, _CELL_NUM, "%.2f")


def cell_ms(value):
    """Table latency in ms, 3 significant digits, no unit; '-' for missing."""
    v = to_float(value)
    if v is None:
        return DASH
    return "0" if v == 0 else scaled(v, _CELL_MS, "%.3f")


def cell_pct(value, digits=1):
    """Table percentage (already in percent), fixed decimals, no unit; '-' for missing."""
    v = to_float(value)
    return DASH if v is None else ("%." + str(int(digits)) + "f") % v


def truncate(text, width):
    """``text`` cut to ``width`` characters, its last one an ellipsis when cut."""
    text = "" if text is None else str(text)
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    return text[: width - 1] + ELLIPSIS


__all__ = ["fmt_ms", "fmt_x", "fmt_k", "fmt_pct", "cell_num", "cell_ms", "cell_pct", "truncate", "DASH", "ELLIPSIS"]
