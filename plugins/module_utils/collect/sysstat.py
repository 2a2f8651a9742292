# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""iostat / vmstat output parsing and the /proc fallback that computes the same fields.

This is the one place iostat and vmstat are parsed. Every sample is a flat dict
with the field names iostat -x and vmstat print (``r/s``, ``w_await``,
``aqu-sz``, ``%util``, ``wareq-sz``; ``r``, ``b``, ``us``, ``sy``, ``id``,
``wa``, ``bi``, ``bo``, ``si``, ``so``) and an ``epoch`` (wall clock, end of
the sample's interval).

The /proc formulas are sysstat's (``common.c:compute_ext_disk_stats`` and
``iostat.c``) and procps vmstat's, so a host without sysstat reports the same
numbers.
"""

import json

# iostat -x fields we keep, in iostat's order. iostat JSON spells %util "util".
IOSTAT_FIELDS = ("r/s", "w/s", "rkB/s", "wkB/s", "r_await", "w_await", "aqu-sz", "%util",
                 "rareq-sz", "wareq-sz")
# extra iostat fields passed through when present (sysstat >= 12 with a 4.18+ kernel)
IOSTAT_EXTRA = ("d/s", "f/s", "dkB/s", "rrqm/s", "wrqm/s", "d_await", "f_await", "dareq-sz")
VMSTAT_FIELDS = ("r", "b", "us", "sy", "id", "wa", "st", "bi", "bo", "si", "so", "in", "cs")
VMSTAT_AVG_FIELDS = ("r", "b", "us", "sy", "id", "wa", "bi", "bo", "si", "so")
RATE_FIELDS = ("r/s", "w/s", "rkB/s", "wkB/s")


# --------------------------------------------------------------------------- iostat JSON

def _iostat_record(dev):
    rec = {"device": dev.get("disk_device")}
    for key in IOSTAT_FIELDS + IOSTAT_EXTRA:
        src = "util" if key == "%util" else key
        if src in dev:
            rec[key] = float(dev[src])
    # sysstat 11.5-11.7 JSON: avgqu-sz instead of aqu-sz, no per-direction request sizes
    if "aqu-sz" not in rec and "avgqu-sz" in dev:
        rec["aqu-sz"] = float(dev["avgqu-sz"])
    for kb, ops, sz in (("rkB/s", "r/s", "rareq-sz"), ("wkB/s", "w/s", "wareq-sz")):
        if sz not in rec and kb in rec and ops in rec:
            rec[sz] = round(rec[kb] / rec[ops], 2) if rec[ops] else 0.0
    return rec


def iostat_json_usable(text):
    """Whether ``iostat -dx -o JSON`` output (one report) is a JSON document with
    per-device statistics we can read; ``(ok, why_not)``."""
    try:
        samples = parse_iostat_json(text)
    except (ValueError, KeyError, TypeError) as e:
        return False, "its -o JSON output does not parse (%s)" % e
    if samples and not all(k in samples[0] for k in ("r/s", "w/s", "r_await", "w_await", "%util")):
        return False, "its -x JSON output lacks r_await/w_await"
    return True, None


def parse_iostat_json(text, interval=1.0, start_epoch=None):
    """Parse a complete ``iostat -dx -o JSON`` document.

    Returns a list of samples (one per device per report). When ``start_epoch``
    is given, report ``i`` (0-based) gets ``epoch = start_epoch + (i+1)*interval``;
    ``index`` is the 0-based report number either way and ``timestamp`` is
    iostat's own (``-t``) string when present.
    """
    doc = json.loads(text)
    samples = []
    for host in doc["sysstat"]["hosts"]:
        for i, stat in enumerate(host.get("statistics", [])):
            for dev in stat.get("disk", []):
                rec = _iostat_record(dev)
                rec["index"] = i
                if "timestamp" in stat:
                    rec["timestamp"] = stat["timestamp"]
                if start_epoch is not None:
                    rec["epoch"] = round(start_epoch + (i + 1) * interval, 3)
                samples.append(rec)
    return samples


class IostatStream(object):
    """Incremental parser of ``iostat -o JSON <interval>`` output, fed line by line.

    iostat prints its JSON document progressively and flushes at every report:
    each report is a ``{"disk": [ ... ]}`` block whose device objects sit one per
    line. The document only closes when iostat exits normally, which it does
    not when we stop it with SIGTERM, so we do not wait for it: every device
    line is parsed on its own as soon as it arrives and stamped with the
    arrival time (the end of its interval: iostat flushes right after
    computing the report). ``feed(line, epoch)`` returns the new samples.
    """

    def __init__(self, origin=None):
        self.index = -1
        self.timestamp = None
        self.samples = []
        self.header = {}
        # real interval of the current report: from the end of the previous report (its
        # arrival), or from ``origin`` (when iostat was started; with -y its first printed
        # report covers the first interval after the start)
        self.origin = origin
        self.last_epoch = None
        self.report_start = None

    def started(self, epoch):
        """The collector started iostat at ``epoch``."""
        if self.origin is None:
            self.origin = epoch

    def _new_report(self):
        self.index += 1
        self.report_start = self.last_epoch if self.last_epoch is not None else self.origin

    def feed(self, line, epoch):
        s = line.strip()
        new = []
        if s.startswith('"timestamp"'):
            self._new_report()
            self.timestamp = s.split(":", 1)[1].strip().rstrip(",").strip('"')
        elif s.startswith('"disk"'):
            if self.timestamp is None:
                self._new_report()
        elif s.startswith('{"disk_device"'):
            dev = json.loads(s.rstrip(","))
            rec = _iostat_record(dev)
            rec["index"] = self.index
            if self.timestamp is not None:
                rec["timestamp"] = self.timestamp
            rec["epoch"] = round(epoch, 3)
            if self.report_start is not None:
                rec["start_epoch"] = round(self.report_start, 3)
            self.last_epoch = epoch
            new.append(rec)
        elif s in ("]", "],"):
            # end of a report's disk list
            self.timestamp = None
        elif s.startswith('"') and ":" in s and self.index < 0:
            k, v = s.split(":", 1)
            self.header[k.strip('"')] = v.strip().rstrip(",").strip('"')
        self.samples.extend(new)
        return new


# --------------------------------------------------------------------------- vmstat

class VmstatStream(object):
    """Parser of ``vmstat -n [-w] <interval>`` output, fed line by line.

    Columns are found by their header names (the second header line), so
    ``-w``, ``-t`` or a newer procps adding columns does not shift fields. The
    first data line is vmstat's since-boot average and is dropped
    (``skip_first``).
    """

    def __init__(self, skip_first=True, origin=None):
        self.columns = None
        self.skip = skip_first
        self.samples = []
        self.index = -1
        # a sample covers the time since the previous line arrived (the since-boot line
        # too), or since ``origin`` (when vmstat was started)
        self.last_epoch = origin

    def started(self, epoch):
        """The collector started vmstat at ``epoch``."""
        if self.last_epoch is None:
            self.last_epoch = epoch

    def feed(self, line, epoch):
        parts = line.split()
        if not parts:
            return []
        if not parts[0].isdigit() and "r" in parts and "b" in parts and "id" in parts:
            self.columns = parts
            return []
        if self.columns is None or not parts[0].isdigit():
            return []  # the group header line (procs --memory--) or junk
        if self.skip:
            self.skip = False
            self.last_epoch = epoch
            return []
        rec = {}
        for name, val in zip(self.columns, parts):
            if name in VMSTAT_FIELDS:
                try:
                    rec[name] = int(val)
                except ValueError:
                    continue
        self.index += 1
        rec["index"] = self.index
        rec["epoch"] = round(epoch, 3)
        if self.last_epoch is not None and epoch:
            rec["start_epoch"] = round(self.last_epoch, 3)
        self.last_epoch = epoch
        self.samples.append(rec)
        return [rec]


def parse_vmstat(text, interval=1.0, start_epoch=0.0, skip_first=True):
    """Parse whole vmstat output (tests, recorded fixtures). Sample ``i`` gets
    ``epoch = start_epoch + (i+1)*interval``."""
    vs = VmstatStream(skip_first=skip_first)
    for line in text.splitlines():
        vs.feed(line, 0.0)
    for s in vs.samples:
        s["epoch"] = round(start_epoch + (s["index"] + 1) * interval, 3)
    return vs.samples


# --------------------------------------------------------------------------- /proc

DISKSTATS_KEYS = ("rd_ios", "rd_merges", "rd_sectors", "rd_ticks",
                  "wr_ios", "wr_merges", "wr_sectors", "wr_ticks",
                  "ios_pgr", "tot_ticks", "rq_ticks",
                  "dc_ios", "dc_merges", "dc_sectors", "dc_ticks",
                  "fl_ios", "fl_ticks")


def parse_diskstats(text):
    """/proc/diskstats -> {name: {rd_ios: .., ...}} (missing newer fields are 0)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        vals = [int(x) for x in parts[3:]]
        vals += [0] * (len(DISKSTATS_KEYS) - len(vals))
        out[parts[2]] = dict(zip(DISKSTATS_KEYS, vals[:len(DISKSTATS_KEYS)]))
    return out


def parse_proc_stat(text):
    """/proc/stat -> {cpu: [user, nice, system, idle, iowait, irq, softirq, steal],
    procs_running, procs_blocked}."""
    out = {"cpu": None, "procs_running": 0, "procs_blocked": 0}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            vals = [int(x) for x in parts[1:9]]
            out["cpu"] = vals + [0] * (8 - len(vals))
        elif parts[0] in ("procs_running", "procs_blocked"):
            out[parts[0]] = int(parts[1])
    return out


def parse_proc_vmstat(text):
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("pgpgin", "pgpgout", "pswpin", "pswpout"):
            out[parts[0]] = int(parts[1])
    return out


def _wrap(cur, prev):
    """Counter delta; 32-bit counters (older kernels) wrap."""
    d = cur - prev
    if d < 0:
        d += 1 << 32
    return d


def compute_iostat(prev, cur, interval_s):
    """iostat -x fields for one device from two /proc/diskstats snapshots
    ``interval_s`` seconds apart (sysstat's formulas):

    * r/s = delta rd_ios / s; rkB/s = delta rd_sectors / 2 / s
    * r_await = delta rd_ticks / delta rd_ios (ms), 0 without ios
    * rareq-sz = delta rd_sectors / 2 / delta rd_ios (kB)
    * aqu-sz = delta rq_ticks (weighted ms) / interval ms
    * %util = delta tot_ticks (io_ticks ms) / interval ms * 100, capped at 100
    (and the same with wr_* for writes).
    """
    d = dict((k, _wrap(cur[k], prev[k])) for k in DISKSTATS_KEYS)
    ms = interval_s * 1000.0
    out = {
        "r/s": d["rd_ios"] / interval_s,
        "w/s": d["wr_ios"] / interval_s,
        "rkB/s": d["rd_sectors"] / 2.0 / interval_s,
        "wkB/s": d["wr_sectors"] / 2.0 / interval_s,
        "r_await": (d["rd_ticks"] / float(d["rd_ios"])) if d["rd_ios"] else 0.0,
        "w_await": (d["wr_ticks"] / float(d["wr_ios"])) if d["wr_ios"] else 0.0,
        "aqu-sz": d["rq_ticks"] / ms,
        "%util": min(100.0, d["tot_ticks"] / ms * 100.0),
        "rareq-sz": (d["rd_sectors"] / 2.0 / d["rd_ios"]) if d["rd_ios"] else 0.0,
        "wareq-sz": (d["wr_sectors"] / 2.0 / d["wr_ios"]) if d["wr_ios"] else 0.0,
        "d/s": d["dc_ios"] / interval_s,
        "f/s": d["fl_ios"] / interval_s,
        "dkB/s": d["dc_sectors"] / 2.0 / interval_s,
        "rrqm/s": d["rd_merges"] / interval_s,
        "wrqm/s": d["wr_merges"] / interval_s,
        "d_await": (d["dc_ticks"] / float(d["dc_ios"])) if d["dc_ios"] else 0.0,
        "f_await": (d["fl_ticks"] / float(d["fl_ios"])) if d["fl_ios"] else 0.0,
        "dareq-sz": (d["dc_sectors"] / 2.0 / d["dc_ios"]) if d["dc_ios"] else 0.0,
    }
    return dict((k, round(v, 2)) for k, v in out.items())


def compute_vmstat(prev, cur, interval_s, pagesize=4096):
    """vmstat fields from two snapshots ``{"stat": parse_proc_stat(..),
    "vmstat": parse_proc_vmstat(..)}`` (procps' formulas):

    * r, b = procs_running, procs_blocked of the later snapshot
    * us = user+nice, sy = system+irq+softirq, id = idle, wa = iowait, st = steal,
      each as % of the summed cpu delta (integers, as vmstat prints)
    * bi, bo = delta pgpgin, pgpgout / s (KiB/s: the kernel counts KiB)
    * si, so = delta pswpin, pswpout * pagesize / 1024 / s (KiB/s)
    """
    pc, cc = prev["stat"]["cpu"], cur["stat"]["cpu"]
    d = [_wrap(c, p) for c, p in zip(cc, pc)]
    user, nice, system, idle, iowait, irq, softirq, steal = d
    total = float(sum(d)) or 1.0

    def pct(x):
        return int(round(100.0 * x / total))

    pv, cv = prev["vmstat"], cur["vmstat"]

    def rate(key, mult=1.0):
        return int(round(_wrap(cv.get(key, 0), pv.get(key, 0)) * mult / interval_s))

    return {
        "r": cur["stat"]["procs_running"],
        "b": cur["stat"]["procs_blocked"],
        "us": pct(user + nice),
        "sy": pct(system + irq + softirq),
        "id": pct(idle),
        "wa": pct(iowait),
        "st": pct(steal),
        "bi": rate("pgpgin"),
        "bo": rate("pgpgout"),
        "si": rate("pswpin", pagesize / 1024.0),
        "so": rate("pswpout", pagesize / 1024.0),
    }


# --------------------------------------------------------------------------- window + averages

def in_window(sample, start_epoch, end_epoch, interval_s):
    """A sample belongs to the window when the middle of its interval lies inside
    [start_epoch, end_epoch]. The interval is the sample's real one, from its
    ``start_epoch`` (the previous sample's arrival, or when the collector started) to its
    ``epoch`` (its own arrival): under load a collector starts late and drifts, so the
    nominal ``interval_s`` is only used for a sample that has no start (recorded fixtures)."""
    start = sample.get("start_epoch")
    if start is None or start >= sample["epoch"]:
        start = sample["epoch"] - interval_s
    mid = (start + sample["epoch"]) / 2.0
    return start_epoch <= mid <= end_epoch


def select_window(samples, start_epoch, end_epoch, interval_s):
    """Samples inside the window, each with ``t`` = seconds from the window
    start to the end of the sample's interval."""
    out = []
    for s in samples:
        if in_window(s, start_epoch, end_epoch, interval_s):
            s = dict(s)
            s["t"] = round(s["epoch"] - start_epoch, 3)
            out.append(s)
    return out


def iostat_average(samples):
    """Average iostat samples over time and combine devices.

    Per device: rates (r/s, w/s, rkB/s, wkB/s) and aqu-sz are time means;
    awaits are weighted by the ops of each sample (total ticks / total ios,
    as iostat would report over the whole window); request sizes are total kB
    / total ios; %util is the time mean. Across devices: rates and aqu-sz are
    summed, awaits and request sizes weighted by ops, %util is the busiest
    device's. ``device`` names the devices joined by ``,``; ``count`` is the
    number of reports averaged. Returns ``{}`` for no samples.
    """
    if not samples:
        return {}
    by_dev = {}
    order = []
    for s in samples:
        dev = s.get("device")
        if dev not in by_dev:
            by_dev[dev] = []
            order.append(dev)
        by_dev[dev].append(s)

    per = {}
    for dev, ss in by_dev.items():
        n = float(len(ss))
        a = {}
        for k in RATE_FIELDS + ("aqu-sz", "%util"):
            a[k] = sum(x.get(k, 0.0) for x in ss) / n
        for op, await_k, sz_k, kb_k in (("r/s", "r_await", "rareq-sz", "rkB/s"),
                                        ("w/s", "w_await", "wareq-sz", "wkB/s")):
            ios = sum(x.get(op, 0.0) for x in ss)
            a[await_k] = (sum(x.get(await_k, 0.0) * x.get(op, 0.0) for x in ss) / ios) if ios else 0.0
            a[sz_k] = (sum(x.get(kb_k, 0.0) for x in ss) / ios) if ios else 0.0
        a["count"] = len(ss)
        per[dev] = a

    out = {}
    for k in RATE_FIELDS + ("aqu-sz",):
        out[k] = sum(per[d][k] for d in order)
    out["%util"] = max(per[d]["%util"] for d in order)
    for op, await_k, sz_k in (("r/s", "r_await", "rareq-sz"), ("w/s", "w_await", "wareq-sz")):
        ios = sum(per[d][op] for d in order)
        out[await_k] = (sum(per[d][await_k] * per[d][op] for d in order) / ios) if ios else 0.0
        out[sz_k] = (sum(per[d][sz_k] * per[d][op] for d in order) / ios) if ios else 0.0
    out = dict((k, round(v, 2)) for k, v in out.items())
    out["device"] = ",".join(str(d) for d in order)
    out["count"] = max(per[d]["count"] for d in order)
    return out


def vmstat_average(samples):
    if not samples:
        return {}
    n = float(len(samples))
    out = {}
    for k in VMSTAT_AVG_FIELDS:
        out[k] = round(sum(s.get(k, 0) for s in samples) / n, 2)
    out["count"] = len(samples)
    return out
