"""The test labs' one rule for a machine that cannot run them: a lab that `scripts/setup.sh
--test` provides (the VM tier's guests, the SAN lab, the BMC lab) skips with the reason when
pytest runs alone, and FAILS under `make test` (which exports ``FLEETQUAL_REQUIRE_LABS=1``):
the README's test command proves those tests or says why it did not, never passes without
them (a missing Debian package once skipped the whole SAN lab in CI unseen)."""
import os

import pytest

REQUIRE_ENV = "FLEETQUAL_REQUIRE_LABS"


def required(environ=None):
    """True when a lab that cannot run is a failure (``FLEETQUAL_REQUIRE_LABS=1``)."""
    return (os.environ if environ is None else environ).get(REQUIRE_ENV) == "1"


def unavailable(why):
    """Skip (pytest alone) or fail (``make test``) with ``why``, the lab's reason."""
    if required():
        pytest.fail("%s (make test requires every lab; scripts/setup.sh --test, and --long for the long suite's labs, install what they need)" % why,
                    pytrace=False)
    pytest.skip(why)
