# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vocabulary shared by plan, metrics, judge and rules (pure Python): iobench's modes,
which of them read and write, the operations and percentiles, and two small readers
(``dig``, ``type_name``). In module_utils since the plan runs on the host too.

Number predicates and ``fmt_num`` live in ``module_utils/common/numeric.py``; statistics and the other
formatters (controller only) in ``plugin_utils/common/stats.py`` and ``plugin_utils/common/fmt.py``."""

# MODES: iobench's modes (sysbench fileio names), from the option table

# dbpattern: page reads, page writes (flushers) and the log's fdatasyncs
READ_MODES = ("seqrd", "rndrd", "rndrw", "dbpattern")
WRITE_MODES = ("seqwr", "seqrewr", "rndwr", "rndrw", "dbpattern")

OPS = ("read", "write", "fsync")
PCTS = ("p50", "p90", "p95", "p99", "p999")
# metrics pct name -> key in iobench latency_us
PCT_SOURCE = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}


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


# MODES, human_size and parse_size are re-exported: plan, rules, validate and the filter wrappers import them from here
__all__ = ["READ_MODES", "WRITE_MODES", "OPS", "PCTS", "PCT_SOURCE", "dig", "type_name"]
