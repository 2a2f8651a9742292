"""How many examples each property test runs (docs/testing.md, "Property tests").

A property test (Hypothesis ``@given``) sets the examples its inputs deserve with
``@settings(max_examples=N)``: up to 400 here. `make test` (README command 2, CI) runs each
with at most ``FLEETQUAL_PROPERTY_EXAMPLES`` of them (100, Hypothesis's own default);
`make test-long`, and a pytest run without the variable, run each with its own N. Hypothesis
took half of the unit stream's own CPU (71 of 147 CPU-s, py-spy), its engine (generating,
mutating and drawing the inputs) 43 of them beyond the tests' bodies, and 60 of the 106
property tests asked for 120-400 examples.

The cap is applied per test function at collection (:func:`pytest_collection_modifyitems`,
registered by tests/conftest.py) through the settings object Hypothesis reads when the test
runs: ``settings(parent=<the test's settings>, max_examples=<the lower>)``, everything else
of the test's settings kept.
"""
import os

ENV = "FLEETQUAL_PROPERTY_EXAMPLES"
# Hypothesis keeps a test's settings on the function pytest calls (hypothesis.core, given)
_SETTINGS_ATTR = "_hypothesis_internal_use_settings"


def cap_from_env(environ=None):
    """The cap (a positive int) ``FLEETQUAL_PROPERTY_EXAMPLES`` gives, or None (no cap: unset,
    empty or ``full``). Anything else is a ValueError that names the variable."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    if value in ("", "full"):
        return None
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise ValueError("%s: must be a positive number of examples or 'full', got %r" % (ENV, value))


def cap_examples(function, cap):
    """Lower ``function``'s max_examples to ``cap`` if it is a property test that asks for
    more; True when it did."""
    from hypothesis import settings  # pylint: disable=import-outside-toplevel

    if cap is None or not hasattr(getattr(function, "hypothesis", None), "inner_test"):
        return False
    current = getattr(function, _SETTINGS_ATTR, None) or settings.default
    if current.max_examples <= cap:
        return False
    setattr(function, _SETTINGS_ATTR, settings(parent=current, max_examples=cap))
    return True


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    cap = cap_from_env()
    for item in items:
        cap_examples(getattr(item, "function", None), cap)
