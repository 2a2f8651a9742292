# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host that did not pass prints on the terminal: its verdict and its first reasons,
bounded in length whatever the record holds (docs/report.md, "Where the full record is").

A failed task's result is printed whole by ansible-core's default callback, twice counting
its ``[ERROR]`` line; with a thousand hosts failing the same way, every byte of it is a
thousand bytes of terminal. So a failed task of this collection carries a brief, never a
record: the record is in ``<results>/<run_id>/<host>.json`` and the brief says so.

* :func:`one_line`: whitespace (newlines included) collapsed to single spaces;
* :func:`cut`: one text at most ``limit`` characters, an ellipsis where it was cut;
* :func:`reasons`: the first ``MAX_REASONS`` reasons, each cut at ``MAX_CHARS``, and the note
  that says how many more there are and where all of them are in full;
* :func:`message`: ``host: VERDICT reason; reason; reason (+N more in <file>)``, the one line
  of a failing host (the gate, a failed wait);
* :func:`text`: one message (a task's own ``msg``) bounded the same way.

The lengths are bounded by :func:`message_limit` (tests/unit/plugins/plugin_utils/report/test_brief.py checks it for any
input with Hypothesis).
"""

from __future__ import annotations

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import ELLIPSIS

MAX_REASONS = 3        # reasons shown
MAX_CHARS = 300        # characters of each reason shown
NOTE_MAX = 40          # the note's own words and numbers, without the file's path


def one_line(value):
    """``value`` as text on one line: every run of whitespace (newlines, tabs) one space."""
    return " ".join(str(value).split())


def cut(value, limit=MAX_CHARS):
    """``(text, was_cut)``: ``value`` on one line, at most ``limit`` characters (the last
    one an ellipsis when it was cut)."""
    line = one_line(value)
    limit = max(1, int(limit))
    if len(line) <= limit:
        return line, False
    return line[:limit - 1].rstrip() + ELLIPSIS, True


def note(dropped, was_cut, where):
    """``(+N more in <where>)`` when reasons were left out, ``(in full in <where>)`` when only
    cut, else empty; without ``where``, ``(+N more)`` / ``(cut)``."""
    if dropped:
        return "(+%d more in %s)" % (dropped, where) if where else "(+%d more)" % dropped
    if was_cut:
        return "(in full in %s)" % where if where else "(cut)"
    return ""


def reasons(items, where=None, max_reasons=MAX_REASONS, max_chars=MAX_CHARS):
    """``(shown, note)``: the first ``max_reasons`` of ``items`` (one line each, cut at
    ``max_chars``) and the note about the rest (:func:`note`)."""
    items = [r for r in (items or []) if one_line(r)]
    shown, any_cut = [], False
    for r in items[:max(1, int(max_reasons))]:
        line, was_cut = cut(r, max_chars)
        shown.append(line)
        any_cut = any_cut or was_cut
    return shown, note(len(items) - len(shown), any_cut, where)


def message(host, verdict, items, where=None, max_reasons=MAX_REASONS, max_chars=MAX_CHARS):
    """``host: VERDICT first reason; second reason; third reason (+N more in <where>)``."""
    shown, tail = reasons(items, where, max_reasons, max_chars)
    head = "%s: %s" % (one_line(host), one_line(verdict))
    return " ".join(p for p in (head, "; ".join(shown), tail) if p)


def text(value, where=None, limit=2 * MAX_CHARS):
    """One message (a task's ``msg``) on one line, at most ``limit`` characters, and
    ``(in full in <where>)`` when it was cut."""
    line, was_cut = cut(value, limit)
    tail = note(0, was_cut, where)
    return "%s %s" % (line, tail) if tail else line


def message_limit(host, verdict, where=None, max_reasons=MAX_REASONS, max_chars=MAX_CHARS):
    """The longest :func:`message` can be for this host, verdict and file."""
    return (len(one_line(host)) + len(one_line(verdict)) + 3 + max(1, max_reasons) * (max_chars + 2)
            + len(str(where or "")) + NOTE_MAX)
