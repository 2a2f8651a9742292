"""The power-cut test in report.html and report.md (docs/durability.md): one row per host and
target that ran it, with the drive, its write cache, the cuts made of those planned, the
writes acknowledged and those not held, exact; nothing when no host ran it. The summaries
are the judge's own (judge_durability, then durability_summary as fleet.json keeps it) laid
over a golden fleet."""
import copy
import json
import os
from html.parser import HTMLParser

from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.durability import durability_summary, judge_durability
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_html import render_html
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.render_markdown import render_markdown

with open(os.path.join(unitpaths.UNIT, "fixtures", "report_golden", "mixed", "fleet.json")) as fh:
    GOLDEN = json.load(fh)

DRIVE = {"name": "nvme1n1", "model": "QEMU NVMe Ctrl", "serial": "FQDURUS1", "write_cache": "write back",
         "write_cache_source": "queue/write_cache", "fua": True}
counts = st.fixed_dictionaries({"acked": st.integers(1, 9000), "lost": st.integers(0, 3000), "torn": st.integers(0, 5),
                                "misplaced": st.integers(0, 2), "read_errors": st.integers(0, 2)})


def summary(per_target, cuts=1, planned=1):
    cycles = []
    for n in range(cuts):
        results = {}
        for name, c in per_target.items():
            bad = c["lost"] + c["torn"] + c["misplaced"] + c["read_errors"]
            results[name] = dict(c, acked=max(c["acked"], bad), intact=0, unreadable_entries=0, samples=[],
                                 drive=dict(DRIVE, name=name), lost_acked_ms={"first": 1000, "last": 4000} if bad else None)
        cycles.append({"cycle": n + 1, "cut_ms": 5000, "taken_ms": 4990, "results": results})
    return durability_summary(judge_durability(cycles, {"cycles": planned}))


class Tables(HTMLParser):
    """The rows of the table ``id``: the cells' text and each row's class."""

    def __init__(self, want):
        super().__init__()
        self.want, self.inside, self.rows, self.row, self.cell = want, False, [], None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.inside = attrs.get("id") == self.want
        elif self.inside and tag == "tr":
            self.row = {"class": attrs.get("class"), "cells": []}
        elif self.inside and tag in ("td", "th") and self.row is not None:
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.row["cells"].append(self.cell.strip())
            self.cell = None
        elif self.inside and tag == "tr" and self.row is not None:
            self.rows.append(self.row)
            self.row = None


def power_rows(html):
    p = Tables("power")
    p.feed(html)
    return p.rows


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["honest", "lying", "<none>"]), counts, min_size=1, max_size=3),
       st.integers(1, 3), st.integers(0, 2))
def test_each_target_is_a_row_with_its_exact_counts_and_a_failing_one_is_flagged(targets, planned, missing):
    cuts = max(1, planned - missing)
    fleet = copy.deepcopy(GOLDEN)
    host = fleet["hosts"][0]
    host["durability"] = summary(targets, cuts, planned)
    rows = power_rows(render_html(fleet))
    head, body = rows[0]["cells"], rows[1:]
    assert head[:2] == ["host", "target"] and head[-1] == "verdict"
    assert len(body) == len(targets)
    for row, name in zip(body, sorted(targets)):
        cells = dict(zip(head, row["cells"]))
        t = host["durability"]["targets"][name]
        assert cells["host"] == host["host"] and cells["target"] == name       # escaped, then read back
        assert cells["drive"] == "QEMU NVMe Ctrl FQDURUS1" and cells["write cache"] == "write back, FUA on"
        assert cells["cuts"] == "%d/%d" % (cuts, planned)
        for col, key in (("acked", "acked"), ("lost", "lost"), ("torn", "torn"), ("misplaced", "misplaced"),
                         ("unreadable", "read_errors")):
            assert cells[col] == str(t[key])
        assert cells["verdict"] == t["verdict"]
        assert (row["class"] == "flagged") == (t["verdict"] != "PASS")
    md = render_markdown(fleet)
    assert "## Power cuts" in md
    assert sum(1 for line in md.splitlines() if line.startswith("| %s | " % host["host"]) and "FQDURUS1" in line) \
        == len(targets)


def test_no_power_cut_no_table():
    fleet = copy.deepcopy(GOLDEN)
    assert all(h.get("durability") is None for h in fleet["hosts"])
    assert power_rows(render_html(fleet)) == [] and "Power cuts" not in render_markdown(fleet)
