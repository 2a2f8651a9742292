# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small helpers shared by plan, metrics, judge and rules (pure Python)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.fleetqual.storage.plugins.module_utils.size import human_size, parse_size  # noqa: F401

# iobench modes (sysbench fileio names)
MODES = ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw", "dbpattern")
# dbpattern: page reads, page writes (flushers) and the log's fdatasyncs
READ_MODES = ("seqrd", "rndrd", "rndrw", "dbpattern")
WRITE_MODES = ("seqwr", "seqrewr", "rndwr", "rndrw", "dbpattern")

OPS = ("read", "write", "fsync")
PCTS = ("p50", "p90", "p95", "p99", "p999")
# metrics pct name -> key in iobench latency_us
PCT_SOURCE = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}


def is_number(value):
    """True for int/float (not bool), finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def as_number(value):
    """A finite float/int or None (missing, NaN, inf, wrong type)."""
    return value if is_number(value) else None


def fmt_num(value):
    """Human number: 812.4 -> '812', 9.83 -> '9.8', 0.234 -> '0.23', 20 -> '20'."""
    if value is None:
        return "n/a"
    if is_int(value):
        return str(value)
    if not is_number(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    a = abs(value)
    if a >= 100:
        return "%.0f" % value
    if a >= 1:
        return "%.1f" % value
    return "%.2g" % value


def dig(d, *path):
    """d[path[0]][path[1]]... or None as soon as a level is missing or not a mapping."""
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__
