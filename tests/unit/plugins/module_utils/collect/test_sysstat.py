"""iostat/vmstat parsing on recorded output, the /proc formulas, windows, averages, sizes."""
import os

import pytest
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import format_size, parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.sysstat import (
    IOSTAT_FIELDS,
    IostatStream,
    iostat_json_usable,
    VmstatStream,
    compute_iostat,
    compute_vmstat,
    iostat_average,
    parse_diskstats,
    parse_iostat_json,
    parse_proc_stat,
    parse_proc_vmstat,
    parse_vmstat,
    select_window,
    vmstat_average,
    in_window,
)

FIX = os.path.join(unitpaths.UNIT, "fixtures", "target")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


# --------------------------------------------------------------------------- sizes

@pytest.mark.parametrize("text,expected", [
    ("16K", 16384), ("16k", 16384), ("16KiB", 16384), ("4096", 4096), (4096, 4096), ("512B", 512),
    ("1M", 1 << 20), ("2G", 2 << 30), ("1T", 1 << 40), ("64MiB", 64 << 20), ("1.5K", 1536),
    ("0.5G", 512 << 20), (" 8 M ", 8 << 20), ("0", 0),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,words", [
    ("16X", "unknown size suffix"), ("16KB", "unknown size suffix"), ("", "cannot parse"),
    ("abc", "cannot parse"), ("-1K", "negative"), ("1.3B", "whole number"), (True, "size must"),
    (-5, "negative"), ([1], "size must"),
])
def test_parse_size_errors(text, words):
    with pytest.raises(ValueError) as e:
        parse_size(text, "block_size")
    assert words in str(e.value)
    assert "block_size" in str(e.value)


def test_format_size_roundtrip():
    for n in (1, 512, 1536, 16384, 3 << 20, 5 << 30, 1 << 40):
        assert parse_size(format_size(n)) == n
    assert format_size(16384) == "16K"


# --------------------------------------------------------------------------- iostat

def test_sysstat_version_recorded():
    assert "sysstat version 12.6" in fixture("SYSSTAT_VERSION.txt")


def test_iostat_json_recorded_with_dd():
    s = parse_iostat_json(fixture("iostat_dxy_json_1_2_with_dd.json"), interval=1, start_epoch=1000.0)
    assert [x["device"] for x in s] == ["vda", "vda"]
    first = s[0]
    assert first["index"] == 0 and first["epoch"] == 1001.0 and s[1]["epoch"] == 1002.0
    for k in IOSTAT_FIELDS:
        assert isinstance(first[k], float), k
    # dd wrote 64 KiB direct writes: values as iostat printed them
    assert first["w/s"] == 3043.0
    assert first["wkB/s"] == 192308.0
    assert first["%util"] == pytest.approx(first["%util"])  # 'util' renamed to '%util'
    assert "util" not in first


def test_iostat_json_with_timestamp_two_devices():
    s = parse_iostat_json(fixture("iostat_dxyt_json_vda_loop0.json"))
    assert [(x["index"], x["device"]) for x in s] == [(0, "loop0"), (0, "vda"), (1, "loop0"), (1, "vda")]
    assert s[0]["timestamp"] == "11/21/26 23:42:57"
    assert s[1]["w/s"] == 6000.0 and s[1]["wkB/s"] == 96000.0 and s[1]["wareq-sz"] == 16.0


@pytest.mark.parametrize("name", ["iostat_dxy_json_1_2_with_dd.json", "iostat_dxyt_json_vda_loop0.json"])
def test_iostat_stream_agrees_with_full_parse(name):
    text = fixture(name)
    full = parse_iostat_json(text)
    st = IostatStream()
    for i, line in enumerate(text.splitlines(True)):
        st.feed(line, 5000.0 + i)
    assert len(st.samples) == len(full)
    for a, b in zip(st.samples, full):
        assert dict((k, v) for k, v in a.items() if k not in ("epoch", "start_epoch")) == b
    assert st.header.get("nodename") == "vm"


def test_iostat_stream_gives_each_report_its_real_interval():
    """A report covers the time from the previous report's arrival (the first one: from
    when iostat was started) to its own: never start + i x interval."""
    text = fixture("iostat_dxyt_json_vda_loop0.json")
    st = IostatStream()
    st.started(4990.5)
    arrivals = [5000.0 + i * 1.7 for i in range(len(text.splitlines()))]   # a drifting collector
    for line, t in zip(text.splitlines(True), arrivals):
        st.feed(line, t)
    by_report = {}
    for x in st.samples:
        by_report.setdefault(x["index"], []).append(x)
    assert by_report[0][0]["start_epoch"] == 4990.5
    assert by_report[1][0]["start_epoch"] == by_report[0][-1]["epoch"]
    assert all(x["start_epoch"] < x["epoch"] for x in st.samples)


def test_vmstat_stream_interval_starts_at_the_previous_line():
    vs = VmstatStream(skip_first=True)
    vs.started(99.0)
    lines = ["procs ---memory---", " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st",
             " 1  0      0 100 10 10 0 0 0 0 1 1 1 1 98 0 0", " 2  0      0 100 10 10 0 0 5 0 1 1 1 1 98 0 0",
             " 3  0      0 100 10 10 0 0 6 0 1 1 1 1 98 0 0"]
    for line, t in zip(lines, (100.0, 100.0, 100.2, 101.9, 103.4)):
        vs.feed(line, t)
    assert [(x["start_epoch"], x["epoch"]) for x in vs.samples] == [(100.2, 101.9), (101.9, 103.4)]


@pytest.mark.parametrize("start, end, inside", [
    (109.9, 110.4, False),    # arrived late, mostly after the window: the idle sample the old rule took
    (108.6, 111.0, True),     # a long report (the collector drifted) centred inside the window
    (105.0, 106.0, True),
    (110.2, 111.2, False),
])
def test_window_membership_uses_the_real_interval(start, end, inside):
    assert in_window({"epoch": end, "start_epoch": start}, 100.0, 110.0, 1) is inside


def test_window_membership_without_a_start_uses_the_nominal_interval():
    assert in_window({"epoch": 110.4}, 100.0, 110.0, 1) is True
    assert in_window({"epoch": 110.6}, 100.0, 110.0, 1) is False


def test_iostat_stream_truncated_by_sigterm():
    """What the collector sees when it terminates iostat: an unclosed document."""
    text = fixture("iostat_sigterm_truncated.json")
    with pytest.raises(ValueError):
        parse_iostat_json(text)
    st = IostatStream()
    for line in text.splitlines(True):
        st.feed(line, 1.0)
    assert [x["index"] for x in st.samples] == [0, 1]
    assert all(x["device"] == "vda" for x in st.samples)


# Shape of sysstat 11.6's -x JSON device entry (old field names), written by hand from its
# documentation: avgqu-sz, avgrq-sz, await, svctm; no rareq-sz/wareq-sz.
OLD_JSON = """{"sysstat": {"hosts": [{"nodename": "c7", "statistics": [{"disk": [
{"disk_device": "sda", "rrqm/s": 0.00, "wrqm/s": 1.00, "r/s": 10.00, "w/s": 20.00, "rkB/s": 40.00,
 "wkB/s": 320.00, "avgrq-sz": 24.00, "avgqu-sz": 0.50, "await": 2.00, "r_await": 1.00, "w_await": 2.50,
 "svctm": 0.30, "util": 9.00}]}]}]}}"""


def test_iostat_old_json_field_names():
    s = parse_iostat_json(OLD_JSON)
    assert s[0]["aqu-sz"] == 0.5 and s[0]["rareq-sz"] == 4.0 and s[0]["wareq-sz"] == 16.0
    assert s[0]["%util"] == 9.0
    assert iostat_json_usable(OLD_JSON) == (True, None)


def test_iostat_json_usable_rejects_text():
    ok, why = iostat_json_usable("Linux 3.10.0 (c7)\n\nDevice: rrqm/s wrqm/s r/s w/s\nsda 0.00 0.00 1.00 2.00\n")
    assert not ok and "does not parse" in why
    assert iostat_json_usable(fixture("iostat_dxy_json_1_2_with_dd.json")) == (True, None)


# --------------------------------------------------------------------------- vmstat

@pytest.mark.parametrize("name,n", [("vmstat_n_1_3.txt", 2), ("vmstat_nw_1_3.txt", 2), ("vmstat_nt_1_2.txt", 1)])
def test_vmstat_recorded(name, n):
    s = parse_vmstat(fixture(name), interval=1, start_epoch=100.0)
    assert len(s) == n  # since-boot line dropped
    for x in s:
        for k in ("r", "b", "us", "sy", "id", "wa", "bi", "bo", "si", "so"):
            assert isinstance(x[k], int)
        assert 95 <= x["us"] + x["sy"] + x["id"] + x["wa"] + x.get("st", 0) <= 105
    assert s[0]["epoch"] == 101.0


def test_vmstat_columns_by_header_name():
    text = ("procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----\n"
            " b  r   swpd   free   buff  cache   so   si    bo    bi   in   cs us sy id wa st\n"
            " 9  9      0      1      1      1    9    9     9     9    9    9  9  9  9  9  9\n"
            " 1  2      0      1      1      1    3    4     5     6    7    8 10 11 70  9  0\n")
    s = parse_vmstat(text)
    assert s == [{"b": 1, "r": 2, "so": 3, "si": 4, "bo": 5, "bi": 6, "in": 7, "cs": 8, "us": 10,
                  "sy": 11, "id": 70, "wa": 9, "st": 0, "index": 0, "epoch": 1.0}]


def test_vmstat_stream_ignores_repeated_headers():
    vs = VmstatStream(skip_first=False)
    text = fixture("vmstat_n_1_3.txt")
    for line in (text + text).splitlines():
        vs.feed(line, 7.0)
    assert len(vs.samples) == 6


# --------------------------------------------------------------------------- /proc formulas

def test_diskstats_hand_checked():
    """Two snapshots around `dd bs=32k count=2000 oflag=direct` (fixtures/target/README.md).

    vda deltas: rd_ios 9, rd_sectors 112, rd_ticks 3, wr_ios 2000, wr_sectors 128000,
    wr_ticks 74, io_ticks 92, weighted 100 ms. Over a 0.5 s interval (500 ms):
    r/s 18, w/s 4000, rkB/s 56/0.5 = 112, wkB/s 64000/0.5 = 128000, r_await 3/9 = 0.33,
    w_await 74/2000 = 0.037 -> 0.04, aqu-sz 100/500 = 0.2, %util 92/500*100 = 18.4,
    rareq-sz 56/9 = 6.22 kB, wareq-sz 64000/2000 = 32 kB.
    """
    a = parse_diskstats(fixture("diskstats_0.txt"))["vda"]
    b = parse_diskstats(fixture("diskstats_1.txt"))["vda"]
    r = compute_iostat(a, b, 0.5)
    assert r["r/s"] == 18.0
    assert r["w/s"] == 4000.0
    assert r["rkB/s"] == 112.0
    assert r["wkB/s"] == 128000.0
    assert r["r_await"] == 0.33
    assert r["w_await"] == 0.04
    assert r["aqu-sz"] == 0.2
    assert r["%util"] == 18.4
    assert r["rareq-sz"] == 6.22
    assert r["wareq-sz"] == 32.0
    # discards (the unlink of the previous file): 2 ops, 192000 sectors, 22 ms
    assert r["d/s"] == 4.0 and r["dkB/s"] == 192000.0 and r["d_await"] == 11.0


def test_diskstats_idle_and_util_cap():
    a = parse_diskstats(fixture("diskstats_0.txt"))
    assert set(["vda", "loop0", "zram0"]) <= set(a)
    r = compute_iostat(a["loop0"], a["loop0"], 1.0)
    assert r["r/s"] == 0 and r["r_await"] == 0 and r["rareq-sz"] == 0 and r["%util"] == 0
    b = dict(a["vda"], tot_ticks=a["vda"]["tot_ticks"] + 1500)
    assert compute_iostat(a["vda"], b, 1.0)["%util"] == 100.0


def test_diskstats_old_kernel_fields():
    """A 4.x kernel without discard/flush fields still parses (14 columns)."""
    d = parse_diskstats("   8       0 sda 10 0 80 5 20 0 160 7 0 12 12\n")
    assert d["sda"]["wr_ios"] == 20 and d["sda"]["fl_ios"] == 0


def test_vmstat_from_proc_hand_checked():
    """cpu deltas: user 1, system 3, idle 73, iowait 7 (total 84): us 1/84 -> 1,
    sy 3/84 -> 4, id 73/84 -> 87, wa 7/84 -> 8; procs_running 2; pgpgin +56 and
    pgpgout +64000 KiB over 0.5 s -> bi 112, bo 128000; no swap."""
    prev = {"stat": parse_proc_stat(fixture("stat_0.txt")), "vmstat": parse_proc_vmstat(fixture("vmstat_proc_0.txt"))}
    cur = {"stat": parse_proc_stat(fixture("stat_1.txt")), "vmstat": parse_proc_vmstat(fixture("vmstat_proc_1.txt"))}
    r = compute_vmstat(prev, cur, 0.5)
    assert r == {"r": 2, "b": 0, "us": 1, "sy": 4, "id": 87, "wa": 8, "st": 0,
                 "bi": 112, "bo": 128000, "si": 0, "so": 0}


def test_vmstat_swap_in_kib():
    prev = {"stat": {"cpu": [0] * 8, "procs_running": 1, "procs_blocked": 0},
            "vmstat": {"pgpgin": 0, "pgpgout": 0, "pswpin": 0, "pswpout": 0}}
    cur = {"stat": {"cpu": [0, 0, 0, 100, 0, 0, 0, 0], "procs_running": 1, "procs_blocked": 3},
           "vmstat": {"pgpgin": 0, "pgpgout": 0, "pswpin": 10, "pswpout": 20}}
    r = compute_vmstat(prev, cur, 2.0, pagesize=4096)
    assert r["si"] == 20 and r["so"] == 40 and r["b"] == 3 and r["id"] == 100


# --------------------------------------------------------------------------- window, averages

def _s(epoch, dev="vda", **kw):
    d = {"epoch": epoch, "device": dev}
    d.update(kw)
    return d


def test_select_window_uses_interval_midpoint():
    samples = [_s(e) for e in (100.0, 101.0, 102.0, 103.0, 104.0)]
    # window 100.6 .. 103.2: midpoints 99.5 100.5 101.5 102.5 103.5 -> keep 101.5, 102.5
    kept = select_window(samples, 100.6, 103.2, 1)
    assert [x["epoch"] for x in kept] == [102.0, 103.0]
    assert [x["t"] for x in kept] == [1.4, 2.4]
    assert "t" not in samples[0]  # input untouched


def test_iostat_average_single_device_weighted_awaits():
    ss = [_s(1, **{"r/s": 100.0, "w/s": 0.0, "rkB/s": 400.0, "wkB/s": 0.0, "r_await": 1.0,
                   "w_await": 0.0, "aqu-sz": 0.1, "%util": 10.0}),
          _s(2, **{"r/s": 300.0, "w/s": 10.0, "rkB/s": 4800.0, "wkB/s": 40.0, "r_await": 3.0,
                   "w_await": 2.0, "aqu-sz": 0.9, "%util": 50.0})]
    a = iostat_average(ss)
    assert a["r/s"] == 200.0 and a["w/s"] == 5.0
    assert a["r_await"] == 2.5          # (100*1 + 300*3) / 400
    assert a["rareq-sz"] == 13.0        # 5200 kB / 400 reads
    assert a["w_await"] == 2.0 and a["wareq-sz"] == 4.0
    assert a["aqu-sz"] == 0.5 and a["%util"] == 30.0
    assert a["device"] == "vda" and a["count"] == 2


def test_iostat_average_two_devices():
    ss = [_s(1, "sda", **{"r/s": 100.0, "rkB/s": 400.0, "r_await": 1.0, "aqu-sz": 0.1, "%util": 10.0}),
          _s(1, "sdb", **{"r/s": 300.0, "rkB/s": 1200.0, "r_await": 5.0, "aqu-sz": 1.5, "%util": 90.0})]
    a = iostat_average(ss)
    assert a["r/s"] == 400.0 and a["rkB/s"] == 1600.0 and a["aqu-sz"] == 1.6
    assert a["r_await"] == 4.0 and a["%util"] == 90.0 and a["rareq-sz"] == 4.0
    assert a["device"] == "sda,sdb" and a["count"] == 1


def test_averages_empty():
    assert iostat_average([]) == {} and vmstat_average([]) == {}


def test_vmstat_average():
    a = vmstat_average([{"r": 1, "b": 0, "us": 10, "sy": 5, "id": 80, "wa": 5, "bi": 0, "bo": 100, "si": 0, "so": 0},
                        {"r": 2, "b": 1, "us": 20, "sy": 5, "id": 70, "wa": 5, "bi": 0, "bo": 300, "si": 0, "so": 0}])
    assert a == {"r": 1.5, "b": 0.5, "us": 15.0, "sy": 5.0, "id": 75.0, "wa": 5.0, "bi": 0.0, "bo": 200.0,
                 "si": 0.0, "so": 0.0, "count": 2}
