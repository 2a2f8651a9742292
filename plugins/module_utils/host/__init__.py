# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's measuring path in two module runs: the start and the cleanup (start), the
benchmark binary on the host (deploy), the facts the plan needs (facts) and the marked
test directory's preflight and removal (bench_dir).

May import: module_utils: common, plan, devices, collect, job.
"""
