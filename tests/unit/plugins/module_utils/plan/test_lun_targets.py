"""A SAN LUN as a target (``fleetqual_targets: [{wwid: ..., destroy_data: true,
expected_paths: 2}]`` or ``alias``): checked before any host is contacted, resolved to the
device path its multipath map has on every initiator, carried into the plan's specs."""
import re
import string

from hypothesis import assume, given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as T
from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as S

WWID = "360000000000000000e00000000010001"
WWID_CHARS = string.ascii_letters + string.digits + "._:-"
ALIAS_CHARS = string.ascii_letters + string.digits + "_.+-"


def resolve(targets, host="db01"):
    return T.resolve_targets(targets, host=host)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=1),
       st.text(alphabet=WWID_CHARS, max_size=40), st.integers(min_value=1, max_value=16))
def test_a_valid_wwid_resolves_to_its_multipath_maps_by_id_link(first, rest, paths):
    wwid = first + rest
    assume(not wwid.lower().startswith(tuple(T.SCSI_DESIGNATORS)))      # a path's designator: the test above
    got, errors = resolve([{"wwid": wwid, "destroy_data": True, "expected_paths": paths}])
    assert errors == []
    assert got == [{"name": T._derived_target_names(["lun-" + wwid])[0], "kind": "device", "wwid": wwid,
                    "device": "/dev/disk/by-id/dm-uuid-mpath-" + wwid, "destroy_data": True, "serial": None,
                    "size": None, "expected_paths": paths, "shorthand": False}]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=ALIAS_CHARS, min_size=1, max_size=30))
def test_a_valid_alias_resolves_to_its_dev_mapper_node(alias):
    got, errors = resolve([{"alias": alias, "destroy_data": True, "name": "lun"}])
    if alias in T.DM_RESERVED:
        assert errors and "for example mpatha" in errors[0], errors
        return
    assert errors == [] and got[0]["device"] == "/dev/mapper/" + alias and got[0]["alias"] == alias


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.integers(), st.none(), st.lists(st.integers(), max_size=2)))
def test_a_bad_wwid_is_refused_naming_host_variable_and_an_example_that_resolves(value):
    if isinstance(value, str) and (T._WWID_RE.match(value.strip()) or
                                   value.strip().lower().startswith(tuple(T.SCSI_DESIGNATORS))):
        return
    errors = resolve([{"wwid": value, "destroy_data": True}])[1]
    assert len(errors) == 1 and errors[0].startswith("host db01: fleetqual_targets[0].wwid: must be the LUN's WWID")
    example = errors[0].rsplit("for example ", 1)[1]
    # the example given is itself a WWID the check takes
    assert resolve([{"wwid": example, "destroy_data": True}])[1] == [], errors


def test_a_paths_scsi_designator_gets_the_multipath_wwid_it_stands_for():
    errors = resolve([{"wwid": "naa.60000000000000000e00000000010001", "destroy_data": True}])[1]
    assert errors == ["host db01: fleetqual_targets[0].wwid: 'naa.60000000000000000e00000000010001' is the SCSI "
                      "designator of a path (sysfs device/wwid), not the LUN's WWID as multipath -ll shows it; for "
                      "example " + WWID], errors
    assert resolve([{"wwid": "EUI.0025385971b0a1c2", "destroy_data": True}])[1][0].endswith("for example 20025385971b0a1c2")


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.booleans(), st.text(max_size=4), st.floats(allow_nan=False)))
def test_expected_paths_must_be_a_whole_number_from_one(value):
    errors = resolve([{"wwid": WWID, "destroy_data": True, "expected_paths": value}])[1]
    assert len(errors) == 1 and "fleetqual_targets[0].expected_paths: must be a whole number" in errors[0], errors
    example = int(re.search(r"for example (\d+)$", errors[0]).group(1))
    assert resolve([{"wwid": WWID, "destroy_data": True, "expected_paths": example}])[1] == []


def test_a_lun_needs_the_opt_in_and_one_name_and_no_serial():
    assert "destroy_data: true" in resolve([{"wwid": WWID}])[1][0]
    both = resolve([{"wwid": WWID, "alias": "mpatha", "destroy_data": True}])[1]
    assert both == ["host db01: fleetqual_targets[0]: give exactly one of path (a directory on a filesystem), device "
                    "(a whole block device), wwid or alias (a SAN LUN's multipath map), got wwid and alias"]
    assert "remove serial" in resolve([{"wwid": WWID, "destroy_data": True, "serial": "X"}])[1][0]
    assert "expected_paths" in resolve([{"path": "/data1/fq", "expected_paths": 2}])[1][0]
    typo = resolve([{"wwid": WWID, "destroy_data": True, "expected_path": 2}])[1]
    assert typo and "(did you mean expected_paths?)" in typo[0], typo
    same = resolve([{"wwid": WWID, "destroy_data": True}, {"wwid": WWID, "destroy_data": True, "name": "b"}])[1]
    assert same and "the same wwid" in same[0] and "different LUN" in same[0], same


def test_the_plan_and_the_hosts_guard_carry_the_lun():
    plan = P.plan([{"workload": "w", "mode": "rndrd", "threads": 1, "total_size": "16M", "block_size": "16K",
                    "direct": True, "time": 2}], cache_size="256M", mem_total_mb=4096)
    raw = [{"wwid": WWID, "destroy_data": True, "expected_paths": 2, "name": "lun0", "size": "64M"}]
    resolved, errors = T.resolve_targets(raw)
    assert errors == []
    specs = T.plan_targets(plan, resolved)
    assert {(s["target_device"], s["target_wwid"], s["target_expected_paths"]) for s in specs} == {
        ("/dev/disk/by-id/dm-uuid-mpath-" + WWID, WWID, 2)}
    # the record's targets and the guard's entries, on the host, from the same resolution
    assert S.resolved_targets(specs) == [{"name": "lun0", "kind": "device", "device": "/dev/disk/by-id/dm-uuid-mpath-"
                                          + WWID, "serial": None, "wwid": WWID, "expected_paths": 2}]
    p = {"targets": raw, "path": "/var/tmp/fleetqual"}
    targets = S._user_targets(p)
    assert S._check_devices(targets) == [{"device": "/dev/disk/by-id/dm-uuid-mpath-" + WWID, "wwid": WWID,
                                          "destroy_data": True, "serial": None, "size": 64 << 20, "expected_paths": 2}]
    assert S._inventory_targets(p, targets) == ["/dev/disk/by-id/dm-uuid-mpath-" + WWID]
    assert S._inventory_targets(p, []) == ["/var/tmp/fleetqual"]


def test_a_lun_shared_by_hosts_without_regions_of_their_own_is_refused_before_any_host():
    """Each host's workloads would use the LUN's blocks from offset 0 and each host's cleanup
    zeroes them (two iSCSI initiators of one LUN: the second read 46 blocks zeroed under it)."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import arrays as A
    lun = {"wwid": WWID, "destroy_data": True}
    hosts = {"db1": {"fleetqual_targets": [lun]},
             "db2": {"fleetqual_targets": [{"path": "/data"}, dict(lun, wwid=WWID.upper(), size="1G")]},
             "db3": {"fleetqual_targets": [dict(lun, wwid="36001")]}}
    problems = A.validate_arrays(hosts)
    assert problems == ["hosts db1 (fleetqual_targets[0]), db2 (fleetqual_targets[1]): the LUN WWID %s is a target of "
                        "2 hosts and db1 gives no size (each region must end where the next begins); each host's "
                        "workloads use its region and each host's cleanup zeroes it on its own schedule, so two hosts "
                        "in one region would read each other's writes as corrupt blocks. Give each host a region of "
                        "its own, for example db1: offset: 0 B, size: 1.0 GiB; db2: offset: 1.0 GiB, size: 1.0 GiB "
                        "(docs/san.md)" % WWID.lower()], problems
    # an alias is each initiator's own name: the same alias on two hosts may be two LUNs
    assert A.validate_arrays({"db1": {"fleetqual_targets": [{"alias": "mpatha", "destroy_data": True}]},
                              "db2": {"fleetqual_targets": [{"alias": "mpatha", "destroy_data": True}]}}) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.one_of(st.none(), st.integers(1, 4))), min_size=2, max_size=4))
def test_hosts_share_a_lun_exactly_when_their_regions_are_apart(regions):
    """Regions in GiB ``(offset, size or None)``, one per host: refused exactly when a host
    gives no size or two regions overlap; the fix it proposes is itself accepted."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import arrays as A

    def fleet(regs):
        return {"h%d" % k: {"fleetqual_targets": [dict({"wwid": WWID, "destroy_data": True, "offset": "%dG" % o},
                                                       **({"size": "%dG" % s} if s else {}))]}
                for k, (o, s) in enumerate(regs)}
    problems = A.validate_arrays(fleet(regions))
    spans = sorted((o, o + s) for o, s in regions if s)
    bad = any(s is None for _o, s in regions) or any(b[0] < a[1] for a, b in zip(spans, spans[1:]))
    assert bool(problems) == bad, (regions, problems)
    if bad:
        fix = re.findall(r"h(\d+): offset: ([\d.]+) GiB, size: ([\d.]+) GiB", problems[0].replace(" 0 B", " 0.0 GiB"))
        assert len(fix) == len(regions), problems[0]
        proposed = [None] * len(regions)
        for k, o, sz in fix:
            proposed[int(k)] = (int(float(o)), int(float(sz)))
        assert A.validate_arrays(fleet(proposed)) == []


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["wwid", "alias", "device", "path"]), st.text(alphabet=ALIAS_CHARS, min_size=1, max_size=20))
def test_a_run_without_root_refuses_every_raw_target_by_the_device_it_resolves_to(key, name):
    """The privileges check reads the targets as written (before they are resolved) and names
    the device each raw one resolves to; a directory target is not refused for being raw."""
    value = "/dev/" + name if key == "device" else "/srv/" + name if key == "path" else name
    entry = {key: value, "destroy_data": True, "name": "t"}
    got, errors = resolve([entry])
    ident = {"uid": 1000, "gid": 1000, "user": "fq", "become": False}
    if key == "path" or errors:
        return
    device = got[0]["device"]
    assert T.raw_device(entry) == device
    try:
        S.privileges({"targets": [entry], "path": "/nonexistent"}, ident)
    except S.StartError as exc:
        assert "target t is the raw device %s, which only root may measure" % device in str(exc), str(exc)
    else:
        raise AssertionError("a raw target passed the privileges check without root")
