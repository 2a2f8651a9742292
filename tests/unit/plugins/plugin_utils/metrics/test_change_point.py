"""When a run's pace changed (metrics.stability ``change_point``, ``change_at_s``): the step that
best splits the series into two levels, found after a running median so that one odd interval
does not move it; over step series with noise (Hypothesis) and iobench's own interval times."""
from hypothesis import assume, given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.stability import (
    change_point,
    run_pace,
    smoothed,
    stability_of,
)


@st.composite
def steps(draw, max_noise=0.25, shortest=2):
    """``(series, m)``: ``m`` intervals at level ``a``, then at least ``shortest`` at ``b``, each
    moved by noise up to ``max_noise`` of the gap between the levels (never below 0 IOPS)."""
    before = draw(st.integers(min_value=shortest, max_value=60))
    after = draw(st.integers(min_value=shortest, max_value=60))
    a = draw(st.floats(min_value=20.0, max_value=2e6))
    b = a * draw(st.floats(min_value=0.0, max_value=0.8))
    if draw(st.booleans()):
        a, b = b, a                       # a run that sped up: the same step upside down
    gap = abs(a - b)
    assume(gap >= 1.0)
    noise = st.floats(min_value=-max_noise, max_value=max_noise)
    series = [max(0.0, level + gap * draw(noise)) for level in [a] * before + [b] * after]
    return series, before


@settings(max_examples=400, deadline=None)
@given(steps())
def test_a_step_with_noise_is_found_where_it_is(case):
    series, m = case
    assert change_point(series) == m


@settings(max_examples=300, deadline=None)
@given(steps(max_noise=0.1, shortest=3), st.data())
def test_one_odd_interval_moves_it_at_most_one(case, data):
    """A stall (0 IOPS) or a spike anywhere in a series whose levels last 3 intervals or more: at
    most one interval off (next to the step the odd one may join either level)."""
    series, m = case
    i = data.draw(st.integers(min_value=0, max_value=len(series) - 1))
    series[i] = data.draw(st.sampled_from([0.0, 10 * max(series) + 1]))
    assert abs(change_point(series) - m) <= 1, (i, series)


@settings(max_examples=200, deadline=None)
@given(steps(), st.sampled_from([0.5, 1.0, 2.0]))
def test_change_at_s_is_the_start_of_the_first_interval_of_the_new_level(case, length):
    """iobench's intervals (``t`` their end, ``duration_s``) with the short tail interval left out."""
    series, m = case
    assume(len(series) >= 6)
    # iobench's t is when the interval really ended: a little late
    intervals = [{"t": (i + 1) * length + 0.0004, "duration_s": length, "iops": v} for i, v in enumerate(series)]
    intervals.append({"t": len(series) * length + 0.01, "duration_s": 0.01, "iops": 3.0})
    pace = run_pace(intervals)
    assert pace["intervals"] == len(series)
    assert pace["change_at_s"] == round(m * length, 1)


def test_the_burst_bucket_of_the_vm_tier():
    """QEMU's bucket of 600 IOPS for a 200 IOPS drive (4 s of burst, filling at 400/s): 600 until
    it fills, 6 s in, then 200; the tail interval left out."""
    series = [629, 597, 603, 610, 588, 570] + [201, 199, 200, 200, 198, 202, 200, 201, 199, 200, 200, 200]
    intervals = [{"t": i + 1.0, "duration_s": 1.0, "iops": float(v)} for i, v in enumerate(series)]
    pace = run_pace(intervals + [{"t": 18.02, "duration_s": 0.02, "iops": 50.0}])
    assert (pace["first_iops"], pace["last_iops"], pace["change_at_s"]) == (600.0, 200.0, 6.0)


def test_one_starved_interval_does_not_move_a_thirds_level():
    """A throttled drive at 100 IOPS after its burst, the guest starved for the run's last full
    second (a loaded machine): the last third's level is still the drive's 100, and one stalled
    interval in the first third does not move its level either (each third's median)."""
    series = [315, 300, 0, 300, 300, 212] + [100] * 6 + [100, 98.5, 103, 100.5, 100, 20.8]
    pace = run_pace([{"t": i + 1.0, "duration_s": 1.0, "iops": float(v)} for i, v in enumerate(series)])
    assert (pace["first_iops"], pace["last_iops"]) == (300.0, 100.0)
    assert pace["min_iops"] == 0.0 and pace["change_at_s"] == 6.0


def test_no_times_no_change_at_s_and_short_series():
    assert stability_of([100.0] * 4 + [50.0] * 4)["change_at_s"] is None       # burn-in rounds: no times
    assert run_pace([{"iops": 100.0}] * 8)["change_at_s"] is None               # intervals without t
    assert change_point([5.0]) is None and change_point([5.0, 1.0]) == 1
    assert change_point([7.0] * 10) == 1                                         # no step: the earliest split
    assert smoothed([1.0, 9.0]) == [1.0, 9.0]
    assert smoothed([5.0, 5.0, 0.0, 5.0, 5.0]) == [5.0] * 5                      # a lone stall taken out
