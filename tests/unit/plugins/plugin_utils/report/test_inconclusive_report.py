"""An INCONCLUSIVE host is counted apart in every report format (terminal summary
line and table, fleet.json's summary, JUnit, HTML, Markdown, Prometheus), rendered from a
fleet of synthetic records (tests/unit/fixtures/report/report_synth.py)."""
import datetime
import json
import os
import sys
import unitpaths

FIXTURES = os.path.join(unitpaths.UNIT, "fixtures", "report")
sys.path.insert(0, FIXTURES)

import report_synth as synth  # noqa: E402
import report_tools as tools  # noqa: E402

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import aggregate as fleet  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import fleet_json
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import prometheus
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_junit
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_markdown
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import render_text
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import rows as report_rows  # noqa: E402

NOW = datetime.datetime(2026, 11, 25, 2, 30, 0, tzinfo=datetime.timezone.utc)
SMALL = [("cache", "rndrd", 1), ("over_cache", "rndwr", 4)]
REASON = ("cache-rndrd-t1: shared window: foreign share 0.35 > limit 0.1 (I/O not ours on device vda over 9.9 s: "
          "foreign share 0.35, reads 31000, writes 0)")


def mixed():
    recs = {"db1": synth.make_record("db1", matrix=SMALL, samples=6, seed=1),
            "db2": synth.make_record("db2", matrix=SMALL, samples=6, seed=2, verdict="INCONCLUSIVE",
                                     reasons=[REASON]),
            "db3": synth.make_record("db3", matrix=SMALL, samples=6, seed=3, verdict="FAIL",
                                     reasons=["over_cache-rndwr-t4: iops 850 below 5000"])}
    recs["db3"]["checks"].append(synth.failing_check("over_cache-rndwr-t4"))
    return fleet.aggregate(recs, now=NOW)


def test_inconclusive_is_counted_apart_in_every_format():
    f = mixed()
    by = f["summary"]["by_verdict"]
    assert (by["PASS"], by["FAIL"], by["INCONCLUSIVE"], by["ERROR"]) == (1, 1, 1, 0)
    assert f["summary"]["passed"] == 1
    assert json.loads(fleet_json.to_json(f))["summary"]["by_verdict"]["INCONCLUSIVE"] == 1

    line = report_rows.summary_line(f)
    assert line.startswith("fleet: 1/3 hosts passed") and "INCONCLUSIVE 1" in line and "FAIL 1" in line
    table = render_text.render_table(f)
    assert "INCONCL" in table

    root = tools.xmllint_junit(render_junit.render_junit(f))      # valid against junit-10.xsd
    cases = {c.get("name").split()[0]: c for c in root.iter("testcase")}
    assert cases["db2"].find("skipped") is not None and cases["db2"].find("failure") is None
    assert "shared window" in cases["db2"].find("skipped").get("message")
    assert cases["db3"].find("failure") is not None
    assert sum(int(s.get("skipped")) for s in root.iter("testsuite")) == 1

    html = render_html.render_html(f)
    assert 'class="badge INCONCLUSIVE"' in html and ".badge.INCONCLUSIVE" in html
    md = render_markdown.render_markdown(f)
    assert "| INCONCLUSIVE | 1 |" in md and "db2 — INCONCLUSIVE" in md

    prom = prometheus.prometheus_text(f)
    assert 'verdict="INCONCLUSIVE"} 1' in prom
