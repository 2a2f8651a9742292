# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one atomic file writer of the collection (controller and target side).

A reader of the file sees the old content or the new one, never a half-written file: the
text goes to a temporary file in the same directory (so the rename stays on one
filesystem), which is given its mode and renamed over the path. ``fsync=True`` also
flushes it to the disk first and the directory after the rename (the detached job's status,
which must survive a crash or a power loss of the host: fsync(2), "Calling fsync() does not
necessarily ensure that the entry in the directory containing the file has also reached
disk"). Used by the job's status (module_utils/job/runner.py), the controller's progress
files (action/job.py) and every report file (plugin_utils: run store, report writers).
Its reader, :func:`read_json_or_none`, takes such a file as it is or says there is none."""

from __future__ import annotations

import json
import os
import tempfile


def write_atomic(path, text, mode=0o644, fsync=False):
    """Write ``text`` (a string, or an iterable of strings written one after the other) to
    ``path`` atomically; creates the directory. Returns ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                f.writelines(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        if fsync:
            # the rename too: until the directory is on disk a crash can bring back the old file
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_json_atomic(path, doc, mode=0o600, fsync=False):
    """``doc`` as compact JSON, written atomically (write_atomic)."""
    return write_atomic(path, json.dumps(doc), mode=mode, fsync=fsync)


def read_json_or_none(path):
    """The JSON document at ``path``, or None when there is none or it cannot be read (a
    file being replaced is read whole, old or new: write_atomic)."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
