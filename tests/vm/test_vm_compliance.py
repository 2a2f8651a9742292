"""Compliance on a host with systemd and cgroup v2 (the VM tier, docs/compliance.md, "What is
ours"): through the real playbook, the benchmark runs in a transient unit systemd makes, so
the foreign I/O comes from the kernel's own counters, the impact caps are kernel limits, and
a limit the host set on a slice above the job still holds the benchmark.

The guest is ``vm-nvme`` (conftest.GUESTS); its drive FQNVME02 is the target (a device
target of :data:`TARGET_SIZE`, opted in). A tenant is a Python reader in the guest, in a
unit of its own (``systemd-run`` in ``fqtenant.slice``, bounded by ``RuntimeMaxSec``), that
reads 4 KiB with O_DIRECT at a fixed rate from the part of the same drive beyond the target
and logs its cumulative count every 50 ms: the ground truth.

* run ``low``: the compliance profile's whole matrix beside a tenant at 40 requests/s: every
  workload's ``foreign_source`` names the unit, its foreign reads are the tenant's over the
  same span within 5 %, nothing foreign is written; the caps are the unit's kernel limits;
* run ``high``: one workload beside a tenant at 1000 requests/s: counted within 5 %, and the
  host is INCONCLUSIVE (a shared window);
* run ``slice``: ``system.slice`` (which holds ``ssh.service``, where the job runs) limited
  to 100 read IOPS on the drive with ``systemctl set-property``: 4 threads of random reads
  stay at or under 100 requests/s by the device's own counters, while the same drive did
  far more without the limit.

After the runs no ``fleetqual-job-*`` unit is left in the guest, failed or not.
"""
import json
import os
import sys

import pytest

import fleetrun
from conftest import host_entry

from playbook_run import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
import unitpaths  # noqa: E402

unitpaths.on_path()

from test_foreign_io import count_at  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import parse_size  # noqa: E402
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics import device as metricsmod  # noqa: E402

HOST = "vm-nvme"
pytestmark = [pytest.mark.vm(HOST), pytest.mark.slow, pytest.mark.long]

SERIAL = "FQNVME02"
DRIVE_SIZE = 256 << 20          # conftest.GUESTS: Drive's default size
# the target: room for the over_cache working set (4 x the plan's cache size, 8M), small
# enough that preparing and zeroing it stays a small part of a run under TCG
TARGET_SIZE = "40M"
TOLERANCE = 0.05
SLICE_LIMIT = 100
TENANT_RATES = {"low": 40, "high": 1000}
TENANT = r"""
import json, mmap, os, signal, sys, time
dev, start, span, rate, seconds, out = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                                        float(sys.argv[5]), sys.argv[6])
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
blocks = span // 4096
n = k = 0
log = []
t0 = time.time()
end, last = t0 + seconds, 0.0
while not stop and time.time() < end:
    now = time.time()
    due = t0 + n / rate
    if due > now:
        time.sleep(min(due - now, 0.05))
    else:
        os.preadv(fd, [buf], start + (k % blocks) * 4096)
        n += 1
        k += 7919
    now = time.time()
    if now - last >= 0.05:
        log.append([now, n])
        last = now
log.append([time.time(), n])
with open(out + ".tmp", "w") as fh:
    json.dump(log, fh)
os.rename(out + ".tmp", out)
"""
# no quiet wait (the tenant shares the window on purpose), polled every 2 s
FOREIGN = {"sample_s": 1, "wait_s": 5, "quiet_util_pct": 100}
# 6 s measured after 1 s of warm-up: 240 of the slow tenant's requests, 6,000 of the busy one's
SHORT = {"time": 6, "warmup": 1}
ONE = [dict(SHORT, workload="cache", mode="rndrd", threads=1, total_size="16M", block_size="16K", direct=True)]
FOUR = [dict(ONE[0], threads=4)]
# roles/qualify/defaults/main/profiles.yml's compliance matrix, shorter; the log's data set 32M, not 256M
SET = dict(SHORT, block_size="16K", direct=True)
COMPLIANCE = [dict(SET, workload="cache", mode="rndrd", threads=[1, 4], working_set="cache"),
              dict(SET, workload="cache", mode="rndwr", threads=1, working_set="cache"),
              dict(SET, workload="over_cache", mode="rndrd", threads=4, working_set="over_cache"),
              dict(SET, workload="over_cache", mode="rndwr", threads=4, working_set="over_cache"),
              dict(SET, workload="log", mode="seqwr", threads=1, file_num=1, total_size="32M", direct=False,
                   fsync_freq=1, fsync_mode="fdatasync")]
PLANS = {
    # the compliance profile's matrix, its working sets made to fit the target
    "low": {"fleetqual_profile": "compliance", "fleetqual_foreign_io": FOREIGN, "fleetqual_cache_size": "8M",
            "fleetqual_matrix": COMPLIANCE},
    "high": {"fleetqual_profile": "compliance", "fleetqual_foreign_io": FOREIGN, "fleetqual_matrix": ONE},
    "slice": {"fleetqual_profile": "compliance", "fleetqual_foreign_io": FOREIGN, "fleetqual_matrix": FOUR},
}


class Tenant:
    """The tenant in its own unit in the guest (module docstring); :meth:`log` stops it and
    returns its ``[[epoch, count], ...]``."""

    def __init__(self, g, name, device, rate, seconds=900):
        self.g, self.unit, self.out = g, "fq-tenant-%s.service" % name, "/tmp/fq-tenant-%s.json" % name
        start = parse_size(TARGET_SIZE, "size")
        g.ssh("cat > /tmp/fq-tenant.py", input=TENANT)
        g.ssh("rm -f %s; systemd-run --quiet --collect --unit %s --slice fqtenant.slice -p IOAccounting=yes "
              "-p RuntimeMaxSec=%d python3 /tmp/fq-tenant.py %s %d %d %s %d %s"
              % (self.out, self.unit, seconds + 60, device, start, DRIVE_SIZE - start, rate, seconds, self.out))

    def log(self):
        self.g.ssh("systemctl stop %s; for i in $(seq 50); do [ -e %s ] && break; sleep 0.2; done" % (self.unit, self.out),
                   check=False)
        return json.loads(self.g.ssh("cat %s" % self.out).stdout)


@pytest.fixture(scope="module")
def compliance_runs(vm_guest, vm_fleet, tmp_path_factory):
    """``runs(name)``: the playbook run ``name`` (module docstring), made once; FleetRun with
    ``.tenant`` (the tenant's log, None without one)."""
    done = {}
    g = vm_guest(HOST)
    device = g.by_id(SERIAL)
    # the drive's controller (nvme1 for nvme1n1), as the guest's kernel names it in its messages
    controller = g.ssh("basename $(readlink -f %s)" % device).stdout.strip().rsplit("n", 1)[0]

    def run(name):
        if name in done:
            return done[name]
        base = str(tmp_path_factory.mktemp("vm-compliance-" + name))
        entry = host_entry(g, SERIAL, PLANS[name])
        entry["vars"]["fleetqual_targets"][0]["size"] = TARGET_SIZE
        inv = vm_fleet.inventory(os.path.join(base, "inventory"), [entry])
        tenant = Tenant(g, name, device, TENANT_RATES[name]) if name in TENANT_RATES else None
        if name == "slice":
            g.ssh("systemctl set-property --runtime system.slice 'IOReadIOPSMax=%s %d'" % (device, SLICE_LIMIT))
        before = _kernel_lines(g)
        try:
            r = fleetrun.run_playbook(vm_fleet, inv, base, "vm-compliance-" + name, timeout=1500)
        finally:
            log = tenant.log() if tenant else None
            if name == "slice":
                g.ssh("systemctl set-property --runtime system.slice IOReadIOPSMax=", check=False)
        r.tenant = log
        # QEMU's emulated NVMe controller sometimes stops completing requests under TCG on a
        # loaded machine (the guest's kernel: "I/O n QID 1 timeout, reset controller"): the
        # run then measures the emulator, not what this module tests
        r.hang = [ln for ln in _kernel_lines(g)[len(before):] if controller + ":" in ln and "timeout" in ln]
        done[name] = r
        return r
    return run


def _kernel_lines(g):
    return g.ssh("dmesg", check=False).stdout.splitlines()


def _measured(r):
    if r.hang:
        pytest.skip("the emulated NVMe drive stopped completing requests during the run: %s" % r.hang[0])
    return r


def _workloads(r):
    assert r.has_record(HOST), "no record of %s (exit %s):\n%s" % (HOST, r.rc, r.out[-4000:])
    rec = r.record(HOST)
    assert rec["workloads"], (rec["verdict"], rec.get("reasons"), rec.get("error"))
    return rec, rec["workloads"]


def _tenant_in_window(w, log):
    """The tenant's reads over the span the foreign figures cover (the samples bounding the
    measured window)."""
    f = w["result"]["foreign"]
    a, b = metricsmod._delta_span(f["samples"], w["result"]["bench"], f["source"])
    return count_at(log, b["e"]) - count_at(log, a["e"])


def _unit_source(w):
    m = w["metrics"]
    cg = m["foreign_cgroup"]
    assert cg and cg["method"] == "unit" and cg["version"] == 2, (m["foreign_source"], w["result"]["foreign"])
    assert cg["unit"].startswith("fleetqual-job-vm-compliance-") and cg["unit"].endswith(".scope"), cg
    assert m["foreign_source"] == "cgroup v2 unit " + cg["unit"], m["foreign_source"]
    assert cg["slice"] == "system.slice" and cg["path"] == "/sys/fs/cgroup/system.slice/" + cg["unit"], cg
    assert w["result"]["foreign"]["impact"]["in_cgroup"] is True
    return cg


def test_every_compliance_workload_is_attributed_by_its_unit_and_a_slow_tenant_counted_within_5pct(compliance_runs):
    r = _measured(compliance_runs("low"))
    rec, wls = _workloads(r)
    assert len(wls) == 6, [w["id"] for w in wls]
    seen, shared = [], []
    for w in wls:
        m = w["metrics"]
        cg = _unit_source(w)
        truth = _tenant_in_window(w, r.tenant)
        seen.append((w["id"], m["foreign_reads"], round(truth, 1), m["foreign_writes"], m["iops"]))
        assert truth > 0 and abs(m["foreign_reads"] - truth) <= TOLERANCE * truth, seen
        # the tenant only reads; the benchmark's own writes and flushes are all in its unit
        assert m["foreign_writes"] <= max(2, TOLERANCE * truth), seen
        # the impact caps are the unit's limits, read back from its io.max
        caps = {(e["rule"], e["value"]) for e in cg["enforced"] if e["from"] == "impact"}
        assert ("read_iops_device", 2000) in caps and ("write_bps_device", 64 << 20) in caps, cg["enforced"]
        assert cg["io_weight"] == 1
        assert any(n.startswith("impact limits kernel-enforced by " + m["foreign_source"])
                   for n in m["impact"]["notes"]), m["impact"]["notes"]
        # the verdict follows the share the kernel's counters give
        if m["foreign_share"] > m["foreign_max_share"] and m["foreign_iops"] >= m["foreign_min_iops"]:
            shared.append(w["id"])
    print("low tenant (id, foreign reads, tenant's reads, foreign writes, our IOPS):", seen, rec["verdict"])
    assert rec["verdict"] == ("INCONCLUSIVE" if shared else "PASS"), (rec["verdict"], rec["reasons"], seen)


def test_a_busy_tenant_is_counted_within_5pct_and_makes_the_host_inconclusive(compliance_runs):
    r = _measured(compliance_runs("high"))
    rec, (w,) = _workloads(r)
    m = w["metrics"]
    _unit_source(w)
    truth = _tenant_in_window(w, r.tenant)
    print("high tenant: foreign reads %s, tenant's reads %.1f, share %s, our IOPS %s, %s"
          % (m["foreign_reads"], truth, m["foreign_share"], m["iops"], rec["verdict"]))
    assert truth > 0 and abs(m["foreign_reads"] - truth) <= TOLERANCE * truth, (m["foreign_reads"], truth)
    assert rec["verdict"] == "INCONCLUSIVE", (rec["verdict"], rec["reasons"])
    assert "shared window" in rec["reasons"][0] and m["foreign_source"] in rec["reasons"][0], rec["reasons"]


def test_a_slice_limited_to_100_read_iops_is_not_escaped(compliance_runs):
    unlimited = {w["id"]: w["metrics"] for w in _workloads(_measured(compliance_runs("low")))[1]}["cache-rndrd-t4"]
    r = _measured(compliance_runs("slice"))
    rec, (w,) = _workloads(r)
    m = w["metrics"]
    cg = _unit_source(w)
    assert [(i["rule"], i["value"], i["from"], i["applies"]) for i in cg["inherited"]] == [
        ("read_iops_device", SLICE_LIMIT, "/system.slice", "nested")], cg["inherited"]
    print("slice %d: device reads/s %s, iobench IOPS %s; without the limit %s"
          % (SLICE_LIMIT, m["dev_r_s"], m["iops"], unlimited["iops"]))
    # the device's own counters over the measured window, and iobench's count
    assert m["dev_r_s"] <= SLICE_LIMIT * 1.05 and m["iops"] <= SLICE_LIMIT * 1.05, (m["dev_r_s"], m["iops"])
    # 4 threads of 16K random reads on the same drive without the limit did far more: the
    # slice's limit is what held the benchmark
    assert m["iops"] >= 0.5 * SLICE_LIMIT and unlimited["iops"] > 1.5 * SLICE_LIMIT, (m["iops"], unlimited["iops"])
    assert rec["verdict"] == "PASS", (rec["verdict"], rec["reasons"])       # nothing foreign on a quiet drive


def test_no_unit_is_left_behind(compliance_runs, vm_guest):
    for name in ("low", "high", "slice"):
        _measured(compliance_runs(name))       # a request the drive never completed may hold one
    g = vm_guest(HOST)
    left = g.ssh("systemctl list-units 'fleetqual-job-*' --all --no-legend --plain; systemctl --failed --no-legend "
                 "--plain").stdout.strip()
    assert left == "", left
    assert "fleetqual-job-" not in g.ssh("ls /sys/fs/cgroup/system.slice").stdout
