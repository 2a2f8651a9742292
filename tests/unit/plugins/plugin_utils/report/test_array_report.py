"""The arrays of the fleet report in every format, from fleet.json's ``arrays``:
terminal lines, JUnit (one suite per array, a case per step), HTML (two SVG curves and a
step table), Markdown and Prometheus."""
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import arrays as array_report
from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays

HOSTS = ["h1", "h2", "h3"]


def _entry(index, start, rate, lat_index, width=0.1, n=20):
    bench = {"config": {"block_size": 4096, "threads": 2, "iodepth": 1, "engine": "sync"},
             "window": {"start_epoch": start, "end_epoch": start + n * width},
             "intervals": [{"t": (k + 1) * width, "duration_s": width, "read_ops": rate, "write_ops": 0}
                           for k in range(n)],
             "ops": {"read": {"count": rate * n, "latency_us": {"sum": rate * n * 100.0},
                              "histogram": {"unit": "ns", "sub_bucket_bits": 6, "buckets": [[lat_index, rate * n]]}}}}
    return {"index": index, "active": True, "complete": True, "error": None, "result": {"bench": bench},
            "window_start": start, "window_end": start + n * width}


def _runs(thresholds, lost=None):
    cfg = {"initiators": [1, 2, 3], "threads": [2], "modes": ["rndrd"], "time": 2, "warmup": 0,
           "latency_bound_ms": 1.0, "thresholds": thresholds}
    steps = arrays.plan_steps(cfg, len(HOSTS))
    runs = {}
    for rank, host in enumerate(HOSTS):
        entries = []
        for s in steps:
            if rank >= s["initiators"]:
                entries.append({"index": s["index"], "active": False, "complete": True, "error": None})
                continue
            e = _entry(s["index"], 1000.0 + s["offset_s"] + 0.001 * rank, 100 - 10 * rank, 700 + 20 * s["index"])
            if lost == (host, s["index"]):
                e.update(complete=False, error="lost mid-step")
            entries.append(e)
        runs[host] = {"name": "san", "rank": rank, "t0": 1000.0, "members": HOSTS, "config": cfg,
                      "clock": {"offset_s": 0.0}, "steps": entries}
    return runs


@pytest.fixture()
def fleet():
    failing = arrays.build_array("san", _runs([{"initiators": 3, "min_aggregate_iops": 1e6}, {"initiators": [1, 3], "min_fairness": 0.5}],
                                              lost=("h2", 2)))
    passing = arrays.build_array("nas", {h: dict(r, name="nas") for h, r in _runs([{"min_fairness": 0.5}]).items()})
    return {"arrays": [failing, passing], "run_id": "r1", "generated_at": "2026-11-25T00:00:00Z"}


def test_terminal_section_names_the_array_its_steps_and_what_failed(fleet):
    lines = array_report.array_text_lines(fleet, width=120)
    text = "\n".join(lines)
    assert lines[0].startswith("array san: FAIL, 3 hosts, 2/3 steps complete")
    assert "incomplete: h2" in text
    assert "reason: min_aggregate_iops@*/i3: step 3 (rndrd, 3 initiators x 2 threads): aggregate IOPS" in text
    assert "rndrd: knee step" in text and "bounded max (p99 <= 1.00 ms)" in text
    assert all(len(line) <= 120 for line in lines)
    assert any(line.startswith("array nas: PASS") for line in lines)


def test_junit_has_one_suite_per_array_and_a_case_per_step(fleet):
    suites = array_report.array_junit_cases(fleet)
    assert [g for g, _cases in suites] == ["array.san", "array.nas"]
    san = suites[0][1]
    assert [c["name"] for c in san] == ["san step 1 rndrd 1x2", "san step 2 rndrd 2x2", "san step 3 rndrd 3x2",
                                        "san verdict"]
    assert [c["kind"] for c in san] == [None, None, "failure", "failure"]
    assert "missing h2: lost mid-step" in san[1]["out"]
    assert san[2]["type"] == "min_aggregate_iops@*/i3"
    assert all(c["kind"] is None for c in suites[1][1])


def test_html_draws_the_two_curves_and_the_step_table(fleet):
    html = str(array_report.html_section(fleet))
    assert html.count("<svg") == 4                        # two curves per array
    assert "outstanding I/O (IOPS x mean latency)" in html and ">aggregate IOPS</text>" in html
    assert ">threads</text>" not in html
    assert html.count('<table class="array-steps">') == 2
    assert html.count('<td class="flag">') == 2           # the incomplete and the failed step
    ET.fromstring("<div>%s</div>" % html.replace("&middot;", ""))   # well-formed


def test_markdown_table(fleet):
    md = array_report.markdown(fleet)
    assert "### array san — FAIL" in md
    rows = [line for line in md.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 2 and "incomplete: h2" in rows[0]


def test_prometheus_series(fleet):
    prometheus_client = pytest.importorskip("prometheus_client")
    reg = array_report.add_array_prometheus(prometheus_client.CollectorRegistry(), fleet)
    text = prometheus_client.generate_latest(reg).decode()
    assert 'fleetqual_array_pass{array="san"} 0.0' in text and 'fleetqual_array_pass{array="nas"} 1.0' in text
    assert 'fleetqual_array_step_complete{array="san",initiators="2",mode="rndrd",step="2",threads="2"} 0.0' in text
    iops = fleet["arrays"][1]["steps"][2]["aggregate"]["iops"]
    assert 'fleetqual_array_iops{array="nas",initiators="3",mode="rndrd",step="3",threads="2"} %r' % iops in text
    assert 'percentile="p99"' in text


def test_the_line_chart_names_its_x_axis():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_svg import svg_line_chart
    series = [("a", {"1": 10.0, "4": 20.0})]
    assert '>threads</text>' in str(svg_line_chart("t", series, ["1", "4"], "IOPS"))           # the default
    svg = str(svg_line_chart("t", series, ["1", "4"], "IOPS", x_label="queue <depth>"))
    assert '>queue &lt;depth&gt;</text>' in svg and '>threads</text>' not in svg
