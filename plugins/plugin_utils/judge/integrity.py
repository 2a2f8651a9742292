# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's data integrity checks of one workload (docs/integrity.md; called by
:mod:`.workload`'s ``_integrity``), read from the metrics
(``plugin_utils/metrics/workload.py``: ``verify_*``, ``errors``, ``error_samples``,
``errors_ok_after_first``, ``errors_stopped``):

* a block read back wrong FAILs, one check per kind (``data_corrupt``, ``data_misplaced``,
  ``lost_write``; ``kind: integrity``), quoting where, expected and found;
* I/O errors in a region of a drive that still serves the rest (requests succeeded after
  the first error, or a later workload on the same target was answered: a read-back pass
  stopped at ``max_errors`` inside a bad region succeeds nowhere after its first error)
  FAIL (``io_errors``, ``kind: integrity``) citing the offsets, the errno name and the
  count; a drive that stopped answering (no success after the first error and none in the
  workloads after it) or an iobench that does not say is an ERROR (``io_errors``, ``kind:
  error``) citing the first error;
* data not verified (``verify_off``) and lost writes not checked (``lost_writes_unchecked``:
  no generation map) are ``n/a`` checks: notes, never a failure;
* a stall (``stall``, ``kind: integrity``; plugin_utils/metrics/stalls.py): the device completed no
  request for a second or more while the workload ran; FAILs with where in the run.
"""

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.checks import make_check, error_check
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.integrity import mismatch_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stalls import STALL_S, held_stall_s, silence_evidence, stall_message

# data verification (docs/integrity.md): each mismatch kind, what it means, and its rule
_MISMATCH = (
    ("corrupt", "data_corrupt", "checksum wrong"),
    ("misplaced", "data_misplaced", "the block holds another offset's data"),
    ("stale", "lost_write", "an older generation than the last acknowledged write"),
)


def verify_checks(wid, metrics):
    """The data verification of one workload (metrics ``verify_*``): a failed check per
    mismatch kind found, quoting the first mismatches; an ``n/a`` note when the data was not
    verified or lost writes could not be seen (no generation map). Nothing for a result
    without a verify section (an iobench without verification)."""
    m = metrics
    if m.get("verify_enabled") is None:
        return []
    if not m["verify_enabled"]:
        msg = "%s: data not verified (%s)" % (wid, m.get("verify_reason") or "verify off")
        return [make_check(wid, "verify_off", "verify_enabled", False, None, None, None, msg, "n/a", "integrity", msg)]
    out = []
    first = [f for f in m.get("verify_first") or [] if isinstance(f, dict)]
    for kind, rule, meaning in _MISMATCH:
        n = m.get("verify_%s" % kind)
        if not n:
            continue
        mine = [f for f in first if f.get("kind") == kind]
        ops = sorted(set(f.get("op") or "read" for f in mine)) or ["read"]
        how = " and ".join("by the verify pass" if op == "verify_pass" else "read" for op in ops)
        shown = "; ".join(mismatch_text(f) for f in mine[:3])
        more = " (+%d more)" % (n - len(mine[:3])) if n > len(mine[:3]) else ""
        msg = "%s: %s %s block%s %s (%s)%s%s" % (wid, fmt_num(n), kind, "" if n == 1 else "s", how, meaning,
                                                 ": " + shown if shown else "", more if shown else "")
        out.append(make_check(wid, rule, "verify_%s" % kind, n, 0, "<=", False, shown or meaning, "fail", "integrity",
                              msg))
    if m.get("verify_stale_tracked") is False:
        msg = "%s: lost writes not checked (generation map not kept%s)" % (
            wid, ": %s" % m["verify_stale_reason"] if m.get("verify_stale_reason") else "")
        out.append(make_check(wid, "lost_writes_unchecked", "verify_stale_tracked", False, None, None, None, msg, "n/a",
                              "integrity", msg))
    return out


def io_error_check(wid, metrics, answered_later=False):
    """I/O errors of a workload. In a region a drive that still serves the rest of its space
    (requests succeeded after the first error): a failed check citing the offsets, the errno
    name and the count. A drive that stopped answering (no successful request after the
    first error, or stopped at max_errors with nothing after it), or an iobench that does
    not say (no ``ok_after_first``): an error, citing the first error."""
    m = metrics
    errors = m["errors"]
    kinds = ", ".join("%s %s" % (k, v) for k, v in sorted((m.get("error_kinds") or {}).items()))
    plural = "" if errors == 1 else "s"
    ok_after = m.get("errors_ok_after_first")
    samples = [e for e in m.get("error_samples") or [] if isinstance(e, dict)]
    if ok_after or (ok_after == 0 and answered_later):
        names = sorted(set(str(e.get("errno_name") or e.get("errno") or "?") for e in samples)) or \
            sorted((m.get("error_kinds") or {}).keys())
        places = {}
        for e in samples:
            key = (e.get("op") or "I/O", e.get("file") or e.get("device") or "?")
            places.setdefault(key, [])
            if e.get("offset") is not None and len(places[key]) < 8 and str(e["offset"]) not in places[key]:
                places[key].append(str(e["offset"]))
        where = "; ".join("%s %s offset%s %s" % (op, place, "" if len(offs) == 1 else "s", ", ".join(offs))
                          if offs else "%s %s" % (op, place) for (op, place), offs in places.items())
        cited = ": %s: %s" % (where, "/".join(names)) if where else ""
        served = ("%s request%s succeeded after the first" % (fmt_num(ok_after), "" if ok_after == 1 else "s")
                  if ok_after else "the drive answered the later workloads")
        msg = "%s: %s I/O error%s (%s) in a region the drive still otherwise serves (%s)%s" % (
            wid, fmt_num(errors), plural, kinds or ", ".join(names), served, cited)
        if m.get("errors_stopped"):
            msg += "; stopped at max_errors %s" % fmt_num(m.get("errors_max"))
        return make_check(wid, "io_errors", "errors", errors, 0, "<=", False, where or kinds, "fail", "integrity", msg)
    first = m.get("error_first")
    if ok_after == 0:
        msg = "%s: the drive stopped answering: %s I/O error%s%s and no successful request after the first" % (
            wid, fmt_num(errors), plural, " (%s)" % kinds if kinds else "")
        if m.get("errors_stopped"):
            msg += "; stopped at max_errors %s" % fmt_num(m.get("errors_max"))
    else:
        msg = "%s: %s I/O error%s during the run" % (wid, errors, plural)
        if kinds:
            msg += " (%s)" % kinds
    if first:
        msg += "; first: %s" % first
    return error_check(wid, "io_errors", msg, value=errors, metric="errors")


def stall_check(wid, metrics):
    """A failed check when the workload's interval series shows a stall (plugin_utils/metrics/stalls.py), else None."""
    figures = metrics.get("stall")
    msg = stall_message(wid, figures)
    if msg is None:
        return None
    return make_check(wid, "stall", "stall", held_stall_s(figures), STALL_S, "<", False, silence_evidence(figures),
                      "fail", "integrity", msg)
