"""Counting what the controller starts on each loopback host ("two round trips per
host"), from real parts and without changing what the modules do. Used by
tests/fleet/test_fleet_round_trips.py and bench/bench_fleet_scale.py.

Two counters, both per host and both files in the host's own directory (``<root>/<host>/``):

* **Module executions** (``modules.log``): the host's ``ansible_python_interpreter`` is a
  small ``/bin/sh`` wrapper (:meth:`ModuleCounter.host_vars`). Every Python start Ansible
  makes on the host goes through it; it appends one line (time, pid, kind, module name, the
  module's ``state`` argument when it has one) and then ``exec``s the real interpreter with
  the same arguments and the same stdin:

  - pipelining (the fleet's default): no argument, the AnsiballZ payload on stdin. The wrapper
    saves stdin to a file in the host's directory, reads the module's name from the payload's
    ``module_fqn='...'`` line (and ``"state": "..."`` from its ``params=`` line), reopens the
    file as stdin, unlinks it and execs the interpreter: same argv, same bytes on stdin;
  - without pipelining: the argument is the transferred ``AnsiballZ_<name>.py``, the name is
    read from that file;
  - anything else (``python -c ...``, e.g. the copy's ``validate``) is logged as kind
    ``other`` with its first argument: a Python start, but not a module execution.

* **SSH sessions** (``sessions.log``, optional): the host's sshd is (re)started with a forced
  command in front of the client key (``authorized_keys`` ``command="..."``, through
  ``fleet.host(n, key_options=...)``, fleetlib's existing parameter). The forced command logs
  ``$SSH_ORIGINAL_COMMAND`` and runs it with the user's shell as sshd would
  (``$SHELL -c "$SSH_ORIGINAL_COMMAND"``); the sftp subsystem (Ansible's file transfer) is
  handed to ``/usr/lib/openssh/sftp-server``. Each Ansible low-level command is one session
  over the ControlPersist connection, so this counts every round trip: module runs, raw
  commands (the cheap polls: a ``cat`` of the job's status file starts no Python, so it is in
  this log and not in ``modules.log``), temporary directories, file transfers.

Each run of a playbook is cut out of the logs with :meth:`ModuleCounter.mark` before and after
the run: ``counts(hosts, since=before, until=after)``, ``sessions(host, since, until)``.
"""
import os
import re
import shlex
import stat
import sys

SFTP_SERVER = "/usr/lib/openssh/sftp-server"

PYTHON_WRAPPER = r"""#!/bin/sh
# Module-execution counter of the fleet tests (tests/fleet/module_counter.py): one line per
# Python start, then the real interpreter with the same arguments and the same stdin.
dir=%(dir)s
ts=$(date +%%s.%%N)
if [ $# -eq 0 ]; then
    # pipelining: the AnsiballZ payload comes on stdin
    f=$(mktemp "$dir/payload.XXXXXX") || exit 97
    cat > "$f"
    name=$(grep -m1 "^module_fqn=" "$f" | sed "s/^module_fqn=.\(.*\).,\$/\1/")
    state=$(grep -m1 "^params=" "$f" | grep -o '"state": "[A-Za-z_]*"' | head -n1 | sed 's/.*: "\(.*\)"/\1/')
    echo "$ts $$ module ${name:-?} ${state:--}" >> "$dir/modules.log"
    exec 0< "$f"
    rm -f "$f"
    exec %(python)s
fi
case "$1" in
    */AnsiballZ_*.py)
        name=$(grep -m1 "^module_fqn=" "$1" | sed "s/^module_fqn=.\(.*\).,\$/\1/")
        state=$(grep -m1 "^params=" "$1" | grep -o '"state": "[A-Za-z_]*"' | head -n1 | sed 's/.*: "\(.*\)"/\1/')
        echo "$ts $$ module ${name:-?} ${state:--}" >> "$dir/modules.log" ;;
    *)
        echo "$ts $$ other $(printf '%%s' "$1" | tr -c 'A-Za-z0-9_./-' '_' | cut -c1-40) -" >> "$dir/modules.log" ;;
esac
exec %(python)s "$@"
"""

SESSION_WRAPPER = r"""#!/bin/sh
# SSH session counter of the fleet tests (tests/fleet/module_counter.py): sshd's forced command.
# Logs the client's command and runs it with the user's shell, as sshd would have.
ts=$(date +%%s.%%N)
cmd=$SSH_ORIGINAL_COMMAND
echo "$ts $$ $(printf '%%s' "$cmd" | tr '\n\t' '  ' | cut -c1-400)" >> %(dir)s/sessions.log
case "$cmd" in
    internal-sftp|sftp|*/sftp-server) exec %(sftp)s ;;
    "") exec "${SHELL:-/bin/sh}" -l ;;
esac
exec "${SHELL:-/bin/sh}" -c "$cmd"
"""

MODULE_RE = re.compile(r"^(\S+) (\d+) (module|other) (\S+) (\S+)$")
SESSION_RE = re.compile(r"^(\S+) (\d+) ?(.*)$")


class Invocation:
    """One line of a host's modules.log."""

    def __init__(self, t, pid, kind, name, state):
        self.t, self.pid, self.kind, self.name = float(t), int(pid), kind, name
        self.state = None if state == "-" else state

    @property
    def label(self):
        short = self.name.rsplit(".", 1)[-1] if self.kind == "module" else "python " + self.name
        return short + ("(%s)" % self.state if self.state else "")

    def __repr__(self):
        return "<%s %s>" % (self.kind, self.label)


class Session:
    """One line of a host's sessions.log: an SSH exec (or sftp) session and its command."""

    def __init__(self, t, pid, command, wrapper):
        self.t, self.pid, self.command = float(t), int(pid), command
        if command in ("internal-sftp", "sftp") or command.endswith("/sftp-server"):
            self.kind = "transfer"
        elif wrapper in command:
            self.kind = "module"           # starts the host's Python (counted in modules.log too)
        elif ".fleetqual-job" in command or "status.json" in command:
            self.kind = "poll"             # a raw read of the job's status: no Python
        elif "ansible-tmp-" in command:
            self.kind = "tmpdir"           # mkdir / chmod / rm of Ansible's remote temporary dir
        else:
            self.kind = "raw"

    def __repr__(self):
        return "<%s %s>" % (self.kind, self.command[:80])


class ModuleCounter:
    """Per-host counters under ``root`` (one directory per inventory host name)."""

    def __init__(self, root, python=None):
        self.root = root
        self.python = python or sys.executable
        os.makedirs(root, mode=0o700, exist_ok=True)

    def dir(self, host):
        return os.path.join(self.root, host)

    def wrapper(self, host):
        return os.path.join(self.dir(host), "python")

    def _write(self, path, text):
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)

    def install(self, host):
        """Write the host's interpreter wrapper (idempotent); its path."""
        d = self.dir(host)
        os.makedirs(d, mode=0o755, exist_ok=True)
        self._write(self.wrapper(host), PYTHON_WRAPPER % {"dir": shlex.quote(d), "python": shlex.quote(self.python)})
        return self.wrapper(host)

    def host_vars(self, host):
        """Host vars for fleet.inventory(): the counting interpreter."""
        return {"ansible_python_interpreter": self.install(host)}

    def key_options(self, host):
        """authorized_keys options for fleet.host(n, key_options=...): every SSH session of the
        host goes through the session logger (its sshd is restarted with them)."""
        if not os.access(SFTP_SERVER, os.X_OK):
            raise RuntimeError("%s is missing: the session counter hands sftp to it" % SFTP_SERVER)
        d = self.dir(host)
        os.makedirs(d, mode=0o755, exist_ok=True)
        path = os.path.join(d, "session")
        self._write(path, SESSION_WRAPPER % {"dir": shlex.quote(d), "sftp": SFTP_SERVER})
        return 'command="%s"' % path

    def _lines(self, host, name):
        try:
            with open(os.path.join(self.dir(host), name)) as fh:
                return fh.read().splitlines()
        except FileNotFoundError:
            return []

    def mark(self, hosts):
        """{host: (module lines, session lines)} so far: pass as ``since`` to cut out one run."""
        return {h: (len(self._lines(h, "modules.log")), len(self._lines(h, "sessions.log"))) for h in hosts}

    @staticmethod
    def _window(lines, host, since, until, which):
        start = (since or {}).get(host, (0, 0))[which]
        end = (until or {}).get(host, (len(lines), len(lines)))[which]
        return lines[start:end]

    def invocations(self, host, since=None, until=None):
        """Every Python start on the host (kind module or other), in order."""
        out = []
        for line in self._window(self._lines(host, "modules.log"), host, since, until, 0):
            m = MODULE_RE.match(line)
            if m:
                out.append(Invocation(*m.groups()))
        return out

    def modules(self, host, since=None, until=None):
        """The host's module executions (AnsiballZ runs), in order."""
        return [i for i in self.invocations(host, since, until) if i.kind == "module"]

    def counts(self, hosts, since=None, until=None):
        """{host: number of module executions}."""
        return {h: len(self.modules(h, since, until)) for h in hosts}

    def sessions(self, host, since=None, until=None):
        """The host's SSH sessions (needs :meth:`key_options` on its sshd), in order."""
        wrapper = self.wrapper(host)
        out = []
        for line in self._window(self._lines(host, "sessions.log"), host, since, until, 1):
            m = SESSION_RE.match(line)
            if m:
                out.append(Session(m.group(1), m.group(2), m.group(3), wrapper))
        return out

    def session_kinds(self, host, since=None, until=None):
        """{kind: count} of the host's SSH sessions (module, poll, transfer, tmpdir, raw)."""
        kinds = {}
        for s in self.sessions(host, since, until):
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
        return kinds

    def summary(self, host, since=None, until=None):
        """One line for messages: the module names in order, with the state argument."""
        mods = self.modules(host, since, until)
        return "%s: %d module executions: %s; other Python starts: %d; SSH sessions: %s" % (
            host, len(mods), ", ".join(i.label for i in mods),
            len([i for i in self.invocations(host, since, until) if i.kind == "other"]),
            self.session_kinds(host, since, until))
