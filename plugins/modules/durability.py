#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: durability
short_description: The host's side of the power-cut test, one short step per run
version_added: "0.4.0"
description:
  - The power-cut test (docs/durability.md) proves that every write a drive acknowledged as
    durable survives a power cut. The role runs it in cycles; each step here is one short module
    run, so no controller worker is held while the host writes or boots.
  - With O(state=start), checks every target (a device through the raw-device guard, which
    needs C(destroy_data=true); a directory must not be on the root filesystem), reads its
    drive's identity (serial, model, the kernel's write cache mode and FUA), on the first cycle
    fills its region with verified data (C(iobench prepare --verify)), then starts one detached
    C(iobench run --witness) per target that writes with a flush per write (O_DSYNC, which the
    kernel sends as FUA on a raw device whose drive offers it) until the power goes, recording
    every acknowledged write in a witness file in shared memory. Returns once every writer has
    had a write acknowledged.
  - With O(state=snapshot), reads every witness now and returns its bytes; the controller keeps
    them and cuts the power right after. It never reads them back from the host.
  - With O(state=check), after the power came back, writes each witness the controller kept to
    shared memory and runs C(iobench witness-check) on its target.
  - With O(state=cleanup), ends the writers still running (a cut that did not happen), removes
    the witnesses and a directory target's files (iobench removes only its own).
options:
  state:
    description: The step.
    type: str
    choices: [start, snapshot, check, cleanup]
    required: true
  binary:
    description: Path of the iobench binary on the host.
    type: path
    required: true
  run_id:
    description: The run's identifier (names the witnesses' directory).
    type: str
    required: true
  cycle:
    description: The cycle's number, from 1 (the first fills the targets' regions).
    type: int
    default: 1
  targets:
    description:
      - The targets, as C(fleetqual_targets) resolves them (C(name), C(kind) V(device) or V(path),
        C(device) or C(path), C(destroy_data)); with O(state=snapshot), O(state=check) and
        O(state=cleanup), the C(targets) O(state=start) returned.
    type: list
    elements: dict
    required: true
  settings:
    description: The test's settings (C(fleetqual_durability) with its defaults; C(size), C(block_size) in bytes, C(threads)).
    type: dict
    default: {}
  controller_boot_id:
    description:
      - With O(state=start), the controller's kernel boot id; a host that runs on that very kernel (the controller
        itself, a container or chroot of it, a second sshd of it) is refused.
    type: str
  witnesses:
    description: With O(state=check), the C(witnesses) O(state=snapshot) returned (target name -> its entry, or the witness bytes in base64).
    type: dict
    default: {}
author:
  - fleetqual.storage developers (!UNKNOWN)
attributes:
  check_mode:
    description: Not supported; the role does not run the power-cut test in check mode.
    support: none
  diff_mode:
    description: Returns no diff.
    support: none
  platform:
    description: Linux (sysfs, /dev/shm, /proc).
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Start the writers of cycle 1
  fleetqual.storage.durability:
    state: start
    binary: /opt/fleetqual/bin/iobench
    run_id: "20261127T200000Z"
    cycle: 1
    targets:
      - {name: nvme1, kind: device, device: /dev/disk/by-id/nvme-ACME_X_S123, destroy_data: true}
    settings: {size: 67108864, block_size: 4096, threads: 4}
  register: started
"""

RETURN = r"""
targets:
  description: With O(state=start), each target with its drive's identity, its witness's path and its writer's PID.
  returned: state=start
  type: list
  elements: dict
taken_ms:
  description: With O(state=snapshot), when the witnesses were read (Unix ms).
  returned: state=snapshot
  type: int
witnesses:
  description: With O(state=snapshot), target name -> {witness (base64), acked, writer_running}.
  returned: state=snapshot
  type: dict
read_back:
  description: With O(state=check), target name -> the output of C(iobench witness-check) and the drive's identity.
  returned: state=check
  type: dict
ended_writers:
  description: With O(state=cleanup), the targets whose writer still ran and was ended.
  returned: state=cleanup
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir as _bench_dir
from ansible_collections.fleetqual.storage.plugins.module_utils.host import durability as _ops


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["start", "snapshot", "check", "cleanup"], required=True),
            binary=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            cycle=dict(type="int", default=1),
            targets=dict(type="list", elements="dict", required=True),
            settings=dict(type="dict", default={}),
            witnesses=dict(type="dict", default={}),
            controller_boot_id=dict(type="str"),
        ),
        supports_check_mode=False,
    )
    p = module.params
    try:
        if p["state"] == "start":
            result = dict(_ops.start(p["binary"], p["run_id"], p["cycle"], p["targets"], p["settings"],
                                     controller_boot_id=p["controller_boot_id"]), changed=True)
        elif p["state"] == "snapshot":
            result = dict(_ops.snapshot(p["targets"]), changed=False)
        elif p["state"] == "check":
            result = dict(read_back=_ops.check(p["binary"], p["run_id"], p["cycle"], p["targets"], p["witnesses"]),
                          changed=False)
        else:
            result = dict(_ops.cleanup(p["binary"], p["run_id"], p["targets"]), changed=True)
    except _ops.DurabilityError as e:
        module.fail_json(msg=str(e))
    except _bench_dir.BenchDirError as e:
        module.fail_json(msg=e.msg)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
