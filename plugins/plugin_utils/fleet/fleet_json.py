# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet.json, the report's one interface (schema in docs/report.md): its schema name and
version, its text (``to_json`` / ``iter_json``, one list item per line) and its reader
(``load_fleet_json``). Every format is rendered from this dict alone."""

from __future__ import annotations

import datetime
import json
import os


SCHEMA = "fleetqual.fleet"

SCHEMA_VERSION = 2

GENERATOR = "fleetqual.storage.qualify_report"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def run_id_from(now):
    """A run id from the time (fleet.json ``run_id`` when the records carry none)."""
    return now.strftime("%Y%m%dT%H%M%SZ")


def to_json(fleet):
    """fleet.json text: top-level keys one per line, each list item (host, outlier, ...) on
    its own line.  Readable with jq, and fast (the C encoder is not used with indent=)."""
    return "".join(iter_json(fleet))


def iter_json(fleet):
    """to_json's text in pieces, one list item at a time (written as it is encoded, the
    text of a 10,000-host fleet is never held whole)."""
    enc = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(", ", ": ")).encode
    keys = list(fleet)
    yield "{\n"
    for i, key in enumerate(keys):
        value = fleet[key]
        end = ",\n" if i < len(keys) - 1 else "\n"
        if isinstance(value, list) and value:
            yield " %s: [\n" % enc(str(key))
            last = len(value) - 1
            for j, item in enumerate(value):
                yield "  " + enc(item) + (",\n" if j < last else "\n")
            yield " ]" + end
        else:
            yield " %s: %s%s" % (enc(str(key)), enc(value), end)
    yield "}\n"


def results_root(records):
    """The results directory the role used (the parent of the run directory of the records'
    ``results_file``), or None when no record says."""
    for r in (records or {}).values():
        rf = r.get("results_file") if isinstance(r, dict) else None
        if rf:
            return os.path.dirname(os.path.dirname(str(rf)))
    return None
