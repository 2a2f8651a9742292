# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's steps on a host through its connection, shared by the action plugins: the
detached job's start, raw status polls and wait (job_wait), the fleet's progress line
(progress), the host's identity decided once by the start (identity) and array mode's
common start (array_start).

May import: module_utils; plugin_utils: common, history, metrics, diagnostics, judge, array, validate, fleet, report.
"""
