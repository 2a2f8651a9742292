# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A log workload (16K sequential writes, fdatasync after each) is shown with its commit
latency -- the write plus the fdatasync that makes it durable, what a committing
transaction waits -- never with the page-cache write() alone, and every report format
says which operation its latency column is (part 3). A real iobench run."""
import os
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET

import pytest
import unitpaths

HERE = unitpaths.UNIT
sys.path.insert(0, os.path.join(HERE, "fixtures", "diagnostics"))
import realrun as rr  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import workload as metrics  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common import fmt
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text  # noqa: E402

SPEC = {"id": "log-seqwr-t1", "workload": "log", "mode": "seqwr", "threads": 1, "file_num": 1,
        "total_size": 16 << 20, "block_size": 16384, "direct": False, "fsync_freq": 1,
        "fsync_mode": "fdatasync", "time": 2, "warmup": 0}


@pytest.fixture(scope="module")
def log_fleet():
    binary, why = rr.build_binary()
    if binary is None:
        pytest.fail(why)
    workdir = tempfile.mkdtemp(prefix="fq-commit-", dir="/var/tmp")   # a real disk, not tmpfs
    try:
        result = rr.run_module(dict(binary=binary, dir=workdir, mode="seqwr", file_num=1, total_size="16M",
                                    block_size="16K", threads=1, fsync_freq=1, fsync_mode="fdatasync",
                                    time=2, warmup=0, collect="none"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert not result.get("failed"), result.get("msg")
    record = metrics.workload_record(SPEC, result)
    host = {"host": "db1", "run_id": "r1", "profile": "quick", "groups": ["db"], "facts": {},
            "workloads": [record], "verdict": "PASS", "reasons": [], "checks": [], "diagnostics": {}}
    return record["metrics"], fleet.aggregate({"db1": host})


def _shown(cell):
    return float(cell)


def test_the_record_carries_the_commit_latency(log_fleet):
    m = log_fleet[0]
    assert m["latency_op"] == "commit"
    assert m["commit_count"] == m["fsync_count"] > 0
    assert m["lat_p99_ms"] == m["commit_p99_ms"]
    assert m["lat_p99_ms"] >= m["fsync_p99_ms"] and m["lat_p99_ms"] >= m["write_p99_ms"]


def test_terminal_table_shows_commit_latency_and_names_the_op(log_fleet):
    m, f = log_fleet
    lines = render_text.render_table(f).splitlines()
    header = lines[0].split()
    row = next(line.split() for line in lines if line.startswith("db1 "))
    assert "op" in header
    assert row[header.index("op")] == "commit"
    assert _shown(row[header.index("p99ms")]) >= float(fmt.cell_ms(m["fsync_p99_ms"]))


def test_markdown_shows_commit_latency_and_names_the_op(log_fleet):
    m, f = log_fleet
    md = render_markdown.render_markdown(f)
    header = next(line for line in md.splitlines() if line.startswith("| host | workload"))
    row = next(line for line in md.splitlines() if line.startswith("| db1 | log-seqwr-t1"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[cols.index("op")] == "commit"
    assert _shown(cells[cols.index("p99 ms")]) >= float(fmt.cell_ms(m["fsync_p99_ms"]))


def test_html_shows_commit_latency_and_names_the_op(log_fleet):
    m, f = log_fleet
    html = render_html.render_html(f)
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*log-seqwr-t1(?:(?!</tr>).)*</tr>", html, re.S).group(0)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    assert "commit" in cells
    assert any(c == fmt.cell_ms(m["lat_p99_ms"]) for c in cells)
    assert float(fmt.cell_ms(m["lat_p99_ms"])) >= float(fmt.cell_ms(m["fsync_p99_ms"]))


def test_junit_shows_commit_latency(log_fleet):
    m, f = log_fleet
    root = ET.fromstring(render_junit.render_junit(f))
    text = "".join(root.itertext())
    line = next(ln for ln in text.splitlines() if ln.startswith("log-seqwr-t1:"))
    p99 = float(re.search(r"p99 ([0-9.]+) ms", line).group(1))
    assert "(commit)" in line
    assert p99 >= float(fmt.cell_ms(m["fsync_p99_ms"]))
