# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Old name of filter_wrappers.py (issue 19), kept while the tests that import it move to
filter_wrappers.py; nothing is defined here."""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filter_wrappers import FILTERS, filter_module  # noqa: F401
