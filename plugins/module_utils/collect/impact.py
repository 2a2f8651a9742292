# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Impact limits on the host (docs/compliance.md): how a workload keeps out of the way of the other
I/O on its disk. Used by ``foreign.Run`` (settings: ``foreign_settings.IMPACT_DEFAULTS``).

* **Idle I/O priority**: ``ioprio_set`` IDLE in the child before it executes iobench
  (:func:`preexec`); recorded with the device's scheduler and whether it honours it
  (:func:`scheduler`, :func:`applied`).
* **nice**, set in the same child.
* **Caps** (:func:`limit_params`): an IOPS cap and a bandwidth cap (a rate from the block
  size, through ``--rate-iops``), a thread cap and a working-set cap (a share of the free
  space). The time budget (``budget_s``) is ``foreign.job_params``'s ``budget_end_epoch``.
* **Kernel-enforced caps** (:func:`kernel_limits`, :func:`io_weight`): where the benchmark's
  block-I/O group is a cgroup v2 group of its own (``cgroups.Cgroup``: a systemd unit or a
  group below the job's path), the IOPS and bandwidth caps are also that group's limits
  (``io.max``; a unit's ``IOReadIOPSMax=`` ...), so the kernel holds the benchmark to them
  whatever its pacing does; the idle I/O class is also the unit's ``IOWeight=1``. The
  workload's notes say which (:func:`enforced_note`).
"""

import ctypes
import ctypes.util
import math
import os
import platform

# schedulers and whether they honour the IDLE I/O priority class
SCHEDULER_IDLE = {
    "bfq": (True, "bfq serves idle-class I/O only when no other class waits"),
    "cfq": (True, "cfq serves idle-class I/O only when no other class waits"),
    "mq-deadline": (False, "mq-deadline orders dispatch by priority class (kernel 5.14+) but has no idle "
                           "semantics: idle-class requests still compete"),
    "kyber": (False, "kyber ignores I/O priorities"),
    "none": (False, "no scheduler: I/O priorities are ignored"),
}

IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13
_SYS_IOPRIO = {"x86_64": (251, 252), "i386": (289, 290), "i686": (289, 290), "aarch64": (30, 31),
               "arm64": (30, 31), "riscv64": (30, 31), "ppc64le": (273, 274), "ppc64": (273, 274),
               "s390x": (282, 283), "armv7l": (314, 315)}


def scheduler(dev):
    """``{name, idle_honoured, note}`` of the device's I/O scheduler (``[name]`` in
    ``/sys/block/<dev>/queue/scheduler``)."""
    try:
        with open("/sys/block/%s/queue/scheduler" % dev) as fh:
            text = fh.read()
    except OSError as e:
        return {"device": dev, "name": None, "idle_honoured": False, "note": "scheduler unknown: %s" % e}
    name = text[text.find("[") + 1:text.find("]")] if "[" in text else text.strip() or None
    honoured, note = SCHEDULER_IDLE.get(name, (False, "scheduler %s: idle priority not known to be honoured" % name))
    return {"device": dev, "name": name, "idle_honoured": honoured, "note": note}


# --------------------------------------------------------------------------- priority

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


def _ioprio_nr(which):
    nums = _SYS_IOPRIO.get(platform.machine())
    return None if nums is None else nums[which]


def ioprio_get(pid):
    """The I/O priority class of ``pid`` (0 none, 1 RT, 2 BE, 3 IDLE), or None."""
    nr = _ioprio_nr(1)
    if nr is None:
        return None
    value = _libc().syscall(nr, IOPRIO_WHO_PROCESS, pid)
    return None if value < 0 else value >> IOPRIO_CLASS_SHIFT


def preexec(procs_path=None, ioprio="none", nice=0):
    """A ``preexec_fn`` that joins the cgroup, sets the idle I/O class and the nice value in
    the child before it executes the benchmark (failures are seen afterwards by
    :func:`applied`, which reads what the child really got)."""
    nr = _ioprio_nr(0) if ioprio == "idle" else None
    libc = _libc() if nr is not None else None

    def fn():
        if procs_path:
            try:
                fd = os.open(procs_path, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
            except OSError:
                pass
        if libc is not None:
            libc.syscall(nr, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT)
        if nice:
            try:
                os.nice(int(nice))
            except OSError:
                pass
    return fn


def applied(pid, cgroup, ioprio, nice, devices):
    """What the child really got: ``{cgroup, ioprio, nice, schedulers, notes}``."""
    notes = []
    in_group = None
    if cgroup is not None and cgroup.path:
        try:
            with open(cgroup.procs) as fh:
                in_group = str(pid) in fh.read().split()
        except OSError:
            in_group = False
        if not in_group:
            notes.append("the benchmark could not join cgroup %s" % cgroup.path)
    got_class = ioprio_get(pid) if ioprio == "idle" else None
    scheds = [scheduler(d) for d in devices]
    if ioprio == "idle":
        if got_class != IOPRIO_CLASS_IDLE:
            notes.append("idle I/O priority not set (class %s)" % got_class)
        for s in scheds:
            if not s["idle_honoured"]:
                notes.append("device %s: idle I/O priority not honoured: %s" % (s["device"], s["note"]))
    try:
        got_nice = os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        got_nice = None
    return {"in_cgroup": in_group, "ioprio_class": got_class, "nice": got_nice, "schedulers": scheds, "notes": notes}


# --------------------------------------------------------------------------- impact

def limit_params(params, impact, block_size, total_size, free_bytes):
    """Apply the impact caps to the run parameters (a copy): ``(params, notes)``. A
    bandwidth cap becomes a request rate: max_mibps x 1 MiB / block size."""
    p = dict(params)
    notes = []
    rates = []
    if impact.get("max_iops"):
        rates.append(float(impact["max_iops"]))
    if impact.get("max_mibps") and block_size:
        rates.append(float(impact["max_mibps"]) * 1048576.0 / block_size)
    if rates and p.get("engine", "sync") == "sync" and not p.get("search") and p.get("mode") != "dbpattern":
        cap = max(1.0, round(min(rates), 1))
        if not p.get("rate_iops") or p["rate_iops"] > cap:
            p["rate_iops"] = cap
            notes.append("paced at %s requests/s (max_iops %s, max_mibps %s at block %d)"
                         % (cap, impact.get("max_iops") or "-", impact.get("max_mibps") or "-", block_size or 0))
    elif rates:
        notes.append("not paced: rate pacing needs the sync engine and a plain run (not search or dbpattern)")
    if impact.get("max_threads") and p.get("threads", 1) > int(impact["max_threads"]) and not p.get("search"):
        notes.append("threads %d capped to %d" % (p["threads"], int(impact["max_threads"])))
        p["threads"] = int(impact["max_threads"])
    share = float(impact.get("max_free_share") or 0)
    if share and total_size and free_bytes is not None and not p.get("device"):
        cap = int(free_bytes * share)
        files = max(1, int(p.get("file_num") or 1))
        unit = files * (block_size or 512)
        if total_size > cap:
            new = max(unit, cap // unit * unit)
            p["total_size"] = new
            notes.append("working set %d bytes capped to %d (%s of the %d bytes free)"
                         % (total_size, new, share, free_bytes))
    return p, notes


# --------------------------------------------------------------------------- kernel-enforced

def kernel_limits(impact):
    """The impact caps as the limits of a block-I/O group (``{rule: value}``, the rules of
    ``cgroups.THROTTLE_RULES``): ``max_iops`` on reads and on writes each (the pacing keeps
    their sum to it), ``max_mibps`` as bytes/s on each."""
    out = {}
    if float(impact.get("max_iops") or 0) > 0:
        out["read_iops_device"] = out["write_iops_device"] = max(1, int(math.ceil(float(impact["max_iops"]))))
    if float(impact.get("max_mibps") or 0) > 0:
        out["read_bps_device"] = out["write_bps_device"] = max(1, int(float(impact["max_mibps"]) * 1048576))
    return out


def io_weight(impact):
    """The unit's ``IOWeight=`` for the idle I/O class (1, the lowest), else None. Like the
    class, it counts only under bfq or the io.cost controller."""
    return 1 if impact.get("ioprio") == "idle" else None


RULE_WORDS = {"read_iops_device": "read %d IOPS", "write_iops_device": "write %d IOPS",
              "read_bps_device": "read %d B/s", "write_bps_device": "write %d B/s"}


def enforced_note(where, enforced, weight=None):
    """The workload's note on the impact caps the kernel enforces (``enforced``: the group's
    read-back limits, ``cgroups.Cgroup.enforced``; those ``from`` ``impact`` are the caps),
    or [] when it enforces none."""
    per = {}
    for r in enforced:
        if r.get("from") == "impact":
            per.setdefault(r["device"], []).append(RULE_WORDS[r["rule"]] % r["value"])
    parts = ["%s: %s" % (dev, ", ".join(words)) for dev, words in sorted(per.items())]
    if weight:
        parts.append("IOWeight %d" % weight)
    return ["impact limits kernel-enforced by %s: %s" % (where, "; ".join(parts))] if parts else []
