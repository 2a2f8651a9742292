# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A SAN LUN as its initiator sees it: the dm-multipath map over its paths.

The kernel is the truth, read without multipath-tools' own view (``multipath -ll`` is made
for people and changes between releases):

* the map: ``/sys/block/dm-N/dm/uuid`` is ``mpath-<WWID>`` for a multipath map (the prefix
  multipath-tools gives every map it makes), ``dm/name`` its alias (``mpatha``, or the
  ``alias`` of multipath.conf), ``slaves/`` its paths (Documentation/ABI/testing/sysfs-block);
* each path: its SCSI device state (``device/state``: ``running``, ``offline``, ``blocked``,
  ``transport-offline``: drivers/scsi/scsi_sysfs.c), its transport from its place in the
  device tree and, for iSCSI, its session's target name and the portal its connection
  reached (``iscsi_session/sessionN/targetname``, ``iscsi_connection/connectionN:C/
  persistent_address``, ``persistent_port``: drivers/scsi/scsi_transport_iscsi.c);
* what multipath itself thinks of each path: the map's status line (``dmsetup status``,
  the kernel's ``multipath_status`` in drivers/md/dm-mpath.c): ``A`` active or ``F`` failed
  and the fail count of each path, the state of each path group.

:func:`lun_check` turns them into the reasons to refuse a LUN target before any write.
"""

import os

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.drives import transport_of

MPATH_UUID_PREFIX = "mpath-"
# a SCSI path that can carry I/O (drivers/scsi/scsi_sysfs.c sdev_states)
SCSI_RUNNING = "running"
# the fix a refusal names
LOGIN_FIX = ("log this host in on every path of the LUN (iscsiadm -m node -T <target> -p <portal> --login, "
             "or the HBA's zoning for FC) and check multipath -ll shows the map")


def _int(tok, what):
    try:
        return int(tok)
    except (TypeError, ValueError):
        raise ValueError("multipath status: %s is not a count: %r" % (what, tok))


def parse_status(text):
    """The path states of one multipath map's status line, as ``dmsetup status <map>``
    prints it (``<start> <length> multipath`` then the kernel's fields) or the fields
    alone. Returns ``{"queue_if_no_path": bool|None, "groups": [{"state", "paths":
    [{"devnum", "state", "fail_count"}]}]}``; raises ValueError on a line it cannot read.

    The fields (drivers/md/dm-mpath.c ``multipath_status``, status type INFO): the feature
    count and features (``<queue_io> <pg_init_count>``), the hardware handler's count and
    arguments, the group count and the next group, then per group its state (``A`` active,
    ``E`` enabled, ``D`` disabled), the path selector's own count and arguments, the
    group's path count and the number of selector values per path, and per path
    ``<major:minor> <A|F> <fail count>`` followed by those values."""
    toks = text.split()
    # "<start> <length> multipath ...", or with the map's name first ("mpatha: 0 524288 multipath")
    head = [i for i, t in enumerate(toks[:4]) if t == "multipath"]
    if head:
        toks = toks[head[0] + 1:]
    pos = [0]

    def take(what):
        if pos[0] >= len(toks):
            raise ValueError("multipath status: ends before %s: %r" % (what, text.strip()))
        pos[0] += 1
        return toks[pos[0] - 1]

    def skip(n):
        for _i in range(n):
            take("an argument")

    nfeat = _int(take("the feature count"), "the feature count")
    feats = [take("a feature") for _i in range(nfeat)]
    skip(_int(take("the handler's count"), "the handler's count"))
    ngroups = _int(take("the group count"), "the group count")
    take("the next group")
    groups = []
    for _g in range(ngroups):
        state = take("a group's state")
        skip(_int(take("the selector's count"), "the selector's count"))
        npaths = _int(take("a group's path count"), "a group's path count")
        nvals = _int(take("the selector's per-path count"), "the selector's per-path count")
        paths = []
        for _p in range(npaths):
            devnum = take("a path")
            pstate = take("a path's state")
            if pstate not in ("A", "F") or devnum.count(":") != 1:
                raise ValueError("multipath status: expected '<major:minor> A|F', got %r %r" % (devnum, pstate))
            paths.append({"devnum": devnum, "state": "active" if pstate == "A" else "failed",
                          "fail_count": _int(take("a fail count"), "a fail count")})
            skip(nvals)
        groups.append({"state": {"A": "active", "E": "enabled", "D": "disabled"}.get(state, state), "paths": paths})
    if pos[0] != len(toks):
        raise ValueError("multipath status: %d fields left over: %r" % (len(toks) - pos[0], text.strip()))
    # in the INFO line the first feature is whether I/O is queued now (no path, queue_if_no_path)
    return {"queuing": (feats[0] == "1") if nfeat >= 1 else None, "groups": groups}


def _iscsi(real):
    """(target name, portal, session state) of the iSCSI session a path device sits in."""
    parts = real.split("/")
    sess = [p for p in parts if p.startswith("session") and p[7:].isdigit()]
    if not sess:
        return None, None, None
    sdir = "/".join(parts[:parts.index(sess[-1]) + 1])
    sclass = os.path.join(sdir, "iscsi_session", sess[-1])
    target = sysfs.read_text(os.path.join(sclass, "targetname"))
    state = sysfs.read_text(os.path.join(sclass, "state"))
    portal = None
    for conn in sorted(sysfs.listdir(sdir)):
        if conn.startswith("connection"):
            cdir = os.path.join(sdir, conn, "iscsi_connection", conn)
            addr = sysfs.read_text(os.path.join(cdir, "persistent_address"))
            port = sysfs.read_text(os.path.join(cdir, "persistent_port"))
            if addr:
                portal = ("[%s]:%s" % (addr, port) if ":" in addr else "%s:%s" % (addr, port)) if port else addr
                break
    return target, portal, state


def path_of(name, sysfs_root="/sys"):
    """One path device of a map (``sdb``): ``{name, devnum, scsi_state, transport, target,
    portal, session_state}``."""
    node = os.path.realpath(os.path.join(sysfs_root, "block", name))
    target, portal, session = _iscsi(node)
    return {"name": name, "devnum": sysfs.read_text(os.path.join(node, "dev")),
            "scsi_state": sysfs.read_text(os.path.join(node, "device", "state")),
            "transport": transport_of(name, node), "target": target, "portal": portal, "session_state": session}


def map_of(name, sysfs_root="/sys", status_text=None):
    """The multipath map of block device ``name`` (``dm-0``), or None when it is not one:
    ``{name, alias, wwid, paths: [path_of + dm_state, fail_count], groups, queuing,
    status_source}``. ``status_text``: the map's ``dmsetup status`` line (None: the
    paths' dm states are unknown, ``dm_state`` None)."""
    node = os.path.join(sysfs_root, "block", name)
    uuid = sysfs.read_text(os.path.join(node, "dm", "uuid")) or ""
    if not uuid.startswith(MPATH_UUID_PREFIX):
        return None
    out = {"name": name, "alias": sysfs.read_text(os.path.join(node, "dm", "name")),
           "wwid": uuid[len(MPATH_UUID_PREFIX):], "paths": [path_of(s, sysfs_root) for s in sorted(sysfs.slaves(node))],
           "groups": None, "queuing": None, "status_source": None}
    by_devnum = {}
    if status_text is not None:
        st = parse_status(status_text)
        out.update(groups=[{"state": g["state"], "paths": [p["devnum"] for p in g["paths"]]} for g in st["groups"]],
                   queuing=st["queuing"], status_source="dmsetup status")
        by_devnum = {p["devnum"]: p for g in st["groups"] for p in g["paths"]}
    for p in out["paths"]:
        dm = by_devnum.get(p["devnum"])
        p["dm_state"] = dm["state"] if dm else None
        p["fail_count"] = dm["fail_count"] if dm else None
    return out


def usable(path):
    """A path that can carry I/O now: multipath has it active (when its status was read)
    and its SCSI device is running (when it has one)."""
    return path.get("dm_state") in (None, "active") and path.get("scsi_state") in (None, SCSI_RUNNING)


def describe_path(p):
    """``sdb (8:16) iscsi 10.0.2.2:3261 active/running``."""
    where = " ".join(x for x in (p.get("transport"), p.get("portal")) if x)
    states = "/".join(s for s in (p.get("dm_state"), p.get("scsi_state")) if s) or "state unknown"
    return "%s (%s)%s %s" % (p["name"], p.get("devnum") or "?", " " + where if where else "", states)


def lun_check(mpath, resolved, options):
    """The reasons to refuse a LUN target: not a multipath map, another WWID or alias than
    the target names, fewer usable paths than ``expected_paths``. ``mpath``: :func:`map_of`
    of the device (None: not a map); ``resolved``: the device path, for the messages."""
    want_wwid, want_alias, expected = options.get("wwid"), options.get("alias"), options.get("expected_paths")
    if not (want_wwid or want_alias or expected):
        return []
    named = ("WWID %s" % want_wwid) if want_wwid else ("alias %s" % want_alias) if want_alias else resolved
    if mpath is None:
        return ["%s is not a dm-multipath map (its dm/uuid does not start with %s): the LUN %s must be grouped by "
                "multipathd; %s" % (resolved, MPATH_UUID_PREFIX, named, LOGIN_FIX)]
    reasons = []
    if want_wwid and mpath["wwid"].lower() != str(want_wwid).lower():
        reasons.append("WWID mismatch: the target says %s but %s (%s) is the map of %s"
                       % (want_wwid, resolved, mpath["alias"] or mpath["name"], mpath["wwid"]))
    if want_alias and mpath["alias"] != want_alias:
        reasons.append("alias mismatch: the target says %s but %s is the map %s (WWID %s)"
                       % (want_alias, resolved, mpath["alias"], mpath["wwid"]))
    if expected:
        good = [p for p in mpath["paths"] if usable(p)]
        if len(good) < expected:
            reasons.append("the LUN %s (WWID %s) has %d usable path%s of the %d expected (expected_paths): %s; %s, "
                           "or set expected_paths to the paths this host has by design"
                           % (mpath["alias"] or mpath["name"], mpath["wwid"], len(good),
                              "" if len(good) == 1 else "s", expected,
                              "; ".join(describe_path(p) for p in mpath["paths"]) or "no path at all", LOGIN_FIX))
    return reasons


def find_maps(sysfs_root="/sys"):
    """``{wwid: (dm name, alias)}`` of every multipath map the kernel has."""
    out = {}
    for name in sysfs.listdir(os.path.join(sysfs_root, "block")):
        uuid = sysfs.read_text(os.path.join(sysfs_root, "block", name, "dm", "uuid")) or ""
        if uuid.startswith(MPATH_UUID_PREFIX):
            out[uuid[len(MPATH_UUID_PREFIX):]] = (name, sysfs.read_text(os.path.join(sysfs_root, "block", name, "dm", "name")))
    return out


def missing_lun(options, sysfs_root="/sys"):
    """What to add to "does not exist" for a LUN target (``wwid`` or ``alias``): the maps
    this host has, and the fix; "" for any other target."""
    want_wwid, want_alias = options.get("wwid"), options.get("alias")
    if not (want_wwid or want_alias):
        return ""
    maps = find_maps(sysfs_root)
    for wwid, (name, alias) in maps.items():
        if (want_wwid and wwid.lower() == str(want_wwid).lower()) or (want_alias and alias == want_alias):
            return (": the kernel has the map as /dev/%s (%s, WWID %s) but udev made no link to it; check that udev "
                    "runs and has multipath-tools' rules, or name the target by device: /dev/%s" % (name, alias, wwid, name))
    have = ", ".join("%s (WWID %s)" % (alias or name, wwid) for wwid, (name, alias) in sorted(maps.items()))
    return ": no multipath map on this host has %s (%s); %s" % (
        "WWID %s" % want_wwid if want_wwid else "alias %s" % want_alias,
        "its maps: %s" % have if have else "it has no multipath map at all", LOGIN_FIX)


def status_line(alias, run, which):
    """``dmsetup status <alias>`` (``(text, note)``): the text None and a note saying why when
    it cannot be read (dmsetup missing, not root, no such map)."""
    dmsetup = which("dmsetup") if which else None
    if not dmsetup or not run:
        return None, "dmsetup not installed: the paths' multipath states are not read (SCSI states only)"
    rc, out, err = run([dmsetup, "status", alias])
    if rc != 0:
        return None, "dmsetup status %s exit %d: %s" % (alias, rc, (err or "").strip()[:200])
    lines = [ln for ln in (out or "").splitlines() if " multipath " in ln]
    return (lines[0] if lines else None), (None if lines else "dmsetup status %s: no multipath line" % alias)
