# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The small outputs of a fleet besides its reports: the hosts that did not pass
(``not-passed.limit``, for ``--limit @file``) and the run summary AWX passes between
workflow nodes."""

from __future__ import annotations


LIMIT_FILE = "not-passed.limit"


def not_passed(fleet):
    """Hosts whose verdict is not PASS, in fleet order."""
    return [h["host"] for h in fleet["hosts"] if h["verdict"] != "PASS"]


def limit_text(fleet):
    """Content of the ``--limit @file`` file: one non-PASS host per line (empty: all passed)."""
    return "".join("%s\n" % h for h in not_passed(fleet))


def run_summary(fleet, slice_=None):
    """The small summary AWX passes between workflow nodes: run id, slice, verdict per
    host and counts (no measurements)."""
    return {"run_id": fleet["run_id"], "slice": slice_, "generated_at": fleet["generated_at"],
            "counts": dict(fleet["summary"]["by_verdict"]), "hosts": fleet["summary"]["hosts"],
            "verdicts": {h["host"]: h["verdict"] for h in fleet["hosts"]},
            "not_passed": not_passed(fleet)}
