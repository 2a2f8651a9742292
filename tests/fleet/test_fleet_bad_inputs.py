"""Bad inventory values over the fleet inventory stop the play before any host is touched.

Each case puts ONE wrong value into the group_vars of a group of its own or into the
host_vars of a host of its own; all the cases are hosts of ONE inventory run at once (each
a name of its own on one of two live sshd instances, fq11 and fq12), with a host that is
fine beside them, and one ``ansible-playbook -v`` run (the validation gathers every host's
problems before any host is contacted). Each must:

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
 6. unknown profile on one host only (host_vars; the other hosts are fine)
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


def case_host(cid, where):
    """The inventory host of a case: named after the case (and the host it stood for)."""
    return "%s-%s" % ("grp" if where == "group" else where, cid)


@pytest.fixture(scope="module")
def batch(fleet, tmp_path_factory):
    """Every case in one inventory, one run: ``(run, new logins per sshd, base)``."""
    base = tmp_path_factory.mktemp("bad-batch")
    insts = {"fq11": fleet.host(11), "fq12": fleet.host(12)}
    hosts = [{"name": "fine", "inst": insts["fq11"]}]
    group_vars = {}
    for i, (cid, where, variables, _text) in enumerate(CASES):
        name = case_host(cid, where)
        inst = insts.get(where) or insts[("fq11", "fq12")[i % 2]]
        if where == "group":
            group = "g_" + cid.replace("-", "_")
            hosts.append({"name": name, "inst": inst, "group": group})
            group_vars[group] = dict(variables)
        else:
            hosts.append({"name": name, "inst": inst, "vars": dict(variables)})
    inv = fleet.inventory(str(base / "inventory"), hosts, group_vars=group_vars, dirs_root=str(base / "hostdirs"))
    before = {n: inst.accepted_logins() for n, inst in insts.items()}
    run = run_playbook(fleet, inv, str(base), "bad", args=["-v"], timeout=300)
    logins = {n: inst.accepted_logins() - before[n] for n, inst in insts.items()}
    return run, logins, base


def test_the_batch_stopped_in_the_validation_play_touching_nothing(batch):
    run, logins, base = batch
    assert run.rc != 0, run.out[-3000:]
    # it stopped in the validation play: no SSH login, no task ran on a fleet host
    assert logins == {"fq11": 0, "fq12": 0}, logins
    assert "Gathering Facts" not in run.out and "PLAY [Qualify storage]" not in run.out
    assert tree_snapshot(str(base / "hostdirs")) == {}
    assert not os.path.exists(os.path.join(str(base), "results", "bad"))
    # the host that is fine is not refused
    assert "fine: " not in run.out, run.out[-3000:]


@pytest.mark.parametrize("where, variables, text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_value_stops_before_any_host_is_touched(batch, request, where, variables, text):
    run, _logins, _base = batch
    name = case_host(request.node.callspec.id, where)
    text = text.replace("host %s:" % where, "host %s:" % name)
    assert text in run.out, (text, run.out[-3000:])
    # the message names the host (a group's value too: each case's group holds one host)
    assert any(text in line and name in line for line in run.out.splitlines()), (name, text, run.out[-3000:])


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
