"""The examples a property test runs under `make test` (tests/propertycap.py): at most the
cap, everything else of its settings kept; its own count without a cap, and for a test that
asks for fewer; a malformed cap refused by name."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import propertycap


def _counting_test(max_examples):
    calls = []

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers())
    def prop(n):
        calls.append(n)

    return prop, calls


def test_a_test_that_asks_for_more_runs_the_cap_and_keeps_its_other_settings():
    prop, calls = _counting_test(60)
    assert propertycap.cap_examples(prop, 12) is True
    prop()
    assert 0 < len(calls) <= 12
    kept = getattr(prop, propertycap._SETTINGS_ATTR)  # pylint: disable=protected-access
    assert kept.deadline is None and HealthCheck.too_slow in kept.suppress_health_check


@pytest.mark.parametrize("cap", [None, 60, 100])
def test_without_a_cap_or_under_it_a_test_runs_its_own_count(cap):
    prop, calls = _counting_test(40)
    assert propertycap.cap_examples(prop, cap) is False
    prop()
    # st.integers() is never exhausted: Hypothesis runs every example asked for
    assert len(calls) >= 40


def test_a_function_that_is_not_a_property_test_is_left_alone():
    def plain():
        return None

    assert propertycap.cap_examples(plain, 5) is False
    assert not hasattr(plain, propertycap._SETTINGS_ATTR)  # pylint: disable=protected-access


@pytest.mark.parametrize("value, cap", [(None, None), ("", None), ("full", None), ("100", 100), (" 7 ", 7)])
def test_the_cap_from_the_environment(value, cap):
    env = {} if value is None else {propertycap.ENV: value}
    assert propertycap.cap_from_env(env) == cap


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1e3"])
def test_a_malformed_cap_is_refused_by_name(value):
    with pytest.raises(ValueError, match=propertycap.ENV):
        propertycap.cap_from_env({propertycap.ENV: value})
