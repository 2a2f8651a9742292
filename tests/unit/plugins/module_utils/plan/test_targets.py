"""fleetqual_targets: validation before any host is contacted, and the plan
expanded over a host's targets, one after the other."""
import os
import subprocess
import sys

import pytest
import yaml
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as T
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import inputs as V

ROOT = unitpaths.ROOT
COLLECTIONS = os.path.join(ROOT, "build", "collections")
GIB = 1024 ** 3


@pytest.fixture(scope="module")
def profiles():
    with open(os.path.join(ROOT, "roles", "qualify", "defaults", "main", "profiles.yml")) as fh:
        return yaml.safe_load(fh)["fleetqual_profiles"]


OVER = [{"workload": "over_cache", "mode": "rndrd", "threads": 4, "working_set": "over_cache"},
        {"workload": "cache", "mode": "rndwr", "threads": 1, "working_set": "cache"}]


def base_plan():
    return P.plan(OVER, cache_size="256M", mem_total_mb=4096)


def errs(targets, host="db01"):
    return V.resolve_targets(targets, host=host)[1]


def expand(plan, targets, **kw):
    resolved, problems = V.resolve_targets(targets, test_dir=kw.pop("test_dir", None))
    assert problems == []
    return P.plan_targets(plan, resolved, **kw)


# --------------------------------------------------------------------------- validation

def test_valid_targets_resolve_with_derived_unique_names():
    t, e = V.resolve_targets([{"path": "/data1/fq"}, {"path": "/data2/fq/"},
                              {"device": "/dev/disk/by-id/nvme-X_S1", "destroy_data": True, "size": "2G",
                               "serial": "S1"},
                              {"name": "fq", "path": "/srv/fq"}])
    assert e == []
    assert [x["name"] for x in t] == ["data1-fq", "data2-fq", "nvme-X_S1", "fq"]
    assert t[1]["path"] == "/data2/fq"
    assert t[2] == {"name": "nvme-X_S1", "kind": "device", "device": "/dev/disk/by-id/nvme-X_S1",
                    "destroy_data": True, "serial": "S1", "size": 2 * GIB, "shorthand": False}


def test_empty_targets_are_the_test_dir_shorthand():
    assert V.resolve_targets([], test_dir="/var/tmp/fleetqual") == (
        [{"name": "test_dir", "kind": "path", "path": "/var/tmp/fleetqual", "shorthand": True}], [])


def test_device_needs_literal_true_destroy_data_and_says_there_is_no_global_switch():
    for value, shown in (("yes", "string 'yes'"), (1, "integer 1"), (False, "boolean False")):
        (e,) = errs([{"device": "/dev/sdb", "destroy_data": value}])
        assert e == ("host db01: fleetqual_targets[0].destroy_data: a raw device target destroys the device's "
                     "contents and must say destroy_data: true on that target (there is no global switch), got "
                     + shown)
    (e,) = errs([{"device": "/dev/sdb"}])
    assert e.endswith("got missing")


@pytest.mark.parametrize("target, message", [
    ({"device": "/dev/sdb", "destroy_data": True, "destory": 1},
     "host db01: fleetqual_targets[0].destory: unknown key (did you mean destroy_data?); known: name, path, device, "
     "wwid, alias, destroy_data, serial, size, offset, expected_paths"),
    ({"path": "/a", "device": "/dev/sdb"},
     "host db01: fleetqual_targets[0]: give exactly one of path (a directory on a filesystem), device (a whole "
     "block device), wwid or alias (a SAN LUN's multipath map), got path and device"),
    ({"name": "x"}, "host db01: fleetqual_targets[0]: give exactly one of path (a directory on a filesystem), "
                    "device (a whole block device), wwid or alias (a SAN LUN's multipath map), got none of them"),
    ({"device": "dev/sdb", "destroy_data": True},
     "host db01: fleetqual_targets[0].device: must be an absolute path under /dev, got 'dev/sdb'; did you mean "
     "/dev/sdb?"),
    ({"device": "/mnt/sdb", "destroy_data": True},
     "host db01: fleetqual_targets[0].device: must be a block device under /dev, got '/mnt/sdb'; did you mean "
     "/dev/sdb?"),
    ({"device": "/dev/sdb", "destroy_data": True, "size": "1000"},
     "host db01: fleetqual_targets[0].size: must be a multiple of 512 bytes greater than 0 (the part of the device "
     "the workloads use), got '1000'; closest: 1K"),
    ({"device": "/dev/sdb", "destroy_data": True, "size": "12X"},
     "host db01: fleetqual_targets[0].size: unknown size suffix 'X' in '12X': use K, M, G, T (or KiB, MiB, GiB, "
     "TiB, B); multiples are binary (1K = 1024)"),
    ({"device": "/dev/sdb", "destroy_data": True, "serial": ""},
     "host db01: fleetqual_targets[0].serial: must be the drive's serial number (a non-empty string), got string ''"),
    ({"path": "data"}, "host db01: fleetqual_targets[0].path: must be an absolute path, got 'data'"),
    ({"path": "/etc"}, "host db01: fleetqual_targets[0].path: '/etc' is a system directory; use a directory of its "
                       "own such as /var/tmp/fleetqual"),
    ({"path": "/data1", "destroy_data": "yes"},
     "host db01: fleetqual_targets[0].destroy_data: true or absent on a directory target (it opts the filesystem in "
     "to the power-cut test), got 'yes'"),
    ({"path": "/data1", "size": "1G"},
     "host db01: fleetqual_targets[0].size: only for a device target; a directory target is sized by the "
     "profile (remove size, or use device: instead of path:)"),
    ({"path": "/data1", "name": "data 1"},
     "host db01: fleetqual_targets[0].name: must be letters, digits, '_', '.' or '-' (it names the report's rows and "
     "files), got 'data 1'; for example data_1"),
])
def test_bad_target_messages_name_host_variable_index_and_closest_value(target, message):
    assert errs([target]) == [message]


def test_duplicate_names_and_same_target_twice():
    e = errs([{"path": "/data1", "name": "a"}, {"path": "/data1/", "name": "a"},
              {"device": "/dev/sdb", "destroy_data": True, "serial": "S1"},
              {"device": "/dev/disk/by-id/x", "destroy_data": True, "serial": "S1"}])
    assert e == [
        "host db01: fleetqual_targets[1].name: duplicate target name 'a' (also fleetqual_targets[0]); for example a-2",
        "host db01: fleetqual_targets[1]: the same path /data1 as fleetqual_targets[0]; each target must be a "
        "different directory",
        "host db01: fleetqual_targets[3]: the same serial S1 as fleetqual_targets[2]; each target must be a "
        "different drive"]


def test_not_a_list():
    assert errs({"path": "/a"}) == ["host db01: fleetqual_targets: must be a list of targets ({path: ...} or "
                                    "{device: ..., destroy_data: true}), got mapping"]


def test_validate_inputs_checks_targets_and_device_sizes_against_the_plan(profiles):
    inputs = {"fleetqual_profile": "standard", "fleetqual_profiles": profiles, "fleetqual_cache_size": "256M",
              "fleetqual_targets": [{"path": "/data1/fq"}]}
    assert V.validate_inputs(inputs) == []
    inputs["fleetqual_targets"] = [{"device": "/dev/sdb", "destroy_data": True, "size": "512M"}]
    e = V.validate_inputs(inputs, host="db01")
    assert e and all(x.startswith("host db01: fleetqual_targets[0] (sdb): size: 512.0 MiB is smaller than workload ")
                     for x in e)
    assert "give a larger size: (at least 1G) or a smaller fleetqual_cache_size" in e[0]
    inputs["fleetqual_targets"] = [{"device": "/dev/sdb"}]
    (e,) = V.validate_inputs(inputs)
    assert e.startswith("fleetqual_targets[0].destroy_data: a raw device target destroys")
    inputs["fleetqual_targets"] = []
    assert V.validate_inputs(inputs) == []


# --------------------------------------------------------------------------- plan per target

def test_shorthand_keeps_the_plan_unchanged():
    plan = base_plan()
    assert expand(plan, [], test_dir="/var/tmp/fleetqual") == plan
    assert expand(plan, None, test_dir="/var/tmp/fleetqual") == plan
    assert all("target" not in s for s in plan)
    assert T.target_args(plan[0]) == {} and T.workload_key(plan[0]) == plan[0]["id"]


def test_two_path_targets_run_the_plan_one_after_the_other():
    plan = base_plan()
    out = expand(plan, [{"path": "/data1/fq"}, {"name": "d2", "path": "/data2/fq"}])
    assert [(s["key"], s["index"], s["of"]) for s in out] == [
        ("over_cache-rndrd-t4@fq", 1, 4), ("cache-rndwr-t1@fq", 2, 4),
        ("over_cache-rndrd-t4@d2", 3, 4), ("cache-rndwr-t1@d2", 4, 4)]
    for s, orig in zip(out, plan + plan):
        assert s["id"] == orig["id"] and s["total_size"] == orig["total_size"] and s["dataset"] == orig["dataset"]
        assert s["target_kind"] == "path" and "target_device" not in s
    assert T.target_args(out[2]) == {"dir": "/data2/fq/%s" % plan[0]["dataset"]}
    assert P.module_args(out[0]) == P.module_args(plan[0])
    assert summary.required_space([s for s in out if s["target"] == "d2"]) == summary.required_space(plan)
    assert summary.workload_line(out[2]).startswith("[3/4] over_cache-rndrd-t4 on d2: rndrd, 4 threads")


def test_device_target_sizes_from_its_size_and_uses_offsets_not_files():
    plan = base_plan()
    out = expand(plan, [{"device": "/dev/disk/by-id/nvme-A_S1", "destroy_data": True, "size": "8G",
                         "serial": "S1"}])
    over, cache = out
    assert over["target_kind"] == "device" and over["target_device"] == "/dev/disk/by-id/nvme-A_S1"
    assert over["target_serial"] == "S1" and "target_path" not in over
    # over_cache on a device: the whole region (size:), not 4 x cache
    assert over["total_size"] == over["device_size"] == 8 * GIB
    assert over["sizing"] == "size: 8.0 GiB -> 8.0 GiB"
    # a cache working set keeps its size (half the cache) from offset 0
    assert cache["device_size"] == cache["total_size"] == 128 * 1024 ** 2
    assert over["dataset"] == "nvme-A_S1@0+8G" and cache["dataset"] == "nvme-A_S1@0+128M"
    assert over["file_num"] == 1 and over["direct"] is True
    assert T.target_args(over) == {"device": "/dev/disk/by-id/nvme-A_S1", "size": 8 * GIB}
    args = P.module_args(over)
    assert "total_size" not in args and "file_num" not in args and args["mode"] == "rndrd"
    assert summary.required_space(out) == 0


def test_device_capacity_comes_from_the_hosts_facts():
    plan = base_plan()
    t = [{"device": "/dev/disk/by-id/nvme-A_S1", "destroy_data": True}]
    drives_result = {"drives": [{"name": "nvme0n1", "path": "/dev/nvme0n1", "id_path": "/dev/disk/by-id/nvme-A_S1",
                                 "by_id": ["/dev/disk/by-id/nvme-A_S1"], "size_bytes": 4 * GIB + 4096}]}
    over = expand(plan, t, capacities=drives_result)[0]
    # the whole device, in whole blocks of the workload
    assert over["device_size"] == 4 * GIB and over["sizing"] == "the whole device (4.0 GiB) -> 4.0 GiB"
    # unknown capacity: iobench's --size 0, the whole device, said in the sizing
    over = expand(plan, t)[0]
    assert over["device_size"] == 0 and over["total_size"] is None
    assert over["sizing"].startswith("the whole device /dev/disk/by-id/nvme-A_S1 (capacity not known to the plan")
    assert summary.workload_line(over).endswith("device /dev/disk/by-id/nvme-A_S1, the whole device (over_cache), "
                                                "16.0 KiB blocks, "
                                                "O_DIRECT, 60 s + 5 s warmup")


def test_device_too_small_or_size_beyond_capacity_is_refused():
    plan = base_plan()
    with pytest.raises(P.PlanError) as exc:
        expand(plan, [{"device": "/dev/sdb", "destroy_data": True}], capacities={"/dev/sdb": 512 * 1024 ** 2})
    assert exc.value.errors == [
        "fleetqual_targets[0] (sdb): the whole device (512.0 MiB) is smaller than workload over_cache-rndrd-t4's "
        "over_cache working set 1.0 GiB (4 x cache 256.0 MiB -> 1.0 GiB); give a larger size: (at least 1G) or a "
        "smaller fleetqual_cache_size"]
    with pytest.raises(P.PlanError) as exc:
        expand(plan, [{"device": "/dev/sdb", "destroy_data": True, "size": "8G"}],
               capacities={"/dev/sdb": 4 * GIB}, host="db01")
    assert exc.value.errors == ["host db01: fleetqual_targets[0] (sdb).size: 8.0 GiB is larger than the device "
                                "(4.0 GiB); at most 4G"]


def test_buffered_workload_on_a_device_is_measured_with_o_direct_and_says_so():
    plan = P.plan([{"workload": "log", "mode": "seqwr", "total_size": "16M", "direct": False}])
    (s,) = expand(plan, [{"device": "/dev/sdb", "destroy_data": True}])
    assert s["direct"] is True
    assert s["sizing"] == ("explicit total_size 16.0 MiB, the first 16.0 MiB of /dev/sdb; O_DIRECT (a block device "
                           "is always measured with O_DIRECT)")


@pytest.mark.slow
def test_the_validation_play_refuses_a_device_without_the_opt_in(tmp_path):
    """The role's validation tasks (argument spec, then validate_inputs) as the playbook runs
    them, on the controller: db01's device target says destroy_data: "yes", db02 is fine."""
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {"hosts": {
        "db01": {"ansible_connection": "local",
                 "fleetqual_targets": [{"path": "/data1/fq"}, {"device": "/dev/sdb", "destroy_data": "yes"}]},
        "db02": {"ansible_connection": "local",
                 "fleetqual_targets": [{"path": "/data1/fq"},
                                       {"device": "/dev/disk/by-id/nvme-X", "destroy_data": True, "size": "64G"}]},
    }}}))
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "fleetqual.storage.qualify", "tasks_from": "validate.yml"},
         "vars": {"fleetqual_validate_hosts": "{{ groups['all'] }}"}}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false")
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml",
                          "pb.yml"], env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert ("db01: fleetqual_targets[1].destroy_data: a raw device target destroys the device's contents and must "
            "say destroy_data: true on that target (there is no global switch), got string 'yes'") in text
    assert "db02: fleetqual_targets" not in text


def test_target_logic_lives_in_one_module():
    """resolve_targets, check_test_dir, plan_targets, target_args, workload_key and PlanError
    are defined in module_utils/plan/targets.py alone; the plan (profiles.py) and the
    controller's validation (validate/inputs.py) import them from there."""
    import ast
    names = {"resolve_targets", "check_test_dir", "plan_targets", "target_args", "workload_key", "PlanError"}
    where = {}
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "plugins")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                for node in tree.body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                        where.setdefault(node.name, []).append(os.path.relpath(path, ROOT))
    assert where == {n: ["plugins/module_utils/plan/targets.py"] for n in names}
    assert P.PlanError is T.PlanError and "plan_targets" in P.__dict__ and "resolve_targets" in V.__dict__


def test_a_workload_iobench_refuses_on_a_device_is_refused_before_any_host():
    """dbpattern needs a directory (its redo log): refused on a device target, naming the
    target, the workload and the option, not mid-run by iobench --device."""
    plan = P.plan([{"workload": "db", "mode": "dbpattern", "working_set": "cache"},
                   {"workload": "r", "mode": "rndrd", "working_set": "cache"}], cache_size="64M")
    resolved, problems = V.resolve_targets([{"device": "/dev/disk/by-id/nvme-A_S1", "destroy_data": True}])
    assert problems == []
    with pytest.raises(P.PlanError) as exc:
        P.plan_targets(plan, resolved, capacities={"/dev/disk/by-id/nvme-A_S1": 8 * GIB}, host="db01")
    assert exc.value.errors == ["host db01: fleetqual_targets[0] (nvme-A_S1): workload db-dbpattern-t1 on a device "
                                "target: mode dbpattern needs a directory (its log and data files), not a device"]


def test_an_explicit_working_set_off_the_sector_is_refused_on_a_device():
    """Found by tests/unit/plugins/module_utils/plan/test_option_space.py: total_size 1M + 1 on a device target passed
    the controller and was refused by the module on the host (--size needs 512-byte multiples)."""
    plan = P.plan([{"workload": "w", "mode": "rndrd", "total_size": (1 << 20) + 1}])
    resolved, _problems = V.resolve_targets([{"device": "/dev/disk/by-id/nvme-A_S1", "destroy_data": True}])
    with pytest.raises(P.PlanError) as exc:
        P.plan_targets(plan, resolved, capacities={"/dev/disk/by-id/nvme-A_S1": 8 * GIB})
    assert exc.value.errors == ["fleetqual_targets[0] (nvme-A_S1): workload w-rndrd-t1's working set 1.0 MiB "
                                "(1048577 bytes) is not a multiple of 512 bytes, which a device region needs; "
                                "closest: total_size: 1M"]


def test_the_cleanup_hands_every_device_target_to_test_dir():
    """The second module run (module_utils/host/start.py cleanup) gives bench_dir's removal of
    fleetqual_test_dir the devices of the host's device targets (a job killed during the run
    has its regions zeroed by the same run), from the resolved targets of the host's own plan;
    each directory target is removed with its own data sets; none without targets."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as H
    resolved, errors = V.resolve_targets([{"path": "/data1/fq"}, {"device": "/dev/sdb", "destroy_data": True},
                                          {"name": "nv", "device": "/dev/nvme0n1", "destroy_data": True}])
    assert errors == []
    plan = P.plan_targets(P.plan([{"workload": "w", "mode": "rndrd", "working_set": "cache"}], "64M"), resolved,
                          capacities={"/dev/sdb": 8 * GIB, "/dev/nvme0n1": 8 * GIB})
    targets = H.resolved_targets(plan)
    assert [t["name"] for t in targets] == [t["name"] for t in resolved]
    removal = H.to_remove("/var/tmp/fq", H.datasets_of(H.shorthand(plan)), targets, plan)
    assert removal[0] == ("/var/tmp/fq", [], ["/dev/sdb", "/dev/nvme0n1"])
    assert removal[1:] == [("/data1/fq", [w["dataset"] for w in plan if w["target"] == resolved[0]["name"]], [])]
    short = P.plan([{"workload": "w", "mode": "rndrd", "working_set": "cache"}], "64M")
    assert H.to_remove("/var/tmp/fq", H.datasets_of(short), H.resolved_targets(short), short) == [
        ("/var/tmp/fq", [short[0]["dataset"]], [])]
