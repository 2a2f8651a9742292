# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's kernel checks (plugin_utils/judge_drives.kernel_checks, docs/kernel-log.md):
host records carrying a kernel section -- none during the run: PASS; above the limit: FAIL
quoting the kernel line and the drive's serial; before the run only: PASS with context; not
collected: a warning, never a failure; the rule max_kernel_errors validated and applied."""
import copy
import json
import os

import pytest
from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import kmsg
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.drives import kernel_errors
from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.rules import validate_rules
from ansible_collections.fleetqual.storage.plugins.plugin_utils.fleet.drive_consistency import drive_rows
from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.rows import drive_table
from test_probes import log_section

FIX = os.path.join(unitpaths.UNIT, "fixtures", "controller")
LINE = "I/O error, dev sdb, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2"


def load_slow(devices=("sdb", "sdc")):
    """A workload record whose collector watched ``devices``: the drives under test."""
    with open(os.path.join(FIX, "vda_over_cache-rndrd-t8-slow.json")) as fh:
        rec = json.load(fh)
    rec["result"]["collector"]["devices"] = list(devices)
    return rec


@pytest.fixture
def slow():
    return load_slow()


SLOW = load_slow()
DRIVES = [{"name": "sdb", "path": "/dev/sdb", "model": "Samsung SSD 870 EVO 1TB", "serial": "S3Z9NX0K",
           "health": {"collected": True, "tool": "smartctl", "passed": True}},
          {"name": "sdc", "path": "/dev/sdc", "model": "Samsung SSD 870 EVO 1TB", "serial": "S3Z9NX0L",
           "health": {"collected": True, "tool": "smartctl", "passed": True}}]


def section(texts_during=(), texts_before=(), lost=0, started_s=1000.0, sysfs_root="/nonexistent"):
    """A kernel section as the job writes it, built by kmsg.message from records."""
    resolver = kmsg.Resolver(sysfs_root)
    messages, counts, before_counts = [], {}, {}
    seq = 100
    for before, texts in ((True, texts_before), (False, texts_during)):
        for text in texts:
            seq += 1
            t = started_s - 10.0 if before else started_s + seq
            rec = {"seq": seq, "usec": int(t * 1e6), "level": 3, "facility": 0, "text": text, "fields": {}}
            m = kmsg.message(rec, resolver, workload=None if before else "over_cache-rndrd-t8", before_run=before,
                             clock=(started_s, 1.7e9))
            messages.append(m)
            kmsg.count_message(before_counts if before else counts, m)
    return {"source": "kmsg", "collected": True, "reason": None, "warnings": [], "lost": lost, "dropped": 0,
            "start_seq": 100 + len(texts_before), "started_s": started_s, "messages": messages,
            "counts": counts, "counts_before": before_counts}


def kchecks(result):
    return [c for c in result["checks"] if c["metric"] == "kernel.errors"]


def test_no_kernel_errors_during_the_run_is_pass(slow):
    r = judge([slow], [], drives=DRIVES, kernel=section())
    assert r["verdict"] == "PASS"
    got = [(c["drive"], c["rule"], c["status"], c["value"], c["limit"]) for c in kchecks(r)]
    assert got == [("sdb", "max_kernel_errors", "pass", 0, 0), ("sdc", "max_kernel_errors", "pass", 0, 0)]
    assert kchecks(r)[0]["message"] == ("drive sdb (Samsung SSD 870 EVO 1TB, serial S3Z9NX0K): no kernel storage "
                                        "errors during the run (limit 0)")


def test_errors_above_the_limit_fail_quoting_the_line_and_the_serial(slow):
    kernel = section([LINE, "Buffer I/O error on dev sdb1, logical block 256, async page read",
                      "sd 2:0:0:0: [sdb] tag#3 Sense Key : Medium Error [current]"])
    r = judge([slow], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "FAIL"
    # the first line of each distinct message
    assert r["reasons"] == ['drive sdb (Samsung SSD 870 EVO 1TB, serial S3Z9NX0K): 3 kernel storage errors during '
                            'the run (limit 0): "%s"; "Buffer I/O error on dev sdb1, logical block 256, async page '
                            'read"; "sd 2:0:0:0: [sdb] tag#3 Sense Key : Medium Error [current]"' % LINE]
    (c,) = [c for c in kchecks(r) if c["drive"] == "sdb"]
    assert (c["serial"], c["value"], c["status"], c["kind"]) == ("S3Z9NX0K", 3, "fail", "drive")
    assert c["kernel"]["counts"] == {"io_error": 1, "buffer_io_error": 1, "medium_error": 1}
    assert [x["workload"] for x in c["kernel"]["lines"]] == ["over_cache-rndrd-t8"] * 3
    assert "io_error 1" in c["evidence"] and "workload over_cache-rndrd-t8" in c["evidence"]
    # the other drive is untouched
    assert [x["status"] for x in kchecks(r) if x["drive"] == "sdc"] == ["pass"]
    assert kernel_errors(kernel, "sdb") == 3 and kernel_errors(kernel, "sdc") == 0


# what the NVMe driver of Debian 12's kernel (6.1) logged for a drive that stopped completing
# requests (the VM tier's hanging drive, tests/vm/test_vm_faults.py)
HUNG = ["nvme nvme0: I/O 996 (I/O Cmd) QID 1 timeout, aborting", "nvme nvme0: Abort status: 0x0",
        "nvme nvme0: I/O 996 QID 1 timeout, reset controller", "nvme nvme0: I/O 17 (I/O Cmd) QID 1 timeout, aborting",
        "nvme nvme0: Abort status: 0x0", "nvme nvme0: I/O 17 QID 1 timeout, reset controller"]
NVME = [{"name": "nvme0n1", "path": "/dev/nvme0n1", "model": "QEMU NVMe Ctrl", "serial": "FQHANG01",
         "health": {"collected": True, "tool": "nvme-cli", "passed": True}}]


def test_a_hung_controller_is_quoted_at_each_step_once(tmp_path):
    """Timeout, abort, reset, and again: each distinct message once in the reason (a drive that
    fails again and again the same way is not quoted again), every line counted."""
    (tmp_path / "class" / "nvme" / "nvme0" / "nvme0n1").mkdir(parents=True)    # the controller's namespace
    kernel = section(HUNG, sysfs_root=str(tmp_path))
    r = judge([load_slow(("nvme0n1",))], [], drives=NVME, kernel=kernel)
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ['drive nvme0n1 (QEMU NVMe Ctrl, serial FQHANG01): 6 kernel storage errors during the run '
                            '(limit 0): "%s"; "%s"; "%s"' % tuple(HUNG[:3])]
    (c,) = kchecks(r)
    assert c["kernel"]["counts"] == {"nvme_timeout": 4, "nvme_reset": 2}
    # the same message about other sectors is one message; past three, how many more
    many = [LINE.replace("2048", str(2048 + 8 * i)) for i in range(20)] + [
        "Buffer I/O error on dev sdb1, logical block 256, async page read",
        "sd 2:0:0:0: [sdb] tag#3 Sense Key : Medium Error [current]",
        "sd 2:0:0:0: [sdb] tag#3 Add. Sense: Unrecovered read error",
        "sd 2:0:0:0: [sdb] tag#3 FAILED Result: hostbyte=DID_OK driverbyte=DRIVER_OK"]
    r = judge([load_slow()], [], drives=DRIVES, kernel=section(many))
    assert r["reasons"][0].endswith('"%s"; "Buffer I/O error on dev sdb1, logical block 256, async page read"; '
                                    '"sd 2:0:0:0: [sdb] tag#3 Sense Key : Medium Error [current]" (+2 other messages)'
                                    % LINE), r["reasons"]


def test_a_drive_rule_raises_the_limit_for_the_drives_it_selects(slow):
    kernel = section([LINE, LINE.replace("2048", "4096")])
    rules = [{"name": "tolerant-sdb", "drive": "S3Z9NX0K", "max_kernel_errors": 2}]
    assert validate_rules(rules) == []
    r = judge([slow], rules, drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS"
    got = [(c["drive"], c["rule"], c["status"], c["limit"]) for c in kchecks(r)]
    assert got == [("sdb", "tolerant-sdb", "pass", 2), ("sdc", "max_kernel_errors", "pass", 0)]
    r = judge([slow], [{"max_kernel_errors": 1}], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "FAIL" and r["reasons"][0].startswith(
        "drive sdb (Samsung SSD 870 EVO 1TB, serial S3Z9NX0K): 2 kernel storage errors during the run (limit 1)")
    assert [c["rule"] for c in kchecks(r)] == ["max_kernel_errors@drive:*"] * 2


def test_before_the_run_only_is_pass_with_context(slow):
    kernel = section(texts_before=[LINE])
    r = judge([slow], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS"
    assert [c["value"] for c in kchecks(r)] == [0, 0]
    (w,) = [w for w in r["warnings"] if "before the run" in w]
    assert w.startswith("kernel log before the run (context, not judged): 1 storage message on sdb, the last: "
                        '"%s"' % LINE)
    # judged when asked, within the look-back
    r = judge([slow], [], drives=DRIVES, kernel=kernel, kernel_log={"judge_before_run": True})
    assert r["verdict"] == "FAIL" and "before the run" in kchecks(r)[0]["evidence"]
    r = judge([slow], [], drives=DRIVES, kernel=kernel, kernel_log={"judge_before_run": True, "lookback_s": 5})
    assert r["verdict"] == "PASS"       # the message is 10 s before the start: outside the look-back


def test_not_collected_is_a_warning_never_a_failure(slow):
    kernel = kmsg.not_collected("/dev/kmsg: permission denied (not root, or kernel.dmesg_restrict=1); "
                                "journalctl -k: journalctl -k shows no kernel message of this boot")
    r = judge([slow], [{"max_kernel_errors": 0}], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS"
    assert r["warnings"][0].startswith("kernel log not collected: /dev/kmsg: permission denied")
    assert [c["status"] for c in kchecks(r)] == ["n/a"]
    assert kernel_errors(kernel, "sdb") is None


def test_lost_records_and_messages_on_other_devices_are_said(slow):
    kernel = section(["I/O error, dev sda, sector 8 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2",
                      "ata7: hard resetting link"], lost=12)
    r = judge([slow], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS"       # not on a drive under test: said, not judged
    assert any("12 records were overwritten" in w for w in r["warnings"])
    (w,) = [w for w in r["warnings"] if "no drive under test" in w]
    assert "sda: io_error 1" in w and "unattributed: link_reset 1" in w
    assert "12 kernel log records were overwritten" in kchecks(r)[0]["evidence"]


def test_without_an_inventory_the_drives_the_kernel_named_are_judged(slow):
    r = judge([slow], [], drives=None, kernel=section([LINE]))
    assert r["verdict"] == "FAIL"
    (c,) = kchecks(r)
    assert c["drive"] == "sdb" and c["message"].startswith("drive sdb (model unknown, serial unknown): 1 kernel "
                                                           "storage error during the run (limit 0)")


def test_without_a_kernel_section_the_judge_is_unchanged(slow):
    a = judge([slow], [], drives=DRIVES)
    b = judge([slow], [], drives=DRIVES, kernel=None)
    assert a == b and not kchecks(a)


def test_rule_validation_names_the_variable():
    assert validate_rules([{"drive": "sdb", "max_kernel_errors": -1}]) == [
        "fleetqual_thresholds[0].max_kernel_errors: must not be negative, got -1; closest: 0"]
    errs = validate_rules([{"max_kernel_error": 0}])
    assert errs and "did you mean max_kernel_errors?" in errs[0]


@settings(max_examples=150, deadline=None)
@given(during=st.lists(st.sampled_from([LINE, "Buffer I/O error on dev sdc1, logical block 1, async page read",
                                        "ata3: hard resetting link", "EXT4-fs error (device sdb1): x"]), max_size=8),
       limit=st.integers(min_value=0, max_value=6))
def test_property_verdict_follows_the_count_and_the_limit(during, limit):
    kernel = section(during)
    r = judge([copy.deepcopy(SLOW)], [{"max_kernel_errors": limit}], drives=DRIVES, kernel=kernel)
    for c in kchecks(r):
        n = sum((kernel["counts"].get(c["drive"]) or {}).values())
        assert c["value"] == n and c["status"] == ("pass" if n <= limit else "fail")
    failing = any(sum(v.values()) > limit for d, v in kernel["counts"].items() if d in ("sdb", "sdc"))
    assert (r["verdict"] == "FAIL") == failing


@pytest.mark.parametrize("value,error", [
    ({}, None),
    ({"judge_before_run": True, "lookback_s": 3600}, None),
    ({"lookback_s": None}, None),
    ({"judge_befor_run": True}, "host db1: fleetqual_kernel_log.judge_befor_run: unknown key (did you mean "
                                "judge_before_run?); valid: judge_before_run, lookback_s"),
    ({"judge_before_run": "yes"}, "host db1: fleetqual_kernel_log.judge_before_run: must be true or false, got str "
                                  "'yes'; closest: true"),
    ({"lookback_s": -5}, "host db1: fleetqual_kernel_log.lookback_s: must be a number of seconds >= 0 (or null: all "
                         "the kernel log holds), got -5; closest: 0"),
    ([1], "host db1: fleetqual_kernel_log: must be a mapping with judge_before_run and/or lookback_s, got list [1]"),
])
def test_fleetqual_kernel_log_is_validated_naming_host_variable_and_closest(value, error):
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate.inputs import validate_inputs
    errors = validate_inputs({"fleetqual_kernel_log": value}, host="db1")
    assert errors == ([error] if error else [])


def test_the_record_carries_the_kernel_section():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import record as host_record
    kernel = section([LINE])
    inputs = {"run_id": "r1", "profile": "quick", "groups": [], "test_dir": "/t", "results_dir": "/tmp/r"}
    judgement = judge([SLOW], [], drives=DRIVES, kernel=kernel)
    rec = host_record.assemble("db1", inputs, {"drives": {"drives": DRIVES}}, [SLOW], {}, judgement, kernel=kernel)
    assert rec["kernel"] is kernel and rec["verdict"] == "FAIL"
    assert host_record.assemble("db1", inputs, {}, [], {}, judge([], []))["kernel"] is None


def test_a_drive_not_under_test_is_said_not_judged_unless_a_rule_names_it():
    on_sdc = load_slow(devices=("sdc",))
    kernel = section([LINE])
    r = judge([on_sdc], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS" and [c["drive"] for c in kchecks(r)] == ["sdc"]
    (w,) = [w for w in r["warnings"] if "no drive under test" in w]
    assert w == ('kernel log: storage messages during the run on no drive under test, not judged: sdb: io_error 1 '
                 '(first: "%s")' % LINE)
    r = judge([on_sdc], [{"drive": "sdb", "max_kernel_errors": 0}], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "FAIL" and [c["drive"] for c in kchecks(r)] == ["sdb", "sdc"]
    # a drive a target runs on is under test
    with_target = [dict(DRIVES[0], targets=["data1"]), DRIVES[1]]
    r = judge([on_sdc], [], drives=with_target, kernel=kernel)
    assert r["verdict"] == "FAIL" and [c["drive"] for c in kchecks(r)] == ["sdb", "sdc"]


# --------------------------------------------------------------------------- capability probes

PROBE_ZEROES = "operation not supported error, dev sdb, sector 0 op 0x9:(WRITE_ZEROES) flags 0x800 phys_seg 0 prio class 2"


def test_a_capability_probe_is_a_note_on_the_drive_never_a_kernel_error(slow):
    """A refused WRITE_ZEROES during the run (the job's KernelLog, test_probes.log_section): the
    drive PASSes with 0 kernel errors, its check and the drive table carry the note."""
    kernel = log_section(during=[PROBE_ZEROES, PROBE_ZEROES])
    r = judge([slow], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "PASS", r["reasons"]
    sdb, sdc = kchecks(r)
    assert (sdb["status"], sdb["value"], sdc["value"]) == ("pass", 0, 0) and "notes" not in sdc
    note = ("does not support write zeroes (2 WRITE_ZEROES requests failed during the run: operation not supported "
            "error; a capability probe, not a fault)")
    assert sdb["notes"] == [note]
    assert sdb["message"].endswith("no kernel storage errors during the run (limit 0); note: " + note)
    assert PROBE_ZEROES in sdb["evidence"]
    assert kernel_errors(kernel, "sdb") == 0
    record = {"host": "db1", "drives": DRIVES, "checks": r["checks"]}
    rows = drive_rows([record])
    assert [(d["drive"], d["verdict"], d["kernel_errors"], d.get("kernel_notes")) for d in rows] == [
        ("sdb", "PASS", 0, [note]), ("sdc", "PASS", 0, None)]
    cells, _left = drive_table({"drives": rows})
    assert cells[0]["reasons"] == "note: " + note and not cells[0]["_flagged"]


def test_a_probe_before_the_run_is_said_apart(slow):
    kernel = log_section(during=[PROBE_ZEROES], before=[PROBE_ZEROES, PROBE_ZEROES])
    sdb = kchecks(judge([slow], [], drives=DRIVES, kernel=kernel))[0]
    assert sdb["notes"] == ["does not support write zeroes (1 WRITE_ZEROES request failed during the run (and 2 "
                            "before it): operation not supported error; a capability probe, not a fault)"]
    kernel = log_section(before=[PROBE_ZEROES])
    sdb = kchecks(judge([slow], [], drives=DRIVES, kernel=kernel))[0]
    assert sdb["value"] == 0 and sdb["notes"][0].startswith(
        "does not support write zeroes (1 WRITE_ZEROES request failed before the run: ")


def test_a_failed_read_beside_a_probe_still_fails(slow):
    kernel = log_section(during=[PROBE_ZEROES, LINE])
    r = judge([slow], [], drives=DRIVES, kernel=kernel)
    assert r["verdict"] == "FAIL"
    assert r["reasons"][0].startswith("drive sdb (Samsung SSD 870 EVO 1TB, serial S3Z9NX0K): 1 kernel storage error "
                                      'during the run (limit 0): "%s"; note: does not support write zeroes' % LINE)
