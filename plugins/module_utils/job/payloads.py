# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsiballZ payloads of this collection's module runs on the host (docs/privileges.md,
"What is left on the host").

Ansible runs a module from a zip it writes into ``<tmp>/ansible_<module>_payload_<random>/``
and removes that directory when the module returns; a module run killed with its SSH
connection leaves it (about 150 KiB) behind. :func:`reap` runs in the detached measurement
job (``job_runner.detach``): once the module run that started it has ended, it removes that
run's payload. :func:`clean` is the next start's leftover check (``host_start.start``): the
stale payloads of this collection's earlier module runs, owned by the same user, untouched
for :data:`STALE_S` seconds and not in use by a live process.
"""

import os
import shutil
import stat
import sys
import tempfile
import time

PAYLOAD_PREFIX = "ansible_fleetqual.storage."
PAYLOAD_MARK = "_payload_"
STALE_S = 3600      # untouched this long and not in use: a killed run's


def payload_dir(path=None):
    """The AnsiballZ payload directory this process runs from (a ``sys.path`` entry
    ``.../ansible_fleetqual.storage.<module>_payload_<x>/ansible_..._payload.zip``), or None
    (not run through AnsiballZ: the unit tests, bench/)."""
    for entry in ([path] if path else sys.path):
        parent = os.path.dirname(entry or "")
        name = os.path.basename(parent)
        if entry and entry.endswith("_payload.zip") and name.startswith(PAYLOAD_PREFIX) and PAYLOAD_MARK in name:
            return parent
    return None


def reap(payload, module_running, poll_s=0.5, limit_s=600.0):
    """In the detached job: once the module run that started it has ended
    (``module_running()`` false: its PID gone or reused), remove its AnsiballZ payload if it
    is still there (ansible's wrapper removes it when the module returns; a module killed
    with its connection cannot). The job imported all it runs before it detached, so it
    needs the payload no more."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and module_running():
        time.sleep(poll_s)
    if not module_running() and os.path.isdir(payload):
        shutil.rmtree(payload, ignore_errors=True)


def _in_use(paths, proc="/proc"):
    """The payload directories of ``paths`` that a live process has open or mapped (its
    descriptors and memory maps), read from ``/proc``; unreadable processes are skipped."""
    used = set()
    try:
        pids = [d for d in os.listdir(proc) if d.isdigit()]
    except OSError:
        return used
    for pid in pids:
        refs = []
        try:
            fds = os.path.join(proc, pid, "fd")
            refs.extend(os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds))
        except OSError:
            pass
        try:
            with open(os.path.join(proc, pid, "maps")) as fh:
                refs.append(fh.read())
        except OSError:
            pass
        for ref in refs:
            used.update(p for p in paths if p in ref)
    return used


def stale_payloads(tmpdir=None, uid=None, now=None, keep=(), stale_s=STALE_S, proc="/proc"):
    """The payload directories of this collection's module runs in ``tmpdir`` (the module's
    temporary directory) left by earlier runs: owned by ``uid`` (this process' effective
    user), untouched for ``stale_s`` seconds, not in ``keep`` (this run's own) and not in use
    by a live process."""
    tmpdir = tmpdir or tempfile.gettempdir()
    uid = os.geteuid() if uid is None else uid
    now = time.time() if now is None else now
    try:
        names = os.listdir(tmpdir)
    except OSError:
        return []
    found = []
    for name in names:
        if not (name.startswith(PAYLOAD_PREFIX) and PAYLOAD_MARK in name):
            continue
        path = os.path.join(tmpdir, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or now - st.st_mtime < stale_s or path in keep:
            continue
        found.append(path)
    if not found:
        return []
    used = _in_use(found, proc)
    return sorted(p for p in found if p not in used)


def clean(tmpdir=None, stale_s=STALE_S):
    """Remove :func:`stale_payloads` (the next start's leftover check); the removed paths."""
    removed = []
    for path in stale_payloads(tmpdir, keep=tuple(p for p in [payload_dir()] if p), stale_s=stale_s):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed
