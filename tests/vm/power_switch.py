"""A guest's power switch for the power-cut test's ``command`` method (docs/durability.md):
what a BMC is to a server, for a guest of the VM tier.

The test process owns the guest (its QEMU and nbdkit processes are children of that
process, ended with it), so the playbook's power commands, run by ansible-playbook on the
controller, ask the test process over a unix socket::

    switch = PowerSwitch(guest, "/dev/shm/.../power.sock").start()
    fleetqual_power = {"method": "command", "off": switch.command("off"), "on": switch.command("on")}

``off`` is :meth:`guests.Guest.power_cut` (QEMU and the drives' nbdkit SIGKILLed: what a
drive's cache held is gone), ``on`` is :meth:`guests.Guest.restart` (the drives served again,
the guest booting on the same port; the playbook waits for it). Each answer is one line,
``ok <what>`` or ``error <why>``; the client exits 0 or 1 with it. Every request is logged
(``switch.log``: time, request, answer)."""
import os
import socket
import sys
import threading
import time

TIMEOUT_S = 120


class PowerSwitch:
    def __init__(self, guest, path):
        self.guest, self.path, self.log = guest, path, []
        self._sock, self._thread = None, None

    def command(self, what):
        """The argv that asks this switch for ``what`` (off | on)."""
        return [sys.executable, os.path.abspath(__file__), self.path, what]

    def start(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.path)
        self._sock.listen(4)
        self._thread = threading.Thread(target=self._serve, name="power-switch", daemon=True)
        self._thread.start()
        return self

    def _serve(self):
        while True:
            try:
                conn, _addr = self._sock.accept()
            except OSError:
                return
            with conn:
                try:
                    what = conn.recv(64).decode().strip()
                    answer = self.act(what)
                except Exception as e:  # noqa: BLE001 - the answer says what went wrong
                    answer = "error %s: %s" % (e.__class__.__name__, e)
                self.log.append((time.time(), what, answer))
                try:
                    conn.sendall(answer.encode() + b"\n")
                except OSError:
                    pass

    def act(self, what):
        if what == "off":
            pid = self.guest.power_cut()
            return "ok off (qemu %s and its drives' nbdkit ended)" % pid
        if what == "on":
            if self.guest.running():
                return "ok on (already running)"
            self.guest.restart()
            return "ok on (qemu %s, port %s)" % (self.guest.pid, self.guest.port)
        return "error unknown request %r (off | on)" % what

    def stop(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if os.path.exists(self.path):
            os.unlink(self.path)


def main(argv):
    if len(argv) != 3 or argv[2] not in ("off", "on"):
        print("usage: power_switch.py SOCKET off|on", file=sys.stderr)
        return 2
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(TIMEOUT_S)
        s.connect(argv[1])
        s.sendall(argv[2].encode())
        answer = s.makefile().readline().strip()
    print(answer)
    return 0 if answer.startswith("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
