# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device's own figures of a workload (docs/contracts.md section 4, ``metrics``: ``dev_*``,
``device``, ``dev_source``) and the foreign I/O beside it (``foreign_*``, docs/compliance.md):
the counters iobench read at the measured window's edges, else the collector's iostat, and
the devices the workloads' collectors watched. Read by :mod:`.workload`, the one reader of the
benchmark's result (its docstring describes every key)."""

from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import (
    DISKSTATS_KEYS,
    compute_iostat,
    iostat_average,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import dig
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.stats import as_number, ratio


# metrics key -> iostat -x column
DEVICE_FIELDS = (
    ("dev_r_s", "r/s"),
    ("dev_w_s", "w/s"),
    ("dev_rkb_s", "rkB/s"),
    ("dev_wkb_s", "wkB/s"),
    ("dev_r_await_ms", "r_await"),
    ("dev_w_await_ms", "w_await"),
    ("dev_aqu_sz", "aqu-sz"),
    ("dev_util_pct", "%util"),
    ("dev_rareq_sz_kb", "rareq-sz"),
    ("dev_wareq_sz_kb", "wareq-sz"),
)


FOREIGN_KEYS = ("foreign_share", "foreign_reads", "foreign_writes", "foreign_read_bytes", "foreign_write_bytes",
                "foreign_bytes", "foreign_iops", "foreign_min_iops", "foreign_busy_pct", "foreign_await_ms", "foreign_span_s", "foreign_source",
                "foreign_blind", "foreign_quiet", "foreign_guard", "foreign_skipped", "foreign_max_share",
                "foreign_on_busy", "impact", "foreign_cgroup")


def window_seconds(bench):
    """Length of the measured window: its epochs, else ``elapsed_s``."""
    start, end = as_number(dig(bench, "window", "start_epoch")), as_number(dig(bench, "window", "end_epoch"))
    if start is not None and end is not None and end > start:
        return end - start
    el = as_number(bench.get("elapsed_s"))
    return el if el and el > 0 else None


def _counters(values):
    if not isinstance(values, list) or len(values) < 11 or not all(is_int(v) and v >= 0 for v in values):
        return None
    vals = list(values[:len(DISKSTATS_KEYS)]) + [0] * max(0, len(DISKSTATS_KEYS) - len(values))
    return dict(zip(DISKSTATS_KEYS, vals))


def devstat_figures(bench):
    """Exact device figures over the window from ``window.devstat``:
    ``(iostat-like avg mapping, read bytes, write bytes, devices)``, or None when absent.

    Each device's start/end counters (/sys/block/<dev>/stat fields, sectors of 512
    bytes) go through sysstat's formulas (``compute_iostat``) over the window's length;
    devices combine as the collector's average does (rates summed, awaits weighted by
    ops, %util the busiest device's)."""
    devstat = dig(bench, "window", "devstat")
    secs = window_seconds(bench)
    if not isinstance(devstat, dict) or not devstat or not secs:
        return None
    samples, rbytes, wbytes = [], 0, 0
    for dev, d in devstat.items():
        if not isinstance(d, dict):
            continue
        start, end = _counters(d.get("start")), _counters(d.get("end"))
        if start is None or end is None:
            continue
        samples.append(dict(compute_iostat(start, end, secs), device=dev))
        rbytes += (end["rd_sectors"] - start["rd_sectors"]) % (1 << 64) * 512
        wbytes += (end["wr_sectors"] - start["wr_sectors"]) % (1 << 64) * 512
    if not samples:
        return None
    return iostat_average(samples), rbytes, wbytes, [s["device"] for s in samples]


def device_figures(result, bench, m):
    """Fill the dev_* figures, their source, the device string and byte totals."""
    exact = devstat_figures(bench)
    avg = dig(result, "iostat", "avg")
    error = dig(bench, "window", "devstat_error")
    if exact is not None:
        avg, rbytes, wbytes, devs = exact
        m["dev_source"] = "devstat"
        m["device"] = ",".join(devs)
        m["dev_read_bytes"], m["dev_write_bytes"] = rbytes, wbytes
    elif isinstance(avg, dict) and any(as_number(avg.get(col)) is not None for _key, col in DEVICE_FIELDS):
        m["dev_source"] = "iostat"
        secs = window_seconds(bench)
        for key, col in (("dev_read_bytes", "rkB/s"), ("dev_write_bytes", "wkB/s")):
            rate = as_number(avg.get(col))
            m[key] = int(round(rate * 1024 * secs)) if rate is not None and secs else None
    else:
        avg = None
    if isinstance(error, str) and error:
        m["device_note"] = "device counters at the window's edges unavailable (%s); %s" % (
            error, "iostat average used" if m["dev_source"] == "iostat" else "no device figures")
    if isinstance(avg, dict):
        for key, col in DEVICE_FIELDS:
            m[key] = as_number(avg.get(col))
    if m["device"] is None:
        dev = avg.get("device") if isinstance(avg, dict) else None
        devs = dig(result, "collector", "devices")
        if isinstance(dev, str) and dev:
            m["device"] = dev
        elif isinstance(devs, list) and devs:
            m["device"] = ",".join(str(d) for d in devs)


def _delta_span(samples, bench, source):
    """The two samples bounding the measured window (see foreign_figures)."""
    start = as_number(dig(bench, "window", "start_epoch"))
    end = as_number(dig(bench, "window", "end_epoch"))
    if source == "iobench":
        samples = [s for s in samples if s.get("l") and s.get("w")]
        runs = [s.get("r") for s in samples]
        if runs:
            samples = [s for s in samples if s.get("r") == runs[-1]]
        return (samples[0], samples[-1]) if len(samples) >= 2 else (None, None)
    if len(samples) < 2:
        return None, None
    a = samples[0]
    b = samples[-1]
    if start is not None:
        before = [s for s in samples if s["e"] <= start]
        a = before[-1] if before else a
    if end is not None:
        after = [s for s in samples if s["e"] >= end - 0.05]
        b = after[0] if after else b
    return (a, b) if b["e"] > a["e"] else (None, None)


def foreign_figures(result, bench):
    """The ``foreign_*`` and ``impact`` metrics of a result (module docstring), or {}."""
    f = dig(result, "foreign")
    if not isinstance(f, dict):
        return {}
    settings = f.get("settings") if isinstance(f.get("settings"), dict) else {}
    guard = f.get("guard") if isinstance(f.get("guard"), dict) else None
    impact = f.get("impact") if isinstance(f.get("impact"), dict) else {}
    out = {"foreign_source": f.get("source"), "foreign_blind": f.get("blind"), "foreign_quiet": f.get("quiet"),
           "foreign_guard": guard.get("reason") if guard else None, "foreign_skipped": f.get("skipped"),
           "foreign_max_share": as_number(settings.get("max_share")), "foreign_on_busy": settings.get("on_busy"),
           "foreign_min_iops": as_number(settings.get("min_foreign_iops")),
           # where the attribution group was and the limits it inherited (docs/compliance.md)
           "foreign_cgroup": f.get("cgroup") if isinstance(f.get("cgroup"), dict) else None,
           "impact": {"ioprio_class": impact.get("ioprio_class"), "nice": impact.get("nice"),
                      "schedulers": [s.get("name") for s in impact.get("schedulers") or [] if isinstance(s, dict)],
                      "notes": list(impact.get("notes") or [])}}
    samples = [s for s in f.get("samples") or [] if isinstance(s, dict) and as_number(s.get("e")) is not None]
    a, b = _delta_span(samples, bench, f.get("source"))
    if a is None:
        return out
    secs = b["e"] - a["e"]
    dev = [0] * 7
    ours = [0] * 4
    for name, cur in (b.get("d") or {}).items():
        prev = (a.get("d") or {}).get(name)
        if not isinstance(cur, list) or not isinstance(prev, list) or len(cur) < 7 or len(prev) < 7:
            return out
        dev = [x + (c - p) for x, c, p in zip(dev, cur, prev)]
        if f.get("source", "").startswith("cgroup"):
            cb = (b.get("c") or {}).get(name) or [0] * 4
            ca = (a.get("c") or {}).get(name) or [0] * 4
            ours = [x + (c - p) for x, c, p in zip(ours, cb, ca)]
    if f.get("source") == "iobench":
        la, lb = a["l"], b["l"]
        ours = [lb[0] - la[0], lb[1] - la[1], lb[3] - la[3], lb[4] - la[4]]
    dev_r, dev_rb, dev_w, dev_wb = dev[0], dev[1] * 512, dev[3], dev[4] * 512
    fr, frb = max(0, dev_r - ours[0]), max(0, dev_rb - ours[1])
    fw, fwb = max(0, dev_w - ours[2]), max(0, dev_wb - ours[3])
    ios_share = ratio(fr + fw, dev_r + dev_w) or 0.0
    bytes_share = ratio(frb + fwb, dev_rb + dev_wb) or 0.0
    util = min(100.0, dev[6] / (secs * 1000.0) * 100.0) if secs > 0 else None
    out.update(foreign_reads=fr, foreign_writes=fw, foreign_read_bytes=frb, foreign_write_bytes=fwb,
               foreign_bytes=frb + fwb, foreign_iops=round((fr + fw) / secs, 2) if secs > 0 else None,
               foreign_share=round(min(1.0, max(ios_share, bytes_share)), 4),
               foreign_busy_pct=None if util is None else round(util * ios_share, 1),
               foreign_span_s=round(secs, 3))
    if a.get("l") and b.get("l") and a.get("r") == b.get("r") and fr + fw:
        our_ms = ((b["l"][2] - a["l"][2]) + (b["l"][5] - a["l"][5])) / 1e6
        out["foreign_await_ms"] = round(max(0.0, dev[2] + dev[5] - our_ms) / (fr + fw), 3)
    return out


def collector_devices(records):
    """The block devices the workloads' collectors watched, in first-seen order."""
    out = []
    for r in records or []:
        coll = ((r or {}).get("result") or {}).get("collector") or {}
        for dev in coll.get("devices") or []:
            if dev not in out:
                out.append(dev)
    return out
