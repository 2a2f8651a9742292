"""Run a command as a child subreaper (prctl PR_SET_CHILD_SUBREAPER, man 2 prctl): the QEMU
processes libvirtd daemonizes (a double fork) are re-parented here instead of to PID 1 and
reaped at once, so a forced power-off is seen in a fraction of a second rather than when PID 1
gets round to it. SIGTERM and SIGINT are passed on to the command; when the command exits, or
when this process's parent (the test) dies, every child left (orphaned QEMUs) is SIGKILLed."""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)      # handled below: the parent is gone
PARENT = os.getppid()
CHILD = os.fork()
if CHILD == 0:
    os.execvp(sys.argv[1], sys.argv[1:])


def kill_children():
    """SIGKILL every direct child: the command and the orphans it left here."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and open("/proc/%s/stat" % entry).read().rsplit(")", 1)[1].split()[1] == me:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError):
            pass


def on_signal(signo, frame):
    if os.getppid() != PARENT:
        kill_children()
    else:
        os.kill(CHILD, signo)


for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, on_signal)
status = 0
while True:
    try:
        reaped, st = os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if reaped == CHILD:
        status = os.waitstatus_to_exitcode(st)
        kill_children()
sys.exit(status if status >= 0 else 128 - status)
