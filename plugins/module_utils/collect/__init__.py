# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is collected beside a workload: iostat/vmstat or the /proc sampler (collector,
sysstat), the kernel log and its capability probes (kmsg, probes; docs/kernel-log.md),
foreign I/O and the impact limits (foreign, foreign_settings, impact; the benchmark's own
block-I/O group: cgroups, units; docs/compliance.md).

May import: module_utils: common, plan, devices.
"""
