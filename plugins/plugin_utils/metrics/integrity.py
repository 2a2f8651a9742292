# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Data integrity figures of a workload (docs/contracts.md section 4, ``metrics``; docs/integrity.md):
iobench's ``verify`` section (blocks checked, corrupt, misplaced, stale, the first mismatches)
and its I/O errors in detail, each as one line. Read by :mod:`.workload` (its docstring
describes every key)."""

import re

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number


# data verification (iobench's verify section) and I/O errors in detail: integrity_figures
VERIFY_KINDS = ("corrupt", "misplaced", "stale")


VERIFY_FIRST_MAX = 16


INTEGRITY_KEYS = ("verify_enabled", "verify_reason", "verify_checked", "verify_corrupt", "verify_misplaced",
                  "verify_stale", "verify_bad", "verify_stale_tracked", "verify_stale_reason", "verify_pass",
                  "verify_first", "error_samples", "errors_ok_after_first", "errors_stopped", "errors_max")


def count_of(value):
    """A non-negative count, else None."""
    n = as_number(value)
    return int(n) if n is not None and n >= 0 else None


def _place(d):
    """``/dev/loop7 offset 1048576`` of an error or a mismatch (its file, else its device)."""
    off = count_of(d.get("offset"))
    return str(d.get("file") or d.get("device") or "?") + (" offset %d" % off if off is not None else "")


def error_text(e):
    """One I/O error as one line: ``read /dev/loop7 offset 1048576: EIO (Input/output error) at 3.2 s``."""
    name = e.get("errno_name") or ("errno %s" % e["errno"] if e.get("errno") is not None else e.get("kind") or "error")
    msg, t = e.get("message"), as_number(e.get("t_s"))
    return "%s%s: %s%s%s" % ("%s " % e["op"] if e.get("op") else "", _place(e), name,
                             " (%s)" % msg if msg and msg != name else "", " at %s s" % round(t, 3) if t is not None else "")


def mismatch_text(d):
    """One verify mismatch (an entry of ``verify_first``) as reasons and reports quote it: where,
    expected vs found; a stale block the generation it holds and the last acknowledged one
    (``lost write: /dev/loop7 offset 8192 holds generation 2, the last acknowledged write was generation 5``)."""
    found, expected = d.get("found"), d.get("expected")
    if d.get("kind") == "stale":     # iobench writes "gen G run R" (docs/iobench-json.md)
        held, last = [(_GENERATION.findall(str(t or "")) or [None])[0] for t in (found, expected)]
        if held is not None and last is not None:
            return "lost write: %s holds generation %s, the last acknowledged write was generation %s" % (
                _place(d), held, last)
        return "lost write: %s: expected %s, found %s" % (_place(d), expected, found)
    return "%s: expected %s, found %s" % (_place(d), expected, found)


_MISMATCH_KEYS = ("op", "file", "device", "offset", "kind", "expected", "found", "found_offset")


_GENERATION = re.compile(r"\bgen(?:eration)?\s+(\d+)")


_ERROR_KEYS = ("op", "file", "device", "offset", "errno", "errno_name", "t_s", "message")


def _text(value):
    return value if isinstance(value, str) and value else None


def integrity_figures(bench):
    """The data verification and error-detail metrics of a benchmark result (module
    docstring): ``verify_*`` (all None without a ``verify`` section), ``error_samples``,
    ``errors_ok_after_first``, ``errors_stopped``, ``errors_max``."""
    out = dict.fromkeys(INTEGRITY_KEYS)
    v = bench.get("verify") if isinstance(bench, dict) else None
    if isinstance(v, dict):
        gen = v.get("generation_map") if isinstance(v.get("generation_map"), dict) else {}
        vp = v.get("pass")
        out.update(verify_enabled=bool(v.get("enabled")), verify_reason=_text(v.get("reason")),
                   verify_checked=count_of(v.get("checked")), verify_stale_reason=_text(gen.get("reason")),
                   verify_stale_tracked=bool(gen["tracked"]) if "tracked" in gen else None,
                   verify_pass={"blocks": count_of(vp.get("blocks")), "bytes": count_of(vp.get("bytes")),
                                "elapsed_s": as_number(vp.get("elapsed_s")),
                                "mib_per_sec": as_number(vp.get("mib_per_sec"))} if isinstance(vp, dict) else None,
                   verify_first=[{k: f.get(k) for k in _MISMATCH_KEYS if k in f} for f in v.get("first") or []
                                 if isinstance(f, dict)][:VERIFY_FIRST_MAX])
        counts = [count_of(v.get(kind)) for kind in VERIFY_KINDS]
        out.update(("verify_%s" % kind, n) for kind, n in zip(VERIFY_KINDS, counts))
        out["verify_bad"] = sum(n or 0 for n in counts) if any(n is not None for n in counts) else None
    errs = bench.get("errors") if isinstance(bench, dict) and isinstance(bench.get("errors"), dict) else {}
    samples = [e for e in errs.get("samples") or [] if isinstance(e, dict)]
    if not samples and isinstance(errs.get("first"), dict) and "errno_name" in errs["first"]:
        samples = [errs["first"]]
    out["error_samples"] = [{k: e.get(k) for k in _ERROR_KEYS if k in e} for e in samples] \
        if samples or "samples" in errs else None
    stopped = errs.get("stopped")
    out.update(errors_ok_after_first=count_of(errs.get("ok_after_first")), errors_max=count_of(errs.get("max_errors")),
               errors_stopped=stopped if isinstance(stopped, str) and stopped else None)
    return out
