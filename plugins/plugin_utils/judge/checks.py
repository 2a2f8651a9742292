# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One check of the judge and its comparison with a limit: a check is the dict every
verdict, reason and report reads (``workload, rule, metric, value, limit, op, passed,
evidence, status, kind, message``; see :mod:`.host`'s docstring). Shared by every module of
the judge and by array mode's rules."""


def make_check(wid, rule, metric, value, limit, op, passed, ev, status, kind, message):
    return {"workload": wid, "rule": rule, "metric": metric, "value": value, "limit": limit, "op": op,
            "passed": passed, "evidence": ev, "status": status, "kind": kind, "message": message}


def error_check(wid, rule, message, value=None, metric=None, ev=""):
    return make_check(wid, rule, metric, value, None, None, False, ev, "error", "error", message)


def compare(value, op, limit):
    return value >= limit if op == ">=" else value <= limit


def cmp_word(op, passed):
    if passed:
        return op
    return "<" if op == ">=" else ">"
