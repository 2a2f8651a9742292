# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ctrl-C, SIGTERM and an AWX cancel stop the fleet's jobs, and the run reports what they
measured (docs/operations.md, "The controller stopped or killed").

``ansible-playbook``'s task queue manager turns SIGINT into KeyboardInterrupt and, on SIGTERM,
passes the signal to its workers and kills itself; neither reaches the hosts, whose detached
jobs would run on to their deadline, and no report is written. :class:`SignalStop`, installed
by the qualify_report callback when the playbook starts, wraps both handlers. From the
measuring play's first job task on (``armed``), the first such signal does not end the run:
it leaves the interrupt file (:data:`INTERRUPT_ENV` names it; every worker forked afterwards
inherits the name) and the run goes on. Each host's wait (``job_wait``) sees the file within
a second, stops its host's job over its own connection (the module's ``state=stopped``, as
``playbooks/stop.yml`` does: the job ends its workload, removes its files, restores its
device regions) and collects it; a host whose job has not started yet is not started. The
run then judges, stores and reports as any run: each interrupted host is an ERROR "stopped
by the operator" with the workloads it measured. A second signal, or one before that task or
in another play, goes to Ansible's own handler at once. A controller killed without a signal
(SIGKILL, a power loss) runs nothing: its jobs end by their deadline and the next run
attaches to them.

The interrupt file's private directory (``fleetqual-run-<pid>-*`` in the system's temporary
directory) is removed when ``ansible-playbook`` exits; one that ended without its exit handlers
(SIGKILL, or Ansible ending itself by its own SIGTERM) leaves it behind, and the next run on the
controller removes it (:func:`sweep_stale`)."""

import atexit
import os
import re
import shutil
import signal
import stat
import tempfile
import threading

INTERRUPT_ENV = "FLEETQUAL_INTERRUPT_FILE"
# who the stopped jobs' status names; the signal's name follows ("... by SIGINT")
STOPPED_BY = "ansible-playbook interrupted"
# each job's grace after its SIGTERM (the module waits up to this for its final status)
STOP_GRACE_S = 10
# a wait of an interrupted run polls at least this often (seconds)
INTERRUPTED_POLL_S = 1.0
# the private directory of one run's interrupt file: the PID of its ansible-playbook, then mkdtemp's
RUN_DIR_PREFIX = "fleetqual-run-"
_RUN_DIR = re.compile(r"^%s(\d+)-[A-Za-z0-9_]+$" % re.escape(RUN_DIR_PREFIX))
_INTERRUPT_FILE = "interrupted"
_INTERRUPT_NAMES = frozenset((_INTERRUPT_FILE, _INTERRUPT_FILE + ".tmp"))     # the file, and its write (interrupt)


def interrupted(environ=None):
    """Who interrupted the run (``ansible-playbook interrupted by SIGINT``) when it was, else
    None: read from the interrupt file this process's ansible-playbook leaves."""
    path = (os.environ if environ is None else environ).get(INTERRUPT_ENV)
    if not path:
        return None
    try:
        with open(path) as fh:
            return fh.read().strip() or STOPPED_BY
    except OSError:
        return None


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:         # another user's process: alive
        return True
    return True


def sweep_stale(tmpdir=None):
    """Remove the interrupt directories that runs on this controller left behind (a process
    ended without its exit handlers). A directory is removed only when it is this user's, is
    a directory (not a link), is named by a PID that no process has now, and holds nothing
    but an interrupt file; anything else is left as it is. Returns the paths removed."""
    tmpdir = tmpdir or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(tmpdir)
    except OSError:
        return removed
    for name in names:
        m = _RUN_DIR.match(name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        path = os.path.join(tmpdir, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            inside = os.listdir(path)
            if not set(inside) <= _INTERRUPT_NAMES or not all(
                    stat.S_ISREG(os.lstat(os.path.join(path, entry)).st_mode) for entry in inside):
                continue
            for entry in inside:
                os.unlink(os.path.join(path, entry))
            os.rmdir(path)
        except OSError:     # gone meanwhile, or not ours to remove: left as it is
            continue
        removed.append(path)
    return removed


def _say(line):
    # written straight to stderr: the handler may have interrupted Display itself
    try:
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


class SignalStop:
    """The signal handlers of one ``ansible-playbook`` run (:meth:`install`), and the jobs it
    started and has not collected yet (``host -> run id``, for the line the signal prints)."""

    def __init__(self, environ=None):
        self.environ = os.environ if environ is None else environ
        self.running = {}
        self.wrapped = {}
        self.armed = False          # the first signal stops the jobs (set by the callback at the first job task)
        self.reason = None
        self.directory = None
        self.lock = threading.Lock()

    @property
    def path(self):
        return os.path.join(self.directory, _INTERRUPT_FILE) if self.directory else None

    def install(self):
        """Wrap SIGINT's and SIGTERM's handlers; name this run's interrupt file in the
        environment (removed with its private directory when the process exits; those of
        earlier runs that could not remove theirs are removed first, :func:`sweep_stale`)."""
        if self.directory is None:
            sweep_stale()
            self.directory = tempfile.mkdtemp(prefix="%s%d-" % (RUN_DIR_PREFIX, os.getpid()))
            atexit.register(shutil.rmtree, self.directory, True)
            self.environ[INTERRUPT_ENV] = self.path
        for sig in (signal.SIGINT, signal.SIGTERM):
            if sig not in self.wrapped:
                self.wrapped[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)

    def started(self, host, run_id):
        if run_id:
            self.running[host] = run_id

    def ended(self, host):
        self.running.pop(host, None)

    def interrupt(self, signame):
        """Leave the interrupt file (once): every wait stops its host's job."""
        with self.lock:
            if self.reason is not None:
                return False
            self.reason = "%s by %s" % (STOPPED_BY, signame)
            tmp = self.path + ".tmp"
            with open(tmp, "w") as fh:
                fh.write(self.reason + "\n")
            os.replace(tmp, self.path)
        hosts = sorted(self.running)
        _say("fleetqual: %s: stopping the measurement jobs of %d host(s)%s; the run collects what they measured "
             "and writes its report (interrupt again to end at once, leaving the jobs to their deadline)"
             % (signame, len(hosts), " (%s%s)" % (", ".join(hosts[:10]), ", ..." if len(hosts) > 10 else "")
                if hosts else ""))
        return True

    def _on_signal(self, signum, frame):
        if self.armed and self.reason is None and self.directory:
            try:
                if self.interrupt(signal.Signals(signum).name):
                    return
            except OSError as exc:
                _say("fleetqual: the jobs cannot be told to stop (%s): ending the run" % exc)
        prev = self.wrapped.get(signum)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_IGN:
            return
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
