"""Faults a drive or a host really has, held to the product through the real playbook (the VM
tier, docs/testing.md; docs/integrity.md, "A drive that hangs"): each guest has its own
kernel, so what it logs is its own, and its drives fail the way the test makes them.

Two guests (the slots left while the other scenarios' guests live), two playbook runs:

* ``vm-fault``: FQHANG01, an NVMe drive served by nbdkit that the test makes stop completing
  requests (``guests.Hang``), and FQEIO01, an NVMe drive whose reads of 64 KiB at 8 MiB fail
  (QEMU's ``blkdebug``);
* ``vm-power``: FQPWR01, a plain NVMe drive.

Run ``hang``, both guests at once:

* vm-fault qualifies FQHANG01 with one 10 s random read at 4 threads and a slack of 28 s; 3 s
  into the workload the drive stops completing requests. The guest's NVMe driver times them
  out, aborts, resets the controller. The host is ERROR: the reason names iobench in
  uninterruptible sleep and the kernel's timeout, abort and reset lines; that process is
  in state D in the guest after the run; the job's final status came by its deadline and
  the bounded stop after it, and the controller's wait ended with it; the hung region was
  left for the next preflight, not zeroed.
* vm-power qualifies FQPWR01 with a 120 s random write; once the job writes the device the
  guest loses its power (SIGKILL of its QEMU): UNREACHABLE alone, while vm-fault got its
  own verdict. Once the controller gave up on it, it boots again on the same disk files.

Run ``after``, both guests:

* vm-fault: the ``burnin`` profile (one round of 3 s passes) on FQEIO01, the critical
  warning of both its NVMe controllers raised through QMP while it runs: FAIL, citing the
  failing offsets inside the region, the guest kernel's own line for them, and the warning
  that rose during the run; the passes after the warning measured (a controller was once
  seen to stop completing requests after a warning was set on another one);
* vm-power: FQPWR01 again: its preflight reports the job the power loss killed (state died)
  and zeroes the device region it left written; PASS, with 0 kernel storage errors (the EIO
  guest's kernel lines are its own).

The killed job's record names the workload it was killed in (the status's rename is on disk
too), and the NVMe driver's own line for a failed read, as Debian's kernel prints it
(``I/O Cmd(0x2) @ LBA ...``), is read as a storage message.
"""
import json
import os
import re
import threading
import time

import pytest

import fleetrun
from conftest import GUESTS, TIMES, host_entry
from guests import Drive

from ansible_collections.fleetqual.storage.plugins.module_utils.job.hung import HUNG_GRACE_S
from ansible_collections.fleetqual.storage.plugins.module_utils.job.workload import KILL_GRACE_S

FAULT, POWER = "vm-fault", "vm-power"
MIB = 1 << 20
EIO_AT, EIO_LEN = 8 * MIB, 64 << 10          # inside every workload's data set, away from the partition table
DRIVE_SIZE = 64 * MIB
TARGET_SIZE = 32 * MIB
HANG, EIO, PWR = (Drive("nvme", "FQHANG01", size=DRIVE_SIZE, nbdkit=True),
                  Drive("nvme", "FQEIO01", size=DRIVE_SIZE, read_errors=((EIO_AT, EIO_LEN),)),
                  Drive("nvme", "FQPWR01", size=DRIVE_SIZE))
# this module's guests, in conftest's table before the end of collection boots them
GUESTS.update({FAULT: [HANG, EIO], POWER: [PWR]})

pytestmark = [pytest.mark.vm(FAULT, POWER), pytest.mark.slow, pytest.mark.long]

TEST_DIR = "/var/tmp/fleetqual"
BURNIN_DIR = "/var/tmp/fleetqual-burnin"      # the hang run's job status stays in TEST_DIR (its region is left)
POLL = {"fleetqual_progress_interval": 3}    # the controller sees a final state or a dead host within 3 s
SLACK = 28
HANG_PLAN = dict(POLL, fleetqual_profile="quick", fleetqual_workload_timeout_slack=SLACK, fleetqual_matrix=[
    {"workload": "hang", "mode": "rndrd", "threads": 4, "total_size": "16M", "block_size": "16K", "direct": True,
     "time": 10, "warmup": 1}])
HANG_AFTER_S = 3          # seconds into the workload the drive stops completing requests
KILL_PLAN = dict(POLL, fleetqual_profile="quick", fleetqual_matrix=[
    {"workload": "power", "mode": "rndwr", "threads": 1, "total_size": "16M", "block_size": "16K", "direct": True,
     "time": 120, "warmup": 0}])
READ_PLAN = dict(POLL, fleetqual_profile="quick", fleetqual_matrix=[
    {"workload": "after", "mode": "rndrd", "threads": 1, "total_size": "16M", "block_size": "16K", "direct": True,
     "time": 4, "warmup": 1}])
# one round of the burn-in: write pass (read back), verify pass, mix, 3 s each
BURNIN_PLAN = dict(POLL, fleetqual_profile="burnin", fleetqual_workload_overrides={"time": 3},
                   fleetqual_test_dir=BURNIN_DIR, fleetqual_cache_size="8M",     # over_cache: 4 x 8M, the region
                   fleetqual_workload_timeout_slack=60)       # bounded, should its drive stop completing requests
# 0.003 h = 10.8 s: one round. An extra variable: the validation play reads the burnin profile's
# hours with the controller's own fleetqual_burnin_time (24), not a host's
BURNIN_TIME = {"fleetqual_burnin_time": 0.003}
WARNING = 0x04            # NVM subsystem reliability degraded
# the guest stops while QEMU resets the hung controller (guests.Hang) and the job's last steps
# (the cleanup that skips the hung target, the last kernel read, the status) take seconds under TCG
STOP_SLOP_S = 20


def entry(g, serial, plan):
    """An inventory host of guest ``g`` qualifying its drive ``serial`` (by-id, opted in) with
    a region of TARGET_SIZE."""
    e = host_entry(g, serial, plan)
    e["vars"]["fleetqual_targets"][0]["size"] = TARGET_SIZE
    e["vars"]["fleetqual_test_dir"] = plan.get("fleetqual_test_dir", TEST_DIR)
    return e


def status_path(test_dir):
    return os.path.join(test_dir, ".fleetqual-job", "status.json")


class StatusWatch:
    """The job status of ``test_dir`` in guest ``g``, read once a second by one SSH session that
    prints it for as long as it runs (a login per look would cost the TCG guest's CPU)."""

    MARK = "@@status@@"

    def __init__(self, g, test_dir):
        self.latest, self.lock = None, threading.Lock()
        self.proc = g.ssh_popen("while :; do echo %s; cat %s 2>/dev/null; echo; sleep 1; done"
                                % (self.MARK, status_path(test_dir)))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = []
        for line in self.proc.stdout:
            if line.strip() == self.MARK:
                text = "".join(buf).strip()
                buf = []
                if text:
                    try:
                        doc = json.loads(text)
                    except ValueError:
                        continue
                    with self.lock:
                        self.latest = doc
            else:
                buf.append(line)

    def status(self, run_id):
        """The last status read of the job of ``run_id``, or None."""
        with self.lock:
            doc = self.latest
        return doc if doc and doc.get("run_id") == run_id else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()       # our ssh client, by its Popen
            self.proc.wait(timeout=30)


def written(path, length=MIB):
    """Whether the first ``length`` bytes of a drive's raw file hold anything but zeros."""
    with open(path, "rb") as fh:
        return any(fh.read(length))


def zeros(path, length):
    with open(path, "rb") as fh:
        data = fh.read(length)
    return len(data) == length and not any(data)


def progress(base, run_id, host):
    """The controller's progress file of ``host`` in a run (plugin_utils/remote/job_wait.py), or {}."""
    try:
        with open(os.path.join(base, "results", run_id, ".progress", host + ".json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def play(vm_fleet, base, run_id, entries, extra_vars=None):
    """The playbook run in a thread: (thread, box) where box["run"] is the FleetRun once done."""
    inv = vm_fleet.inventory(os.path.join(base, "inventory"), entries)
    box = {}

    def go():
        r = fleetrun.run_playbook(vm_fleet, inv, base, run_id, extra_vars=extra_vars, args=["--forks", "4"],
                                  timeout=1200)
        r.targets = {e["name"]: e["vars"]["fleetqual_targets"][0] for e in entries}
        box["run"] = r
    t = threading.Thread(target=go, name="vm-faults-" + run_id, daemon=True)
    t.start()
    return t, box


def hang_run(fault, power, vm_fleet, base, run_id):
    """Run ``hang`` (module docstring): FleetRun with ``.seen`` (what the test did and saw)."""
    seen = {"killed_pid": None, "killed_status": None, "hang": None, "restarted": False}
    watches = {FAULT: StatusWatch(fault, TEST_DIR), POWER: StatusWatch(power, TEST_DIR)}
    t, box = play(vm_fleet, base, run_id, [entry(fault, HANG.serial, HANG_PLAN), entry(power, PWR.serial, KILL_PLAN)])
    hang = None
    try:
        while t.is_alive() and (seen["killed_pid"] is None or hang is None):
            st = watches[POWER].status(run_id)
            if seen["killed_pid"] is None and st and st.get("index") and written(power.drive_file(PWR)) \
                    and time.time() - (st.get("workload_started_epoch") or time.time()) >= 2:
                # the power loss: the job has recorded its region and is writing it
                watches[POWER].stop()
                seen["killed_status"], seen["killed_pid"] = st, power.power_off()
            st = watches[FAULT].status(run_id)
            if hang is None and st and st.get("index") == 1 \
                    and time.time() - (st.get("workload_started_epoch") or time.time()) >= HANG_AFTER_S:
                hang = seen["hang"] = fault.hang(HANG)
            time.sleep(0.5)
        for w in watches.values():
            w.stop()
        # once the controller has given up on it, vm-power boots again on its disk files while
        # the run goes on (a host found unreachable gets no more task in this run)
        while t.is_alive() and seen["killed_pid"] and progress(base, run_id, POWER).get("state") != "unreachable":
            time.sleep(1)
        if seen["killed_pid"]:
            power.restart()
            seen["restarted"] = threading.Thread(target=power.wait_ssh, daemon=True)
            seen["restarted"].start()
        t.join(1200)
        run = box.get("run")
        assert run is not None, "the playbook of run %s did not end" % run_id
        run.seen = seen
        run.evidence = hang_evidence(fault, run) if hang is not None else {}
    finally:
        for w in watches.values():
            w.stop()
        if hang is not None:
            hang.stop()         # the requests held go on: the process left to the kernel ends
        t.join(1200)
    run.evidence["after_resume"] = fault.ssh("for i in $(seq 60); do pgrep -x iobench >/dev/null || break; "
                                             "sleep 1; done; pgrep -x iobench || true", check=False).stdout.strip()
    if seen["restarted"]:
        seen["restarted"].join(600)
        power.wait_ssh()        # the error, if it did not answer
        seen["restarted"] = True
    return run


def hang_evidence(g, run):
    """What the guest shows while its drive still hangs: the state of the process the host's
    reason names, its threads' states and where they wait, the kernel's NVMe lines, the job's
    status left in the test directory."""
    out = {"pid": None, "states": "", "dmesg": "", "status": None}
    t0 = time.time()
    guest_now = float(g.ssh("date +%s.%N", check=False, timeout=60).stdout.strip() or "nan")
    out["skew"] = guest_now - (t0 + time.time()) / 2      # the guest's clock minus this machine's
    rec = run.record(FAULT) if run.has_record(FAULT) else {}
    m = re.search(r"iobench \(pid (\d+)\)", " ".join(rec.get("reasons") or []))
    if m:
        pid = int(m.group(1))
        out["pid"] = pid
        out["states"] = g.ssh("for t in /proc/%d/task/*; do echo $(awk '{print $3}' $t/stat) $(cat $t/wchan); done"
                              % pid, check=False, timeout=60).stdout
    out["dmesg"] = g.ssh("dmesg | grep -E 'nvme'", check=False, timeout=60).stdout
    text = g.ssh("cat %s" % status_path(TEST_DIR), check=False, timeout=60).stdout
    try:
        out["status"] = json.loads(text)
    except ValueError:
        pass
    return out


def after_run(fault, power, vm_fleet, base, run_id):
    """Run ``after`` (module docstring): FleetRun with ``.seen``."""
    seen = {"warning_set": None}
    watch = StatusWatch(fault, BURNIN_DIR)
    t, box = play(vm_fleet, base, run_id, [entry(fault, EIO.serial, BURNIN_PLAN), entry(power, PWR.serial, READ_PLAN)],
                  extra_vars=BURNIN_TIME)
    try:
        while t.is_alive() and seen["warning_set"] is None:
            st = watch.status(run_id)
            if st and st.get("index"):
                # the start read the drives' health already; the cleanup reads it again. The other
                # controller's first: a controller was seen to stop completing requests after a
                # warning was set on another one
                for drive in (HANG, EIO):
                    fault.qmp("qom-set", path=fault.qom_path(drive), property="smart_critical_warning", value=WARNING)
                seen["warning_set"] = st.get("current")
                seen["warning_at"] = time.time()
            time.sleep(0.5)
        t.join(1200)
    finally:
        watch.stop()
        t.join(1200)
    run = box.get("run")
    assert run is not None, "the playbook of run %s did not end" % run_id
    run.seen = seen
    run.power_region_zero = zeros(power.drive_file(PWR), TARGET_SIZE)
    run.dmesg = fault.ssh("dmesg | grep -E 'nvme|sector' | tail -40", check=False).stdout
    return run


@pytest.fixture(scope="module")
def fault_runs(vm_guest, vm_fleet, tmp_path_factory):
    """``runs(name)``: run ``hang`` or ``after`` (module docstring), each made once, in that order."""
    done = {}
    makers = {"hang": hang_run, "after": after_run}

    def run(name):
        if name == "after":
            run("hang")
        if name not in done:
            fault, power = vm_guest(FAULT), vm_guest(POWER)
            base = str(tmp_path_factory.mktemp("vm-faults-" + name))
            r = makers[name](fault, power, vm_fleet, base, "vm-faults-" + name)
            TIMES["run faults-%s (%s, %s)" % (name, FAULT, POWER)] = r.elapsed
            with open(os.path.join(base, "playbook.out"), "w") as fh:     # for the reader of a failure
                fh.write(r.out)
            with open(os.path.join(base, "seen.json"), "w") as fh:
                json.dump({"seen": {k: (v.events if hasattr(v, "events") else v) for k, v in r.seen.items()},
                           "evidence": getattr(r, "evidence", None)}, fh, indent=1, default=str)
            done[name] = r
        return done[name]
    return run


def brief(rec):
    return (rec.get("verdict"), rec.get("reasons"), rec.get("error"))


def verdicts(run):
    return {h["host"]: h["verdict"] for h in run.fleet()["hosts"]}


# --------------------------------------------------------------------------- run "hang"

def test_a_drive_that_hangs_is_an_error_naming_the_sleeping_process_and_the_kernels_lines(fault_runs):
    run = fault_runs("hang")
    assert run.seen["hang"] is not None, "the drive was never made to hang (the job never ran its workload)"
    rec = run.record(FAULT)
    print("hang: %s; the drive's events %s" % (brief(rec), run.seen["hang"].events))
    assert rec["verdict"] == "ERROR", brief(rec)
    hung = [r for r in rec["reasons"] if "did not end %d s after SIGKILL" % HUNG_GRACE_S in r]
    # hang-rndrd-t4 ...: stopped when the job's deadline passed: iobench (pid N) did not end 10 s after
    # SIGKILL: 4 of 5 threads in uninterruptible sleep (D) in ...: the device does not complete its
    # requests; the process is left to the kernel
    assert hung and "uninterruptible sleep (D)" in hung[0] and "the process is left to the kernel" in hung[0], \
        rec["reasons"]
    assert re.search(r"iobench \(pid \d+\)", hung[0]), hung[0]
    # the kernel's own lines about the drive, each step quoted: the timeout, the abort, the reset
    drive = next(d for d in rec["drives"] if d.get("serial") == HANG.serial)
    kernel = [r for r in rec["reasons"] if r.startswith("drive %s (" % drive["name"]) and "kernel storage" in r]
    assert kernel, rec["reasons"]
    assert re.search(r'"nvme nvme\d+: I/O \d+ \(I/O Cmd\) QID \d+ timeout, aborting"', kernel[0]), kernel[0]
    assert re.search(r'"nvme nvme\d+: I/O \d+ QID \d+ timeout, reset controller"', kernel[0]), kernel[0]
    assert "serial %s" % HANG.serial in kernel[0]
    # the controller reset happened while the drive hung (the held requests let go for it)
    assert run.seen["hang"].released() >= 1, run.seen["hang"].events


def test_the_process_named_sleeps_uninterruptibly_in_the_guest(fault_runs):
    ev = fault_runs("hang").evidence
    assert ev.get("pid"), ev
    states = [line.split() for line in ev["states"].splitlines() if line.strip()]
    print("threads of iobench %s after the run (state, wchan): %s" % (ev["pid"], states))
    # SIGKILLed and still there: its I/O threads wait for the drive in uninterruptible sleep;
    # unless the guest's driver already gave the controller up before this look (the run
    # ends only after vm-power's loss is handled: on a loaded machine the driver's retries
    # ran out first, "disable controller" then "Removing after probe failure", and the
    # requests ended in errors, the process with them: gone, or a zombie its parent has not
    # reaped yet, state Z)
    gave_up = re.search(r"QID \d+ timeout, disable controller", ev["dmesg"]) and "Removing after probe failure" \
        in ev["dmesg"]
    ended = not states or all(s[0] == "Z" for s in states)
    assert (states and any(s[0] == "D" for s in states)) or (ended and gave_up), (ev["states"], ev["dmesg"])
    # the guest's own kernel said so: timed out, aborted, reset
    assert re.search(r"QID \d+ timeout, aborting", ev["dmesg"]) and re.search(
        r"QID \d+ timeout, reset controller", ev["dmesg"]), ev["dmesg"]
    # once the drive completes requests again, the process the job left to the kernel ends
    assert ev["after_resume"] == "", ev["after_resume"]


def test_the_hung_host_ends_by_its_deadline_and_its_region_is_left(fault_runs):
    run = fault_runs("hang")
    st = run.evidence.get("status")
    assert st, "the hung job's status was not kept in %s" % TEST_DIR
    deadline, finished = st["deadline_epoch"], st["finished_epoch"]
    print("job: deadline %.1f, final status %.1f (%+.1f s); cleanup %s" % (deadline, finished, finished - deadline,
                                                                           st["cleanup"]))
    assert st["state"] == "failed" and finished is not None, st["state"]
    # docs/integrity.md, "A drive that hangs": SIGTERM at the deadline, SIGKILL KILL_GRACE_S later,
    # left to the kernel HUNG_GRACE_S after that, then the final status
    assert finished <= deadline + KILL_GRACE_S + HUNG_GRACE_S + STOP_SLOP_S, (deadline, finished)
    # the controller's wait ended on that final status, at a poll after it (a poll every 3 s, one
    # SSH round trip to a TCG guest: seconds on a busy machine), not at its own limit (the
    # deadline plus 120 s, 80 s after the final status)
    prog = progress(run.base, run.run_id, FAULT)
    seen_at = prog.get("updated", float("inf")) + run.evidence["skew"]        # on the guest's clock
    assert prog.get("state") == "failed" and seen_at <= finished + POLL["fleetqual_progress_interval"] + 30, \
        (prog, finished, run.evidence["skew"])
    assert "still running" not in " ".join(run.record(FAULT)["reasons"])
    # nothing more was asked of the hung drive: its region left for the next preflight, not zeroed
    (region,) = st["regions"]
    assert region["serial"] == HANG.serial
    assert any(x.startswith(region["device"]) for x in st["cleanup"]["left"]), st["cleanup"]
    assert any("not zeroed: the device stopped completing requests" in w for w in st["cleanup"]["warnings"]), \
        st["cleanup"]


def test_a_guest_that_loses_its_power_is_unreachable_alone(fault_runs):
    run = fault_runs("hang")
    assert run.seen["killed_pid"], "vm-power's job never wrote its device (status %s)" % run.seen["killed_status"]
    got = verdicts(run)
    print("power loss: %s; killed qemu %s at %s" % (got, run.seen["killed_pid"], run.seen["killed_status"].get("current")))
    assert got.get(POWER) in ("UNREACHABLE", "ERROR"), got
    # the other host got its own verdict, with its own reasons
    assert got.get(FAULT) == "ERROR" and not any(POWER in r for r in run.record(FAULT)["reasons"]), got
    assert run.rc != 0


# --------------------------------------------------------------------------- run "after"

def test_the_next_run_reports_the_killed_job_and_zeroes_its_region(fault_runs):
    killed = fault_runs("hang").seen["killed_status"]
    run = fault_runs("after")
    rec = run.record(POWER)
    prev = rec.get("previous_job") or {}
    print("after the power loss: %s; previous job %s" % (brief(rec)[:2], prev))
    assert rec["verdict"] == "PASS", brief(rec)
    # the job the power loss killed: still "running" in its status, its process gone with the boot
    assert (prev.get("run_id"), prev.get("pid"), prev.get("state")) == (killed["run_id"], killed["pid"], "died"), prev
    # the region the job recorded before its first byte: its data set on the opted-in device
    (region,) = killed["regions"]
    assert region["serial"] == PWR.serial
    assert prev.get("regions_zeroed") == ["%s[0+%d]" % (run.targets[POWER]["device"], region["size"])], prev
    said = " ".join(rec.get("warnings") or []) + " " + run.out
    assert "left device regions written" in said and "zeroed" in said, rec.get("warnings")
    # the region is zeros on the drive's own file (the run's own job wrote and zeroed it again too)
    assert run.power_region_zero


def test_the_killed_jobs_record_names_the_workload_it_was_killed_in(fault_runs):
    killed = fault_runs("hang").seen["killed_status"]
    prev = fault_runs("after").record(POWER).get("previous_job") or {}
    assert (prev.get("index"), prev.get("current")) == (killed["index"], killed["current"]), prev


def test_a_region_that_fails_reads_fails_its_host_citing_offsets_and_its_kernel(fault_runs):
    run = fault_runs("after")
    rec = run.record(FAULT)
    print("EIO region: %s" % (brief(rec)[:2],))
    assert rec["verdict"] == "FAIL", brief(rec)
    io = [r for r in rec["reasons"] if "I/O error" in r and "in a region the drive still otherwise serves" in r]
    assert io, rec["reasons"]
    offsets = [int(x) for x in re.findall(r"offsets? ((?:\d+(?:, )?)+)", io[0])[0].split(", ")]
    assert offsets and all(EIO_AT <= o < EIO_AT + EIO_LEN for o in offsets), (offsets, io[0])
    # the guest's own kernel: QEMU's EIO comes back as an unrecovered read error (a medium error)
    drive = next(d for d in rec["drives"] if d.get("serial") == EIO.serial)
    kernel = [r for r in rec["reasons"] if r.startswith("drive %s (" % drive["name"]) and "kernel storage" in r]
    assert kernel, rec["reasons"]
    sectors = [int(s) for s in re.findall(r"dev %s, sector (\d+)" % drive["name"], kernel[0])]
    assert sectors and all(EIO_AT // 512 <= s < (EIO_AT + EIO_LEN) // 512 for s in sectors), kernel[0]
    # the other guest, in the same run: its own kernel logged nothing
    other = run.record(POWER)
    assert other["verdict"] == "PASS", brief(other)
    checks = [c for c in other["checks"] if c.get("metric") == "kernel.errors"]
    assert checks and all(c["value"] == 0 for c in checks), checks
    assert not (other.get("kernel") or {}).get("counts"), other.get("kernel")


def test_the_nvme_drivers_own_line_is_counted(fault_runs):
    run = fault_runs("after")
    assert re.search(r"nvme\d+n\d+: I/O Cmd\(0x2\) @ LBA \d+", run.dmesg), run.dmesg
    rec = run.record(FAULT)
    kinds = {m["kind"] for m in rec["kernel"]["messages"]}
    assert "nvme_error" in kinds, (kinds, run.dmesg)


def test_a_critical_warning_raised_during_a_burnin_fails_it_as_risen(fault_runs):
    run = fault_runs("after")
    assert run.seen["warning_set"], "the burn-in job never ran a workload"
    rec = run.record(FAULT)
    drive = next(d for d in rec["drives"] if d.get("serial") == EIO.serial)
    # healthy when the run began: the start's own health check passed
    assert drive["health"]["critical_warning"] == 0 and drive["health"]["passed"] is True, drive["health"]
    after = next(d for d in rec["drives_after"] if d.get("serial") == EIO.serial)
    assert after["health"]["critical_warning"] == WARNING, after["health"]
    rose = [r for r in rec["reasons"] if r.startswith("burn-in: drive %s (" % drive["name"])]
    assert rose == ["burn-in: drive %s (QEMU NVMe Ctrl, serial %s): critical warning rose during the run from 0x00 to "
                    "0x%02x (NVM subsystem reliability degraded)" % (drive["name"], EIO.serial, WARNING)], \
        rec["reasons"]
    print("warning raised during %s: %s" % (run.seen["warning_set"], rose))
    # the round went on: no controller stopped completing requests after the warnings (on the
    # target's controller and on the other one): every pass still running when they were set,
    # or started after, completed requests (the drive's bad region errs by design). The status the watch acted on
    # can be seconds old under load (a CI run: it named the write pass while the job was in
    # the mix pass), so the passes are the ones whose window ended after that instant.
    ws = {w["burnin"]["pass"]: w for w in rec["workloads"]}
    assert sorted(ws) == ["mix", "verify", "write"], [w.get("id") for w in rec["workloads"]]
    affected = [p for p, w in ws.items() if w["result"]["bench"]["window"]["end_epoch"] > run.seen["warning_at"]]
    assert affected and all(ws[p]["metrics"]["iops"] > 0 for p in affected), \
        (run.seen, {p: (w["result"]["bench"]["window"], w["metrics"]["iops"]) for p, w in ws.items()})
