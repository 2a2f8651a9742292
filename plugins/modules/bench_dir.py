#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_dir
short_description: Prepare, check and remove the marked directory iobench writes in
version_added: "0.1.0"
description:
  - With O(state=present), checks everything the benchmark needs before a single byte is
    written, in this order, and fails with a message saying what to change.
  - The path must be absolute and free of C(..) components, must not be a symlink, and, if it
    already exists and holds anything, must carry the collection's marker file. A directory
    holding someone else's files is refused and left untouched.
  - Free space (statvfs) must cover O(required_bytes) plus O(margin_pct) percent. The message
    states both numbers.
  - With O(direct=true), a 4 KiB O_DIRECT write is probed in the directory; a filesystem that
    refuses it (tmpfs, some FUSE) is named in the message, with the advice to run buffered.
  - Only then is the directory created (mode 0700) with its marker, and one owner-only
    subdirectory per data set in O(datasets).
  - A previous run's job status found in the directory is reported and cleared; while that
    job still runs the module fails. Device regions that job left written are zeroed or
    refused, see O(devices).
  - With O(state=absent), runs C(iobench cleanup) in each data set directory (iobench removes
    only its own files), then removes the empty data set directories, the marker, and the
    directory itself when it is empty. Anything else found there is left and reported. A
    dead job's device regions not zeroed (not among O(devices)) keep its status in place for
    the next run.
options:
  path:
    description: Absolute path of the test directory.
    type: path
    required: true
  state:
    description: V(present) checks and creates; V(absent) cleans up what the collection created.
    type: str
    choices: [present, absent]
    default: present
  datasets:
    description: Names of the data set subdirectories (one per working set).
    type: list
    elements: str
    default: []
  required_bytes:
    description: Largest working set, in bytes, that must fit (with O(state=present)).
    type: int
    default: 0
  margin_pct:
    description: Extra free space required, in percent of O(required_bytes).
    type: int
    default: 10
  direct:
    description: Probe that the filesystem accepts O_DIRECT.
    type: bool
    default: false
  devices:
    description:
      - The device targets this run opted in by name (C(fleetqual_targets) entries with
        C(destroy_data=true) whose raw-device guard passed).
      - A measurement job killed before its cleanup leaves the device regions it recorded in
        its status written. Each such region whose drive (same serial, else WWID, else a loop
        device's backing file) is one of these devices is zeroed (C(iobench cleanup --device));
        any other makes O(state=present) fail, naming the device, the job and how to clear it,
        and leaves the device and the job's status untouched.
    type: list
    elements: path
    default: []
  binary:
    description:
      - Path of the iobench binary. With O(state=absent) it removes the benchmark's files; with
        O(state=present) it must exist and be executable (not checked in check mode), else the
        module fails saying to run the C(fleetqual.storage.iobench) role first.
    type: path
author:
  - fleetqual.storage developers (!UNKNOWN)
notes:
  - Supports check mode; in check mode nothing is created or removed and the result says what would be.
attributes:
  check_mode:
    description: Nothing is created or removed; the result says what would be.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
  platform:
    description: Reads statvfs and /proc/self/mountinfo; probes O_DIRECT with a real file.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Check and create the test directory for a 2 GiB working set with O_DIRECT
  fleetqual.storage.bench_dir:
    path: /var/tmp/fleetqual
    datasets: [cache, over_cache]
    required_bytes: 2147483648
    direct: true
  register: preflight

- name: Remove what the benchmark created
  fleetqual.storage.bench_dir:
    path: /var/tmp/fleetqual
    datasets: [cache, over_cache]
    binary: /opt/fleetqual/bin/iobench
    state: absent
"""

RETURN = r"""
path:
  description: The test directory.
  returned: always
  type: str
created:
  description: Whether this call created the test directory.
  returned: state=present
  type: bool
filesystem:
  description: Filesystem type of the test directory (from /proc/self/mountinfo).
  returned: always
  type: str
  sample: ext4
mount_point:
  description: Mount point holding the test directory.
  returned: always
  type: str
free_bytes:
  description: Bytes available to an unprivileged writer (statvfs f_bavail * f_frsize).
  returned: state=present
  type: int
needed_bytes:
  description: O(required_bytes) plus the margin.
  returned: state=present
  type: int
direct_supported:
  description: Result of the O_DIRECT probe; null when not probed.
  returned: state=present
  type: bool
sysstat:
  description: Path of iostat, or null when sysstat is not installed.
  returned: state=present
  type: str
removed:
  description: Paths removed, with O(state=absent).
  returned: state=absent
  type: list
  elements: str
left:
  description: Entries left in place because the collection did not create them.
  returned: state=absent
  type: list
  elements: str
previous_job:
  description:
    - Summary of a previous run's job found in the directory (run_id, pid, state, results),
      or absent when there was none. C(regions_zeroed) lists the device regions it left
      written that were zeroed now (C(<device>[0+<size>|all])).
  returned: state=present and a previous job was found
  type: dict
regions_zeroed:
  description: Device regions of a dead job zeroed by this call (C(<device>[0+<size>|all])).
  returned: state=absent
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir as _ops


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            datasets=dict(type="list", elements="str", default=[]),
            required_bytes=dict(type="int", default=0),
            margin_pct=dict(type="int", default=10),
            direct=dict(type="bool", default=False),
            binary=dict(type="path"),
            devices=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        _ops.checked_path(p["path"], p["datasets"], p["required_bytes"], p["margin_pct"])
        if p["state"] == "present":
            result = _ops.prepare(p["path"], binary=p["binary"], datasets=p["datasets"],
                                  required_bytes=p["required_bytes"], margin_pct=p["margin_pct"],
                                  direct=p["direct"], devices=p["devices"], check_mode=module.check_mode)
        else:
            result = _ops.remove(p["path"], datasets=p["datasets"], binary=p["binary"], devices=p["devices"],
                                 check_mode=module.check_mode)
    except _ops.BenchDirError as e:
        fields = dict(e.result)
        for warning in fields.pop("warnings", []):
            module.warn(warning)
        module.fail_json(msg=e.msg, **fields)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
