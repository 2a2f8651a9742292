"""The power-cut test through the real playbook (docs/durability.md), on a guest whose drives
keep a volatile write cache of known truth: nbdkit's cache filter under each NVMe drive
(guests.Drive ``cache``), the power cut by the ``command`` method through the guest's power
switch (tests/vm/power_switch.py: QEMU and the drives' nbdkit SIGKILLed, what a cache held
is gone; then both started again).

* ``writeback``: the cache holds writes until a flush or FUA, as an honest volatile cache
  does: no acknowledged write lost;
* ``unsafe``: the cache acknowledges flushes it never does (a drive that lies): the
  acknowledged writes are lost, every one of them within what the witness saw acknowledged;
* ``writethrough``: no write cache: nothing lost.

The host FAILs on the lying drive alone, naming it; the other two drives' rows say 0 lost.
``FLEETQUAL_DURABILITY_CYCLES`` (default 1 here: each cut is a boot of the guest under TCG)
runs more cuts; the long run (3 cycles) is in docs/testing.md."""
import json
import os
import time

import pytest

import fleetrun
from conftest import DUR_CACHES as CACHES, GROUP
from power_switch import PowerSwitch

pytestmark = [pytest.mark.slow, pytest.mark.vm("vm-dur"), pytest.mark.long]
CYCLES = int(os.environ.get("FLEETQUAL_DURABILITY_CYCLES") or 1)


def host_vars(g, switch, cycles, **durability):
    """The vm-dur guest's inventory vars: the durability profile on its three drives, the power
    through ``switch``; ``durability``: more of fleetqual_durability."""
    targets = [{"name": CACHES[s], "device": g.by_id(s), "destroy_data": True} for s in CACHES]
    return {"ansible_python_interpreter": "/usr/bin/python3", "ansible_ssh_private_key_file": g.ssh_key,
            "ansible_ssh_timeout": 60, "fleetqual_test_dir": "/var/tmp/fleetqual",
            "fleetqual_bin_dir": "/opt/fleetqual/bin", "fleetqual_profile": "durability",
            "fleetqual_targets": targets,
            "fleetqual_power": {"method": "command", "off": switch.command("off"), "on": switch.command("on"),
                                "timeout": 120},
            "fleetqual_durability": dict({"cycles": cycles, "write_s": 4, "size": "8M", "threads": 4, "off_s": 1,
                                          "boot_timeout_s": 900}, **durability),
            # the profile's log workload, short: its subject here is the power cut
            "fleetqual_workload_overrides": {"time": 2, "warmup": 0}}


@pytest.fixture(scope="module")
def cut_run(vm_guest, vm_fleet, tmp_path_factory):
    g = vm_guest("vm-dur")
    base = str(tmp_path_factory.mktemp("vm-durability"))
    switch = PowerSwitch(g, g.path("power.sock")).start()
    try:
        inv = vm_fleet.inventory(os.path.join(base, "inventory"),
                                 [{"name": g.name, "group": GROUP, "inst": g, "vars": host_vars(g, switch, CYCLES)}])
        r = fleetrun.run_playbook(vm_fleet, inv, base, "vm-durability", args=["--forks", "2"],
                                  timeout=900 + CYCLES * 600)
        r.switch_log = list(switch.log)
        r.guest = g
        yield r
    finally:
        switch.stop()


def record(run):
    with open(os.path.join(run.results_dir(), run.guest.name + ".json")) as fh:
        return json.load(fh)


def test_the_lying_drive_fails_the_host_and_the_honest_ones_lose_nothing(cut_run):
    rec = record(cut_run)
    dur = rec.get("durability")
    assert dur, (cut_run.verdicts(), cut_run.out[-3000:])
    assert dur["cycles"] == CYCLES and dur["planned_cycles"] == CYCLES, (rec["verdict"], rec["reasons"][:4], rec["error"])
    assert rec["verdict"] == "FAIL", cut_run.verdicts()
    t = dur["targets"]
    assert [t[n]["verdict"] for n in ("writeback", "unsafe", "writethrough")] == ["PASS", "FAIL", "PASS"], t
    assert t["writeback"]["lost"] == t["writeback"]["torn"] == 0 and t["writeback"]["acked"] > 0, t["writeback"]
    assert t["writethrough"]["lost"] == t["writethrough"]["torn"] == 0 and t["writethrough"]["acked"] > 0
    lying = t["unsafe"]
    assert lying["lost"] + lying["torn"] > 0 and lying["lost"] + lying["torn"] <= lying["acked"], lying
    reasons = [x for x in rec["reasons"] if "across a power cut" in x]
    assert len(reasons) == 1 and "target unsafe" in reasons[0] and "FQDURUS1" in reasons[0], rec["reasons"]
    assert "acknowledged writes lost across a power cut" in reasons[0] or "torn" in reasons[0]
    assert "write cache" in reasons[0]


def test_every_cut_was_a_power_cut_and_the_guest_came_back(cut_run):
    offs = [x for x in cut_run.switch_log if x[1] == "off"]
    ons = [x for x in cut_run.switch_log if x[1] == "on"]
    assert len(offs) == len(ons) == CYCLES, cut_run.switch_log
    assert all(a[2].startswith("ok") for a in offs + ons), cut_run.switch_log
    assert cut_run.guest.boots == 1 + CYCLES
    # the lost writes had been acknowledged before the witness was copied, and that before the cut
    for c in record(cut_run)["durability"]["per_cycle"]:
        assert c["taken_ms"] <= c["cut_ms"], c


def test_nothing_is_left_on_the_guest(cut_run):
    out = cut_run.guest.ssh("ls /dev/shm; pgrep -x iobench || true").stdout.split()
    assert not [x for x in out if x.startswith("fleetqual-durability")] and not [x for x in out if x.isdigit()], out


def test_a_run_killed_between_its_cut_and_the_power_on_leaves_the_next_to_power_on_and_read_back(
        cut_run, vm_fleet, tmp_path_factory):
    """The controller SIGKILLed once its cut is done and while the power is off (off_s 60 s): the
    guest stays off. The same command again powers it on first, reads back every write the
    killed run's witnesses name (kept on the controller: results/.durability/<host>.json) and
    judges that cut with its own: the lying drive lost writes in both, the honest ones none;
    the record says which cut it recovered; nothing is left on the guest or the controller."""
    g = cut_run.guest
    base = str(tmp_path_factory.mktemp("vm-durability-killed"))
    switch = PowerSwitch(g, g.path("power2.sock")).start()
    pending = os.path.join(base, "results", ".durability", g.name + ".json")
    try:
        inv = vm_fleet.inventory(os.path.join(base, "inventory"), [
            {"name": g.name, "group": GROUP, "inst": g, "vars": host_vars(g, switch, 1, off_s=60)}])
        proc, log = fleetrun.start_playbook(vm_fleet, inv, base, "vm-dur-killed", args=["--forks", "2"])
        with log:
            try:
                limit = time.monotonic() + 900
                while True:
                    try:
                        with open(pending) as fh:
                            if json.load(fh).get("state") == "cut":
                                break
                    except (OSError, ValueError):
                        pass
                    assert proc.poll() is None and time.monotonic() < limit, "the killed run never cut the power"
                    time.sleep(0.2)
            finally:
                proc.kill()
                proc.wait()
        assert not g.running() and [x[1] for x in switch.log] == ["off"], switch.log
        r = fleetrun.run_playbook(vm_fleet, inv, base, "vm-dur-after", args=["--forks", "2"], timeout=1500)
        r.guest = g
        log_after = [x[1] for x in switch.log]
    finally:
        switch.stop()
    # powered on first (the recovery), then this run's own cut
    assert log_after == ["off", "on", "off", "on"], switch.log
    rec = record(r)
    dur = rec["durability"]
    assert dur, (r.verdicts(), r.out[-3000:])
    recovered, own = dur["per_cycle"]
    assert (recovered["recovered_from"], own["recovered_from"]) == ("vm-dur-killed", None), dur["per_cycle"]
    lying = recovered["targets"]["unsafe"]
    assert lying["lost"] + lying["torn"] > 0, recovered
    assert all(recovered["targets"][n]["lost"] == recovered["targets"][n]["torn"] == 0
               for n in ("writeback", "writethrough")), recovered
    assert dur["recovered"]["judged"] is True and dur["recovered"]["note"] in rec["warnings"], dur["recovered"]
    assert rec["verdict"] == "FAIL" and dur["cycles"] == 2 and dur["planned_cycles"] == 1, rec["reasons"][:3]
    assert not os.path.exists(pending)
    out = g.ssh("ls /dev/shm; pgrep -x iobench || true").stdout.split()
    assert not [x for x in out if x.startswith("fleetqual-durability")] and not [x for x in out if x.isdigit()], out
