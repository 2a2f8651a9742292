# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host judged: records + rules -> verdict, reasons, checks (host: the judge and its
verdict; workload: one workload's checks; checks: the check dict and the comparison;
integrity, drives, burnin: data, drive health and the kernel log, burn-in), the threshold
rules (rules), the one final verdict of a host (verdict) and the host record assembled and
stored once by the action that receives the results (record).

May import: module_utils; plugin_utils: common, metrics, diagnostics.
"""
