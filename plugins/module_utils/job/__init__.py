# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The detached measurement job on the host: one workload (workload), the job's run, deadline
and results (runner), its status.json and the raw poll (status), what it removes (cleanup),
array mode's steps (lockstep), the module payloads it removes (payloads) and the bounded end
of a child that a hung drive holds (hung).

May import: module_utils: common, plan, devices, collect.
"""
