# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dm-multipath's word on a LUN's paths (docs/kernel-log.md, "The record"): the kernel log's
``Failing path`` and ``Reinstating path`` lines (drivers/md/dm-mpath.c ``fail_path`` and
``reinstate_path``: ``device-mapper: multipath: [<map maj:min>: ]Failing path <maj:min>.``;
kernels before 5.x print no map), kept by the measurement job in the kernel section's
``path_states``, in order. A failed path is also a ``dm_error`` storage message
(module_utils/collect/kmsg.py); a reinstated one is no error. A failover under load reads
its time to fail back from them (plugin_utils/array/failover.py, docs/san.md). Standard
library only."""

import re

_PATH_STATE = re.compile(r"device-mapper: multipath: (?:(?P<map>\d+:\d+): )?(?P<what>Failing|Reinstating) "
                         r"path (?P<path>\d+:\d+)\.")
PATH_STATES = {"Failing": "failed", "Reinstating": "reinstated"}
MAX_PATH_STATES = 200       # path state changes kept in the record (the later ones are dropped)


def record_times(record, clock):
    """``(time_s, epoch)`` of a kernel log record: its monotonic time, and its Unix time (the
    journal's own, else from ``clock``, ``(monotonic_s, epoch_s)`` read together; None
    without)."""
    time_s = round(record["usec"] / 1e6, 6)
    epoch = record.get("epoch")
    if epoch is None and clock:
        epoch = round(clock[1] - (clock[0] - time_s), 3)
    return time_s, epoch


def path_state(record, resolver, clock=None):
    """The record's entry in the section's ``path_states`` when it is dm-multipath failing or
    reinstating a path, else None: ``{seq, time_s, epoch, state ("failed" | "reinstated"),
    map, path (maj:min), drive (the path's disk, None when sysfs does not know it), text}``.
    ``resolver``: the kernel log's (``kmsg.Resolver``), whose ``disks("devnum", ...)`` reads sysfs."""
    m = _PATH_STATE.search(record.get("text") or "")
    if not m:
        return None
    time_s, epoch = record_times(record, clock)
    disks = resolver.disks("devnum", m.group("path"))
    return {"seq": record["seq"], "time_s": time_s, "epoch": epoch, "state": PATH_STATES[m.group("what")],
            "map": m.group("map"), "path": m.group("path"), "drive": disks[0] if disks else None,
            "text": record["text"]}
