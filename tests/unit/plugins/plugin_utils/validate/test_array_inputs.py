"""Array mode's inputs refused on the controller before any host is touched: each
error names the variable, the host and the closest valid value."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.array import mode as arrays
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.arrays import validate_arrays

SAN = {"initiators": [1, 2, 4], "threads": [1, 16], "modes": ["rndrd", "rndwr"], "time": 10, "warmup": 2,
       "block_size": "16K", "total_size": "1G",
       "thresholds": [{"initiators": 4, "threads": 16, "mode": "rndrd", "min_aggregate_iops": 200000, "max_p99_ms": 2},
                      {"min_fairness": 0.9}, {"min_share_pct": 50}]}
DEFAULTS = {"fleetqual_arrays": {}, "fleetqual_cache_size": "256M", "fleetqual_latency_bound_ms": 50,
            "fleetqual_targets": [], "fleetqual_test_dir": "/var/tmp/fleetqual"}


def fleet(n=4, cfg=None, **extra):
    arrays_var = {"san": SAN if cfg is None else cfg}
    hosts = {"h%d" % i: {"fleetqual_array": "san", "fleetqual_arrays": arrays_var} for i in range(1, n + 1)}
    for host, more in extra.items():
        hosts.setdefault(host, {"fleetqual_arrays": arrays_var}).update(more)
    return hosts


def check(hosts, groups=None):
    return validate_arrays(hosts, groups, DEFAULTS)


def one(errors, *words):
    hits = [e for e in errors if all(w in e for w in words)]
    assert len(hits) == 1, errors
    return hits[0]


def test_a_valid_array_passes():
    assert check(fleet()) == []
    assert check({"db1": {}}) == []          # no arrays at all


def test_unknown_array_name_is_refused_with_did_you_mean():
    hosts = fleet()
    hosts["h3"]["fleetqual_array"] = "sna"
    e = one(check(hosts), "host h3", "fleetqual_array", "'sna'")
    assert "did you mean san?" in e


def test_an_array_with_no_hosts_is_refused():
    hosts = fleet()
    for h in hosts.values():
        h["fleetqual_arrays"] = {"san": SAN, "nas": dict(SAN, initiators=[1])}
    e = one(check(hosts), "fleetqual_arrays.nas", "no targeted host joins")
    assert "fleetqual_array: nas" in e


def test_an_array_group_with_no_hosts_is_refused():
    cfg = dict(SAN, groups=["sanhost"], initiators=[1])
    hosts = {"h1": {"fleetqual_arrays": {"san": cfg}}}
    errors = check(hosts, {"h1": ["sanhosts_old", "web"]})
    one(errors, "fleetqual_arrays.san.groups[0]", "'sanhost'")
    one(errors, "fleetqual_arrays.san", "no targeted host joins")


def test_a_host_in_two_arrays_is_refused():
    hosts = fleet()
    for h in hosts.values():
        h["fleetqual_arrays"] = {"san": SAN, "nas": dict(SAN, initiators=[1], groups=["filers"])}
    hosts["h2"]["fleetqual_array"] = ["san", "nas"]
    errors = check(hosts, {"h4": ["filers"]})
    e = one(errors, "host h2", "in 2 arrays")
    assert "san (fleetqual_array)" in e and "nas (fleetqual_array)" in e
    e = one(errors, "host h4", "in 2 arrays")
    assert "nas (fleetqual_arrays.nas.groups)" in e


def test_unknown_keys_and_modes_get_did_you_mean():
    errors = check(fleet(cfg=dict(SAN, thread=[1], modes=["rndrd", "randwr"])))
    assert "did you mean threads?" in one(errors, "fleetqual_arrays.san.thread", "unknown key")
    assert "did you mean rndwr?" in one(errors, "fleetqual_arrays.san.modes[1]", "'randwr'")


def test_more_initiators_than_hosts_names_the_hosts_and_the_closest_count():
    e = one(check(fleet(n=3)), "fleetqual_arrays.san.initiators[2]")
    assert "4 initiators, but the array has 3 hosts (h1, h2, h3)" in e and "closest valid value: 3" in e


def test_array_wide_problems_name_the_array_hosts():
    e = one(check(fleet(n=6, cfg=dict(SAN, time=0))), "fleetqual_arrays.san.time")
    assert e == ("fleetqual_arrays.san.time: must be an integer >= 1, got 0; closest valid value: 1 "
                 "(array san: hosts h1, h2, h3, h4 and 2 more)")


def test_a_rule_naming_a_step_that_is_not_planned():
    rules = [{"initiators": 16, "threads": 16, "min_aggregate_iops": 1}, {"mode": "rndrw", "max_p99_ms": 2},
             {"mode": "rnderd", "min_fairness": 0.9}]
    errors = check(fleet(cfg=dict(SAN, thresholds=rules)))
    e = one(errors, "thresholds[0]", "initiators 16")
    assert "closest valid value: 4" in e and "planned: 1, 2, 4" in e
    one(errors, "thresholds[1]", "mode 'rndrw' is not a planned step")
    assert "did you mean rndrd?" in one(errors, "thresholds[2].mode")


def test_host_rule_keys_point_to_the_array_rule_keys():
    errors = check(fleet(cfg=dict(SAN, thresholds=[{"min_iops": 5, "workload": "x"}, {"min_fairness": 1.5}])))
    assert "did you mean min_aggregate_iops?" in one(errors, "thresholds[0].min_iops")
    one(errors, "thresholds[0].workload", "initiators, threads and mode")
    one(errors, "thresholds[1].min_fairness", "closest valid value: 1")


def test_steps_that_exceed_a_device_target_or_the_array_capacity():
    hosts = fleet(cfg=dict(SAN, target="lun", capacity="3G"))
    for i, h in enumerate(hosts.values()):
        h["fleetqual_targets"] = [{"name": "lun", "device": "/dev/sdb", "destroy_data": True,
                                   "size": "512M" if i == 1 else "2G"}]
    errors = check(hosts)
    e = one(errors, "host h2", "exceeds target lun's size 512.0 MiB")
    assert "closest valid value: total_size: 512.0 MiB" in e
    e = one(errors, "fleetqual_arrays.san.capacity", "4 hosts x 1.0 GiB")
    assert "closest valid value: total_size: 768.0 MiB" in e


def test_an_unknown_target_is_named_per_host():
    hosts = fleet(cfg=dict(SAN, target="lum"))
    for h in hosts.values():
        h["fleetqual_targets"] = [{"name": "lun", "device": "/dev/sdb", "destroy_data": True}]
    errors = check(hosts)
    assert len(errors) == 4 and "did you mean lun?" in one(errors, "host h1", "'lum'")


def test_a_host_with_several_targets_must_name_the_arrays():
    """Without ``target`` an array measures the host's only target; a host with two is
    refused (before any host is touched) naming them, the others measure their one."""
    hosts = fleet()
    hosts["h1"]["fleetqual_targets"] = [{"name": "lun0", "wwid": "3600a0001", "destroy_data": True},
                                        {"name": "data", "path": "/srv/data"}]
    hosts["h2"]["fleetqual_targets"] = [{"name": "lun0", "wwid": "3600a0002", "destroy_data": True}]
    errors = check(hosts)
    assert errors == ["host h1: fleetqual_arrays.san.target: this host has 2 targets (lun0, data); name one "
                      "(closest valid value: target: lun0)"], errors


def test_definitions_that_differ_between_hosts():
    hosts = fleet()
    hosts["h3"]["fleetqual_arrays"] = {"san": dict(SAN, time=30)}
    one(check(hosts), "fleetqual_arrays.san", "differently on hosts h1 and h3", "key time: 10 vs 30")


def test_bounded_rule_needs_a_bound_and_a_mode_only_selector():
    rules = [{"mode": "rndrd", "initiators": 2, "min_bounded_iops": 1000}]
    one(check(fleet(cfg=dict(SAN, thresholds=rules))), "select it by mode only")
    errors = validate_arrays(fleet(cfg=dict(SAN, thresholds=[{"min_bounded_iops": 1}])), None,
                             dict(DEFAULTS, fleetqual_latency_bound_ms=None))
    one(errors, "min_bounded_iops", "needs a latency bound")


@given(st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
       st.integers(1, 10), st.integers(1, 64), st.sampled_from(["rndrd", "rndwr", "rndrw"]))
def test_a_rule_is_refused_exactly_when_it_matches_no_planned_step(inits, threads, want_i, want_t, mode):
    cfg = {"initiators": inits, "threads": threads, "modes": ["rndrd", "rndwr"], "total_size": "64M",
           "thresholds": [{"initiators": want_i, "threads": want_t, "mode": mode, "min_aggregate_iops": 1}]}
    errors = check(fleet(n=8, cfg=cfg))
    steps = arrays.plan_steps(cfg, 8)
    planned = any(arrays.array_rule_matches(cfg["thresholds"][0], s) for s in steps)
    assert planned == (want_i in inits and want_t in threads and mode != "rndrw")
    assert (errors == []) == planned, errors


@pytest.mark.parametrize("key,value,words", [
    ("time", 0, "must be an integer >= 1"), ("block_size", "16Q", "block_size"), ("direct", "yes", "true or false"),
    ("iodepth", 8, "needs engine: io_uring"), ("threads", [1, 1], "listed twice"), ("rw_ratio", -1, "number > 0"),
])
def test_bad_values_name_the_key(key, value, words):
    one(check(fleet(cfg=dict(SAN, **{key: value}))), "fleetqual_arrays.san.%s" % key, words)


@pytest.mark.slow
def test_the_validation_play_refuses_a_host_in_two_arrays(tmp_path):
    """The role's validation tasks as the playbook runs them, on the controller: h3 names
    san and is in the group nas lists, h5 has two targets and san names none; nothing is
    touched (the hosts do not even exist)."""
    import os
    import subprocess
    import sys

    import yaml
    root = unitpaths.ROOT
    arrays_var = {"san": {"initiators": [1, 2], "threads": [1], "modes": ["rndrd"], "total_size": "64M"},
                  "nas": {"initiators": [1], "groups": ["filers"], "total_size": "64M"}}
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"fleetqual_arrays": arrays_var},
        "children": {"sanhosts": {"vars": {"fleetqual_array": "san"},
                                  "hosts": {"h1": {"ansible_host": "192.0.2.1"}, "h3": {"ansible_host": "192.0.2.3"},
                                            "h5": {"ansible_host": "192.0.2.5", "fleetqual_targets": [
                                                {"name": "data", "path": "/srv/data"},
                                                {"name": "logs", "path": "/srv/logs"}]}}},
                     "filers": {"hosts": {"h3": {}, "f1": {"ansible_host": "192.0.2.9"}}}}}}))
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "fleetqual.storage.qualify", "tasks_from": "validate.yml"},
         "vars": {"fleetqual_validate_hosts": "{{ groups['all'] }}"}}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml", "pb.yml"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path), check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert ("host h3: in 2 arrays, nas (fleetqual_arrays.nas.groups) and san (fleetqual_array); a host belongs to "
            "one array") in text, text
    assert "host h5: fleetqual_arrays.san.target: this host has 2 targets (data, logs); name one" in text, text
    assert "host h1" not in text and "host f1" not in text


# --------------------------------------------------------------------------- fleetqual_serial

class _Play:
    hosts, order = "all", None

    def __init__(self, serial):
        self.serial = serial


class _Inventory:
    def __init__(self, hosts):
        self.hosts = hosts

    def get_hosts(self, pattern, order=None):
        return list(self.hosts)


_SERIALS = st.one_of(st.integers(-1, 9), st.integers(0, 120).map("{}%".format))


@settings(deadline=None)
@given(n=st.integers(1, 12), serial=st.lists(_SERIALS, min_size=1, max_size=4))
def test_serial_batches_are_ansibles(n, serial):
    """The batches serial_batches computes are the ones Ansible's executor cuts (a count, a
    percentage, a list of them), so the check below refuses exactly the splits that happen."""
    from types import SimpleNamespace

    from ansible.executor.playbook_executor import PlaybookExecutor
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.arrays import serial_batches
    hosts = ["h%d" % i for i in range(n)]
    want = PlaybookExecutor._get_serialized_batches(SimpleNamespace(_inventory=_Inventory(hosts)), _Play(serial))
    assert serial_batches(hosts, serial) == want
    if len(serial) == 1:
        assert serial_batches(hosts, serial[0]) == want
    assert serial_batches(hosts, None) == serial_batches(hosts, "100%") == [hosts]


def test_an_array_split_across_serial_batches_is_refused():
    hosts = fleet(4, db1={}, db2={})         # order: h1, h2, h3, h4, db1, db2
    err = one(validate_arrays(hosts, None, DEFAULTS, serial=3), "fleetqual_arrays.san")
    assert err.startswith("fleetqual_arrays.san: its hosts h1, h2, h3, h4 would be in 2 of the play's 2 batches "
                          "(fleetqual_serial: 3 puts h1, h2, h3 in batch 1; h4 in batch 2)"), err
    assert "miss every step" in err and err.endswith("closest valid value: fleetqual_serial: 4")
    # from the defaults (the validation play passes the playbook's fleetqual_serial there)
    assert validate_arrays(hosts, None, dict(DEFAULTS, fleetqual_serial="50%")) == [err.replace(
        "fleetqual_serial: 3 puts", "fleetqual_serial: '50%' puts")]
    for fine in (None, 4, "70%", "100%", [4, 2], 0):
        assert validate_arrays(hosts, None, DEFAULTS, serial=fine) == [], fine
    # the batches are cut in the hosts' order: db1 and db2 first, then the array in one batch
    again = {h: hosts[h] for h in ("db1", "db2", "h1", "h2", "h3", "h4")}
    assert validate_arrays(again, None, DEFAULTS, serial=[2, 4]) == []
    err = one(validate_arrays(again, None, DEFAULTS, serial=3), "san")
    assert "h1 in batch 1; h2, h3, h4 in batch 2" in err and err.endswith("closest valid value: fleetqual_serial: 6")


def test_the_validation_play_refuses_an_array_split_by_fleetqual_serial(tmp_path):
    """-e fleetqual_serial=2 on three hosts of one array (which do not exist): refused by the
    role's validation tasks on the controller, naming the array, its hosts and the variable."""
    import os
    import subprocess
    import sys

    import yaml
    root = unitpaths.ROOT
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"fleetqual_arrays": {"san": {"initiators": [1, 3], "threads": [1], "modes": ["rndrd"],
                                              "total_size": "64M"}}, "fleetqual_array": "san"},
        "hosts": {"h1": {"ansible_host": "192.0.2.1"}, "h2": {"ansible_host": "192.0.2.2"},
                  "h3": {"ansible_host": "192.0.2.3"}}}}))
    (tmp_path / "pb.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "fleetqual.storage.qualify", "tasks_from": "validate.yml"},
         "vars": {"fleetqual_validate_hosts": "{{ groups['all'] }}"}}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "inv.yml", "pb.yml"]
    out = subprocess.run(cmd + ["-e", "fleetqual_serial=2"], env=env, capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path), check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert ("fleetqual_arrays.san: its hosts h1, h2, h3 would be in 2 of the play's 2 batches (fleetqual_serial: '2' puts "
            "h1, h2 in batch 1; h3 in batch 2)") in text, text
    assert "closest valid value: fleetqual_serial: 3" in text
    ok = subprocess.run(cmd + ["-e", "fleetqual_serial=3"], env=env, capture_output=True, text=True, timeout=300,
                        cwd=str(tmp_path), check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.floats(-5, 40, allow_nan=False), st.integers(-5, 40), st.text(max_size=3), st.booleans()))
def test_a_step_gap_is_a_number_of_seconds_of_at_least_one(gap):
    """``step_gap_s`` (the time a host has to save one step and start the next) is refused below
    1 s or when not a number, with the closest valid value, which is accepted."""
    errors = check(fleet(cfg=dict(SAN, step_gap_s=gap)))
    ok = isinstance(gap, (int, float)) and not isinstance(gap, bool) and gap >= 1
    assert (errors == []) == ok, errors
    if not ok:
        e = one(errors, "fleetqual_arrays.san.step_gap_s", "closest valid value: ")
        closest = e.split("closest valid value: ")[1].split(" ")[0]
        assert check(fleet(cfg=dict(SAN, step_gap_s=float(closest)))) == []
