"""A SAN LUN as its initiator sees it (module_utils/devices/multipath.py): the kernel's
multipath status line, and the map, its paths and their iSCSI portals in sysfs, laid out
as a Debian 12 initiator's kernel lays them out (two iSCSI sessions to one tgt LUN; the
status lines were read with ``dmsetup status`` on that guest: tests/vm/test_vm_san.py
reads the real ones)."""
import os

from hypothesis import given, settings, strategies as st
import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import blockdev
from ansible_collections.fleetqual.storage.plugins.module_utils.devices import multipath as M

WWID = "360000000000000000e00000000010001"
# dmsetup status on the guest, both paths up (two path groups, round-robin, one path each),
# and on an initiator logged in on one portal
TWO_PATHS = "mpatha: 0 524288 multipath 2 0 0 0 2 1 A 0 1 2 8:0 A 0 0 1 E 0 1 2 8:16 A 0 0 1 "
ONE_PATH = "0 524288 multipath 2 0 0 0 1 1 A 0 1 2 8:0 A 0 0 1"


def test_the_guests_status_lines():
    assert M.parse_status(TWO_PATHS) == {"queuing": False, "groups": [
        {"state": "active", "paths": [{"devnum": "8:0", "state": "active", "fail_count": 0}]},
        {"state": "enabled", "paths": [{"devnum": "8:16", "state": "active", "fail_count": 0}]}]}
    assert M.parse_status(ONE_PATH)["groups"] == [{"state": "active", "paths": [
        {"devnum": "8:0", "state": "active", "fail_count": 0}]}]


paths_st = st.lists(st.tuples(st.integers(0, 259), st.integers(0, 1023), st.sampled_from("AF"), st.integers(0, 99)),
                    min_size=0, max_size=4)
groups_st = st.lists(st.tuples(st.sampled_from("AED"), st.integers(0, 2), st.integers(0, 3), paths_st),
                     min_size=0, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["0", "1", "queue_if_no_path", "7"]), max_size=4), st.lists(st.just("x"), max_size=2),
       groups_st, st.booleans())
def test_status_fields_read_back_whatever_the_counts(features, handler, groups, with_head):
    """The kernel's field layout (dm-mpath.c multipath_status, INFO), rendered from any
    counts of features, handler arguments, groups, selector values and paths, reads back."""
    toks = [str(len(features))] + features + [str(len(handler))] + handler + [str(len(groups)), "1"]
    for state, nsel, nvals, paths in groups:
        toks += [state, str(nsel)] + ["s"] * nsel + [str(len(paths)), str(nvals)]
        for major, minor, pst, fails in paths:
            toks += ["%d:%d" % (major, minor), pst, str(fails)] + ["9"] * nvals
    line = ("0 1024 multipath " if with_head else "") + " ".join(toks)
    got = M.parse_status(line)
    assert got["queuing"] == ((features[0] == "1") if features else None)
    assert got["groups"] == [{"state": {"A": "active", "E": "enabled", "D": "disabled"}[state],
                              "paths": [{"devnum": "%d:%d" % (ma, mi), "state": "active" if p == "A" else "failed",
                                         "fail_count": f} for ma, mi, p, f in paths]}
                             for state, _n, _v, paths in groups]
    # one field short or one too many is refused, never read as something else
    with pytest.raises(ValueError):
        M.parse_status(line + " 5")
    with pytest.raises(ValueError):
        M.parse_status(line.rsplit(" ", 1)[0])


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text + "\n")


def sysfs_tree(root, paths, uuid="mpath-" + WWID, alias="mpatha", states=None):
    """``/sys/block`` of an initiator: dm-0 over ``paths`` (sda, sdb...), each an iSCSI disk in
    its own session, as the guest's kernel has them."""
    states = states or {}
    dm = os.path.join(root, "devices", "virtual", "block", "dm-0")
    _write(os.path.join(dm, "dm", "uuid"), uuid)
    _write(os.path.join(dm, "dm", "name"), alias)
    _write(os.path.join(dm, "dev"), "253:0")
    _write(os.path.join(dm, "size"), "524288")
    os.makedirs(os.path.join(dm, "slaves"))
    os.makedirs(os.path.join(root, "block"))
    os.symlink(dm, os.path.join(root, "block", "dm-0"))
    for i, (name, port) in enumerate(paths):
        host, sess = "host%d" % (i + 2), "session%d" % (i + 1)
        sdir = os.path.join(root, "devices", "platform", host, sess)
        disk = os.path.join(sdir, "target%d:0:0" % (i + 2), "%d:0:0:1" % (i + 2))
        node = os.path.join(disk, "block", name)
        _write(os.path.join(node, "dev"), "8:%d" % (16 * i))
        _write(os.path.join(disk, "state"), states.get(name, "running"))
        os.symlink(disk, os.path.join(node, "device"))
        conn = "connection%d:0" % (i + 1)
        cdir = os.path.join(sdir, conn, "iscsi_connection", conn)
        _write(os.path.join(cdir, "persistent_address"), "10.0.2.2")
        _write(os.path.join(cdir, "persistent_port"), str(port))
        _write(os.path.join(sdir, "iscsi_session", sess, "targetname"), "iqn.2026-11.test.fleetqual:lun1")
        _write(os.path.join(sdir, "iscsi_session", sess, "state"), "LOGGED_IN")
        os.symlink(node, os.path.join(root, "block", name))
        os.symlink(node, os.path.join(dm, "slaves", name))
    return root


def test_the_map_its_paths_and_their_portals(tmp_path):
    root = sysfs_tree(str(tmp_path), [("sda", 3260), ("sdb", 3261)])
    m = M.map_of("dm-0", root, TWO_PATHS)
    assert (m["alias"], m["wwid"], m["status_source"]) == ("mpatha", WWID, "dmsetup status")
    assert [(p["name"], p["devnum"], p["transport"], p["portal"], p["target"], p["dm_state"], p["scsi_state"])
            for p in m["paths"]] == [
        ("sda", "8:0", "iscsi", "10.0.2.2:3260", "iqn.2026-11.test.fleetqual:lun1", "active", "running"),
        ("sdb", "8:16", "iscsi", "10.0.2.2:3261", "iqn.2026-11.test.fleetqual:lun1", "active", "running")]
    assert M.lun_check(m, "/dev/dm-0", {"wwid": WWID, "expected_paths": 2}) == []
    assert M.map_of("sda", root) is None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.lists(st.sampled_from(["active/running", "failed/running", "active/offline",
                                                    "active/transport-offline", "failed/blocked"]), min_size=1,
                                   max_size=3))
def test_a_lun_with_fewer_usable_paths_than_expected_is_refused_naming_each_path(tmp_path_factory, expected, states):
    root = str(tmp_path_factory.mktemp("sys"))
    names = ["sd" + "abc"[i] for i in range(len(states))]
    sysfs_tree(root, [(n, 3260 + i) for i, n in enumerate(names)],
               states={n: s.split("/")[1] for n, s in zip(names, states)})
    groups = " ".join("%s 0 1 2 8:%d %s 0 0 1" % ("A" if i == 0 else "E", 16 * i, "A" if s.startswith("active") else "F")
                      for i, s in enumerate(states))
    m = M.map_of("dm-0", root, "0 524288 multipath 2 0 0 0 %d 1 %s" % (len(states), groups))
    usable = sum(1 for s in states if s == "active/running")
    reasons = M.lun_check(m, "/dev/dm-0", {"wwid": WWID, "expected_paths": expected})
    if usable >= expected:
        assert reasons == []
    else:
        assert len(reasons) == 1 and "has %d usable path" % usable in reasons[0], reasons
        assert "of the %d expected (expected_paths)" % expected in reasons[0]
        for n, s in zip(names, states):
            assert "%s (8:%d) iscsi 10.0.2.2:%d %s" % (n, 16 * names.index(n), 3260 + names.index(n), s) in reasons[0]
        assert "iscsiadm" in reasons[0]


def test_another_wwid_or_alias_or_no_map_is_refused(tmp_path):
    root = sysfs_tree(str(tmp_path), [("sda", 3260)])
    m = M.map_of("dm-0", root, ONE_PATH)
    assert M.lun_check(m, "/dev/dm-0", {"wwid": "36001"})[0].startswith(
        "WWID mismatch: the target says 36001 but /dev/dm-0 (mpatha) is the map of " + WWID)
    assert M.lun_check(m, "/dev/dm-0", {"alias": "mpathb"})[0].startswith("alias mismatch")
    assert "is not a dm-multipath map" in M.lun_check(None, "/dev/sdb", {"expected_paths": 1})[0]
    assert M.lun_check(None, "/dev/sdb", {}) == []
    # a LUN whose by-id link is missing: the maps this host has, or that udev made no link
    assert "no multipath map on this host has WWID 36001 (its maps: mpatha (WWID %s))" % WWID in M.missing_lun(
        {"wwid": "36001"}, root)
    assert "udev made no link" in M.missing_lun({"alias": "mpatha"}, root)
    assert M.missing_lun({}, root) == ""


def test_the_guard_reads_the_map_through_the_same_reader(tmp_path):
    """check_raw_device on a fake tree: a wwid target that does not exist says which maps
    the host has (its by-id link is what resolve_targets gives)."""
    root = sysfs_tree(str(tmp_path / "sys"), [("sda", 3260)])
    r = blockdev.check_raw_device("/dev/disk/by-id/dm-uuid-mpath-36001", {"destroy_data": True, "wwid": "36001"},
                                  sysfs_root=root, dev_root=str(tmp_path / "dev"))
    assert not r["ok"] and "no multipath map on this host has WWID 36001" in r["reasons"][0], r["reasons"]


def test_a_drive_row_names_the_lun_path_it_is():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.drive_consistency import lun_path
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import lun_text
    mp = {"alias": "mpatha", "wwid": WWID, "paths": [
        {"name": "sda", "transport": "iscsi", "portal": "10.0.2.2:3260", "dm_state": "active", "scsi_state": "running"},
        {"name": "sdb", "transport": "iscsi", "portal": "10.0.2.2:3261", "dm_state": "failed", "scsi_state": "running"}]}
    targets = [{"name": "data", "kind": "path"}, {"name": "lun", "kind": "device", "multipath": mp}]
    assert lun_path(targets, "sdc") is None and lun_path(None, "sda") is None
    got = lun_path(targets, "sdb")
    want = (2, 2, 1, "10.0.2.2:3261", "failed")
    assert (got["path"], got["paths"], got["usable"], got["portal"], got["dm_state"]) == want
    assert lun_text(got) == ("path 2 of 2 of LUN mpatha (WWID %s) on target lun: iscsi 10.0.2.2:3261, failed/running; "
                             "1 of 2 paths usable" % WWID)
