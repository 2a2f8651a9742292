# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet: fleet.json's sections from every record (aggregate), one host entry (hosts), one
workload row (rows), fleet latency percentiles from merged histograms (latency), groups of
like hosts and the one outlier rule (outliers), drive consistency, a fleet against an earlier
fleet.json (baseline), the run directory and the merge of slices (run_store), fleet.json's
schema and writer (fleet_json) and the AWX summary (summary).

May import: module_utils; plugin_utils: common, history, metrics, diagnostics, judge, array.
"""
