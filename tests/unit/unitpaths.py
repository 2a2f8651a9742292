# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where things are, for the unit tests at any depth of tests/unit/ (they mirror the
collection's tree: tests/unit/plugins/plugin_utils/judge/ holds plugin_utils/judge's tests),
and :func:`on_path`, which lets any test, bench or other test directory import a unit test's
helpers by name (``from test_drives import build_fake_sysfs``)."""
import os
import sys

UNIT = os.path.dirname(os.path.abspath(__file__))       # tests/unit: fixtures/, shared helpers
TESTS = os.path.dirname(UNIT)                            # tests
ROOT = os.path.dirname(TESTS)                            # the checkout (the collection's root)
FIXTURES = os.path.join(UNIT, "fixtures")


def on_path():
    """Every directory of tests/unit that holds tests or helpers (not fixtures/) appended to
    sys.path. Test file names are unique across tests/unit, so no name hides another."""
    for dirpath, dirs, files in sorted(os.walk(UNIT)):
        dirs[:] = [d for d in dirs if d not in ("fixtures", "__pycache__")]
        if any(f.endswith(".py") for f in files) and dirpath not in sys.path:
            sys.path.append(dirpath)
