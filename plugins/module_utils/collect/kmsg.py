# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel's word on each drive (docs/kernel-log.md): the kernel log read by the
measurement job, its storage messages classified and attributed to whole disks.

Sources, in order:

* ``/dev/kmsg`` (kernel Documentation/ABI/testing/dev-kmsg): one record per ``read``,
  ``<pri>,<seq>,<usec>,<flags>[,...];<text>`` then continuation lines `` KEY=value``
  (``SUBSYSTEM=block``, ``DEVICE=b8:16``). Opened ``O_RDONLY|O_NONBLOCK``: a read with
  nothing new fails with EAGAIN; EPIPE means the reader was overrun and records were
  overwritten. Every record has a sequence number: a record at or below the last one read
  is never counted again, and a gap is counted as ``lost`` (never silently skipped).
* ``journalctl -k -o json`` with its cursor (``--after-cursor``), where ``/dev/kmsg``
  cannot be read (not root under ``kernel.dmesg_restrict=1``, a container without it).
  ``dmesg`` is not a third source: it reads ``/dev/kmsg`` or ``syslog(2)`` under the same
  restriction, so where ``/dev/kmsg`` is refused it is refused too.
* else ``collected: false`` and the reason -- never "no errors".

Only storage messages are kept (:data:`KINDS`); a capability probe's line (a refused
WRITE_ZEROES, DISCARD, ...: module_utils/collect/probes.py) is a note on its drive, counted
apart (the section's ``notes``), never a storage error. Each message is attributed to the device named in
its text (``sdb1``, ``nvme0n1p1``, ``nvme0`` -> its namespaces, ``ata3`` -> the disks on that
port, ``sd 2:0:0:0`` -> that SCSI disk, ``loop5``, ``md0``, ``dm-2``, ``253:5``) or in its
``DEVICE=b<maj>:<min>`` key, then resolved through sysfs (``module_utils/devices/sysfs.py``, ``disks.walk_sysfs``:
the one reader of sysfs) to the whole disks under it. Standard library only (the target
runs it under Python 3.9+).
"""

import errno
import json
import os
import re
import subprocess
import threading
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.devices.disks import walk_sysfs
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.mpath_states import (
    MAX_PATH_STATES,
    path_state,
    record_times,
)
from ansible_collections.fleetqual.storage.plugins.module_utils.collect.probes import (
    PROBE,
    probe_note,
    probe_op,
    probe_refs,
    refused_command,
    scsi_command,
)

KMSG = "/dev/kmsg"
MAX_MESSAGES = 200          # messages kept in the record (the counts stay complete)
MAX_BEFORE = 50             # storage messages of the look-back kept as context
JOURNAL_LOOKBACK = 2000     # kernel journal entries read at the start (look-back)
READ_SIZE = 16384           # one /dev/kmsg record (text <= 1 KiB + its dictionary)
UNATTRIBUTED = "unattributed"   # the counts' key of messages that name no drive

LEVELS = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")

# (kind, severity, pattern): the first that matches classifies a message. ``dev`` names the
# device in the text, ``ata`` an ATA port, ``scsi`` a SCSI address, ``ctrl`` an NVMe
# controller, ``devnum`` a major:minor.
_STORAGE_PATTERNS = (
    ("medium_error", "error", r"critical medium error, dev (?P<dev>[^\s,]+), sector \d+"),
    # the error words of block/blk-core.c blk_errors[]
    ("io_error", "error", r"(?:I/O|critical [\w ]+?|recoverable transport|timeout|operation not supported|"
                          r"[\w]+ resource|protection|nonblocking retry|device offline|(?:open|active) zones exceeded|"
                          r"duration limit exceeded) error, dev (?P<dev>[^\s,]+), sector (?P<sector>\d+)"),
    ("buffer_io_error", "error", r"Buffer I/O error on dev(?:ice)? (?P<dev>[^\s,]+)"),
    ("medium_error", "error", r"Sense Key : Medium Error|Add\. Sense: Unrecovered read error"),
    ("scsi_sense", "warning", r"Sense Key : |Add\. Sense: |(?:FAILED )?Result: hostbyte=|Unhandled (?:sense|error) code"),
    ("link_reset", "warning", r"\bata(?P<ata>\d+)(?:\.\d+)?: (?:(?:hard|soft) resetting link|link is slow to respond|"
                              r"COMRESET failed|limiting SATA link speed|reset failed)"),
    ("ata_error", "warning", r"\bata(?P<ata>\d+)(?:\.\d+)?: (?:exception Emask|failed command: |error: \{|disabled$)"),
    ("nvme_timeout", "warning", r"\bnvme (?P<ctrl>nvme\d+): I/O (?:tag )?\d+ .*?QID \d+ timeout"),
    ("nvme_reset", "warning", r"\bnvme (?P<ctrl>nvme\d+): (?:controller is down; will reset|resetting controller|"
                              r"Abort status|Device not ready; aborting reset|Removing after probe failure)"),
    # "Read(0x2) @ LBA ..." with CONFIG_NVME_VERBOSE_ERRORS, "I/O Cmd(0x2) @ LBA ..." without
    ("nvme_error", "error", r"\b(?P<dev>nvme\d+n\d+): [\w /]+\(0x[0-9a-f]+\) @ LBA \d+, \d+ blocks, "),
    ("csum_error", "error", r"BTRFS \w+ \(device (?P<dev>[^)\s]+?)\): csum failed"),
    ("fs_error", "error", r"EXT[234]-fs error \(device (?P<dev>[^)\s]+?)\)|"
                          r"XFS \((?P<dev2>[^)\s]+?)\): (?:metadata I/O error|Metadata corruption|Corruption detected|"
                          r"log I/O error|Log I/O Error|I/O Error Detected|Internal error|"
                          r"xfs_do_force_shutdown)|"
                          r"BTRFS(?:: error| error| critical) \(device (?P<dev3>[^)\s]+?)\)"),
    ("md_failure", "error", r"md/raid\d*:(?P<md>md\w+): (?:Disk failure on (?P<dev>[^\s,]+)|"
                            r"read error not correctable|unrecoverable I/O read error)"),
    # an iSCSI session's connection lost, its recovery given up (scsi_transport_iscsi.c): its disks' lines
    ("iscsi_error", "warning", r"\bconnection(?P<isess>\d+):\d+: detected conn error \(\d+\)|"
                               r"\bsession(?P<isess2>\d+): session recovery timed out after \d+ secs"),
    ("dm_error", "warning", r"device-mapper: [\w-]+: (?:(?P<devnum>\d+:\d+): )?"
                            r"(?:.*?Failing path (?P<path>\d+:\d+)|.*?(?:fail|error|Error|corrupt))"),
)
KINDS = tuple(dict.fromkeys(k for k, _s, _p in _STORAGE_PATTERNS)) + (PROBE,)
SEVERITY = dict([(k, s) for k, s, _p in _STORAGE_PATTERNS] + [(PROBE, "note")])
_STORAGE_MATCHERS = [(k, s, re.compile(p)) for k, s, p in _STORAGE_PATTERNS]
_SCSI = re.compile(r"\b(?:sd|scsi) (?P<scsi>\d+:\d+:\d+:\d+): (?:\[(?P<dev>\w+)\])?")
_NS = re.compile(r"^nvme\d+(?:c\d+)?n\d+$")
_DISK_NAME = re.compile(r"^(?:(?:sd|vd|xvd|hd)[a-z]+|nvme\d+n\d+|mmcblk\d+|loop\d+|md\d+|nbd\d+|dm-\d+)$")


def parse_record(raw):
    """A ``/dev/kmsg`` record (bytes or str) -> ``{seq, usec, level, facility, text, fields}``
    (``fields``: its ``KEY=value`` dictionary), or None when it is not a record."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    head, sep, rest = raw.partition(";")
    if not sep:
        return None
    parts = head.split(",")
    try:
        pri, seq, usec = int(parts[0]), int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return None
    if pri < 0 or seq < 0 or usec < 0:
        return None
    lines = rest.split("\n")
    fields = {}
    for line in lines[1:]:
        if line.startswith(" ") and "=" in line:
            key, _eq, value = line[1:].partition("=")
            fields[key] = value
    return {"seq": seq, "usec": usec, "level": pri & 7, "facility": pri >> 3, "text": lines[0], "fields": fields}


def classify(text):
    """``(kind, severity, refs)`` of a storage message, or None for any other message.
    ``refs``: what the text names, ``[(how, value)]`` with ``how`` one of ``block``
    (a block device name), ``ata`` (a port number), ``scsi`` (an H:C:T:L address),
    ``nvme_ctrl`` (a controller name), ``devnum`` (``major:minor``), ``iscsi_session`` (a
    session id). A capability probe's
    line is kind ``capability_probe``, severity ``note`` (module_utils/collect/probes.py)."""
    if not isinstance(text, str):
        return None
    probe = probe_refs(text)
    if probe is not None:
        return PROBE, SEVERITY[PROBE], probe
    for kind, severity, rx in _STORAGE_MATCHERS:
        m = rx.search(text)
        if not m:
            continue
        groups = m.groupdict()
        refs = []
        for key in ("dev", "dev2", "dev3"):
            if groups.get(key):
                refs.append(("block", groups[key]))
        if groups.get("path"):
            refs.append(("devnum", groups["path"]))
        elif groups.get("devnum"):
            refs.append(("devnum", groups["devnum"]))
        if groups.get("md") and not refs:
            refs.append(("block", groups["md"]))
        if groups.get("ata"):
            refs.append(("ata", groups["ata"]))
        if groups.get("ctrl"):
            refs.append(("nvme_ctrl", groups["ctrl"]))
        if groups.get("isess") or groups.get("isess2"):
            refs.append(("iscsi_session", groups.get("isess") or groups["isess2"]))
        if not refs:
            s = _SCSI.search(text)
            if s:
                # the [sdX] name first, the SCSI address when sysfs does not know the name
                refs.extend(([("block", s.group("dev"))] if s.group("dev") else []) + [("scsi", s.group("scsi"))])
        return kind, severity, refs
    return None


def _devnum_field(fields):
    """``(major, minor)`` of a ``DEVICE=b<maj>:<min>`` dictionary key, or None."""
    m = re.match(r"^b(\d+):(\d+)$", (fields or {}).get("DEVICE") or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def whole_disk_name(name):
    """The whole disk of a partition's name when sysfs no longer knows it (a drive that
    dropped off the bus): ``sdb1`` -> ``sdb``, ``nvme0n1p2`` -> ``nvme0n1``, ``loop5p1``
    -> ``loop5``; a whole disk's name unchanged."""
    for rx in (r"^((?:nvme\d+n\d+|mmcblk\d+|loop\d+|md\d+|nbd\d+))p\d+$", r"^((?:sd|vd|xvd|hd)[a-z]+)\d+$"):
        m = re.match(rx, name)
        if m:
            return m.group(1)
    return name if _DISK_NAME.match(name) else None


_REF_NAMES = {"ata": "ata%s", "iscsi_session": "session%s"}   # a reference said as a name (ata5, session1)


class Resolver:
    """Device references -> whole disks through sysfs (cached: a drive keeps its name for
    the job's life; one that vanishes keeps the disks it resolved to)."""

    def __init__(self, sysfs_root="/sys"):
        self.root = sysfs_root
        self.cache = {}

    def _walk(self, node):
        return walk_sysfs(node, self.root)[0] if node else []

    def _under(self, directory, depth_names):
        """Block device names under ``directory``: ``depth_names`` is the chain of entry
        prefixes to descend (``host``, ``target``, ``""``) before ``block/``."""
        dirs = [directory]
        for prefix in depth_names:
            dirs = [os.path.join(d, e) for d in dirs for e in sysfs.listdir(d) if e.startswith(prefix)
                    and os.path.isdir(os.path.join(d, e))]
        return [name for d in dirs for name in sysfs.listdir(os.path.join(d, "block"))]

    def disks(self, how, value):
        key = (how, value)
        if key in self.cache:
            return self.cache[key]
        out = []
        if how == "block":
            out = self._walk(sysfs.node_for_name(value, self.root))
        elif how == "devnum":
            major, minor = (int(x) for x in value.split(":"))
            out = self._walk(sysfs.node_for_devnum(major, minor, self.root))
        elif how == "ata":
            port = os.path.join(self.root, "class", "ata_port", "ata%s" % value)
            if os.path.exists(port):
                # <port>/device (else <port>/../..) is the ataN device; its SCSI hosts, targets
                # and their disks below it
                base = os.path.join(port, "device")
                if not os.path.isdir(base):
                    base = os.path.join(os.path.realpath(port), os.pardir, os.pardir)
                out = self._under(os.path.realpath(base), ("host", "target", ""))
        elif how == "scsi":
            for base in (os.path.join(self.root, "class", "scsi_disk", value, "device"),
                         os.path.join(self.root, "bus", "scsi", "devices", value)):
                out = sysfs.listdir(os.path.join(base, "block"))
                if out:
                    break
        elif how == "iscsi_session":
            # session<sid>'s device is hostH/session<sid>: its targets' SCSI devices' disks
            base = os.path.join(self.root, "class", "iscsi_session", "session%s" % value, "device")
            if os.path.isdir(base):
                out = self._under(os.path.realpath(base), ("target", ""))
        elif how == "nvme_ctrl":
            ctrl = os.path.join(self.root, "class", "nvme", value)
            names = [e for e in sysfs.listdir(ctrl) if _NS.match(e)]
            # a multipath namespace's path device nvme0c0n1 is the disk nvme0n1
            out = list(dict.fromkeys(re.sub(r"c\d+n", "n", e) for e in names))
        out = [d for d in out if d]
        self.cache[key] = out
        return out

    def attribute(self, refs, fields=None):
        """``(device, disks)``: the device the message names (its first reference, else its
        ``DEVICE`` key as ``maj:min``) and the whole disks under it ([] when none resolve)."""
        # the device the text names: its first reference that is a device's name
        device = next((_REF_NAMES.get(h, "%s") % v for h, v in refs if h != "block" or whole_disk_name(v)), None)
        for how, value in refs:
            disks = self.disks(how, value)
            if disks:
                return device or value, disks
        num = _devnum_field(fields)
        if num:
            disks = self.disks("devnum", "%d:%d" % num)
            if disks or device is None:
                return device or "%d:%d" % num, disks
        # a disk sysfs does not know (any more): its own name, a partition's suffix stripped
        for how, value in refs:
            name = whole_disk_name(value) if how == "block" else None
            if name:
                return value, [name]
        return device, []


def message(record, resolver, workload=None, before_run=False, clock=None):
    """The record's entry in the kernel section, or None when it is not a storage message.
    ``clock``: ``(monotonic_s, epoch_s)`` read together, to give the message its epoch."""
    found = classify(record.get("text"))
    if found is None:
        return None
    kind, severity, refs = found
    device, disks = resolver.attribute(refs, record.get("fields"))
    time_s, epoch = record_times(record, clock)
    out = {"seq": record["seq"], "time_s": time_s, "epoch": epoch, "level": LEVELS[record["level"] & 7],
           "kind": kind, "severity": severity, "text": record["text"], "device": device,
           "drive": disks[0] if disks else None, "workload": workload, "before_run": bool(before_run)}
    if len(disks) > 1:
        out["drives"] = disks
    if kind == PROBE:
        out["op"], out["error"] = probe_op(record["text"])
    return out


def add_note(notes, msg):
    """Count a capability probe's message in ``notes`` (``{(drive, op): entry}``; each entry
    ``{drive, device, op, note, error, count, count_before, lines, first}``: ``lines`` the SCSI
    result and sense lines of its commands, ``first`` the first line seen, its seq, time,
    workload and text). Never a storage error: the section's ``notes``. Returns the entry."""
    entry = None
    for drive in message_drives(msg) or [None]:
        entry = notes.get((drive, msg["op"]))
        if entry is None:
            entry = notes[(drive, msg["op"])] = {
                "drive": drive, "device": msg["device"], "op": msg["op"], "note": probe_note(msg["op"]),
                "error": msg["error"], "count": 0, "count_before": 0, "lines": 0,
                "first": dict((k, msg.get(k)) for k in ("seq", "time_s", "epoch", "workload", "before_run", "text"))}
        entry["count_before" if msg.get("before_run") else "count"] += 1
    return entry


def is_note(msg):
    """A kept message that is a note on its drive (a capability probe), not a storage error."""
    return isinstance(msg, dict) and msg.get("kind") == PROBE


def message_drives(msg):
    """Every whole disk a kept message is attributed to ([] when none)."""
    if msg.get("drives"):
        return list(msg["drives"])
    return [msg["drive"]] if msg.get("drive") else []


def _clock():
    return time.clock_gettime(time.CLOCK_MONOTONIC), time.time()


# --------------------------------------------------------------------------- sources

class SeqTracker:
    """Sequence numbers seen: a record is taken once (at or below the last one taken it is
    a repeat), and a gap above the last one is counted as ``lost`` (records overwritten in
    the kernel's ring buffer before they were read)."""

    def __init__(self):
        self.last = None
        self.lost = 0

    def take(self, seq):
        if self.last is not None:
            if seq <= self.last:
                return False
            self.lost += seq - self.last - 1
        self.last = seq
        return True


class KmsgSource:
    """``/dev/kmsg`` read record by record, deduplicated by sequence number."""

    name = "kmsg"

    def __init__(self, path=KMSG):
        self.path = self.label = path
        self.fd = None
        self.seqs = SeqTracker()

    def open(self, backlog=True):
        """Open (raises OSError when refused); without ``backlog`` skip what is there."""
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        if not backlog:
            os.lseek(self.fd, 0, os.SEEK_END)

    def read(self):
        """Every record not read before, in order, until EAGAIN."""
        out = []
        while True:
            try:
                raw = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue    # overrun: the next read returns the oldest record left; the gap counts
                if e.errno == errno.EINTR:
                    continue
                raise
            if not raw:
                break
            rec = parse_record(raw)
            if rec is not None and self.seqs.take(rec["seq"]):
                out.append(rec)
        return out

    @property
    def lost(self):
        return self.seqs.lost

    @lost.setter
    def lost(self, value):
        self.seqs.lost = value

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def parse_journal_entry(entry):
    """A ``journalctl -o json`` kernel entry -> a record like :func:`parse_record`'s (with its
    ``epoch`` and ``cursor``), or None. ``MESSAGE`` may be a list of bytes (not UTF-8)."""
    if not isinstance(entry, dict):
        return None
    text = entry.get("MESSAGE")
    if isinstance(text, list):
        try:
            text = bytes(int(b) & 0xFF for b in text).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    if not isinstance(text, str):
        return None
    cursor = entry.get("__CURSOR")
    seq = entry.get("__SEQNUM")
    if seq is None and isinstance(cursor, str):
        m = re.search(r"(?:^|;)i=([0-9a-f]+)", cursor)
        seq = int(m.group(1), 16) if m else None
    try:
        seq = int(seq)
        usec = int(entry.get("_SOURCE_MONOTONIC_TIMESTAMP") or entry.get("__MONOTONIC_TIMESTAMP") or 0)
        level = int(entry.get("PRIORITY", 6))
        real = entry.get("__REALTIME_TIMESTAMP")
        epoch = round(int(real) / 1e6, 3) if real is not None else None
    except (TypeError, ValueError):
        return None
    fields = {}
    if entry.get("_KERNEL_DEVICE"):
        fields["DEVICE"] = entry["_KERNEL_DEVICE"]
    if entry.get("_KERNEL_SUBSYSTEM"):
        fields["SUBSYSTEM"] = entry["_KERNEL_SUBSYSTEM"]
    return {"seq": seq, "usec": usec, "level": level & 7, "facility": 0, "text": text.rstrip("\n"),
            "fields": fields, "epoch": epoch, "cursor": cursor}


class JournalSource:
    """``journalctl -k -o json`` of this boot, read on from its cursor."""

    name = "journalctl"

    def __init__(self, binary="journalctl"):
        self.binary = binary
        self.label = "%s -k" % binary
        self.cursor = None
        self.lost = 0

    def _run(self, args):
        argv = [self.binary, "-k", "-b", "-o", "json", "--no-pager"] + args
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=60, check=False)
        err = p.stderr.decode("utf-8", "replace").strip()
        if p.returncode != 0:
            raise OSError("%s exited %d: %s" % (" ".join(argv[:3]), p.returncode, err or "no message"))
        out = []
        for line in p.stdout.decode("utf-8", "replace").splitlines():
            try:
                rec = parse_journal_entry(json.loads(line))
            except ValueError:
                continue
            if rec is not None:
                out.append(rec)
        return out, err

    def open(self, backlog=True):
        """Read the look-back; raises OSError when the journal holds no kernel messages
        readable here (no journal, or only the user's own journal)."""
        recs, err = self._run(["-n", str(JOURNAL_LOOKBACK if backlog else 1)])
        if not recs:
            raise OSError("journalctl -k shows no kernel message of this boot%s" % (": %s" % err if err else ""))
        self.cursor = recs[-1]["cursor"]
        self.backlog = recs if backlog else []

    def read(self):
        if getattr(self, "backlog", None) is not None:
            out, self.backlog = self.backlog, None
            return out
        out, _err = self._run(["--after-cursor=%s" % self.cursor] if self.cursor else [])
        if out:
            self.cursor = out[-1]["cursor"] or self.cursor
        return out

    def close(self):
        pass


# --------------------------------------------------------------------------- the job's log

class KernelLog:
    """What the measurement job reads of the kernel log: :meth:`start` at the job's start
    (the look-back before it is context, ``before_run``), :meth:`poll` after each workload
    (and every ``interval`` s from :meth:`watch`'s thread while one runs), :meth:`section`
    for the status and the host's record."""

    def __init__(self, kmsg_path=KMSG, journalctl="journalctl", sysfs_root="/sys",
                 max_messages=MAX_MESSAGES, max_before=MAX_BEFORE):
        self.kmsg_path = kmsg_path
        self.journalctl = journalctl
        self.resolver = Resolver(sysfs_root)
        self.max_messages = max_messages
        self.max_before = max_before
        self.source = None
        self.reason = None
        self.reasons = []
        self.before = []
        self.during = []
        self.counts = {}
        self.counts_before = {}
        self.notes = {}
        self.path_states = []
        self.dropped = 0
        self.started_s = None
        self.start_seq = None
        self.workload = None
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        """Open the first readable source and take what it holds as the look-back."""
        self.started_s = round(_clock()[0], 6)
        for source in (KmsgSource(self.kmsg_path), JournalSource(self.journalctl)):
            try:
                source.open(backlog=True)
                recs = source.read()
            except (OSError, subprocess.SubprocessError) as e:
                self.reasons.append("%s: %s" % (source.label, _why(e)))
                continue
            self.source = source
            break
        if self.source is None:
            self.reason = "; ".join(self.reasons) or "no kernel log source"
            return self
        self.start_seq = recs[-1]["seq"] if recs else None
        self.look_back(recs, _clock())
        self.source.lost = 0    # records lost before the run are not this run's
        return self

    def look_back(self, recs, clock):
        """Take ``recs``, what the log held at the start, as the look-back (``before_run``):
        its storage messages context, its probes notes."""
        for rec in recs:
            msg = message(rec, self.resolver, before_run=True, clock=clock)
            if is_note(msg):
                self._absorb(msg, self.before, self.counts_before)
            elif msg is not None:
                count_message(self.counts_before, msg)
                self.before.append(msg)
        self.before = self.before[-self.max_before:]

    def _absorb(self, msg, kept, counts):
        """Take a capability probe's line as a note (:func:`add_note`); a SCSI disk's CDB line
        also takes back the result and sense lines of the same command just before it in
        ``kept`` (its address and tag: one refused command, not storage errors), uncounted
        from ``counts`` and counted in the note's ``lines``."""
        entry = add_note(self.notes, msg)
        key = refused_command(msg["text"])
        if key is None:
            return
        i = len(kept)
        while i > 0 and kept[i - 1].get("kind") == "scsi_sense" and scsi_command(kept[i - 1]["text"]) == key:
            i -= 1
        for m in kept[i:]:
            count_message(counts, m, -1)
            entry["lines"] += 1
        del kept[i:]

    def set_workload(self, workload):
        with self.lock:
            self.workload = workload

    def poll(self, workload=False):
        """Read what is new; tagged with ``workload`` (default: the current one). Returns the
        number of storage messages read."""
        with self.lock:
            if self.source is None:
                return 0
            tag = self.workload if workload is False else workload
            try:
                recs = self.source.read()
            except (OSError, subprocess.SubprocessError) as e:
                self.reasons.append("reading %s failed: %s" % (self.source.name, _why(e)))
                return 0
            clock = _clock()
            n = 0
            for rec in recs:
                state = path_state(rec, self.resolver, clock)
                if state is not None and len(self.path_states) < MAX_PATH_STATES:
                    self.path_states.append(state)
                msg = message(rec, self.resolver, workload=tag, clock=clock)
                if is_note(msg):
                    self._absorb(msg, self.during, self.counts)
                    continue
                if msg is None:
                    continue
                n += 1
                count_message(self.counts, msg)
                if len(self.during) < self.max_messages:
                    self.during.append(msg)
                else:
                    self.dropped += 1
            return n

    def watch(self, interval=5.0):
        """Poll every ``interval`` s in a daemon thread (a long workload does not let the
        kernel's ring buffer overrun the reader) until :meth:`close`."""
        if self.source is None or self._thread is not None:
            return

        def loop():
            while not self._stop.wait(interval):
                self.poll()

        self._thread = threading.Thread(target=loop, name="fleetqual-kmsg", daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self.lock:
            if self.source is not None:
                self.source.close()

    def section(self):
        """The ``kernel`` section of the status and of the host's record (docs/kernel-log.md)."""
        with self.lock:
            collected = self.source is not None
            return {
                "source": self.source.name if collected else None,
                "collected": collected,
                "reason": None if collected else self.reason,
                "warnings": [r for r in self.reasons if collected],
                "lost": self.source.lost if collected else 0,
                "dropped": self.dropped,
                "start_seq": self.start_seq,
                "started_s": self.started_s,
                "messages": [dict(m) for m in self.before + self.during],
                "counts": _copy(self.counts),
                "counts_before": _copy(self.counts_before),
                "notes": [dict(self.notes[k], first=dict(self.notes[k]["first"]))
                          for k in sorted(self.notes, key=lambda k: (k[0] or "", k[1]))],
                "path_states": [dict(p) for p in self.path_states],
            }


def job_open(status, interval):
    """The measurement job's kernel log, opened at its start (``job_runner.Job.run``): the
    look-back read as context, a thread reading every ``interval`` s, ``status["kernel"]``
    set; None (and the section says why) when it cannot be read at all."""
    try:
        log = KernelLog().start()
        log.watch(interval)
        status["kernel"] = log.section()
        return log
    except Exception as e:  # noqa: BLE001 - the log is evidence, never a reason to stop the job
        status["kernel"] = not_collected("reading the kernel log failed: %s" % e)
        return None


def job_read(log, status, close=False):
    """After a workload: read what the kernel logged since the last read (tagged with the
    workload that ran), then no workload runs; ``close``: the last read, after the cleanup.
    ``status["kernel"]`` is the section then."""
    if log is None:
        return
    try:
        log.poll()
        log.set_workload(None)
        if close:
            log.close()
        status["kernel"] = log.section()
    except Exception as e:  # noqa: BLE001
        status["kernel"].setdefault("warnings", []).append("reading the kernel log failed: %s" % e)


def _why(exc):
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (not root, or kernel.dmesg_restrict=1)"
    if isinstance(exc, FileNotFoundError):
        return "not found"
    return str(exc) or exc.__class__.__name__


def count_message(counts, msg, n=1):
    """Add ``n`` (-1: take back) to ``msg``'s kind on each of its drives in ``counts``."""
    for drive in message_drives(msg) or [UNATTRIBUTED]:
        per = counts.setdefault(drive, {})
        per[msg["kind"]] = per.get(msg["kind"], 0) + n
        if per[msg["kind"]] <= 0:
            del per[msg["kind"]]
        if not per:
            del counts[drive]


def _copy(counts):
    return dict((k, dict(v)) for k, v in counts.items())


def not_collected(reason):
    """The section of a job that could not read the kernel log at all (``reason``)."""
    return {"source": None, "collected": False, "reason": reason, "warnings": [], "lost": 0, "dropped": 0,
            "start_seq": None, "started_s": None, "messages": [], "counts": {}, "counts_before": {}, "notes": [],
            "path_states": []}
