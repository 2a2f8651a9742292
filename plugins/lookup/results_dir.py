# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: results_dir
short_description: The default of fleetqual_results_dir
version_added: 0.3.0
description:
  - Returns the default results directory of the collection, defined in one place
    (plugin_utils/report/config.py) for the C(fleetqual.storage.qualify) role, the fleet report
    callback and the C(fleetqual.storage.fleet_report) action. C($FLEETQUAL_RESULTS_DIR), else
    C(results) in the directory ansible-playbook runs in, as an absolute path.
options: {}
"""

EXAMPLES = r"""
fleetqual_results_dir: "{{ lookup('fleetqual.storage.results_dir') }}"
"""

RETURN = r"""
_raw:
  description: The directory, one element.
  type: list
  elements: path
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.config import default_results_dir


class LookupModule(LookupBase):
    """fleetqual.storage.results_dir"""

    def run(self, terms, variables=None, **kwargs):
        return [default_results_dir()]
