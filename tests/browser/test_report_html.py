"""report.html opened in headless Chromium: screenshot + DOM dump prove that it renders.

Needs Debian's chromium (/usr/bin/chromium) or $CHROMIUM; skipped otherwise.  Set
FLEETQUAL_SCREENSHOT_DIR to keep the PNG for a human look."""
from __future__ import annotations

import datetime
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "report"))

import report_synth as synth  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import publish as report  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_html  # noqa: E402

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") \
    or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
MATRIX = [("cache", "rndrd", 1), ("cache", "rndrd", 16), ("cache", "rndrd", 64),
          ("over_cache", "rndwr", 1), ("over_cache", "rndwr", 16), ("over_cache", "rndwr", 64)]


def chromium(args, tmp_path, timeout=120, attempts=2):
    """Headless chromium on a page; a run that never returns is run once more with a fresh
    profile (on a loaded CI machine a screenshot of a page whose DOM had just been dumped
    hung for 120 s: the browser's, the page and every assertion on it unchanged)."""
    for attempt in range(attempts):
        profile = tmp_path / ("profile-%d" % len(os.listdir(tmp_path)))
        profile.mkdir()
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--enable-logging=stderr", "--v=0", "--user-data-dir=%s" % profile] + args
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            if attempt == attempts - 1:
                raise
    raise AssertionError("no attempt")


def build_report(path):
    now = datetime.datetime(2026, 11, 21, 12, 30, tzinfo=datetime.timezone.utc)
    recs = {}
    for i in range(1, 6):
        name = "db%02d" % i
        recs[name] = synth.make_record(name, matrix=MATRIX, scale=0.55 if i == 4 else 1.0 + 0.03 * i,
                                       samples=30, seed=i)
    recs["db04"]["verdict"] = "FAIL"
    recs["db04"]["checks"].append(synth.failing_check("over_cache-rndwr-t64"))
    recs["db04"]["reasons"] = ["over_cache-rndwr-t64: iops 850 below the limit 5000 "
                               "(device vda: r/s 851, r_await 38.1 ms, aqu-sz 31.9, %util 99.8)"]
    play = {"db06": {"counts": {"unreachable": 1},
                     "unreachable": [{"task": "Gathering Facts", "msg": "ssh: connect to host db06: No route to host"}]}}
    f = fleet.aggregate(recs, play=play, inventory={"db06": ["db"]}, now=now)
    path.write_text(render_html.render_html(f, recs), encoding="utf-8")
    return f


# --------------------------------------------------------------------------- PNG

def png_pixels(data):
    """Decode an 8-bit, non-interlaced RGB/RGBA PNG; returns (width, height, channels, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, colour, _c, _f, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, ihdr
    ch = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * ch
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(ch, stride):
                line[i] = (line[i] + line[i - ch]) & 255
        elif ftype == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - ch] if i >= ch else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - ch] if i >= ch else 0
                b = prev[i]
                c = prev[i - ch] if i >= ch else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, ch, rows


def colour_stats(rows, ch, step=2):
    colours = set()
    non_white = 0
    total = 0
    for row in rows[::step]:
        for i in range(0, len(row), ch * step):
            px = row[i:i + 3]
            colours.add(px)
            total += 1
            if px != b"\xff\xff\xff":
                non_white += 1
    return colours, non_white / max(total, 1)


# --------------------------------------------------------------------------- test

@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium) and $CHROMIUM unset")
def test_report_html_renders_in_chromium(tmp_path):
    html_path = tmp_path / "report.html"
    build_report(html_path)
    url = "file://%s" % html_path
    png = tmp_path / "report.png"

    shot = chromium(["--screenshot=%s" % png, "--window-size=1400,2000", "--hide-scrollbars", url], tmp_path)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.exists() and png.stat().st_size > 20000
    keep = os.environ.get("FLEETQUAL_SCREENSHOT_DIR")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(png, os.path.join(keep, "report.png"))

    width, height, ch, rows = png_pixels(png.read_bytes())
    assert (width, height) == (1400, 2000)
    colours, coverage = colour_stats(rows, ch)
    assert len(colours) > 200, "a blank or flat page has few colours: %d" % len(colours)
    assert coverage > 0.05
    # the red outlier dots and the red FAIL badge are on screen
    reds = sum(1 for c in colours if c[0] > 180 and c[1] < 90 and c[2] < 90)
    assert reds > 0

    dom = chromium(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert text.count("<svg") >= 10
    assert "fleet: 4/6 hosts passed (PASS 4, FAIL 1, UNREACHABLE 1, ERROR 0)" in text
    assert 'class="outlier"' in text and "polyline" in text and "utilarea" in text
    assert "<script" not in text

    # no console messages / load errors about the page (dbus, GPU noise is ignored)
    for out in (shot.stderr, dom.stderr):
        page_errors = [line for line in out.splitlines()
                       if re.search(r"CONSOLE|Uncaught|net::ERR|Refused to|Failed to load|report\.html", line)]
        assert page_errors == [], page_errors


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium) and $CHROMIUM unset")
def test_large_fleet_report_from_fleet_json_renders(tmp_path):
    """450 hosts, 10 drawn in detail, rendered again from the stored fleet.json alone: the
    group's spread is a box with its outliers, the table has a summary row per host."""
    now = datetime.datetime(2026, 11, 21, 12, 30, tzinfo=datetime.timezone.utc)
    recs = synth.fleet_records(450, groups=("db",), matrix=MATRIX[:2], samples=3)
    for i, rec in enumerate(recs.values()):
        if i % 90 == 5:
            for w in rec["workloads"]:
                w["metrics"]["iops"] *= 0.4
    f = fleet.aggregate(recs, now=now, detail_hosts=10)
    run_dir = tmp_path / "run"
    report.write_reports(f, str(run_dir), ["json"])
    written = report.rerender(str(run_dir / "fleet.json"))
    url = "file://%s" % written["html"]
    dom = chromium(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert 'class="box"' in text and 'class="outlier"' in text
    assert text.count('class="dot"') == 0                     # no dot per host in a 450-host group
    assert text.count('<div class="hostbox"') == 10
    assert "fleet: 450/450 hosts passed" in text and "2 workloads" in text
    png = tmp_path / "large.png"
    shot = chromium(["--screenshot=%s" % png, "--window-size=1400,1600", "--hide-scrollbars", url], tmp_path)
    assert shot.returncode == 0 and png.exists()
    width, height, ch, rows = png_pixels(png.read_bytes())
    colours, coverage = colour_stats(rows, ch)
    assert len(colours) > 100 and coverage > 0.05


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium) and $CHROMIUM unset")
def test_drive_table_renders_with_the_odd_firmware_marked(tmp_path):
    """Hosts with two targets and a drive inventory (tests/unit/plugins/plugin_utils/fleet/test_drive_consistency.py's fake
    sysfs hosts); db04's NVMe drive runs another firmware and ``drives: fail``: Chromium's
    DOM has the drive table with every drive, that firmware cell marked and the host FAIL."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
    import unitpaths
    unitpaths.on_path()
    from test_drive_consistency import RUN, report_record

    recs = {"db0%d" % i: report_record(tmp_path / "sysfs", "db0%d" % i, i) for i in (1, 2, 3)}
    recs["db04"] = report_record(tmp_path / "sysfs", "db04", 4,
                                 overrides={"nvme0n1": {"device/firmware_rev": "GDC5603Q"}})
    f = fleet.aggregate(recs, run_id=RUN, options={"drives": "fail"})
    html_path = tmp_path / "report.html"
    html_path.write_text(render_html.render_html(f), encoding="utf-8")
    dom = chromium(["--dump-dom", "file://%s" % html_path], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    table = re.search(r'<table id="drives">.*?</table>', dom.stdout, re.S).group(0)
    rows = re.findall(r"<tr[ >].*?</tr>", table, re.S)
    assert len(rows) == 1 + 4 * 6                                    # the header and every drive
    odd = [r for r in rows if "<td>db04</td><td>nvme0n1</td>" in r]
    assert len(odd) == 1 and '<td class="flag">GDC5603Q</td>' in odd[0] and "S64GNE0R600004" in odd[0]
    assert sum('class="flag">GDC5602Q' in r for r in rows) == 0
    assert "fleet: 3/4 hosts passed (PASS 3, FAIL 1, UNREACHABLE 0, ERROR 0)" in dom.stdout
    assert "over_cache-rndrd-t64@data1" in dom.stdout                # a row per host and target
