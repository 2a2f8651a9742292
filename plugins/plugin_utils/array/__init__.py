# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Array mode across hosts (docs/arrays.md): members, schedule, rules, verdict and fleet.json
entries (mode), and each step's figures over the common window, the curve, its knee and the
latency-bounded maximum (figures).

May import: module_utils; plugin_utils: common, metrics, diagnostics, judge.
"""
