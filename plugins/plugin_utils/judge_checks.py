# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One check of the judge and its comparison with a limit (split out of ``judge.py``, which
re-exports them): a check is the dict every verdict, reason and report reads (``workload,
rule, metric, value, limit, op, passed, evidence, status, kind, message``; see judge.py's
docstring). Shared by ``judge.py`` and ``judge_drives.py``."""


def _check(wid, rule, metric, value, limit, op, passed, ev, status, kind, message):
    return {"workload": wid, "rule": rule, "metric": metric, "value": value, "limit": limit, "op": op,
            "passed": passed, "evidence": ev, "status": status, "kind": kind, "message": message}


def _error(wid, rule, message, value=None, metric=None, ev=""):
    return _check(wid, rule, metric, value, None, None, False, ev, "error", "error", message)


def _compare(value, op, limit):
    return value >= limit if op == ">=" else value <= limit


def _cmp_word(op, passed):
    if passed:
        return op
    return "<" if op == ">=" else ">"
