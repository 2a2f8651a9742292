# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/fleet/outliers.py, the one outlier rule (docs/report.md "Fleet outliers"): a
latency is an outlier only when it is also more than ``outlier_min_diff_ms`` from its group's
median. Hypothesis over the group's values: the floor removes exactly the latency findings
within it and nothing else, never touches IOPS, and a host at p50 0.07 ms among peers at
0.06 ms is no outlier by default."""
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet import outliers
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.aggregate import DEFAULT_OPTIONS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.drive_consistency import DRIVE_OPTIONS


def hosts_of(p50s, iops=None, p99s=None, group="db"):
    """Fleet hosts (find_outliers' input) of one group, one workload, host i with p50s[i]."""
    out = []
    for i, p50 in enumerate(p50s):
        w = {"id": "cache-rndrd-t1", "target": None, "errors": 0, "interrupted": False, "outliers": [],
             "p50_ms": p50, "p99_ms": (p99s or p50s)[i] * (1 if p99s else 4), "iops": (iops or [1000.0] * len(p50s))[i]}
        out.append({"host": "h%02d" % i, "group": group, "group_source": "inventory", "workloads": [w],
                    "outliers": []})
    return out


def flagged(hosts, metric, **kw):
    found, _groups = outliers.find_outliers(hosts, **kw)
    return {(o["host"], o["metric"]): o for o in found if o["metric"] == metric}


def test_a_host_at_p50_0_07_ms_among_peers_at_0_06_is_no_outlier_by_default():
    hosts = hosts_of([0.06, 0.06, 0.06, 0.06, 0.07])
    assert flagged(hosts, "p50_ms") == {}
    # it is the floor that keeps it: without one the +17 % host is flagged (robust score)
    assert list(flagged(hosts_of([0.06, 0.06, 0.06, 0.06, 0.07]), "p50_ms", min_diff_ms=0)) == [("h04", "p50_ms")]
    # a drive that adds milliseconds to every request is still found
    slow = flagged(hosts_of([0.06, 0.06, 0.06, 0.06, 2.5]), "p50_ms")
    assert list(slow) == [("h04", "p50_ms")] and slow[("h04", "p50_ms")]["worse"]


def test_the_floor_is_one_default_for_hosts_and_drives():
    assert outliers.MIN_DIFF_MS == 0.1
    assert DEFAULT_OPTIONS["outlier_min_diff_ms"] == DRIVE_OPTIONS["outlier_min_diff_ms"] == outliers.MIN_DIFF_MS
    assert outliers.min_diff_of("p50_ms", 0.1) == outliers.min_diff_of("lat_p99_ms", 0.1) == 0.1
    assert outliers.min_diff_of("iops", 0.1) == 0.0


_LAT = st.floats(min_value=0.005, max_value=40.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(p50s=st.lists(_LAT, min_size=3, max_size=12), floor=st.sampled_from([0.0, 0.05, 0.1, 0.5, 2.0]))
def test_property_the_floor_removes_exactly_the_latency_findings_within_it(p50s, floor):
    without = flagged(hosts_of(p50s), "p50_ms", min_diff_ms=0.0)
    with_floor = flagged(hosts_of(p50s), "p50_ms", min_diff_ms=floor)
    med = outliers.Peers(p50s, "lower").median
    assert set(with_floor) == {k for k, o in without.items() if abs(p50s[int(k[0][1:])] - med) > floor}
    for o in with_floor.values():
        assert abs(o["value"] - o["median"]) > floor - 1e-9     # rounded figures, same side
        assert o == without[(o["host"], o["metric"])]          # the finding itself unchanged


@settings(max_examples=200, deadline=None)
@given(iops=st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=3, max_size=12),
       floor=st.sampled_from([0.0, 0.1, 5.0, 1000.0]))
def test_property_iops_outliers_ignore_the_latency_floor(iops, floor):
    p50s = [1.0] * len(iops)
    assert flagged(hosts_of(p50s, iops=iops), "iops", min_diff_ms=floor) == \
        flagged(hosts_of(p50s, iops=iops), "iops", min_diff_ms=0.0)


@pytest.mark.parametrize("value, expected", [(0.16, None), (0.2, "high")])
def test_peers_deviation_needs_the_difference_above_the_floor(value, expected):
    peers = outliers.Peers([0.1, 0.1, 0.1, 0.1, value], "lower")
    d = peers.deviation(value, 3.5, 20.0, min_diff=0.08)
    assert (d and d["direction"]) == expected
    assert peers.deviation(value, 3.5, 20.0)["direction"] == "high"     # no floor: flagged either way
