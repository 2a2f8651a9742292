# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.durability_verdict filter (logic: plugins/plugin_utils/judge/durability.py)."""

DOCUMENTATION = r"""
name: durability_verdict
author: fleetqual.storage developers
version_added: "0.4.0"
short_description: The verdict of a host's power cuts
description:
  - PASS when no write the drive acknowledged as durable was lost, torn, misplaced or unreadable after any of the
    power cuts; FAIL with the counts, how long before the cut the lost writes had been acknowledged, the drive's
    serial and its write cache setting; ERROR when fewer cuts ran than planned (docs/durability.md).
positional: _input, settings, recovered
options:
  _input:
    description:
      - The cycles, each C({cycle, cut_ms, taken_ms, results}) with the read-back of every target; a cycle an earlier
        run cut and never read back (its controller died) also C(recovered_from), that run's id.
    type: list
    elements: dict
    required: true
  settings:
    description: The test's settings (C(cycles) planned; a recovered cycle is not one of them).
    type: dict
  recovered:
    description:
      - C({run_id, cycle, state}) of the cycle an earlier run left unchecked, which this run powered the host on for
        (C(state) V(cut), judged; V(armed), its cut never confirmed, not judged), or null. It becomes C(recovered)
        and a warning of the record.
    type: dict
"""

EXAMPLES = r"""
_fleetqual_durability: "{{ _fleetqual_dur_cycles | fleetqual.storage.durability_verdict(_fleetqual_dur.settings) }}"
"""

RETURN = r"""
_value:
  description: C({verdict, reasons, cycles, planned_cycles, acked, lost, torn, misplaced, read_errors, targets, per_cycle, recovered}).
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("durability_verdict")
