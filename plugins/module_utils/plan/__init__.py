# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's plan: profiles and matrices -> resolved workload specs (profiles), what a plan
costs (summary), the burn-in plan (burnin), iobench's option table (options), targets
(targets) and the vocabulary of modes, ops and percentiles shared by plan, metrics, judge
and rules (vocabulary).

May import: module_utils: common.
"""
