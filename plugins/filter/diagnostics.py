# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.diagnostics filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: diagnostics
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Diagnostics that explain a host's disk, from its workload records
description:
  - Computes, once, the diagnostics of docs/diagnostics.md from the workloads the profile ran
    C(cache_proof), C(write_amplification), C(write_serialization), C(write_cache),
    C(tipping_point), C(bounded_max), C(db_pattern), C(readahead).
  - Each entry is C({status, conclusion, sentence, evidence, workloads}); C(status) is C(pass),
    C(warn), C(fail), C(unproven), C(info) or C(n/a) (the plan has no workload for it).
  - The role stores the result as the host record's C(diagnostics) and hands it to
    P(fleetqual.storage.judge#filter), which fails over-cache reads served from a cache and checks
    threshold rules of kind C(diagnostic).
positional: _input
options:
  _input:
    description: Workload records (spec + C(result) + optional C(metrics)).
    type: list
    elements: dict
    required: true
  latency_bound_ms:
    description: p99 bound of the tipping point and the latency-bounded maximum (C(fleetqual_latency_bound_ms)).
    type: float
    default: 50
  drives:
    description: "The host's drive inventory (the C(drives) list of P(fleetqual.storage.drives#module)): the write-cache
      diagnostic states the cache the kernel declares for the drive the writes reached, the timing as corroboration;
      without it the cache is inferred from the timing alone."
    type: list
    elements: dict
  options:
    description: "Other thresholds by name (see C(DEFAULTS) in plugins/plugin_utils/diagnostics/model.py), for
      example C({cache_proof_min_ratio: 0.8, serial_ratio: 0.5}). Unknown names and values <= 0 fail."
    type: dict
"""

EXAMPLES = r"""
- name: Diagnose this host
  ansible.builtin.set_fact:
    _fleetqual_diagnostics: "{{ _fleetqual_records | fleetqual.storage.diagnostics(
                                 latency_bound_ms=fleetqual_latency_bound_ms | default(50)) }}"
- name: Say them
  ansible.builtin.debug:
    msg: "{{ _fleetqual_diagnostics | dict2items | rejectattr('value.status', 'eq', 'n/a')
             | map(attribute='value.sentence') | list }}"
"""

RETURN = r"""
_value:
  description: "Mapping of diagnostic name to C({status, conclusion, sentence, evidence, workloads})."
  type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("diagnostics")
