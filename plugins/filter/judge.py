# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleetqual.storage.judge filter (logic: plugins/plugin_utils/filters/table.py)."""

DOCUMENTATION = r"""
name: judge
author: fleetqual.storage developers
version_added: "0.1.0"
short_description: Judge a host's workload records against threshold rules
description:
  - Returns C(verdict) (PASS, FAIL or ERROR), C(reasons), C(checks), C(summary) and C(warnings)
    (docs/contracts.md section 5). The same code is used by the qualify_report callback.
  - ERROR when the host failed outside a workload (O(error)), a planned workload is missing
    (O(expected_ids)), a module call failed or was skipped, a workload has no benchmark data, had I/O
    errors, was interrupted or stopped by the module's timeout; else FAIL when a limit failed; else PASS.
  - Reasons quote the measured value, the limit and the iostat figures that explain it, for example
    C(over_cache-rndrd-t8 read p99 34.2 ms > limit 20 ms (device vda r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)).
  - A C(max_<op>_<pct>_ms) limit on a workload that does not do that op (no fsyncs, no reads) is not
    applicable (status n/a, ignored by the verdict); a C(metric) rule whose JMESPath yields null FAILS
    with "no value".
  - A failed cache proof (an over-cache read workload served from a cache, see
    P(fleetqual.storage.diagnostics#filter)) is always a failed check (rule C(cache_proof)), so the host
    cannot PASS on numbers that are not disk numbers. Rules with C(diagnostic) are checked once per host
    against O(diagnostics) (docs/diagnostics.md).
  - Fails when the rules do not pass P(fleetqual.storage.validate_rules#filter).
positional: _input, rules
options:
  _input:
    description: Workload records (spec + C(result) + optional C(metrics); metrics are computed when absent).
    type: list
    elements: dict
    required: true
  rules:
    description: Threshold rules (C(fleetqual_thresholds)).
    type: list
    elements: dict
  expected_ids:
    description: Planned workload ids, or the plan itself; a planned id without a record is an ERROR.
    type: list
  error:
    description: A host-level failure outside any workload (the role's rescue), C({task, msg}) or a
      string; makes the verdict ERROR with the reason C(task 'X' failed, msg) listed first.
    type: raw
  diagnostics:
    description: The host's diagnostics (P(fleetqual.storage.diagnostics#filter)); computed from the
      records with O(options) when omitted.
    type: dict
  options:
    description: "Diagnostic options when O(diagnostics) is omitted, e.g. C({latency_bound_ms: 20})."
    type: dict
  drives:
    description: The host's drives (a list, or the M(fleetqual.storage.drives) result; docs/contracts.md
      section 7) for the drive health checks; omitted, no drive is checked.
    type: raw
"""

EXAMPLES = r"""
- name: Judge this host
  ansible.builtin.set_fact:
    _fleetqual_judgement: "{{ _fleetqual_records | fleetqual.storage.judge(fleetqual_thresholds,
                              expected_ids=_fleetqual_plan) }}"
"""

RETURN = r"""
_value:
  description: Judgement.
  type: dict
  contains:
    verdict:
      description: PASS, FAIL or ERROR.
      type: str
    reasons:
      description: Sentences explaining a non-PASS verdict (errors first); empty on PASS.
      type: list
      elements: str
    checks:
      description: "One per (workload, rule limit) and per integrity error: workload, rule, metric, value,
        limit, op (>= or <=), passed (true, false, null for n/a), evidence, status (pass, fail, n/a, error),
        kind (limit, metric, diagnostic, error), message. Ordered by workload, then rule, then limit."
      type: list
      elements: dict
    summary:
      description: Counts (workloads, checks, passed, failed, not_applicable, errors).
      type: dict
    warnings:
      description: Rules that matched no workload, or only workloads where their limits do not apply;
        an unproven cache proof.
      type: list
      elements: str
    diagnostics:
      description: The diagnostics used (given or computed).
      type: dict
"""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import filter_module

FilterModule = filter_module("judge")
