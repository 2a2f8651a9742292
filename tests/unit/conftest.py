# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit tests' directories on sys.path (unitpaths.on_path): the shared helpers here
(unitpaths, loopdev, history_records) and the few tests that reuse another test's fixtures
or records (``from test_module_iobench import iobench_binary``) import them by name from any
depth of the tree."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unitpaths  # noqa: E402

unitpaths.on_path()
