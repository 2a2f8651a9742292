#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: drives
short_description: Inventory a host's drives, read their health, and guard raw device targets
version_added: "0.2.0"
description:
  - Lists every whole disk of the host from sysfs (C(/sys/block)), that is SCSI/SATA/SAS, NVMe,
    virtio, MMC disks and attached loop devices, with name, stable C(/dev/disk/by-id) path, model,
    serial, firmware, capacity, rotational and media (hdd or ssd), transport, logical and
    physical sector size and the kernel's write cache mode. C(lsblk -J -O -b) fills what sysfs
    leaves empty when it is installed; sysfs alone suffices.
  - Device-mapper, md RAID, ram, zram and detached loop devices are not drives; they are listed
    under RV(virtual) with what they are stacked on.
  - With O(targets), says which drives each target (a directory, or a block device) sits on,
    through partitions, LVM, dm-crypt and md RAID.
  - With O(health=true), reads each drive's health with C(smartctl --json -a) (smartmontools)
    or, for NVMe without smartmontools, C(nvme smart-log -o json) (nvme-cli), normalized to one
    shape. A drive whose health could not be read says C(collected=false) and why.
  - With O(check_devices), runs the raw device guard on each raw device target and fails, before
    anything is written anywhere, when one is refused, naming the device and every reason.
  - Only reads; never writes to a device.
options:
  targets:
    description:
      - Paths (directories or block devices) to map onto drives.
    type: list
    elements: path
    default: []
  health:
    description: Read drive health with smartctl or nvme-cli when installed.
    type: bool
    default: true
  lsblk:
    description: Use C(lsblk -J -O -b) (when installed) to fill identity fields sysfs lacks.
    type: bool
    default: true
  check_devices:
    description:
      - Raw device targets to check with the guard. Each is refused when C(destroy_data) is not
        true; when it is not a block device, is mounted (or anything on it is), holds partitions,
        has holders, is used as swap, backs the root filesystem, holds a filesystem, RAID, LVM,
        partition table, swap or LUKS signature (C(blkid -p), C(wipefs --no-act) and a built-in
        magic reader), has a O(check_devices[].size) larger than itself, has a serial other than
        O(check_devices[].serial), or is not the multipath map the LUN options name with its paths.
    type: list
    elements: dict
    default: []
    suboptions:
      device:
        description: The block device, preferably a C(/dev/disk/by-id) path (symlinks are resolved).
        type: path
        required: true
      destroy_data:
        description: Must be V(true), because the benchmark destroys the device's contents.
        type: bool
        default: false
      serial:
        description: When set, the drive's serial must equal it (case-insensitive).
        type: str
      size:
        description: Bytes of the device the benchmark will use (a size such as V(64G)); must fit.
        type: raw
      wwid:
        description:
          - A SAN LUN's WWID, as C(multipath -ll) shows it in parentheses. The device must be the
            dm-multipath map of that WWID (its C(dm/uuid) is C(mpath-<wwid>)).
        type: str
      alias:
        description: A multipath map's name (C(mpatha), or an C(alias) of C(multipath.conf)); the device must be that map.
        type: str
      expected_paths:
        description:
          - The device must be a dm-multipath map with at least this many usable paths. A path is
            usable when multipath has it active (C(dmsetup status), read when C(dmsetup) is
            installed) and its SCSI device is C(running).
        type: int
  fail_on_refusal:
    description: Fail the task when a O(check_devices) entry is refused. With V(false) the verdicts are only returned.
    type: bool
    default: true
  sysfs_root:
    description: Root of the sysfs tree to read. Only for tests (a fake tree), leave the default.
    type: path
    default: /sys
  dev_root:
    description: Root of the device directory for C(by-id)/C(by-path) links. Only for tests.
    type: path
    default: /dev
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - Reading SMART data needs root (C(become=true)); without it the health says C(collected=false) and why.
  - Loop devices have no SMART data; virtio disks usually do not either (the hypervisor does not pass it).
  - Supports check mode fully, since the module only reads.
attributes:
  check_mode:
    description: Can run in check mode; the module only reads, so the result is the same.
    support: full
  diff_mode:
    description: Returns no diff; nothing is changed.
    support: none
  platform:
    description: Reads Linux sysfs, /proc/self/mountinfo and /proc/swaps.
    support: full
    platforms: linux
"""

EXAMPLES = r"""
- name: Inventory the drives and their health, and map the test directory onto them
  fleetqual.storage.drives:
    targets: [/data1/fleetqual]
  become: true
  register: inv

- name: Show each drive's serial, firmware and SMART verdict
  ansible.builtin.debug:
    msg: "{{ item.name }} {{ item.serial }} {{ item.firmware }} passed={{ item.health.passed }}"
  loop: "{{ inv.drives }}"

- name: Refuse a raw device target unless it is blank, unused and the expected drive
  fleetqual.storage.drives:
    health: false
    check_devices:
      - device: /dev/disk/by-id/nvme-SAMSUNG_MZQL21T9HCJR-00A07_S64GNE0R123456
        destroy_data: true
        serial: S64GNE0R123456
"""

RETURN = r"""
drives:
  description: Whole disks and attached loop devices, in C(/sys/block) order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: "Kernel name."
      type: str
      returned: always
      sample: nvme0n1
    path:
      description: "Device node."
      type: str
      returned: always
      sample: /dev/nvme0n1
    id_path:
      description: "Stable C(/dev/disk/by-id) path (C(wwn-) preferred), else a C(by-path) one, else null."
      type: str
      returned: always
    by_id:
      description: "Every C(by-id) link to the drive."
      type: list
      returned: always
      elements: str
    by_path:
      description: "Every C(by-path) link to the drive."
      type: list
      returned: always
      elements: str
    model:
      description: "Model."
      type: str
      returned: always
    vendor:
      description: "Vendor (SCSI vendor, or the PCI vendor id of a virtio disk)."
      type: str
      returned: always
    serial:
      description: "Serial number (sysfs, then lsblk, then smartctl)."
      type: str
      returned: always
    firmware:
      description: "Firmware revision (NVMe C(firmware_rev), SCSI C(rev)); smartctl's full version replaces a SCSI C(rev) cut to 4 characters."
      type: str
      returned: always
    wwid:
      description: "World wide id when the kernel shows one."
      type: str
      returned: always
    size_bytes:
      description: "Capacity in bytes."
      type: int
      returned: always
    rotational:
      description: "Whether the kernel says the drive rotates (C(queue/rotational))."
      type: bool
      returned: always
    media:
      description:
        - "C(hdd) when the kernel says the drive rotates, C(ssd) when it says it does not (an NVMe namespace is C(ssd)
          when the kernel does not say); null when nothing says. The drive findings compare an HDD only with HDDs."
      type: str
      returned: always
      sample: ssd
    transport:
      description: "One of nvme, sata, sas, scsi, usb, virtio, xen, mmc, iscsi, loop, nbd, or null."
      type: str
      returned: always
      sample: nvme
    logical_sector_size:
      description: "Logical sector size in bytes."
      type: int
      returned: always
    physical_sector_size:
      description: "Physical sector size in bytes."
      type: int
      returned: always
    write_cache:
      description:
        - "The drive's cache as the kernel declares it, C(write back) or C(write through) (whether the kernel sends it
          flushes; SCSI WCE, the NVMe volatile write cache feature); null when unknown. The write-cache diagnostic
          states it first."
      type: str
      returned: always
      sample: write back
    write_cache_source:
      description: "Where C(write_cache) was read: C(queue/write_cache), else a SCSI disk's C(scsi_disk/cache_type); null."
      type: str
      returned: always
      sample: queue/write_cache
    partitions:
      description: "Partition names."
      type: list
      returned: always
      elements: str
    holders:
      description: "Devices stacked on the drive."
      type: list
      returned: always
      elements: str
    backing_file:
      description: "The backing file of a loop device."
      type: str
      returned: always
    sources:
      description: "Where the identity came from (sysfs, lsblk, smartctl)."
      type: list
      returned: always
      elements: str
    targets:
      description: "The O(targets) that sit on this drive."
      type: list
      returned: always
      elements: str
    health:
      description:
        - Normalized health. C(collected), C(tool) (smartctl or nvme-cli), C(reason) (why not
          collected), C(protocol), C(passed) (overall verdict; NVMe via nvme-cli is critical_warning == 0),
          C(critical_warning), C(media_errors), C(percentage_used), C(available_spare),
          C(reallocated_sectors) (ATA id 5, SCSI grown defect list), C(pending_sectors) (ATA id 197),
          C(temperature_c), C(power_on_hours), C(problems) (human-readable list).
      type: dict
      returned: health=true
virtual:
  description: Block devices that are not drives (dm, md, ram, zram, detached loop), with their slaves and holders.
  returned: always
  type: list
  elements: dict
targets:
  description: For each O(targets) entry, C(drives) it sits on, C(not_drives) (leaves that are not drives, e.g. zram), C(chain) and C(reason).
  returned: always
  type: list
  elements: dict
guard:
  description:
    - For each O(check_devices) entry, C(device), C(resolved), C(name), C(ok), C(reasons), C(signatures), C(serial),
      C(size_bytes), C(notes).
    - C(multipath) when the device is a dm-multipath map, else null, with C(name), C(alias), C(wwid), C(queuing), C(groups)
      and C(paths). Each path has C(name), C(devnum), C(scsi_state), C(dm_state), C(fail_count), C(transport), and for
      iSCSI C(target), C(portal) and C(session_state).
  returned: always
  type: list
  elements: dict
not_collected:
  description: Drives whose health was not read, with the reason.
  returned: health=true
  type: list
  elements: dict
  sample: [{name: vda, reason: "smartctl: /dev/vda: Unable to detect device type (exit status 1)"}]
tools:
  description: Paths of smartctl, nvme and lsblk (null when not installed).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import DrivesError
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.inventory import host_inventory


def main():
    module = AnsibleModule(
        argument_spec=dict(
            targets=dict(type="list", elements="path", default=[]),
            health=dict(type="bool", default=True),
            lsblk=dict(type="bool", default=True),
            check_devices=dict(type="list", elements="dict", default=[], options=dict(
                device=dict(type="path", required=True),
                destroy_data=dict(type="bool", default=False),
                serial=dict(type="str"),
                size=dict(type="raw"),
                wwid=dict(type="str"),
                alias=dict(type="str"),
                expected_paths=dict(type="int"),
            )),
            fail_on_refusal=dict(type="bool", default=True),
            sysfs_root=dict(type="path", default="/sys"),
            dev_root=dict(type="path", default="/dev"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    env = {"LC_ALL": "C", "LANG": "C"}

    def run(argv):
        return module.run_command(argv, environ_update=env)

    def which(name):
        return module.get_bin_path(name)

    try:
        result = host_inventory(targets=p["targets"], health=p["health"], check_devices=p["check_devices"],
                                lsblk=p["lsblk"], fail_on_refusal=p["fail_on_refusal"], sysfs_root=p["sysfs_root"],
                                dev_root=p["dev_root"], run=run, which=which)
    except DrivesError as e:
        module.fail_json(msg=e.msg, **e.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
