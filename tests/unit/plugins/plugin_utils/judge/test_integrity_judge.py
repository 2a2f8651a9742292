"""The judge on data integrity (docs/integrity.md): verify mismatches, I/O errors of a drive
that still answers (FAIL) or stopped answering (ERROR), verification off and lost writes
not tracked (notes). Records are real iobench results (tests/unit/fixtures/controller) with
the ``verify`` and ``errors`` sections of iobench's JSON contract laid over them."""
import copy
import json
import os

import pytest

from hypothesis import given, settings, strategies as st
import unitpaths

from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge.host import judge
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.integrity import INTEGRITY_KEYS
from ansible_collections.fleetqual.storage.plugins.plugin_utils.metrics.workload import workload_metrics

FIX = os.path.join(unitpaths.UNIT, "fixtures", "controller")
with open(os.path.join(FIX, "nvme_over_cache-rndrd-t64.json")) as fh:
    BASE = json.load(fh)
with open(os.path.join(FIX, "nvme_over_cache-rndwr-t64.json")) as fh:
    BASE_WRITE = json.load(fh)
ERROR_KEYS = ("op", "file", "device", "offset", "errno", "errno_name", "t_s", "message")


def verify_section(enabled=True, checked=1000, corrupt=0, misplaced=0, stale=0, tracked=True, first=(), reason=None,
                   vpass=None, map_reason=None):
    return {"enabled": enabled, "reason": reason, "checked": checked, "corrupt": corrupt, "misplaced": misplaced,
            "stale": stale, "generation_map": {"tracked": tracked, "blocks": 4096, "bytes": 32768, "reason": map_reason},
            "pass": vpass, "first": list(first)}


def mismatch(kind, offset, expected, found, op="read", device="/dev/loop7", file=None):
    return {"op": op, "file": file, "device": device, "offset": offset, "kind": kind, "expected": expected,
            "found": found}


def io_error(offset, t_s=1.5, op="read", device="/dev/loop7", errno=5, name="EIO"):
    return {"op": op, "file": None, "device": device, "offset": offset, "errno": errno, "errno_name": name,
            "t_s": t_s, "message": "Input/output error"}


def errors_section(samples=(), total=None, ok_after_first=0, stopped=None, max_errors=100):
    samples = list(samples)
    total = len(samples) if total is None else total
    first = dict(samples[0], kind=samples[0]["errno_name"]) if samples else None
    by_kind = {}
    for s in samples:
        by_kind[s["errno_name"]] = by_kind.get(s["errno_name"], 0) + 1
    if total and not by_kind:
        by_kind = {"EIO": total}
    return {"total": total, "by_kind": by_kind, "first": first, "samples": samples, "ok_after_first": ok_after_first,
            "max_errors": max_errors, "stopped": stopped, "policy": "continue until max_errors"}


def record(verify=None, errors=None, wid="over_cache-rndrd-t4", base=BASE):
    rec = copy.deepcopy(base)
    rec["id"] = wid
    rec.pop("metrics", None)
    if verify is not None:
        rec["result"]["bench"]["verify"] = verify
    if errors is not None:
        rec["result"]["bench"]["errors"] = errors
    return rec


def checks(result, rule=None):
    return [c for c in result["checks"] if rule is None or c["rule"] == rule]


# --------------------------------------------------------------------------- metrics

def test_metrics_without_a_verify_section_are_none():
    m = workload_metrics(record())
    assert all(m[k] is None for k in INTEGRITY_KEYS if k.startswith("verify_"))
    assert judge([record()], [])["verdict"] == "PASS"


def test_metrics_flatten_the_contract():
    first = [mismatch("corrupt", 1048576, "crc32c 0x1a2b3c4d", "crc32c 0x00000000")]
    samples = [io_error(4096), io_error(8192, t_s=2.0)]
    m = workload_metrics(record(verify_section(corrupt=3, first=first, vpass={"blocks": 4, "bytes": 65536,
                                                                              "elapsed_s": 0.5, "mib_per_sec": 0.125}),
                                errors_section(samples, ok_after_first=7)))
    assert m["verify_enabled"] is True and m["verify_checked"] == 1000
    assert (m["verify_corrupt"], m["verify_misplaced"], m["verify_stale"], m["verify_bad"]) == (3, 0, 0, 3)
    assert m["verify_stale_tracked"] is True and m["verify_first"] == first
    assert m["verify_pass"] == {"blocks": 4, "bytes": 65536, "elapsed_s": 0.5, "mib_per_sec": 0.125}
    assert m["error_samples"] == [{k: s[k] for k in ERROR_KEYS} for s in samples]
    assert m["errors_ok_after_first"] == 7 and m["errors_stopped"] is None and m["errors_max"] == 100
    assert m["error_first"] == "read /dev/loop7 offset 4096: EIO (Input/output error) at 1.5 s"


# --------------------------------------------------------------------------- mismatches FAIL

def test_corrupt_blocks_fail_citing_where_and_the_checksums():
    first = [mismatch("corrupt", 1048576, "crc32c 0x1a2b3c4d", "0x00ff00ff")]
    r = judge([record(verify_section(corrupt=3, first=first))], [])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["over_cache-rndrd-t4: 3 corrupt blocks read (checksum wrong): /dev/loop7 offset 1048576: "
                            "expected crc32c 0x1a2b3c4d, found 0x00ff00ff (+2 more)"]
    c = checks(r, "data_corrupt")[0]
    assert (c["status"], c["kind"], c["value"], c["metric"]) == ("fail", "integrity", 3, "verify_corrupt")


def test_misplaced_block_quotes_the_offset_found_in_it():
    first = [dict(mismatch("misplaced", 65536, "offset 65536 target 3", "offset 131072 target 3",
                           file="/data/over_cache-16x4M/f3", device=None), found_offset=131072)]
    r = judge([record(verify_section(misplaced=1, first=first))], [])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["over_cache-rndrd-t4: 1 misplaced block read (the block holds another offset's data): "
                            "/data/over_cache-16x4M/f3 offset 65536: expected offset 65536 target 3, found offset 131072 target 3"]


def test_stale_block_is_a_lost_write_with_both_generations():
    first = [mismatch("stale", 8192, "gen 5 run 9f1c2a0b44d1e6f3", "gen 2 run 9f1c2a0b44d1e6f3", op="verify_pass")]
    r = judge([record(verify_section(stale=1, first=first), wid="over_cache-rndwr-t4", base=BASE_WRITE)], [])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["over_cache-rndwr-t4: 1 stale block by the verify pass (an older generation than the "
                            "last acknowledged write): lost write: /dev/loop7 offset 8192 holds generation 2, the last "
                            "acknowledged write was generation 5"]
    assert checks(r, "lost_write")[0]["status"] == "fail"


def test_each_kind_is_its_own_check():
    first = [mismatch("corrupt", 0, "crc32c 0x1", "crc32c 0x2"), mismatch("stale", 4096, "gen 3 run 77", "gen 1 run 77")]
    r = judge([record(verify_section(corrupt=1, misplaced=2, stale=1, first=first))], [])
    assert [c["rule"] for c in checks(r) if c["status"] == "fail"] == ["data_corrupt", "data_misplaced", "lost_write"]
    # a kind counted without a sample still fails, with what it means
    assert "2 misplaced blocks read (the block holds another offset's data)" in r["reasons"][1]


def test_a_mismatch_fails_even_on_a_shared_window():
    rec = record(verify_section(corrupt=1, first=[mismatch("corrupt", 0, "crc32c 0x1", "crc32c 0x2")]))
    settings_ = {"max_share": 0.1, "on_busy": "inconclusive", "min_foreign_iops": 5}
    rec["result"]["foreign"] = {"source": "cgroup-v2", "settings": settings_, "skipped": None,
                                "guard": {"reason": "the other I/O's await passed 50 ms"}, "samples": []}
    r = judge([rec], [])
    assert r["verdict"] == "FAIL"
    assert checks(r, "data_corrupt")[0]["status"] == "fail"


# --------------------------------------------------------------------------- I/O errors

def test_errors_in_a_region_a_serving_drive_fail_with_offsets_errno_and_count():
    samples = [io_error(4096), io_error(8192), io_error(12288)]
    r = judge([record(errors=errors_section(samples, total=5, ok_after_first=12000))], [])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["over_cache-rndrd-t4: 5 I/O errors (EIO 3) in a region the drive still otherwise serves "
                            "(12000 requests succeeded after the first): read /dev/loop7 offsets 4096, 8192, 12288: EIO"]
    assert checks(r, "io_errors")[0]["kind"] == "integrity"


def test_a_drive_that_stopped_answering_is_an_error_with_the_first_error():
    r = judge([record(errors=errors_section([io_error(4096, t_s=3.2)], total=40, ok_after_first=0))], [])
    assert r["verdict"] == "ERROR"
    assert r["reasons"][0] == ("over_cache-rndrd-t4: the drive stopped answering: 40 I/O errors (EIO 1) and no "
                               "successful request after the first; first: read /dev/loop7 offset 4096: EIO "
                               "(Input/output error) at 3.2 s")


def test_stopped_at_max_errors_with_nothing_after_is_an_error():
    r = judge([record(errors=errors_section([io_error(0)], total=100, ok_after_first=0, stopped="max_errors"))], [])
    assert r["verdict"] == "ERROR"
    assert "stopped at max_errors 100" in r["reasons"][0]


def test_stopped_at_max_errors_while_serving_elsewhere_fails():
    r = judge([record(errors=errors_section([io_error(0)], total=100, ok_after_first=50, stopped="max_errors"))], [])
    assert r["verdict"] == "FAIL"
    assert r["reasons"][0].endswith("; stopped at max_errors 100")


def test_a_bad_region_a_read_back_pass_stops_in_fails_when_the_drive_answers_later_workloads():
    # the read-back pass of a write workload reads sequentially: max_errors is reached inside a
    # bad region with no success after the first error; the next workload is served
    bad = record(errors=errors_section([io_error(20 << 20, op="verify_pass")], total=64, ok_after_first=0,
                                       stopped="max_errors", max_errors=64), wid="over_cache-rndwr-t4")
    later = record(wid="log-seqwr-t1")
    r = judge([bad, later], [])
    assert r["verdict"] == "FAIL", r["reasons"]
    assert r["reasons"][0].startswith("over_cache-rndwr-t4: 64 I/O errors (EIO 1) in a region the drive still otherwise "
                                      "serves (the drive answered the later workloads): verify_pass /dev/loop7 offset "
                                      "20971520: EIO"), r["reasons"]
    # the same errors in the last workload, or before workloads the drive no longer answered: ERROR
    assert judge([later, bad], [])["verdict"] == "ERROR"
    gone = record(errors=errors_section([], total=0), wid="log-seqwr-t1")
    for k in ("ops",):
        for op in gone["result"]["bench"][k].values():
            op["count"] = 0
    gone["result"].update(rc=4, stderr="iobench: error: --device /dev/loop7: prepare write at offset 0 failed: "
                                       "Input/output error\n")
    assert judge([bad, gone], [])["verdict"] == "ERROR"


def test_a_workload_that_completed_no_request_and_failed_is_an_error_quoting_iobench():
    gone = record(errors=errors_section([], total=0), wid="over_cache-rndwr-t4")
    for op in gone["result"]["bench"]["ops"].values():
        op["count"] = 0
    gone["result"].update(rc=4, stderr="iobench: error: --device /dev/loop7: prepare write at offset 0 failed: "
                                       "Input/output error\n")
    r = judge([gone], [])
    assert r["verdict"] == "ERROR"
    assert r["reasons"] == ["over_cache-rndwr-t4: no request completed (iobench rc 4): iobench: error: --device "
                            "/dev/loop7: prepare write at offset 0 failed: Input/output error"]


def test_an_iobench_that_does_not_say_what_followed_keeps_error():
    errs = errors_section([io_error(0)], total=2)
    del errs["ok_after_first"]
    assert judge([record(errors=errs)], [])["verdict"] == "ERROR"


# --------------------------------------------------------------------------- notes

def test_verify_off_is_a_note_not_a_failure():
    r = judge([record(verify_section(enabled=False, checked=0, reason="verify: false in the workload"))], [])
    assert r["verdict"] == "PASS"
    c = checks(r, "verify_off")[0]
    assert (c["status"], c["message"]) == ("n/a", "over_cache-rndrd-t4: data not verified (verify: false in the workload)")


def test_untracked_generation_map_says_lost_writes_were_not_checked():
    v = verify_section(tracked=False, map_reason="data set of 2 TiB needs a 512 MiB map, above the 64 MiB bound")
    r = judge([record(v)], [])
    assert r["verdict"] == "PASS"
    assert checks(r, "lost_writes_unchecked")[0]["message"] == (
        "over_cache-rndrd-t4: lost writes not checked (generation map not kept: data set of 2 TiB needs a 512 MiB "
        "map, above the 64 MiB bound)")


def test_a_rule_can_require_that_data_was_verified():
    """docs/thresholds.md: {metric: metrics.verify_checked, min: 1}."""
    rule = [{"workload": "over_cache", "metric": "metrics.verify_checked", "min": 1}]
    assert judge([record(verify_section())], rule)["verdict"] == "PASS"
    off = judge([record(verify_section(enabled=False, checked=0))], rule)
    assert off["verdict"] == "FAIL" and "metrics.verify_checked 0 < limit 1" in off["reasons"][0]
    old = judge([record()], rule)
    assert old["verdict"] == "FAIL" and "metrics.verify_checked has no value" in old["reasons"][0]


# --------------------------------------------------------------------------- properties

COUNTS = st.integers(min_value=0, max_value=10 ** 6)


@settings(max_examples=150, deadline=None)
@given(corrupt=COUNTS, misplaced=COUNTS, stale=COUNTS, errors=COUNTS, ok_after=st.one_of(st.none(), COUNTS),
       stopped=st.sampled_from([None, "max_errors"]), samples=st.integers(min_value=0, max_value=16),
       shown=st.lists(st.sampled_from(["corrupt", "misplaced", "stale"]), max_size=16))
def test_any_mismatch_or_error_never_passes(corrupt, misplaced, stale, errors, ok_after, stopped, samples, shown):
    first = [mismatch(k, 4096 * i, "x", "y") for i, k in enumerate(shown)]
    errs = errors_section([io_error(512 * i) for i in range(min(samples, errors))], total=errors,
                          ok_after_first=ok_after, stopped=stopped if errors else None)
    if ok_after is None:
        del errs["ok_after_first"]
    r = judge([record(verify_section(corrupt=corrupt, misplaced=misplaced, stale=stale, first=first), errs)], [])
    bad = corrupt + misplaced + stale
    if bad or errors:
        assert r["verdict"] != "PASS"
    else:
        assert r["verdict"] == "PASS"
    if errors and not ok_after:
        assert r["verdict"] == "ERROR"          # a drive that stopped answering, or unknown
    elif errors or bad:
        assert r["verdict"] == "FAIL"
    for kind, rule in (("corrupt", corrupt), ("misplaced", misplaced), ("stale", stale)):
        fails = [c for c in r["checks"] if c["metric"] == "verify_%s" % kind and c["status"] == "fail"]
        assert len(fails) == (1 if rule else 0)
        if rule:
            assert fails[0]["message"].startswith("over_cache-rndrd-t4: ")
            assert " %s block" % kind in fails[0]["message"] and fails[0]["value"] == rule


# --------------------------------------------------------------------------- burn-in (plugin_utils/judge/burnin.py)

def drive(media=0, realloc=None, pending=None, errlog=None, collected=True, serial="S5GXNX0T123456"):
    health = {"collected": collected, "passed": True, "media_errors": media, "reallocated_sectors": realloc,
              "pending_sectors": pending, "tool": "smartctl", "reason": None if collected else "smartctl not installed"}
    if errlog is not None:
        health["num_err_log_entries"] = errlog
    return {"name": "nvme0n1", "path": "/dev/nvme0n1", "model": "PM9A3", "serial": serial, "health": health}


def burnin_records(rounds=1, iops=None):
    out = []
    for k in range(1, rounds + 1):
        for kind, base in (("write", BASE_WRITE), ("verify", BASE), ("mix", BASE)):
            rec = record(verify_section(), wid="burnin-%s-r%d" % (kind, k), base=base)
            rec["burnin"] = {"round": k, "rounds": rounds, "pass": kind}
            if iops is not None:
                rec["metrics"] = dict(workload_metrics(rec), iops=iops[k - 1], mibps=iops[k - 1] / 64.0)
            out.append(rec)
    return out


def test_a_health_counter_rising_during_a_burnin_fails_citing_the_drive():
    r = judge(burnin_records(), [], drives=[drive(media=0, errlog=3)], drives_after=[drive(media=2, errlog=5)])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == [
        "burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456): media errors rose during the run from 0 to 2",
        "burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456): NVMe error-log entries rose during the run from 3 to 5"]
    c = [c for c in r["checks"] if c["rule"] == "burnin_health"][0]
    assert (c["serial"], c["value"], c["limit"], c["kind"]) == ("S5GXNX0T123456", 2, 0, "drive")


def nvme_drive(warning, passed=None, **kw):
    d = drive(**kw)
    d["health"].update(critical_warning=warning, passed=(warning == 0) if passed is None else passed,
                       problems=["critical_warning 0x%02x (...)" % warning] if warning else [], tool="nvme-cli")
    return d


def test_a_critical_warning_raised_during_a_burnin_fails_saying_it_rose():
    """The drive's health verdict at the start was PASSED: only the comparison with the read
    after the run can see a warning the drive raised while the burn-in ran."""
    r = judge(burnin_records(), [], drives=[nvme_drive(0)], drives_after=[nvme_drive(0x04)])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456): critical warning rose during the "
                            "run from 0x00 to 0x04 (NVM subsystem reliability degraded)"]
    c = [c for c in r["checks"] if c["rule"] == "burnin_health"][0]
    assert (c["metric"], c["value"], c["limit"], c["serial"]) == ("critical_warning", 4, 0, "S5GXNX0T123456")
    # a bit already set before the run did not rise (the start's own health check FAILs it)
    r = judge(burnin_records(), [], drives=[nvme_drive(0x04)], drives_after=[nvme_drive(0x04)])
    assert not [m for m in r["reasons"] if "rose" in m]
    # a second bit on top of it did
    r = judge(burnin_records(), [], drives=[nvme_drive(0x04)], drives_after=[nvme_drive(0x06)])
    assert "critical warning rose during the run from 0x04 to 0x06 (temperature outside threshold)" in \
        r["reasons"][-1]


def test_a_health_verdict_turned_failed_during_a_burnin_fails():
    before, after = drive(), drive()
    after["health"].update(passed=False, problems=["overall health self-assessment FAILED"])
    r = judge(burnin_records(), [], drives=[before], drives_after=[after])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456): the drive's own health verdict "
                            "turned FAILED during the run (overall health self-assessment FAILED)"]


@settings(max_examples=80, deadline=None)
@given(before=st.integers(0, 255), after=st.integers(0, 255))
def test_a_critical_warning_fails_exactly_when_a_bit_was_set_during_the_run(before, after):
    r = judge(burnin_records(), [], drives=[nvme_drive(before, passed=True)],
              drives_after=[nvme_drive(after, passed=True)])
    assert (r["verdict"] == "FAIL") == bool(after & ~before)
    assert any("critical warning rose" in m for m in r["reasons"]) == bool(after & ~before)


def test_a_burnin_with_steady_counters_passes_and_says_what_it_compared():
    r = judge(burnin_records(), [], drives=[drive(realloc=8, pending=0)], drives_after=[drive(realloc=8, pending=0)])
    assert r["verdict"] == "PASS"
    c = [c for c in r["checks"] if c["rule"] == "burnin_health"][0]
    assert c["status"] == "pass" and "reallocated sectors 8 -> 8" in c["message"]


def test_a_drive_gone_after_the_burnin_fails():
    r = judge(burnin_records(), [], drives=[drive()], drives_after=[])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456) was not found after the run"]


def test_a_loop_device_detached_during_the_burnin_is_said_and_a_drive_gone_beside_it_still_fails():
    """A loop device is software (snapd's squashfs mounts come and go; on a loopback fleet
    every test's loop device is in every host's inventory): detached, it is a warning. The
    drive that vanished in the same run still FAILs the host."""
    loop = {"name": "loop1250", "path": "/dev/loop1250", "transport": "loop", "model": None, "serial": None,
            "health": {"collected": False, "reason": "loop device: no SMART or health log"}}
    r = judge(burnin_records(), [], drives=[drive(), loop], drives_after=[drive()])
    assert r["verdict"] == "PASS"
    assert any("loop device loop1250 was detached during the run" in w for w in r["warnings"])
    r = judge(burnin_records(), [], drives=[drive(), loop], drives_after=[])
    assert r["verdict"] == "FAIL"
    assert r["reasons"] == ["burn-in: drive nvme0n1 (PM9A3, serial S5GXNX0T123456) was not found after the run"]


def test_health_not_read_after_a_burnin_is_said_never_passed():
    r = judge(burnin_records(), [], drives=[drive()])
    assert r["verdict"] == "PASS"
    assert any(w.startswith("burn-in: drive health after the run not read") for w in r["warnings"])
    assert [c["status"] for c in r["checks"] if c["rule"] == "burnin_health"] == ["n/a"]


def test_no_burnin_check_without_burnin_workloads():
    r = judge([record(verify_section())], [], drives=[drive()], drives_after=[drive(media=9)])
    assert not any(c["rule"].startswith("burnin") for c in r["checks"])


def test_the_cleanup_reads_the_drives_again_when_asked(tmp_path):
    """host_start.cleanup with health_after: the real drive inventory of this host, in the
    shape the judge's drives_after takes; without it, nothing is read."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.host import bench_dir as bench_dir_ops
    from ansible_collections.fleetqual.storage.plugins.module_utils.host import start as host_start
    path = str(tmp_path / "bench")
    for health_after in (True, False):
        bench_dir_ops.prepare(path, binary="/bin/true", datasets=[], required_bytes=0, margin_pct=10, direct=False,
                              devices=[])
        out = host_start.cleanup({"path": path, "binary": "/bin/true", "datasets": [], "targets": [], "plan": [],
                                  "health_after": health_after})
        if not health_after:
            assert "drives_after" not in out
            continue
        drives = out["drives_after"]["drives"]
        assert drives and all(isinstance(d.get("health"), dict) for d in drives)
        # the judge takes it as it is: a burn-in with the same drives before and after does not fail
        r = judge(burnin_records(), [], drives=drives, drives_after=out["drives_after"])
        assert r["verdict"] == "PASS"


def test_the_stability_over_the_rounds_warns_when_the_drive_slows():
    slowing = [1000.0] * 4 + [900.0] * 4 + [500.0] * 4
    r = judge(burnin_records(12, iops=slowing), [], drives=[drive()], drives_after=[drive()])
    assert r["verdict"] == "PASS"       # a warning, never a failure
    assert "burn-in mix pass over 12 rounds: IOPS 1000 -> 500 (first to last third, -50 %): slowed more than 20 % " \
           "under sustained load" in r["warnings"]
    steady = judge(burnin_records(12, iops=[1000.0] * 12), [], drives=[drive()], drives_after=[drive()])
    assert not [w for w in steady["warnings"] if "slowed" in w]
    assert [c["status"] for c in steady["checks"] if c["rule"] == "burnin_stability"] == ["pass"] * 3


@settings(max_examples=80, deadline=None)
@given(before=st.lists(st.one_of(st.none(), st.integers(0, 10 ** 6)), min_size=4, max_size=4),
       rise=st.lists(st.integers(0, 10), min_size=4, max_size=4))
def test_any_rising_counter_never_passes(before, rise):
    after = [None if b is None else b + r for b, r in zip(before, rise)]
    r = judge(burnin_records(), [], drives=[drive(*before)], drives_after=[drive(*after)])
    rose = any(b is not None and d for b, d in zip(before, rise))
    assert (r["verdict"] == "FAIL") == rose


# --------------------------------------------------------------------------- a host's own textfile

def test_the_host_textfile_has_bad_blocks_and_io_errors_per_workload():
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.report.prometheus import host_prometheus_text
    bad = record(verify_section(corrupt=2, misplaced=1), errors_section([io_error(0)], total=3, ok_after_first=9))
    off = record(verify_section(enabled=False, checked=0), wid="over_cache-rndwr-t4", base=BASE_WRITE)
    for rec in (bad, off):
        rec["metrics"] = workload_metrics(rec)
    text = host_prometheus_text({"verdict": "FAIL", "workloads": [bad, off]})
    lines = text.splitlines()
    assert 'fleetqual_workload_verify_bad_blocks{mode="rndrd",threads="64",workload="over_cache-rndrd-t4"} 3.0' in lines
    assert 'fleetqual_workload_io_errors{mode="rndrd",threads="64",workload="over_cache-rndrd-t4"} 3.0' in lines
    assert 'fleetqual_workload_io_errors{mode="rndwr",threads="64",workload="over_cache-rndwr-t4"} 0.0' in lines
    # a workload that did not verify has no bad-block series (no series is not a zero)
    assert not [ln for ln in lines if ln.startswith("fleetqual_workload_verify_bad_blocks") and "rndwr" in ln]


# --------------------------------------------------------------------------- end to end on a fault drive
# The real iobench (--verify) on a loop device over the fault-injecting drive (docs/testing.md):
# each fault as docs/integrity.md's table says it shows. Each run is bounded (--time 1) and
# the drive is stopped and detached by the fixture whatever happens.

from faultdrive.fixtures import faultdrive  # noqa: E402,F401  pylint: disable=unused-import
from test_module_iobench import iobench_binary  # noqa: E402,F401  pylint: disable=unused-import

MIB = 1 << 20
FAULTS = {
    # kind: (rules, mode, extra argv, verdict, reason must contain)
    "none": ([], "rndrw", [], "PASS", None),
    "eio": ([{"kind": "eio", "start": MIB, "length": 64 << 10, "ops": "read"}], "rndrd", [], "FAIL",
            "in a region the drive still otherwise serves"),
    "flip": ([{"kind": "flip", "start": MIB, "length": 64 << 10}], "rndrd", [], "FAIL",
             "corrupt blocks read (checksum wrong): /dev/loop"),
    "misplace": ([{"kind": "misplace", "start": MIB, "length": 64 << 10, "from_offset": 4 * MIB}], "rndrd", [], "FAIL",
                 "misplaced blocks read (the block holds another offset's data)"),
    "drop": ([{"kind": "drop", "start": MIB, "length": 64 << 10, "rewrites_only": True, "since": "start"}], "rndwr",
             ["--verify-pass"], "FAIL", "the last acknowledged write was generation"),
    "vanish": ([{"kind": "vanish"}], "rndrd", [], "ERROR", "the drive stopped answering"),
}


def _run(argv):
    import subprocess  # pylint: disable=import-outside-toplevel
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                          check=False)


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_of_a_real_drive_gets_its_verdict(fault, faultdrive, iobench_binary):  # noqa: F811
    rules, mode, extra, verdict, words = FAULTS[fault]
    fd = faultdrive(size=16 * MIB)
    prep = _run([iobench_binary, "prepare", "--device", fd.device, "--verify"])
    assert prep.returncode == 0, prep.stderr
    fd.set(rules)
    run = _run([iobench_binary, "run", "--device", fd.device, "--mode", mode, "--block-size", "16K", "--time", "1",
                "--verify", "--seed", "7", "--threads", "2"] + extra)
    bench = json.loads(run.stdout)
    rec = {"id": "fd-%s" % mode, "mode": mode, "result": {"rc": run.returncode, "bench": bench}}
    r = judge([rec], [])
    assert r["verdict"] == verdict, (r["reasons"], run.stderr)
    if words:
        assert words in r["reasons"][0], r["reasons"]
    else:
        assert workload_metrics(rec)["verify_checked"] > 0 and workload_metrics(rec)["verify_bad"] == 0
