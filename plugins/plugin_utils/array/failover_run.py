# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The failover's timer on the controller (docs/san.md, "Failover under load"): run the cut
command at ``cut_at`` and the restore command at ``restore_at`` (Unix times, the controller's
clock, which is the array's), each through ``/bin/sh -c`` with a time limit, and write what
ran, when and how it ended to ``log`` (JSON, replaced atomically after each event).

Started detached by ``array/failover.launch`` (its own session, so neither a fork of the
playbook nor the playbook's end holds or stops it); it ends by itself after the restore, which
always runs, even when the cut failed or timed out. Standard library only:
``python3 failover_run.py <spec.json>``.
"""

import json
import os
import subprocess
import sys
import time

TAIL = 2000


def write_log(path, doc):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
    os.rename(tmp, path)


def run_at(name, command, at, timeout):
    """Sleep until ``at``, run ``command``; the event's record."""
    while True:
        left = at - time.time()
        if left <= 0:
            break
        time.sleep(min(left, 0.5))
    start = time.time()
    event = {"event": name, "command": command, "planned": at, "start": round(start, 6), "late_s": round(start - at, 3)}
    try:
        p = subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, check=False)
        event.update(rc=p.returncode, timed_out=False, stdout=p.stdout[-TAIL:], stderr=p.stderr[-TAIL:])
    except subprocess.TimeoutExpired as exc:
        event.update(rc=None, timed_out=True, stdout=(exc.stdout or "")[-TAIL:] if isinstance(exc.stdout, str) else "",
                     stderr="timed out after %s s" % timeout)
    except OSError as exc:
        event.update(rc=None, timed_out=False, stdout="", stderr=str(exc))
    event["end"] = round(time.time(), 6)
    return event


def main(spec_path):
    with open(spec_path) as fh:
        spec = json.load(fh)
    doc = {"pid": os.getpid(), "spec": spec, "events": [], "state": "waiting"}
    write_log(spec["log"], doc)
    for name, at in (("cut", spec["cut_at"]), ("restore", spec["restore_at"])):
        doc["state"] = "%s running" % name
        write_log(spec["log"], doc)
        doc["events"].append(run_at(name, spec[name], at, float(spec.get("timeout_s") or 60)))
        write_log(spec["log"], doc)
    doc["state"] = "done"
    write_log(spec["log"], doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
