# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Transient systemd units (docs/compliance.md, "What is ours"): on a cgroup v2 host whose init
is systemd, the benchmark's block-I/O group is a scope that systemd makes
(``systemd-run --scope``), not a directory the job makes in the tree systemd manages. Used by
``cgroups.Cgroup``.

* **Where**: in the slice that holds the job (:func:`slice_of`: ``system.slice`` for a job
  started from ``ssh.service``, ``user-1000.slice`` for one in a login session), so every
  limit the host set on that slice and the slices above it holds the benchmark by nesting.
* **What it carries**: ``IOAccounting=yes`` (systemd turns the io controller on down to the
  unit: its ``io.stat`` counts the benchmark's I/O per device), and the limits it must carry
  itself (:func:`properties`): the ones of the job's own unit (not an ancestor of the scope)
  and the impact caps, as ``IOReadIOPSMax=``, ``IOWriteIOPSMax=``, ``IOReadBandwidthMax=``,
  ``IOWriteBandwidthMax=``, and ``IOWeight=``.
* **Who is in it** (:class:`Scope`): a holder process (``sh`` that says it is ready, then
  ``cat`` reading a pipe that only this process writes), from before the benchmark starts
  until its last counters are read; the benchmark joins the scope's group itself before it
  executes (``impact.preexec``). systemd removes a scope's group as soon as no process is in
  it, and the group must outlive the benchmark by the final sample. The holder ends at end of
  file: when this process closes the pipe (:meth:`Scope.close`) or dies, however it dies; so
  the scope never outlives the job and the benchmark. ``--collect`` unloads the unit once it
  ended, failed or not, so no failed unit is left for ``systemctl reset-failed``; a unit still
  holding a process after the holder ended (a benchmark that would not end) is stopped
  without waiting (:meth:`Scope.stop`).
* **Its name** (:func:`unit_name`): ``fleetqual-job-<run id>-<pid>-<n>.scope``: this process'
  PID and a counter make it unique on the host while the job lives.

As root, ``systemd-run --scope`` reaches systemd over its private socket: no D-Bus daemon and
no login session are needed.
"""

import os
import re
import select
import shutil
import stat
import subprocess
import time

SYSTEMD_DIR = "/run/systemd/system"       # exists when the running init is systemd (sd_booted)
TOOL_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
UNIT_PREFIX = "fleetqual-job-"
LABEL_MAX = 64
# the rules of a block-I/O group (cgroups.THROTTLE_RULES) as systemd's unit properties
PROPERTIES = {"read_iops_device": "IOReadIOPSMax", "write_iops_device": "IOWriteIOPSMax",
              "read_bps_device": "IOReadBandwidthMax", "write_bps_device": "IOWriteBandwidthMax"}
HOLDER = ("/bin/sh", "-c", "echo ready; exec cat")
READY = b"ready\n"
START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 10.0
SYSTEMCTL_TIMEOUT_S = 30.0


def systemd_booted(run_dir=SYSTEMD_DIR):
    """Whether the running init is systemd (its runtime directory, as ``sd_booted()`` tells)."""
    return os.path.isdir(run_dir)


def tool(name):
    """The path of a systemd tool (``systemd-run``, ``systemctl``), or None: ``PATH``, then the
    usual directories (a detached job may run with a short ``PATH``)."""
    found = shutil.which(name)
    if found:
        return found
    for d in TOOL_DIRS:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def unit_name(label, pid, seq):
    """``fleetqual-job-<label>-<pid>-<seq>.scope``: ``label`` (the run id) with every character
    a unit name cannot hold made ``_``, cut to :data:`LABEL_MAX`."""
    text = re.sub(r"[^A-Za-z0-9_.:-]", "_", str(label or "run"))[:LABEL_MAX] or "run"
    return "%s%s-%d-%d.scope" % (UNIT_PREFIX, text, int(pid), int(seq))


def slice_of(rel):
    """``(slice unit, its group's path)`` of the innermost slice holding the cgroup v2 group
    ``rel`` (``/user.slice/user-0.slice/session-4.scope`` -> ``("user-0.slice",
    "/user.slice/user-0.slice")``), or ``(None, None)`` when no slice holds it (a scope made
    without ``--slice`` then goes to ``system.slice``)."""
    parts = [p for p in (rel or "").split("/") if p]
    for k in range(len(parts) - 1, -1, -1):
        if parts[k].endswith(".slice"):
            return parts[k], "/" + "/".join(parts[:k + 1])
    return None, None


def device_node(dev, number, dev_dir="/dev"):
    """A block device node systemd can resolve for ``dev`` (``maj:min`` ``number``):
    ``/dev/<dev>`` when it is that device, else ``/dev/block/<maj:min>`` (udev's link)."""
    path = os.path.join(dev_dir, dev)
    try:
        st = os.stat(path)
        major, minor = (int(x) for x in number.split(":"))
        if stat.S_ISBLK(st.st_mode) and os.major(st.st_rdev) == major and os.minor(st.st_rdev) == minor:
            return path
    except (OSError, ValueError):
        pass
    return os.path.join(dev_dir, "block", number)


def properties(limits, weight=None, node=device_node):
    """The unit's properties (``-p`` values): ``IOAccounting=yes``, one ``IO*Max=<node> <value>``
    per limit (``[{rule, device, number, value}]``, the rules of :data:`PROPERTIES`), and
    ``IOWeight=<weight>`` when given."""
    props = ["IOAccounting=yes"]
    for r in limits:
        props.append("%s=%s %d" % (PROPERTIES[r["rule"]], node(r["device"], r["number"]), int(r["value"])))
    if weight:
        props.append("IOWeight=%d" % int(weight))
    return props


def scope_argv(systemd_run, unit, slice_name, props, command=HOLDER):
    """``systemd-run --scope`` making ``unit`` (in ``slice_name`` when given) with ``props``,
    running ``command`` in it."""
    argv = [systemd_run, "--scope", "--quiet", "--collect", "--unit", unit]
    if slice_name:
        argv += ["--slice", slice_name]
    for p in props:
        argv += ["-p", p]
    return argv + ["--"] + list(command)


def _last_line(data):
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


class Scope:
    """One transient scope and its holder process (module docstring). :meth:`start` makes it
    and returns None once the holder runs in it, or why it could not; :attr:`pid` is the
    holder's (its ``/proc/<pid>/cgroup`` names the scope's group); :meth:`close` ends the
    holder; :meth:`stop` stops what is left in the unit."""

    def __init__(self, unit, slice_name, props, systemd_run=None, systemctl=None):
        self.unit = unit
        self.slice = slice_name
        self.props = list(props)
        self.systemd_run = systemd_run
        self.systemctl = systemctl
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def argv(self):
        return scope_argv(self.systemd_run or tool("systemd-run") or "systemd-run", self.unit, self.slice,
                          self.props)

    def start(self, timeout=START_TIMEOUT_S):
        """Make the scope: None once the holder said it runs in it, else why not (then nothing
        of it is left)."""
        argv = self.argv()
        env = dict(os.environ, LC_ALL="C", LANG="C")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, close_fds=True, env=env)
        except OSError as e:
            return "%s could not run: %s" % (argv[0], e)
        out = self.proc.stdout.fileno()
        got = b""
        end = time.monotonic() + timeout
        while not got.startswith(READY):
            left = end - time.monotonic()
            ready = select.select([out], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self.close(kill=True)
                return "systemd-run did not start unit %s within %d s" % (self.unit, timeout)
            chunk = os.read(out, 64)
            if not chunk:
                # systemd-run ended before the holder ran: it could not make the unit
                rc = self.proc.wait()
                err = self.proc.stderr.read()
                self.close()
                return "systemd-run could not start unit %s (exit %s): %s" % (self.unit, rc, _last_line(err))
            got += chunk
        return None

    def close(self, kill=False):
        """End the holder (end of file on its pipe) and reap it; SIGKILL by its PID if it has
        not ended within :data:`CLOSE_TIMEOUT_S` (at once with ``kill``: a ``systemd-run`` that
        never answered)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for fh in (proc.stdin, proc.stdout, proc.stderr):
            try:
                fh.close()
            except OSError:
                pass
        try:
            proc.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self):
        """Stop the unit without waiting for it (``systemctl stop --no-block``): systemd ends
        what is still in it; ``--collect`` unloads it once it ended. Returns None or why not."""
        ctl = self.systemctl or tool("systemctl")
        if not ctl:
            return "systemctl not found"
        try:
            p = subprocess.run([ctl, "stop", "--no-block", self.unit], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=SYSTEMCTL_TIMEOUT_S,
                               env=dict(os.environ, LC_ALL="C", LANG="C"), check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "systemctl stop %s: %s" % (self.unit, e)
        return None if p.returncode == 0 else "systemctl stop %s: %s" % (self.unit, _last_line(p.stderr))
