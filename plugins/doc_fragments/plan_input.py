# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input of the filters that read a workload plan, documented once."""


class ModuleDocFragment:
    """options._input of fleetqual.storage.plan_summary, largest_working_set, required_space
    and expected_duration_s."""

    DOCUMENTATION = r"""
options:
  _input:
    description: The output of P(fleetqual.storage.plan#filter).
    type: list
    elements: dict
    required: true
"""
