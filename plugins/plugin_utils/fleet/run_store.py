# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run directory, ``<results>/<run_id>/`` (controller side, pure Python): the host
records the role stored there, the host entries each report stored in ``fleet.d/``
(``EntryWriter``), and the merge of both into the fleet of the whole run
(``aggregate_run``: every slice, controller and re-run that wrote with the same run id)."""

from __future__ import annotations

import contextlib
import json
import os
import re

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.aggregate import aggregate
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.fleet_json import run_id_from, utc_now
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.latency import HistogramAccumulator
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.plain import natural_key


REPORT_FILES = ("fleet.json", "summary.json", "gate.json")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def record_paths(run_dir):
    """Paths of the host records stored in a run directory (``<host>.json``), sorted by
    host name.  The role's replaced records (``<host>.json.<pid>.<time>~``, kept by
    ``copy backup``) and the report files are not records."""
    out = []
    with os.scandir(run_dir) as it:
        for e in it:
            if e.name.endswith(".json") and e.name not in REPORT_FILES and not e.name.startswith(".") \
                    and e.is_file():
                out.append((e.name[:-5], e.path))
    out.sort(key=lambda x: natural_key(x[0]))
    return out


def iter_run_records(run_dir, names=None):
    """(host, record) of the host records in a run directory (all, or those in ``names``),
    read one at a time so that only one record is in memory."""
    for name, path in record_paths(run_dir):
        if names is not None and name not in names:
            continue
        try:
            rec = _read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and "workloads" in rec and "verdict" in rec:
            yield str(rec.get("host") or name), rec


ENTRIES_DIR = "fleet.d"

_ENTRY_HOST = re.compile(r'^\{"host": ("(?:[^"\\]|\\.)*")')


class EntryWriter:
    """Stores the host entries of one report (a run, a slice, a controller) in
    ``<run_dir>/fleet.d/``: ``<label>-<time>-<pid>.jsonl`` one entry per line (without its
    histograms), ``.hist`` each host's latency histograms, ``.sum`` their sum per group and
    workload.  A merge reads the small entries and the sums (and the histograms only of
    the hosts a newer file replaces, to subtract them), never every full record.  The
    ``.jsonl`` is renamed into place last: a file set is complete or absent."""

    def __init__(self, run_dir, label="run"):
        directory = os.path.join(run_dir, ENTRIES_DIR)
        os.makedirs(directory, exist_ok=True)
        name = "%s-%s-%d.jsonl" % (re.sub(r"[^A-Za-z0-9_.-]", "_", str(label)),
                                   utc_now().strftime("%Y%m%dT%H%M%S.%fZ"), os.getpid())
        self.path = os.path.join(directory, name)
        self._tmp = os.path.join(directory, "." + name)
        self._f = open(self._tmp, "w", encoding="utf-8")
        self._h = open(self.path + ".hist", "w", encoding="utf-8")
        self._enc = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode
        self._sum = HistogramAccumulator()

    def __call__(self, entry):
        hists = entry.get("histograms")
        line = self._enc({k: v for k, v in entry.items() if k != "histograms"})
        self._f.write(line.replace('{"host":', '{"host": ', 1) + "\n")
        if hists:
            self._h.write(self._enc({"host": entry["host"], "group": entry["group"], "histograms": hists})
                          .replace('{"host":', '{"host": ', 1) + "\n")
            self._sum.add_host(entry["group"], hists)

    def close(self):
        self._h.close()
        write_atomic(self.path + ".sum", self._enc(self._sum.state()) + "\n")
        self._f.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self):
        for f in (self._f, self._h):
            f.close()
        for p in (self._tmp, self.path + ".hist"):
            with contextlib.suppress(OSError):
                os.unlink(p)


def run_sources(run_dir):
    """What a run directory holds, newest first: (entries, stale, hist).

    ``entries`` yields the newest stored entry of each host (fleet.d/); ``stale`` is the
    set of hosts whose record is newer than their entry (or who have none): those records
    are summarized again; ``hist`` holds the latency histograms of the entries yielded
    (each file's sum, minus the hosts a newer file or record replaces).  Two passes over
    the entry files, so that only the winning line of each host is parsed and no more than
    one entry is held at a time."""
    directory = os.path.join(run_dir, ENTRIES_DIR)
    files = []
    if os.path.isdir(directory):
        with os.scandir(directory) as it:
            files = sorted((e.stat().st_mtime_ns, e.name, e.path) for e in it
                           if e.name.endswith(".jsonl") and not e.name.startswith("."))
    newest = {}                       # host -> (file index, line number, mtime)
    in_file = []                      # file index -> hosts in it
    for fi, (mtime, _name, path) in enumerate(files):
        names = set()
        with open(path, encoding="utf-8") as f:
            for li, line in enumerate(f):
                m = _ENTRY_HOST.match(line)
                if m:
                    host = json.loads(m.group(1))
                    newest[host] = (fi, li, mtime)
                    names.add(host)
        in_file.append(names)
    stale = set()
    for name, path in record_paths(run_dir):
        got = newest.get(name)
        if got is None or os.stat(path).st_mtime_ns > got[2]:
            stale.add(name)
            newest.pop(name, None)

    hist = HistogramAccumulator()
    for fi, (_mtime, _name, path) in enumerate(files):
        replaced = {h for h in in_file[fi] if newest.get(h, (None,))[0] != fi}
        try:
            with open(path + ".sum", encoding="utf-8") as f:
                hist.add_state(json.load(f))
        except (OSError, ValueError):
            continue
        if replaced:
            with open(path + ".hist", encoding="utf-8") as f:
                for line in f:
                    m = _ENTRY_HOST.match(line)
                    if m and json.loads(m.group(1)) in replaced:
                        h = json.loads(line)
                        hist.add_host(h["group"], h["histograms"], sign=-1)

    def entries():
        wanted = {}
        for host, (fi, li, _m) in newest.items():
            wanted.setdefault(fi, set()).add(li)
        for fi, (_mtime, _name, path) in enumerate(files):
            lines = wanted.get(fi)
            if not lines:
                continue
            with open(path, encoding="utf-8") as f:
                for li, line in enumerate(f):
                    if li in lines:
                        yield json.loads(line)
    return entries(), stale, hist


def run_loader(run_dir):
    """host -> its record read again from the run directory (None when absent)."""
    def load(host):
        try:
            rec = _read_json(os.path.join(run_dir, "%s.json" % host))
        except (OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) else None
    return load


def aggregate_run(run_dir, options=None, baseline=None, now=None, detail_hosts=100, store_entries=True):
    """The fleet of every host stored in ``run_dir`` (all slices and controllers that
    wrote into it, re-runs included): each host's newest entry from fleet.d/, or its
    record summarized again when the record is newer; streamed one host at a time.
    ``store_entries``: store the entries summarized here, so the next merge reads them."""
    run_id = os.path.basename(os.path.normpath(run_dir))
    entries, stale, hist = run_sources(run_dir)
    sink = EntryWriter(run_dir, "report") if store_entries and stale else None
    try:
        fleet = aggregate(iter_run_records(run_dir, stale), options=options, baseline=baseline, now=now,
                          run_id=run_id, loader=run_loader(run_dir), detail_hosts=detail_hosts, entries=entries,
                          entry_sink=sink, hist=hist, results_root=os.path.dirname(os.path.abspath(run_dir)))
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    if sink is not None:
        sink.close()
    return fleet


def pick_run_id(records, now=None):
    """The run id of a set of records: the most common one (ties: the latest), else the
    time now."""
    counts = {}
    for r in records:
        rid = r.get("run_id") if isinstance(r, dict) else None
        if rid:
            counts[rid] = counts.get(rid, 0) + 1
    return max(counts, key=lambda r: (counts[r], r)) if counts else run_id_from(now or utc_now())
