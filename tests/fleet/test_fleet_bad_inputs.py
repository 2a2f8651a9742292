"""Bad inventory values over the fleet inventory stop the play before any host is touched.

Each case puts ONE wrong value into group_vars (group ``db``) or into one host's host_vars
of a two-host fleet (fq11, fq12, both with a live sshd). Each must:

* make ansible-playbook exit non-zero in the validation play,
* print a message naming the variable (and the host, for host_vars),
* open no SSH session: neither sshd logged an "Accepted publickey" during the run,
* create nothing: no binary directory, no test directory, no results.

16 cases (tests/integration covers the other kinds on localhost via extra vars: unknown
profile name, unparsable fleetqual_cache_size, relative test dir, misspelt threshold key):

 1. negative fleetqual_cache_size (group_vars)
 2. unparsable size in a fleetqual_matrix entry (host_vars)
 3. negative size in a fleetqual_matrix entry (host_vars)
 4. 0 threads in a fleetqual_matrix entry (host_vars)
 5. unknown mode in a fleetqual_matrix entry (group_vars)
 6. unknown profile on one host only (host_vars; the other host is fine)
 7. a threshold on an unknown metric limit (``min_p99_ms``; group_vars)
 8. a negative threshold limit (group_vars)
 9. a test dir with a ``..`` component (host_vars)
10. a JMESPath threshold rule that does not parse (group_vars)
11. a JMESPath ``metric`` that parses but names a metric no record has
    (``metrics.no_such_metric``; group_vars; run against dead addresses, so it costs seconds)
12-16. the power-cut test's refusals (docs/durability.md "Safety"): no power action, the
    controller itself (``ansible_connection: local``), a profile with production safety, a
    target not opted in, a system top directory
"""
import os

import pytest

from fleetrun import run_playbook, tree_snapshot

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


def wl(**kw):
    spec = {"workload": "bad", "mode": "rndrd", "threads": 1, "file_num": 1, "total_size": "4M",
            "block_size": "16K", "direct": True, "time": 1, "warmup": 0}
    spec.update(kw)
    return [spec]


# a host the power-cut test would cut, with everything in place (each durability case breaks one thing)
DURABLE = {"fleetqual_profile": "durability",
           "fleetqual_power": {"method": "command", "off": ["true"], "on": ["true"]},
           "fleetqual_targets": [{"device": "/dev/disk/by-id/nvme-X", "destroy_data": True}]}

# (id, where: 'group' | host name, variables, text the message must contain)
CASES = [
    ("negative-cache-size", "group", {"fleetqual_cache_size": "-1G"}, "fleetqual_cache_size: size must not be negative"),
    ("unparsable-matrix-size", "fq12", {"fleetqual_matrix": wl(total_size="lots")}, "fleetqual_matrix[0].total_size: cannot parse size 'lots'"),
    ("negative-matrix-size", "fq12", {"fleetqual_matrix": wl(total_size=-8)}, "fleetqual_matrix[0].total_size: size must not be negative"),
    ("zero-threads", "fq11", {"fleetqual_matrix": wl(threads=0)}, "fleetqual_matrix[0].threads: must be an integer between 1 and 1024, got 0"),
    ("unknown-mode", "group", {"fleetqual_matrix": wl(mode="rndread")}, "fleetqual_matrix[0].mode: unknown mode 'rndread'"),
    ("unknown-profile-one-host", "fq12", {"fleetqual_profile": "qiuck"}, "fleetqual_profile: unknown profile 'qiuck'"),
    ("unknown-metric", "group", {"fleetqual_thresholds": [{"min_p99_ms": 3}]}, "fleetqual_thresholds[0].min_p99_ms: unknown key"),
    ("negative-limit", "group", {"fleetqual_thresholds": [{"workload": "cache", "min_iops": -5}]}, "fleetqual_thresholds[0].min_iops: must not be negative"),
    ("dotdot-test-dir", "fq11", {"fleetqual_test_dir": "/var/tmp/../etc/fleetqual"}, "fleetqual_test_dir: must not contain '..' components"),
    ("jmespath-parse", "group", {"fleetqual_thresholds": [{"metric": "metrics.iops[", "min": 1}]},
     "fleetqual_thresholds[0].metric: JMESPath 'metrics.iops[' does not parse"),
    # the power-cut test's refusals (docs/durability.md "Safety"), one each
    ("durability-no-power", "fq12", dict(DURABLE, fleetqual_power={}),
     "host fq12: fleetqual_power: the durability test cuts this host's power and needs a power action"),
    ("durability-the-controller", "fq11", dict(DURABLE, ansible_connection="local"),
     "host fq11: ansible_host: this host is the controller itself"),
    ("durability-production", "group", dict(DURABLE, fleetqual_profile="burnin",
                                            fleetqual_profile_safety={"burnin": {"impact": {"ioprio": "idle"}}}),
     "fleetqual_profile: profile burnin runs on production hosts"),
    ("durability-not-opted-in", "group", dict(DURABLE, fleetqual_targets=[{"device": "/dev/disk/by-id/nvme-X"}]),
     "fleetqual_targets[0].destroy_data"),
    ("durability-system-dir", "group", dict(DURABLE, fleetqual_targets=[{"path": "/var/tmp", "destroy_data": True}]),
     "fleetqual_targets[0].path: /var/tmp is a top directory of the system's own filesystem"),
]


@pytest.fixture(scope="module")
def pair(fleet):
    return {"fq11": fleet.host(11), "fq12": fleet.host(12)}


def run_case(fleet, pair, tmp_path, where, variables):
    hosts = [{"name": n, "inst": inst, "vars": dict(variables) if where == n else {}} for n, inst in pair.items()]
    inv = fleet.inventory(str(tmp_path / "inventory"), hosts,
                          group_vars={"db": variables} if where == "group" else None,
                          dirs_root=str(tmp_path / "hostdirs"))
    before = {n: inst.accepted_logins() for n, inst in pair.items()}
    run = run_playbook(fleet, inv, str(tmp_path), "bad", timeout=180)
    run.new_logins = {n: inst.accepted_logins() - before[n] for n, inst in pair.items()}
    return run


@pytest.mark.parametrize("where, variables, text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_value_stops_before_any_host_is_touched(fleet, pair, tmp_path, where, variables, text):
    run = run_case(fleet, pair, tmp_path, where, variables)
    assert run.rc != 0, run.out[-3000:]
    assert text in run.out, run.out[-3000:]
    if where != "group":
        assert "%s: %s" % (where, text.split(":")[0]) in run.out      # the message names the host
    # it stopped in the validation play: no SSH login, no task ran on a fleet host
    assert run.new_logins == {"fq11": 0, "fq12": 0}, run.new_logins
    assert "Gathering Facts" not in run.out and "PLAY [Qualify storage]" not in run.out
    assert tree_snapshot(str(tmp_path / "hostdirs")) == {}
    assert not os.path.exists(os.path.join(str(tmp_path), "results", "bad"))


def test_jmespath_on_an_unknown_metric_is_refused(fleet, tmp_path):
    # on dead addresses: if validation lets it through, the run ends at once (unreachable)
    # instead of qualifying two hosts for nothing, and the message is not the validation one
    addr, port = fleet.dead_address()
    hosts = [{"name": n, "addr": addr, "port": port} for n in ("fq11", "fq12")]
    inv = fleet.inventory(str(tmp_path / "inventory"), hosts,
                          group_vars={"db": {"fleetqual_thresholds": [{"metric": "metrics.no_such_metric", "min": 1}]}})
    run = run_playbook(fleet, inv, str(tmp_path), "bad", timeout=180)
    assert run.rc != 0 and "fleetqual_thresholds[0].metric" in run.out and "no_such_metric" in run.out
    assert "PLAY [Qualify storage]" not in run.out
