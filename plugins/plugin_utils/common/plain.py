# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain JSON values for the fleet report (controller side, pure Python): deep copies into
the builtin types, rounding that keeps None, the natural order of host names, and a pause of
the garbage collector while hundreds of thousands of such values are built."""

from __future__ import annotations

import contextlib
import gc
import re


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector (restored on exit).

    The report builds hundreds of thousands of small acyclic dicts while the host records
    (every iostat sample) are alive; each automatic collection walks all of them, which
    cost about a third of ``aggregate`` on 1000 hosts. Nothing here creates cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plain(obj):
    """Deep-copy into plain JSON types (str, int, float, bool, None, dict, list).

    Ansible 2.19 hands data over in tagged subclasses of the builtin types; renderers and
    json.dumps want the plain ones.  Unknown objects become their str()."""
    if obj is None or type(obj) in (str, int, float, bool):
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, dict) or hasattr(obj, "items"):
        try:
            return {str(k): plain(v) for k, v in obj.items()}
        except Exception:  # pragma: no cover - exotic mapping
            return str(obj)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [plain(v) for v in obj]
    return str(obj)


_NAT = re.compile(r"(\d+)")


def natural_key(text):
    """Sort db2 before db10."""
    return [int(p) if p.isdigit() else p.lower() for p in _NAT.split(str(text))]


def rounded(value, digits=4):
    """``round(value, digits)``, None kept."""
    return None if value is None else round(value, digits)
