"""libvirt calls of the BMC lab, run with .venv-bmc's Python (Debian's python3-libvirt):
``virt.py URI define FILE`` (prints the domain's UUID), ``virt.py URI state NAME`` (prints the
state and its reason as libvirt names them, e.g. ``shutoff destroyed``), ``virt.py URI
remove NAME`` (destroys it if running, then undefines it). https://libvirt.org/html/libvirt-libvirt-domain.html"""
import sys

import libvirt

STATES = {libvirt.VIR_DOMAIN_RUNNING: "running", libvirt.VIR_DOMAIN_SHUTOFF: "shutoff",
          libvirt.VIR_DOMAIN_PAUSED: "paused", libvirt.VIR_DOMAIN_SHUTDOWN: "shutdown",
          libvirt.VIR_DOMAIN_CRASHED: "crashed"}
SHUTOFF_REASONS = {libvirt.VIR_DOMAIN_SHUTOFF_DESTROYED: "destroyed", libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN: "shutdown",
                   libvirt.VIR_DOMAIN_SHUTOFF_CRASHED: "crashed", libvirt.VIR_DOMAIN_SHUTOFF_UNKNOWN: "unknown"}


def main(uri, op, arg):
    conn = libvirt.open(uri)
    try:
        if op == "define":
            with open(arg) as fh:
                print(conn.defineXML(fh.read()).UUIDString())
        elif op == "state":
            state, reason = conn.lookupByName(arg).state()
            print(STATES.get(state, str(state)),
                  SHUTOFF_REASONS.get(reason, str(reason)) if state == libvirt.VIR_DOMAIN_SHUTOFF else reason)
        elif op == "remove":
            dom = conn.lookupByName(arg)
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        else:
            raise SystemExit("unknown operation %s" % op)
    finally:
        conn.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
