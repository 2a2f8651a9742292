# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's drive inventory as the module ``fleetqual.storage.drives`` returns it: every
drive's identity and health (:mod:`.drives`) and the raw-device guard of each device
target (:mod:`.blockdev`), in one call that the module and the host's one-run start share."""

from ansible_collections.fleetqual.storage.plugins.module_utils.devices.blockdev import check_raw_device, refusal_message
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import (
    DrivesError,
    apply_tool_identity,
    collect_health,
    find_tool,
    inventory,
    run_tool,
)


def host_inventory(targets=(), health=True, check_devices=(), lsblk=True, fail_on_refusal=True,
                   sysfs_root="/sys", dev_root="/dev", run=None, which=None):
    """What the module ``fleetqual.storage.drives`` returns, without an AnsibleModule:
    ``changed``, ``drives``, ``virtual``, ``targets``, ``guard``, ``tools`` and, with
    ``health``, ``not_collected``. ``check_devices``: dicts with ``device`` and optional
    ``destroy_data`` (false), ``serial``, ``size``. ``run``/``which``: as for
    :func:`collect_health` (default :func:`run_tool`, :func:`find_tool`). Raises
    :class:`DrivesError` (the result in its fields) when an entry is refused and
    ``fail_on_refusal``."""
    run = run or run_tool
    which = which or find_tool
    tools = {"smartctl": which("smartctl"), "nvme": which("nvme"), "lsblk": which("lsblk")}
    lsblk_text = None
    if lsblk and tools["lsblk"] and sysfs_root == "/sys":
        rc, out, dummy = run([tools["lsblk"], "-J", "-O", "-b", "--nodeps"])
        if rc == 0:
            lsblk_text = out

    inv = inventory(sysfs_root=sysfs_root, dev_root=dev_root, lsblk_text=lsblk_text, targets=list(targets or []))
    result = dict(changed=False, drives=inv["drives"], virtual=inv["virtual"], targets=inv["targets"],
                  guard=[], tools=tools)
    serials = {}
    if health:
        result["not_collected"] = []
        for d in inv["drives"]:
            if sysfs_root != "/sys":
                d["health"] = {"collected": False, "reason": "fake sysfs tree (%s): no device to query" % sysfs_root}
            else:
                d["health"] = collect_health(d, run, which)
                apply_tool_identity(d, d["health"])
            if not d["health"].get("collected"):
                result["not_collected"].append({"name": d["name"], "reason": d["health"].get("reason")})
            serials[d["name"]] = d.get("serial")

    refused = []
    for entry in check_devices or []:
        t = {"destroy_data": False, "serial": None, "size": None}
        t.update(entry)
        opts = dict(t)
        r = check_raw_device(t["device"], opts, sysfs_root=sysfs_root, dev_root=dev_root,
                             run=run, which=which, drive_serial=None)
        if not r["ok"] and r.get("serial") is None and t.get("serial") and r.get("name"):
            # sysfs shows no serial (SATA behind libata often): ask smartctl once, then re-check.
            disk = r.get("partition_of") or r["name"]
            known = serials.get(disk)
            if known is None and tools["smartctl"]:
                h = collect_health({"name": disk, "path": "/dev/" + disk, "transport": None}, run, which)
                known = (h.get("identity") or {}).get("serial")
            if known:
                r = check_raw_device(t["device"], opts, sysfs_root=sysfs_root, dev_root=dev_root,
                                     run=run, which=which, drive_serial=known)
        result["guard"].append(r)
        if not r["ok"]:
            refused.append(refusal_message(r))

    if refused and fail_on_refusal:
        raise DrivesError("; ".join(refused), **result)
    return result
