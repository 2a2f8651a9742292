#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: iobench
short_description: Run one iobench storage workload and capture iostat/vmstat beside it
version_added: "0.1.0"
description:
  - Runs the bundled C benchmark C(iobench run) once on the target with the given workload
    options and returns its JSON result as data, together with C(iostat -x) and C(vmstat)
    samples taken while it ran.
  - The disks to sample are found from the test directory's device number through
    C(/sys/dev/block). A partition resolves to its disk, device-mapper (LVM, crypt) and md
    devices to their members, recursively; loop devices stay loop devices. On a filesystem
    without a block device (tmpfs, overlay, NFS) no disk is sampled and RV(collector.reason)
    says so.
  - When sysstat is not installed (or O(collect=procfs)) the module samples C(/proc/diskstats),
    C(/proc/stat) and C(/proc/vmstat) itself and computes the same fields with sysstat's and
    procps' formulas.
  - Only samples inside the benchmark's measured window (after warmup, RV(bench.window)) are
    returned; a sample belongs to the window when the middle of its interval lies inside it.
  - The benchmark's JSON is written to a private temporary directory which is removed
    afterwards.
  - Fails on iobench exit codes 1 (internal error), 2 (usage error) and 3 (environment
    error) with the binary's error line in C(msg). Exit codes 4 (I/O errors) and 5
    (interrupted) return the partial result with C(failed=false) so the data is kept; the
    judge turns them into a non-PASS verdict.
  - The range of each numeric option is the option table's
    (C(plugins/module_utils/plan/options.py), checked against the binary's own), listed in
    C(docs/iobench.md); it is not repeated here. A value outside it fails before anything runs.
author:
  - fleetqual.storage developers (!UNKNOWN)
options:
  binary:
    description: Path of the iobench binary on the target.
    type: path
    default: /opt/fleetqual/bin/iobench
  dir:
    description:
      - Test directory (C(--dir)). iobench creates its files there.
      - It must exist and be writable, otherwise iobench exits 3 and the module fails.
      - Exactly one of O(dir) and O(device).
    type: path
  device:
    description:
      - A whole block device as the target instead of O(dir) (C(--device)); its first O(size) bytes are
        overwritten, and cleanup zeroes exactly what was written.
      - O(total_size) and O(file_num) are not passed with it; O(mode=dbpattern) is refused.
      - The role only hands a device here after the raw-device guard of M(fleetqual.storage.drives)
        accepted it (C(destroy_data=true), no signature, not mounted, not in use).
    type: path
  size:
    description: With O(device), the bytes used from O(offset) (C(--size)), a multiple of 512; V(0) or unset is up to the device's end.
    type: raw
  offset:
    description:
      - With O(device), where the bytes used start (C(--offset)), a multiple of the device's logical
        block size; default V(0). Reports (errors, mismatches) name the device's own byte.
    type: raw
  mode:
    description:
      - Workload (C(--mode)), with sysbench fileio's names.
      - V(dbpattern) mimics an InnoDB-style server (O(threads) page readers committing
        transactions through one group-commit log writer, O(db_flushers) page flushers); the
        result carries a C(db) section. See the C(db_*) options.
    type: str
    required: true
    choices: [seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw, dbpattern]
  file_num:
    description: Number of files (C(--file-num)).
    type: int
    default: 128
  total_size:
    description:
      - Total size of all files (C(--total-size)).
      - Bytes (an integer), or a string with a binary suffix C(K M G T) or C(KiB MiB GiB TiB)
        (C(1K) = 1024).
      - Passed to iobench in bytes. Required with O(dir), not passed with O(device).
    type: raw
  block_size:
    description: Request size (C(--block-size)), same syntax as O(total_size).
    type: raw
    default: 16K
  threads:
    description: Number of worker threads (C(--threads)); its range is the option table's (docs/iobench.md).
    type: int
    default: 1
  engine:
    description: I/O engine (C(--engine)).
    type: str
    choices: [sync, io_uring]
    default: sync
  iodepth:
    description: Requests in flight per thread with O(engine=io_uring) (C(--iodepth)); its range is the option table's (docs/iobench.md).
    type: int
    default: 1
  direct:
    description: Open files with O_DIRECT (C(--direct)).
    type: bool
    default: false
  open_flags:
    description: Extra open flags (C(--open-flags)).
    type: list
    elements: str
    choices: [sync, dsync]
  fsync_freq:
    description:
      - fsync a file after every N writes to it (C(--fsync-freq)); 0 disables.
      - When unset the binary's default applies (100).
    type: int
  fsync_all:
    description: fsync after every write (C(--fsync-all)).
    type: bool
    default: false
  fsync_end:
    description:
      - fsync the written files at the end of the test (C(--fsync-end) / C(--fsync-end=off)).
      - When unset the binary's default applies (on, as in sysbench).
    type: bool
  fsync_mode:
    description: Sync call used (C(--fsync-mode)).
    type: str
    choices: [fsync, fdatasync]
  time:
    description:
      - Duration of the measured window in seconds (C(--time)); 0 means no limit and needs
        O(requests).
      - When unset the binary runs 10 seconds, or until O(requests) when that is given.
    type: int
  requests:
    description: Stop after this many requests (C(--requests)); 0 means no limit.
    type: int
  warmup:
    description: Seconds run before the measured window starts (C(--warmup)).
    type: int
  seed:
    description: Random seed (C(--seed)).
    type: int
  rw_ratio:
    description: Read/write ratio for O(mode=rndrw) (C(--rw-ratio)); its range is the option table's (docs/iobench.md).
    type: float
  search:
    description:
      - Latency-bounded maximum search (C(--search)), which runs steps 1, 2, 4, ... up to O(search_max) of
        the knob and keep the highest IOPS whose p99 stays under O(search_bound_ms). The result
        carries a C(search) section; its C(ops)/C(total) describe the best step.
      - Only with O(mode) V(rndrd), V(rndwr) or V(rndrw). V(iodepth) needs O(engine=io_uring).
      - The searched knob is not passed (O(threads) resp. O(iodepth) must stay 1), nor is O(time)
        (each step runs O(search_step_time) seconds), nor O(requests).
    type: str
    choices: [threads, iodepth]
  search_bound_ms:
    description: Latency bound of the search in milliseconds (C(--search-bound-ms)); its range is the option table's. Binary default 50.
    type: float
  search_max:
    description:
      - Last value of the searched knob (C(--search-max)); its range is that of the searched knob (O(threads) or
        O(iodepth)) in the option table. Binary default 64.
    type: int
  search_step_time:
    description: Measured seconds per search step (C(--search-step-time)); its range is the option table's. Binary default 5.
    type: int
  search_percentile:
    description: Percentile compared with the bound (C(--search-percentile)). Binary default p99.
    type: str
    choices: [p50, p90, p95, p99, p99.9]
  db_reads_per_txn:
    description: O(mode=dbpattern) page reads per transaction before its commit (C(--db-reads-per-txn)). Binary default 4.
    type: int
  db_log_block:
    description:
      - O(mode=dbpattern) bytes written to the redo log per group commit (C(--db-log-block)), a
        multiple of 512 not larger than O(block_size); same syntax as O(block_size). Binary default 4K.
    type: raw
  db_log_size:
    description:
      - O(mode=dbpattern) size of the redo log file C(ib_logfile.iobench), written circularly
        (C(--db-log-size)); created and filled by iobench in O(dir), removed by cleanup. Binary default 64M.
    type: raw
  db_flushers:
    description: O(mode=dbpattern) page flusher threads doing random page writes (C(--db-flushers)); its range is the option table's. Binary default 1.
    type: int
  db_flush_rate:
    description: O(mode=dbpattern) page writes per second over all flushers (C(--db-flush-rate)); 0 = as fast as they go.
    type: float
  db_group_commit_max:
    description: O(mode=dbpattern) transactions per group commit at most (C(--db-group-commit-max)); 0 = no limit.
    type: int
  report_interval:
    description: Seconds per time-series interval of the result (C(--report-interval)); 0 = none. Binary default 1.
    type: float
  rate_iops:
    description: At most this many read+write requests per second over all threads (C(--rate-iops)); 0 = unlimited.
    type: float
  search_min_gain:
    description: Stop the search after two steps each gaining less than this % IOPS (C(--search-min-gain)). Binary default 5.
    type: float
  steady_state:
    description:
      - Run in rounds until the SNIA PTS steady-state rule holds or O(ss_max_rounds) ran (C(--steady-state));
        the result's C(steady_state) holds every round (docs/iobench.md).
    type: bool
    default: false
  ss_round_time:
    description: Seconds per steady-state round (C(--ss-round-time)). Binary default 10.
    type: float
  ss_window:
    description: Rounds judged together (C(--ss-window)). Binary default 5.
    type: int
  ss_range_pct:
    description: Max - min of the window at most this % of its average (C(--ss-range-pct)). Binary default 20.
    type: float
  ss_slope_pct:
    description: Least-squares excursion over the window at most this % of the average (C(--ss-slope-pct)). Binary default 10.
    type: float
  ss_max_rounds:
    description: Stop after this many rounds (C(--ss-max-rounds)). Binary default 25.
    type: int
  ss_metric:
    description: Value tracked per round (C(--ss-metric)). Binary default iops.
    type: str
    choices: [iops, mib_per_sec, lat_p99_us]
  keep_cache:
    description: Do not drop the page cache of the test files before the run (C(--keep-cache)).
    type: bool
    default: false
  prepare:
    description: Create and fill the test files before the run (C(--prepare)).
    type: bool
    default: true
  cleanup:
    description: Remove the test files after the run (C(--cleanup)).
    type: bool
    default: true
  verify:
    description:
      - End-to-end data verification (C(--verify), C(--verify=off) when false; docs/iobench.md
        "Data verification"). Every 4 KiB written carries a header (offset, file, generation,
        run id) and a CRC-32C; every block read is checked and a mismatch is counted as
        corrupt, misplaced or stale (a lost write) in C(bench.verify).
      - On by default in every workload; V(false) turns it off for that workload. The binary
        turns it off by itself, with the reason in C(bench.verify.reason), where it cannot be
        sound (a block size that is not a multiple of 4 KiB, O(mode=dbpattern), test files
        prepared without it).
    type: bool
    default: true
  verify_pass:
    description:
      - With O(verify), after a workload that writes, read the whole working set back and check
        every block (C(--verify-pass)); its time is not part of the measured window.
      - When unset the binary's default applies (off).
    type: bool
  verify_map_max:
    description:
      - Memory for O(verify)'s per-block generation map, 4 bytes per block (C(--verify-map-max));
        a working set that needs more is verified without stale (lost write) detection.
      - When unset the binary's default applies (256M).
    type: raw
  max_errors:
    description:
      - The workload stops at this many I/O errors in total (C(--max-errors)); an error does not
        stop its thread, so a bad region is mapped rather than stopped at.
      - When unset the binary's default applies (64).
    type: int
  collect:
    description:
      - Where device and CPU statistics come from.
      - V(auto) uses iostat and vmstat when iostat is installed, else C(/proc).
      - V(sysstat) requires iostat and fails before running anything when it is missing.
      - V(procfs) always samples C(/proc/diskstats), C(/proc/stat) and C(/proc/vmstat).
      - V(none) collects nothing.
    type: str
    choices: [auto, sysstat, procfs, none]
    default: auto
  collect_interval:
    description: Sampling interval in seconds (1 to 60).
    type: int
    default: 1
  timeout:
    description:
      - Seconds after which the benchmark is stopped with SIGTERM (then SIGKILL after 30 s).
      - A benchmark stopped this way returns its partial result with RV(timed_out=true), like
        exit code 5. No timeout when unset.
    type: int
  device_counters:
    description:
      - V(auto) passes C(--devstat) with the disks behind O(dir) when the binary supports it, so
        the result's C(bench.window.devstat) holds their kernel counters read at the measured
        window's exact start and end (docs/iobench-json.md). V(off) never passes it.
    type: str
    choices: ["auto", "off"]
    default: auto
notes:
  - "Check mode: parameters are validated, the device chain and collector source are
    resolved and RV(argv) is returned with C(changed=false); nothing is run or written.
    The C(--output) path in that RV(argv) is a placeholder (the real run uses a fresh private
    temporary directory)."
  - The module runs iobench with C(LC_ALL=C) from an argv list, never through a shell.
  - Sizes are parsed by C(plugins/module_utils/common/size.py), the one size parser of the
    collection (the controller side uses the same code).
requirements:
  - iobench (deployed by the role C(fleetqual.storage.iobench))
  - sysstat (optional; iostat with JSON output, sysstat 11.5 or later)
seealso:
  - name: iobench JSON schema
    description: docs/iobench-json.md in the collection.
    link: https://example.invalid/fleetqual/storage/docs/iobench-json.md
"""

EXAMPLES = r"""
- name: Random reads over the cache size, 64 threads, O_DIRECT
  fleetqual.storage.iobench:
    binary: /opt/fleetqual/bin/iobench
    dir: /var/tmp/fleetqual
    mode: rndrd
    threads: 64
    total_size: 8G
    block_size: 16K
    direct: true
    time: 60
    warmup: 5
  register: over_cache

- name: Log-style writes, fdatasync after every write, procfs sampling
  fleetqual.storage.iobench:
    dir: /data/fq
    mode: seqwr
    file_num: 1
    total_size: 1G
    block_size: 4K
    fsync_all: true
    fsync_mode: fdatasync
    time: 30
    collect: procfs
    timeout: 120

- name: Highest IOPS with p99 under 20 ms, searching the thread count (1, 2, 4, ... 64)
  fleetqual.storage.iobench:
    dir: /var/tmp/fleetqual
    mode: rndrd
    total_size: 8G
    direct: true
    search: threads
    search_bound_ms: 20
    search_max: 64
    search_step_time: 5
    timeout: 300
  register: bounded

- name: InnoDB-like database pattern, 16 page readers, one flusher at 500 pages/s
  fleetqual.storage.iobench:
    dir: /var/tmp/fleetqual
    mode: dbpattern
    total_size: 8G
    direct: true
    threads: 16
    db_flush_rate: 500
    time: 60
  register: db

- name: Show what would run
  fleetqual.storage.iobench:
    dir: /var/tmp/fleetqual
    mode: rndrw
    rw_ratio: 1.5
    total_size: 256M
  check_mode: true
  register: plan

- ansible.builtin.debug:
    msg: "device {{ over_cache.iostat.avg.device }} r/s {{ over_cache.iostat.avg['r/s'] }}, r_await {{ over_cache.iostat.avg.r_await }} ms"
"""

RETURN = r"""
argv:
  description: The command run (or, in check mode, that would run).
  returned: always
  type: list
  elements: str
  sample: [/opt/fleetqual/bin/iobench, run, --dir, /var/tmp/fq, --mode, rndrd, --file-num, "128",
           --total-size, "134217728", --block-size, "16384", --threads, "1", --engine, sync,
           --iodepth, "1", --prepare, --cleanup, --format, json, --output, /tmp/fleetqual-iobench-x/result.json]
rc:
  description: Exit code of iobench (see docs/contracts.md section 1); -15 when killed by SIGTERM.
  returned: when the binary ran
  type: int
  sample: 0
timed_out:
  description: Whether the module stopped the benchmark after O(timeout) seconds.
  returned: when the binary ran
  type: bool
  sample: false
stderr:
  description: The binary's standard error (its last 4 KiB).
  returned: when the binary ran
  type: str
bench:
  description:
    - The iobench JSON document (schema_version 1, docs/contracts.md section 2), as written by the
      binary. Empty when the binary wrote none.
    - With O(search), C(search) holds the steps and the best step (docs/diagnostics.md section 6)
      and C(window), C(ops), C(total) describe the best step (the last one when none kept the
      bound), so the iostat/vmstat samples are those of that step.
    - With O(mode=dbpattern), C(db) holds transactions, group commits, commit latency and page
      read/write latency (docs/diagnostics.md section 7); C(ops.read) are the page reads,
      C(ops.write) the page writes and C(ops.fsync) the log fdatasyncs.
  returned: when the binary ran
  type: dict
  sample: {schema_version: 1, window: {start_epoch: 1763760000.123, end_epoch: 1763760060.13},
           total: {count: 812345, iops: 13539.1, mib_per_sec: 211.5}, exit_code: 0}
  contains:
    window:
      description:
        - The measured window (after warmup); null when nothing ran.
        - C(start_epoch), C(end_epoch) are its wall-clock start and end.
        - With O(device_counters=auto) and a binary that supports it, C(devstat) holds each disk's
          kernel block counters read at the window's start and end and C(devstat_error) names the
          first disk that could not be read (null when all were read); both are absent otherwise
          (docs/iobench-json.md).
      type: dict
      returned: when the binary ran
      sample: {start_epoch: 1763760000.123, end_epoch: 1763760060.13}
collector:
  description: How device and CPU statistics were collected.
  returned: always
  type: dict
  contains:
    source:
      description: V(sysstat) (iostat and vmstat ran beside the benchmark), V(procfs) or V(none).
      type: str
      sample: sysstat
    reason:
      description: Why the source or device list is what it is (null when nothing to say).
      type: str
      sample: "iostat not found; sampled /proc/diskstats and /proc/vmstat"
    devices:
      description: Disks backing O(dir), named as iostat names them. Empty when none.
      type: list
      elements: str
      sample: [vda]
    chain:
      description: Every block device walked to find them (partition -> disk, dm/md -> members).
      type: list
      elements: str
      sample: [vda1, vda]
    st_dev:
      description: Major:minor of the filesystem holding O(dir).
      type: str
      sample: "254:1"
    fstype:
      description: Filesystem type of O(dir), from mountinfo.
      type: str
      sample: ext4
    interval_s:
      description: Sampling interval in seconds.
      type: int
      sample: 1
    commands:
      description: The collector commands run (argv lists).
      type: list
      elements: list
    errors:
      description: Problems of the collectors (a collector that died, unparsable output).
      type: list
      elements: str
    samples_total:
      description: Samples taken before selecting the window, per kind.
      type: dict
      sample: {iostat: 64, vmstat: 64}
device_samples:
  description:
    - The disks' kernel block counters (C(/sys/block/<dev>/stat)) read every C(interval) seconds
      beside the benchmark, kept only inside and next to the intervals of the benchmark's series
      in which nothing completed, so that the judge can tell a stall of the device from a wait
      behind other I/O or a pause of the host (docs/integrity.md, "Stalls"; docs/contracts.md).
    - Each sample is C(e) (epoch) and C(d) (per device rd_ios, rd_sectors, rd_ticks, wr_ios,
      wr_sectors, wr_ticks, io_ticks, in_flight).
  returned: when the benchmark ran outside a compliance run, on disks whose counters could be read
  type: dict
  sample: {interval: 0.2, devices: [vda], samples: []}
iostat:
  description:
    - Per-device iostat -x samples inside the measured window and their average.
    - Each sample has C(t) (seconds from the window start to the end of the sample's interval),
      C(epoch) (wall clock at the end of the interval), C(device) and the iostat fields
      C(r/s w/s rkB/s wkB/s r_await w_await aqu-sz %util rareq-sz wareq-sz) (plus C(d/s f/s
      dkB/s rrqm/s wrqm/s d_await f_await dareq-sz)).
    - C(avg) is the time average; with several devices rates and aqu-sz are summed, awaits and
      request sizes weighted by operations, %util is the busiest device's; C(device) joins the
      names with commas and C(count) is the number of reports averaged.
  returned: always
  type: dict
  sample: {samples: [{t: 1.0, epoch: 1763760001.12, device: vda, "r/s": 812.0, "w/s": 0.0,
                      "rkB/s": 12992.0, "wkB/s": 0.0, r_await: 9.8, w_await: 0.0, "aqu-sz": 7.9,
                      "%util": 99.6, rareq-sz: 16.0, wareq-sz: 0.0}],
           avg: {device: vda, count: 60, "r/s": 812.0, r_await: 9.8, "aqu-sz": 7.9, "%util": 99.6}}
vmstat:
  description: vmstat samples inside the measured window (C(t), C(epoch), C(r b us sy id wa st bi bo
    si so), plus C(in cs) from vmstat) and their average (C(r b us sy id wa bi bo si so), C(count)).
  returned: always
  type: dict
  sample: {samples: [{t: 1.0, epoch: 1763760001.1, r: 2, b: 1, us: 3, sy: 9, id: 60, wa: 28, bi: 12992,
                      bo: 0, si: 0, so: 0}],
           avg: {r: 2.0, b: 1.0, us: 3.0, sy: 9.0, id: 60.0, wa: 28.0, bi: 12992.0, bo: 0.0, si: 0.0,
                 so: 0.0, count: 60}}
"""

import os
import signal
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetqual.storage.plugins.module_utils.job.workload import (
    ARGUMENT_SPEC,
    EMPTY_IO,
    validate,
    prepare,
    run_workload,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.options import build_argv


class ModuleStopped(Exception):
    """The module process got SIGTERM/SIGHUP/SIGINT (task timeout, ^C on the controller)."""


def _on_signal(signum, frame):
    raise ModuleStopped(signum)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params

    errors, sizes, collector_info, source, tools = prepare(p)
    if errors and collector_info is None and errors[0].startswith("invalid parameters: "):
        module.fail_json(msg=errors[0], errors=validate(p)[0])
    if errors:
        module.fail_json(msg=errors[0])

    if module.check_mode:
        argv = build_argv(p, sizes, os.path.join(tempfile.gettempdir(), "fleetqual-iobench-XXXX", "result.json"))
        if not (os.path.isfile(p["binary"]) and os.access(p["binary"], os.X_OK)):
            module.warn("iobench binary %s is not there (yet); a real run would fail" % p["binary"])
        module.exit_json(changed=False, argv=argv, collector=collector_info, iostat=EMPTY_IO,
                         vmstat=EMPTY_IO)

    # a signal to the module must stop the benchmark and the collectors, not orphan them
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    try:
        result, failed, msg, warnings = run_workload(p, sizes=sizes, collector_info=collector_info,
                                                     source=source, tools=tools)
    except ModuleStopped as e:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        module.fail_json(msg="the module was stopped by signal %d; the benchmark and the collectors were "
                             "terminated" % e.args[0], collector=collector_info)
    if failed:
        module.fail_json(msg=msg, **result)
    for w in warnings:
        module.warn(w)
    module.exit_json(failed=False, **result)


if __name__ == "__main__":
    main()
