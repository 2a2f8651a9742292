# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's block devices: the one reader of sysfs (sysfs), the disks behind a directory
(disks), drive identity and health (drives), the raw-device guard and the regions a killed
job left (blockdev), and the drive inventory the module returns (inventory).

May import: module_utils: common, plan.
"""
