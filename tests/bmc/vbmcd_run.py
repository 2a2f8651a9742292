"""virtualbmc's vbmcd with one correction, so that community.general.ipmi_power (a pyghmi
client) can log in to it.

pyghmi's BMC side answers an RMCP+ Open Session request with cipher suite 3 (RAKP-HMAC-SHA1)
whatever the client proposed; pyghmi's client proposes suite 17 (SHA-256), ignores the
algorithms in the answer, expects a 32-byte RAKP 2 hash and fails ("pack expected 32 items
for packing (got 20)"). A real BMC that cannot do what was proposed answers status 0x11 (no
matching cipher suite; IPMI 2.0 section 13.24), after which pyghmi's client proposes SHA-1.
That is what this does. ipmitool logs in either way. Each per-BMC process vbmcd forks dies
with vbmcd (PR_SET_PDEATHSIG)."""
import ctypes
import os
import signal
import sys

from pyghmi.ipmi.private import serversession

_libc = ctypes.CDLL(None, use_errno=True)
os.register_at_fork(after_in_child=lambda: _libc.prctl(1, signal.SIGKILL))   # PR_SET_PDEATHSIG

_stock = serversession.ServerSession.create_open_session_response


def create_open_session_response(self, request):
    request = bytearray(request)
    # tag, role, reserved (2), client session id (4), then the authentication (byte 12) and
    # integrity (byte 20) algorithm payloads: 1 is HMAC-SHA1 for both
    if request[12] != 1 or request[20] != 1:
        self.clientsessionid = request[4:8]
        return bytearray([request[0], 0x11, 0, 0]) + self.clientsessionid
    return _stock(self, request)


serversession.ServerSession.create_open_session_response = create_open_session_response

from virtualbmc.cmd.vbmcd import main  # noqa: E402

sys.exit(main())
