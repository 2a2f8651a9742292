# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Python parser of size strings (``16K``, ``1.5G``, ``64MiB``, ``4096``).

Used by the module on the target and imported by controller-side code, so the
two sides can never disagree about what ``16K`` means. Units are binary
(1K = 1024 bytes), as in sysbench fileio and iobench.

Ours rather than ansible-core's ``human_to_bytes``: that one refuses the IEC suffixes
(``64MiB``) that iobench, the profiles and the docs accept, takes ``KB`` as 1024 where
iobench refuses it, and its errors cannot name the variable; the same suffixes as the C
parser matter more than a shorter file.
"""

import re

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KIB": 1024,
    "M": 1024 ** 2,
    "MIB": 1024 ** 2,
    "G": 1024 ** 3,
    "GIB": 1024 ** 3,
    "T": 1024 ** 4,
    "TIB": 1024 ** 4,
}

_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(value, name=None):
    """Return ``value`` in bytes as an int.

    Accepts an int (bytes), or a string: a number with an optional suffix
    ``K M G T`` or ``KiB MiB GiB TiB`` (case-insensitive, binary multiples) or
    ``B``. A fractional number is allowed when it gives whole bytes
    (``1.5K`` -> 1536). Raises ``ValueError`` naming the problem (and ``name``,
    the option, when given).
    """
    label = "%s: " % name if name else ""
    if isinstance(value, bool):
        raise ValueError("%ssize must be a number of bytes or a string like 16K, got %r" % (label, value))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("%ssize must not be negative, got %d" % (label, value))
        return value
    if isinstance(value, float):
        if value < 0 or value != int(value):
            raise ValueError("%ssize must be a whole non-negative number of bytes, got %r" % (label, value))
        return int(value)
    if not isinstance(value, str):
        raise ValueError("%ssize must be a string like 16K or an integer, got %r" % (label, value))
    m = _SIZE_RE.match(value)
    if not m:
        if value.strip().startswith("-"):
            raise ValueError("%ssize must not be negative, got %r" % (label, value))
        raise ValueError("%scannot parse size %r: expected a number with an optional suffix "
                         "K, M, G, T (or KiB, MiB, GiB, TiB, B)" % (label, value))
    number, suffix = m.group(1), m.group(2).upper()
    if suffix not in _UNITS:
        raise ValueError("%sunknown size suffix %r in %r: use K, M, G, T (or KiB, MiB, GiB, TiB, B); "
                         "multiples are binary (1K = 1024)" % (label, m.group(2), value))
    mult = _UNITS[suffix]
    if "." in number:
        whole, frac = number.split(".")
        # exact arithmetic: whole*mult + frac*mult/10^len(frac)
        scale = 10 ** len(frac)
        num = int(whole) * scale + int(frac)
        total = num * mult
        if total % scale:
            raise ValueError("%ssize %r is not a whole number of bytes" % (label, value))
        return total // scale
    return int(number) * mult


def format_size(nbytes):
    """Shortest exact binary representation: 16384 -> '16K', 1536 -> '1536'."""
    nbytes = int(nbytes)
    for suffix, mult in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if nbytes and nbytes % mult == 0:
            return "%d%s" % (nbytes // mult, suffix)
    return str(nbytes)


def human_size(nbytes):
    """Binary human size with one decimal, for messages: 2147483648 -> '2.0 GiB', 512 -> '512 B'."""
    if nbytes is None:
        return "n/a"
    n = float(nbytes)
    for unit, mult in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if abs(n) >= mult:
            return "%.1f %s" % (n / mult, unit)
    return "%d B" % int(n)
