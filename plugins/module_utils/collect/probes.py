# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel's capability probes (docs/kernel-log.md, "Capability probes"): lines of the
kernel log that say a device refused an operation which only asks it to do work the kernel
or the filesystem then does another way (zeroing, discarding). Such a line is a note on the
drive ("does not support write zeroes"), never a storage error, whoever issued the request
(iobench's cleanup, mkfs, ext4's lazy init, a discard).

* The block layer's line for a failed request (block/blk-mq.c ``blk_print_req_error``,
  ``blk_update_request: `` or ``print_req_error: `` before it on older kernels)::

      <error word> error, dev <disk>, sector <n> op 0x<nn>:(<OP>) flags 0x<ff> phys_seg <n> prio class <n>

  is a probe when ``<OP>`` is one of :data:`PROBE_OPS`, whatever the error word
  (``operation not supported``, ``critical target``, ``I/O``). Any other operation's failure
  (READ, WRITE, FLUSH, ...) stays an error. The operation is judged by its name in the line.
* A SCSI disk refusing such a command prints its result and sense lines, then the command
  (``sd 0:0:0:0: [sda] tag#0 CDB: Write same(16) 93 08 ...``, ``CDB: Unmap/Read sub-channel``)
  before the block layer's line: the CDB line is a probe, and the result and sense lines of
  the same command (its SCSI address and tag, :func:`scsi_command`) belong to it.

Standard library only (the target runs it under Python 3.9+).
"""

import re

PROBE = "capability_probe"          # the kind of a probe's message
PROBE_OPS = {"WRITE_ZEROES": "write zeroes", "DISCARD": "discard", "SECURE_ERASE": "secure erase",
             "WRITE_SAME": "write same"}
_REQUEST_ERROR = re.compile(r"(?:^|: )(?P<word>[A-Za-z][\w /-]*?) error, dev (?P<dev>[^\s,]+), sector \d+ "
                            r"op 0x[0-9a-fA-F]+:\((?P<op>\w+)\)")
_SCSI_CDB = {"write same": "WRITE_SAME", "unmap": "DISCARD"}
_SCSI_PROBE = re.compile(r"\b(?:sd|scsi) (?P<scsi>\d+:\d+:\d+:\d+): (?:\[(?P<dev>\w+)\] ?)?(?:tag#\d+ )?"
                         r"CDB: (?P<cdb>write same|unmap)\b", re.I)
_SCSI_COMMAND = re.compile(r"\b(?:sd|scsi) (?P<scsi>\d+:\d+:\d+:\d+): (?:\[\w+\] ?)?(?:tag#(?P<tag>\d+))?")


def _request(text):
    m = _REQUEST_ERROR.search(text) if isinstance(text, str) else None
    return m if m and m.group("op") in PROBE_OPS else None


def _cdb(text):
    return _SCSI_PROBE.search(text) if isinstance(text, str) else None


def probe_refs(text):
    """The device references of a probe's line (as ``kmsg.classify`` gives them: ``[(how,
    value)]``), or None when the line is not a probe."""
    m = _request(text)
    if m:
        return [("block", m.group("dev"))]
    c = _cdb(text)
    if c:
        return ([("block", c.group("dev"))] if c.group("dev") else []) + [("scsi", c.group("scsi"))]
    return None


def probe_op(text):
    """``(op, error word)`` of a probe's line: the block layer's operation and error word, or
    for a SCSI CDB line the operation behind the command (``Unmap`` a DISCARD, ``Write same``
    a WRITE_SAME) and the word ``SCSI``; None for any other line."""
    m = _request(text)
    if m:
        return m.group("op"), m.group("word")
    c = _cdb(text)
    return (_SCSI_CDB[c.group("cdb").lower()], "SCSI") if c else None


def probe_note(op):
    """The note a refused probe leaves on its drive: ``does not support write zeroes``."""
    return "does not support %s" % PROBE_OPS.get(op, str(op).lower().replace("_", " "))


def scsi_command(text):
    """``(address, tag)`` of a SCSI disk's line about one command (tag None on kernels that
    print none), else None: the lines of one command share it."""
    m = _SCSI_COMMAND.search(text) if isinstance(text, str) else None
    return (m.group("scsi"), m.group("tag")) if m else None


def refused_command(text):
    """``(address, tag)`` of a SCSI CDB line naming a probe's command: the result and sense
    lines with that key just before it are the same refused command. None for any other line
    (the block layer's probe line included)."""
    return scsi_command(text) if _cdb(text) and not _request(text) else None
