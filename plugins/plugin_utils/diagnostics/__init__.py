# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nine diagnostics of a host's workloads (docs/diagnostics.md): what they share (model:
names, titles, conclusions, defaults, the entry, the workload view), the thread sweep and
its knee, tipping point and latency-bounded maximum (sweep), and the diagnostics themselves
(diagnose).

May import: module_utils; plugin_utils: common, metrics.
"""
