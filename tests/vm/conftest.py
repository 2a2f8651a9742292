"""Fixtures of the VM tier (docs/testing.md, "The VM tier"): the guests of the scenarios,
booted in the background from the end of collection on, and the real playbook's runs over
SSH to them.

Each test names the guests it needs in its marker (``pytest.mark.vm("vm-nvme", ...)``); only
the guests of the selected tests boot (``pytest tests/vm/test_vm_throttle.py`` boots one),
and each stops after the last test that names it. The scenarios are batched:
:data:`RUNS` says which guest qualifies which of its drives, with which plan, in each of two
playbook runs (a drive whose truth the test sets is opted in by its ``/dev/disk/by-id`` name,
``destroy_data: true``); a run holds only the selected guests and is made once per session,
when a test first asks for it (``vm_run("first")``).
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import guests  # noqa: E402
import vmimage  # noqa: E402
from guests import Drive  # noqa: E402

import fleetlib  # noqa: E402  (tests/fleet, on sys.path through vmimage)
import fleetrun  # noqa: E402
import labs  # noqa: E402  (tests/, on sys.path through tests/conftest.py)

CRITICAL_WARNING = 0x04         # NVM subsystem reliability degraded
HDD = {"vendor": "FQDISK", "product": "FQ-HDD-7200", "rotation_rate": 7200}
# low enough that one thread of a TCG guest on a busy 2-core machine outruns it: its own
# request latency, not the drive's limit, held one thread at 166 IOPS when throttled to 200,
# and at 88 when throttled to 100 (load 12); 40 leaves it 25 ms a request
THROTTLE_IOPS = 40
BURST = {"iops-total": 100, "iops-total-max": 300, "iops-total-max-length": 4}

# the power-cut test's drives: nbdkit's cache filter in each mode (test_vm_durability.py)
DUR_CACHES = {"FQDURWB1": "writeback", "FQDURUS1": "unsafe", "FQDURWT1": "writethrough"}

# guest -> its drives (the root disk, virtio, comes with every guest)
GUESTS = {
    "vm-nvme": [Drive("nvme", "FQNVME01"), Drive("nvme", "FQNVME02")],
    "vm-crit": [Drive("nvme", "FQNVME03", smart_critical_warning=CRITICAL_WARNING)],
    "vm-hdd": [Drive("scsi", "FQHDD01", write_cache=False, **HDD), Drive("scsi", "FQHDD02", write_cache=True, **HDD)],
    "vm-throttle": [Drive("nvme", "FQTHR01", throttle={"iops-total": THROTTLE_IOPS}),
                    Drive("nvme", "FQBURST01", throttle=BURST)],
    "vm-dur": [Drive("nvme", serial, size=32 << 20, nbdkit=True, cache=mode) for serial, mode in DUR_CACHES.items()],
}

# the guests the SAN lab makes iSCSI initiators (test_vm_san.py): their user-mode network
# reaches this machine's tgt portals at 10.0.2.2 (QEMU's restrict=off); the others reach
# nothing but their SSH forward
INITIATORS = ("vm-nvme", "vm-crit")

# the quick profile paced (fleetqual_workload_overrides): where the subject is a drive's
# identity, health and declared cache, not its speed; at full speed each quick run kept its
# guest's emulated CPU busy for its 30 s of workloads, this machine's CPU under TCG
QUICK = {"fleetqual_profile": "quick", "fleetqual_workload_overrides": {"rate_iops": 100}}
# one short workload: the host FAILs on its drive's health, whatever it measures
ONE_READ = {"fleetqual_profile": "quick", "fleetqual_matrix": [
    {"workload": "cache", "mode": "rndrd", "threads": 1, "total_size": "16M", "block_size": "16K", "direct": True,
     "time": 4, "warmup": 1}]}
# a thread sweep on the throttled drive: the IOPS it is set to at every step (from 4 threads:
# on a loaded machine one thread of a TCG guest fell behind even 40 IOPS, p99 194 ms). 16 s
# windows: a fresh-clone run's guest stood still for 1 s in the 4-thread step of 8 s (p99
# 1002 ms), 87 % of the rate, under the tipping point's 90 %; in 16 s such a second is 6 %
SWEEP = {"fleetqual_profile": "quick", "fleetqual_matrix": [
    {"workload": "throttled", "mode": "rndrd", "threads": [4, 16, 64], "total_size": "64M", "block_size": "16K",
     "direct": True, "time": 16, "warmup": 2}]}
# no warmup: the measured window starts with the bucket's burst
BURST_PLAN = {"fleetqual_profile": "quick", "fleetqual_matrix": [
    {"workload": "burst", "id": "burst-rndrd-t16", "mode": "rndrd", "threads": 16, "total_size": "64M",
     "block_size": "16K", "direct": True, "time": 18, "warmup": 0}]}

# run -> guest -> (the serial of the drive it qualifies, its plan)
RUNS = {
    "first": {"vm-nvme": ("FQNVME01", QUICK), "vm-crit": ("FQNVME03", ONE_READ), "vm-hdd": ("FQHDD01", QUICK),
              "vm-throttle": ("FQTHR01", SWEEP)},
    "second": {"vm-hdd": ("FQHDD02", QUICK), "vm-throttle": ("FQBURST01", BURST_PLAN)},
}
TARGET_SIZE = "128M"
GROUP = "vm"

_STATE = {"boot": None, "wanted": (), "last": {}, "released": set()}
TIMES = {}          # what took how long, for the summary at the end


def guests_of(item):
    """The guests a test names in its ``vm`` markers."""
    return {name for m in item.iter_markers("vm") for name in m.args}


def wanted_guests(items):
    """The guests the selected tests need, in the order the tests (sorted by
    :data:`MODULE_ORDER`) first name them, in GUESTS order within a test: the guests boot in
    that order as slots come free."""
    names = []
    for item in items:
        for n in sorted(guests_of(item), key=lambda g: list(GUESTS).index(g) if g in GUESTS else len(GUESTS)):
            if n not in names:
                names.append(n)
    unknown = set(names) - set(GUESTS)
    if unknown:
        raise ValueError("pytest.mark.vm names unknown guests %s; known: %s" % (sorted(unknown), ", ".join(GUESTS)))
    return tuple(names)


def _boot(names):
    if _STATE["boot"] is None and names and not vmimage.unavailable():
        _STATE["wanted"] = names
        _STATE["boot"] = guests.Boot([guests.Guest(n, drives=GUESTS[n], restrict=n not in INITIATORS)
                                      for n in names]).start()
    return _STATE["boot"]


# the modules in the order that frees the guests' slots soonest: vm-hdd and vm-throttle stop
# after the first two runs' tests (drives, throttle), so the fault scenario's guests boot
# while the compliance runs go on with vm-nvme (and an idle vm-crit), then the SAN lab's
# run on those two (test_vm_san: vm-crit is idle until test_vm_guests). test_vm_guests comes
# last: its exit-path tests start a guest of their own, which needs a slot the session's
# guests have let go (first, it waited behind the four guests booted for the first run)
MODULE_ORDER = ("test_vm_drives", "test_vm_throttle", "test_vm_compliance", "test_vm_san", "test_vm_faults",
                "test_vm_durability", "test_vm_guests")


def pytest_collection_modifyitems(session, config, items):
    """Run the VM tier's modules in :data:`MODULE_ORDER` (a stable sort: the tests of a module
    keep their order; a module not listed comes last)."""
    def rank(item):
        name = os.path.splitext(os.path.basename(str(item.fspath)))[0]
        return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)
    if any(os.path.dirname(str(item.fspath)) == HERE for item in items):
        items.sort(key=lambda item: rank(item) if os.path.dirname(str(item.fspath)) == HERE else -1)


def pytest_collection_finish(session):
    """Build the image (when missing) and boot the selected tests' guests in the background
    from now on, so the boots overlap the tests before the first that needs a guest; note
    each guest's last test (the guest stops after it: its slot and CPU go to the others)."""
    for item in session.items:
        for name in guests_of(item):
            _STATE["last"][name] = item.nodeid
    _boot(wanted_guests(session.items))


def pytest_runtest_teardown(item, nextitem):
    boot = _STATE["boot"]
    for name, nodeid in _STATE["last"].items():
        if boot is not None and nodeid == item.nodeid and name in boot.guests:
            _STATE["released"].add(name)
            boot.guests[name].stop()


@pytest.fixture(scope="session")
def vm_boot(request):
    """The session's booting guests (``guests.Boot``); stopped, and checked gone, at the end."""
    why = vmimage.unavailable()
    if why:
        labs.unavailable(why)
    boot = _boot(wanted_guests(request.session.items))
    if boot is None:
        pytest.skip("no test of this session names a guest (pytest.mark.vm)")
    yield boot
    boot.stop()
    # each QEMU process ended and reaped by the Popen that started it (never looked up by PID)
    running = [g.name for g in boot.guests.values() if g.proc is not None and g.proc.returncode is None]
    assert not running, "qemu still running after the teardown: %s" % running
    left = [g.dir for g in boot.guests.values() if os.path.exists(g.dir)]
    assert not left, "guest files left after the teardown: %s" % left


@pytest.fixture(scope="session")
def vm_guest(vm_boot):
    """``vm_guest(name)``: the booted guest (skips with the reason when it cannot boot here)."""
    def get(name):
        try:
            return vm_boot.guest(name)
        except vmimage.Unavailable as e:
            labs.unavailable(str(e))
    return get


@pytest.fixture(scope="session")
def vm_fleet(tmp_path_factory):
    """The inventory writer and ansible environment of the fleet tests (``fleetlib.Fleet``)."""
    if not fleetrun._BUILD_CACHE:
        fleetrun._BUILD_CACHE.append(str(tmp_path_factory.mktemp("vm-build-cache")))
    f = fleetlib.Fleet(str(tmp_path_factory.mktemp("vm-fleet")))
    yield f
    f.close()


def host_entry(g, serial, plan, target=None):
    """An inventory host of guest ``g`` qualifying its drive ``serial`` (by-id, opted in), or
    the ``target`` given (a SAN LUN: test_vm_san.py)."""
    target = target or {"name": serial.lower(), "device": g.by_id(serial), "destroy_data": True, "serial": serial,
                        "size": TARGET_SIZE}
    hv = {"ansible_python_interpreter": "/usr/bin/python3", "ansible_ssh_private_key_file": g.ssh_key,
          "ansible_ssh_timeout": 60, "fleetqual_test_dir": "/var/tmp/fleetqual", "fleetqual_bin_dir": "/opt/fleetqual/bin",
          "fleetqual_targets": [target]}
    hv.update(plan)
    return {"name": g.name, "group": GROUP, "inst": g, "vars": hv}


@pytest.fixture(scope="session")
def vm_run(vm_boot, vm_guest, vm_fleet, tmp_path_factory):
    """``vm_run(name)``: the playbook run ``name`` of :data:`RUNS` over the selected guests
    (made once); the FleetRun, with ``.guests`` (name -> Guest) and ``.targets`` (name -> its
    target)."""
    done = {}

    def run(name):
        if name not in done:
            hosts = {n: v for n, v in RUNS[name].items() if n in _STATE["wanted"] and n not in _STATE["released"]}
            entries = [host_entry(vm_guest(n), serial, plan) for n, (serial, plan) in hosts.items()]
            base = str(tmp_path_factory.mktemp("vm-run-" + name))
            inv = vm_fleet.inventory(os.path.join(base, "inventory"), entries)
            r = fleetrun.run_playbook(vm_fleet, inv, base, "vm-" + name, args=["--forks", "4"], timeout=1500)
            TIMES["run %s (%s)" % (name, ", ".join(hosts))] = r.elapsed
            r.guests = {e["name"]: e["inst"] for e in entries}
            r.targets = {e["name"]: e["vars"]["fleetqual_targets"][0] for e in entries}
            done[name] = r
        return done[name]
    return run


def pytest_terminal_summary(terminalreporter):
    """Where the time went: the image (built now or cached), each guest's boot, each run."""
    boot = _STATE["boot"]
    if boot is None:
        return
    lines = []
    images = [g.image for g in boot.guests.values() if g.image]
    image = next((i for i in images if i.get("built_now")), images[0] if images else None)
    if image:
        lines.append("image %s: %s" % (image.get("key"), "built in %s s %s" % (image.get("build_s"), image.get("steps"))
                                       if image.get("built_now") else "cached (built in %s s)" % image.get("build_s")))
    for base in {id(g.restored_from): g.restored_from for g in boot.guests.values() if g.restored_from}.values():
        lines.append("base machine %s: booted to SSH in %s s%s, saved once; the guests start from it"
                     % (os.path.basename(base.directory), base.boot_s,
                        ", %.0f CPU-s" % base.cpu_s if base.cpu_s is not None else ""))
    for name, g in boot.guests.items():
        boots = " (%d boots: power cuts)" % g.boots if g.boots > 1 else ""
        if g.restored_from is None and g.restore_error:
            boots += " (booted cold: %s)" % g.restore_error[:200]
        elif g.restored_from is not None:
            boots += " (restored)"
        cpu = g.cpu_s()
        cost = ", %.0f CPU-s in all" % cpu if cpu is not None else ""
        lines.append("guest %s: %s" % (name, "SSH after %s s%s%s" % (g.first_boot_s, boots, cost) if g.first_boot_s else
                                       "did not boot: %s" % str(boot.errors.get(name))[:200]))
    lines += ["%s: %.0f s" % (k, v) for k, v in TIMES.items()]
    terminalreporter.write_sep("-", "VM tier timings")
    for line in lines:
        terminalreporter.write_line(line)
