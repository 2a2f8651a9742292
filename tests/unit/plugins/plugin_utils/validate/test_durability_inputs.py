"""The power-cut test's inputs refused on the controller before any host is touched
(docs/durability.md "Safety"): every refusal names the host, the variable and the fix or
the closest valid value, and a host that passes them all is exactly one with a valid power
action, not the controller, not on a production profile, with every target opted in and
none on a system top directory."""
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
# unitpaths: the collection on sys.path
import unitpaths  # noqa: F401  pylint: disable=unused-import

from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import durability as d

REDFISH = {"method": "redfish", "baseuri": "10.0.0.5", "username": "admin", "password": "secret"}
IPMI = {"method": "ipmi", "name": "10.0.0.6", "user": "admin", "password": "secret"}
COMMAND = {"method": "command", "off": ["virsh", "destroy", "db1"], "on": ["virsh", "start", "db1"]}
SAFETY = {"compliance": {"impact": {"ioprio": "idle"}}}
DEV = {"device": "/dev/disk/by-id/nvme-X", "destroy_data": True}
DIR = {"path": "/mnt/data/fq", "destroy_data": True}


def inputs(power="redfish", profile="durability", targets=(DEV,)):
    power = REDFISH if power == "redfish" else power
    return {"fleetqual_power": power, "fleetqual_profile": profile, "fleetqual_targets": list(targets)}


def test_a_host_with_everything_in_place_is_not_refused():
    for power in (REDFISH, IPMI, COMMAND):
        assert d.power_cut_refusals(inputs(power, targets=(DEV, DIR)), "db1", "ssh", "10.1.1.1", 22, SAFETY) == []


def test_each_refusal_names_the_host_the_variable_and_the_fix():
    cases = [
        (inputs(power=None), {}, "fleetqual_power", "needs a power action"),
        (inputs(), {"connection": "local"}, "ansible_host", "the controller itself"),
        (inputs(), {"address": "localhost", "port": 22}, "ansible_host", "the controller itself"),
        (inputs(profile="compliance"), {}, "fleetqual_profile", "never power-cut"),
        (inputs(targets=()), {}, "fleetqual_targets", "destroy_data: true"),
        (inputs(targets=({"device": "/dev/sdb"},)), {}, "fleetqual_targets[0].destroy_data", "missing"),
        (inputs(targets=({"path": "/mnt/x", "destroy_data": "yes"},)), {}, "fleetqual_targets[0].destroy_data", "'yes'"),
        (inputs(targets=({"path": "/var/tmp/", "destroy_data": True},)), {}, "fleetqual_targets[0].path", "/mnt/data"),
    ]
    for inp, conn, var, fix in cases:
        kw = dict({"connection": "ssh", "address": "10.1.1.1", "port": 22}, **conn)
        found = d.power_cut_refusals(inp, "db1", kw["connection"], kw["address"], kw["port"], SAFETY)
        assert len(found) == 1, (inp, found)
        assert found[0].startswith("host db1: " + var) and fix in found[0], found


def test_a_guest_behind_a_forwarded_loopback_port_is_not_the_controller():
    assert not d.is_controller("ssh", "127.0.0.1", 2222)
    assert d.is_controller("ssh", "127.0.0.1", None) and d.is_controller("local", "db1", 22)


def test_power_actions_wrong_in_one_place_each():
    cases = [
        ("redfsh", None, "method", "did you mean redfish?"),
        ("redfish", ("password", None), "password", "required for method redfish"),
        ("redfish", ("usename", "x"), "usename", "did you mean username?"),
        ("redfish", ("validate_certs", "no"), "validate_certs", "true or false"),
        ("redfish", ("ca_path", ""), "ca_path", "the CA certificate(s) the BMC's TLS certificate is checked against"),
        ("redfish", ("ca_path", ["/etc/bmc-ca.pem"]), "ca_path", "got ['/etc/bmc-ca.pem']"),
        ("ipmi", ("port", 70000), "port", "1-65535"),
        ("command", ("on", ""), "on", "an argv list such as [virsh, destroy, db17]"),
        ("command", ("off", "virsh destroy db1"), "off", "an argv list"),
        ("command", ("timeout", 0), "timeout", "between 1 and 3600"),
    ]
    base = {"redfish": REDFISH, "ipmi": IPMI, "command": COMMAND}
    for method, change, key, text in cases:
        p = dict(base.get(method, REDFISH), method=method)
        if change:
            k, v = change
            if v is None:
                p.pop(k)
            else:
                p[k] = v
        found = d.validate_power(p, "db1")
        assert len(found) == 1 and found[0].startswith("host db1: fleetqual_power.%s" % key) and text in found[0], found


def test_settings_defaults_and_closest_values():
    out, problems = d.durability_settings(None)
    assert not problems and out["cycles"] == 3 and out["size"] == 64 << 20 and out["block_size"] == 4096
    out, problems = d.durability_settings({"cycles": 0, "write_s": 2, "blocksize": "4K"}, "db1")
    assert len(problems) == 2, problems
    assert any("fleetqual_durability.cycles" in p and "closest valid: 1" in p for p in problems)
    assert any("fleetqual_durability.blocksize" in p and "did you mean block_size?" in p for p in problems)
    _out, problems = d.durability_settings({"block_size": "6K"})
    assert problems and "closest valid: 8K" in problems[0]
    _out, problems = d.durability_settings({"size": "1M", "threads": 256, "block_size": "8K"})
    assert problems and "closest valid: 2048K" in problems[0]


targets_st = st.lists(st.fixed_dictionaries({
    "kind": st.sampled_from(["device", "path"]),
    "opted": st.sampled_from([True, False, "yes", None]),
    "top": st.booleans()}), max_size=3)


@settings(max_examples=300, deadline=None)
@given(power=st.sampled_from([None, {}, REDFISH, IPMI, COMMAND, {"method": "ipmi"}]),
       connection=st.sampled_from(["ssh", "local", None]),
       address=st.sampled_from(["10.0.0.9", "127.0.0.1", "localhost", "db1"]),
       port=st.sampled_from([None, 22, 2222]),
       profile=st.sampled_from(["durability", "burnin", "compliance"]),
       targets=targets_st)
def test_a_host_is_refused_exactly_when_a_rule_says_so(power, connection, address, port, profile, targets):
    ts = []
    for t in targets:
        entry = {"device": "/dev/sdz"} if t["kind"] == "device" else {"path": "/var" if t["top"] else "/mnt/d/x"}
        if t["opted"] is not None:
            entry["destroy_data"] = t["opted"]
        ts.append(entry)
    found = d.power_cut_refusals(inputs(power, profile, ts), "h1", connection, address, port, SAFETY)
    expected = list(itertools.chain(
        ["power"] if power in (None, {}) or power == {"method": "ipmi"} else [],
        ["controller"] if connection == "local" or (address in ("127.0.0.1", "localhost") and port in (None, 22)) else [],
        ["production"] if profile == "compliance" else [],
        ["no targets"] if not ts else [],
        ["not opted"] * sum(1 for t in ts if t.get("destroy_data") is not True),
        ["top"] * sum(1 for t in ts if t.get("path") == "/var")))
    n_power = 3 if power == {"method": "ipmi"} else 1       # its three missing keys, one line each
    assert len(found) == len(expected) + (n_power - 1) * ("power" in expected), (expected, found)
    assert all(f.startswith("host h1: ") for f in found)
    assert not expected or found
