# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's own block-I/O group (docs/compliance.md, "What is ours" and "Limits
inherited"): where it is made, which limits hold it, and its per-device counters. Used by
``foreign.Run``; the kernel charges every bio the benchmark submits to it.

Where (:func:`methods`, tried in this order; the first that works is used):

* ``v1``: cgroup v1 ``blkio``: a child of the job's group, with the strictest
  ``blkio.throttle.*_device`` rule of the job's group and every ancestor copied into it
  (v1 throttling is not hierarchical: :func:`strictest_rules`);
* ``unit``: cgroup v2 on a host whose init is systemd: a transient scope made by systemd
  (``units.py``) in the slice that holds the job. The slice's limits and those above hold it
  by nesting; those of the groups between that slice and the job (the job's own service or
  session scope) are copied onto the unit; the impact caps too;
* ``v2-own``: cgroup v2 under systemd, the job's own group delegated to it (``io`` already in
  its ``cgroup.subtree_control``): a child of it. The job never writes in the groups systemd
  manages;
* ``v2-leaf``: cgroup v2 without systemd: a child of the nearest group on the job's path whose
  children have the io controller or can get it (:func:`plan_leaf`: the job writes ``+io``
  into ``cgroup.subtree_control`` where cgroup v2's no-internal-process rule allows it, and
  ``-io`` again when its group is removed), with the limits of the groups below it copied
  into the group's ``io.max``, and the impact caps too.

A rule that must be copied and does not read back as written means no group (the benchmark
would be less limited than its session); an impact cap that does not hold is only noted.
Where no method works, ``foreign.Run`` attributes by iobench's own counts.
"""

import os
import time

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import units as _units

BLKIO_V1 = "/sys/fs/cgroup/blkio"
CGROUP2_CANDIDATES = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
THROTTLE_RULES = ("read_iops_device", "write_iops_device", "read_bps_device", "write_bps_device")
# cgroup v2 io.max keys of the same four limits
IO_MAX_KEYS = {"riops": "read_iops_device", "wiops": "write_iops_device", "rbps": "read_bps_device",
               "wbps": "write_bps_device"}
IO_MAX_KEY_OF = dict((rule, key) for key, rule in IO_MAX_KEYS.items())
IO_STAT_KEYS = ("rios", "rbytes", "wios", "wbytes")
METHODS = ("v1", "unit", "v2-own", "v2-leaf")


def devnum(dev):
    """``maj:min`` of the block device ``dev`` (``/sys/block/<dev>/dev``), or None."""
    try:
        with open("/sys/block/%s/dev" % dev) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def own_cgroups(text=None):
    """``(blkio v1 path, unified v2 path)`` of this process (``/proc/self/cgroup``; None when
    it is in no such hierarchy): where the job runs, and so where its limits are."""
    if text is None:
        text = _read("/proc/self/cgroup") or ""
    v1 = v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2] or "/"
        elif "blkio" in parts[1].split(","):
            v1 = parts[2] or "/"
    return v1, v2


def read_rules(path):
    """``{"maj:min": value}`` of one v1 throttle file (a missing file: {})."""
    out = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def ancestry(mount, rel):
    """The group directories from ``mount`` + ``rel`` up to the hierarchy's root, own first."""
    rel = "/" + (rel or "/").strip("/")
    out = []
    while True:
        out.append((os.path.join(mount, rel.lstrip("/")) if rel != "/" else mount, rel))
        if rel == "/":
            return out
        rel = os.path.dirname(rel)


def within(rel, top):
    """Whether the group ``rel`` is ``top`` or inside it."""
    rel, top = "/" + (rel or "").strip("/"), "/" + (top or "").strip("/")
    return top == "/" or rel == top or rel.startswith(top + "/")


def strictest_rules(mount, rel, numbers):
    """cgroup v1 (not hierarchical: a process in another group leaves its group's limits
    behind): the strictest of each throttle rule over the job's group and every ancestor up
    to the root, for the devices ``numbers`` (``{"maj:min": dev}``). Returns
    ``[{rule, device, number, value, from}]`` (``from``: the group that set it)."""
    best = {}
    for path, name in ancestry(mount, rel):
        for rule in THROTTLE_RULES:
            for num, value in read_rules(os.path.join(path, "blkio.throttle." + rule)).items():
                if num in numbers and value > 0 and ((rule, num) not in best or value < best[(rule, num)][0]):
                    best[(rule, num)] = (value, name)
    return [{"rule": rule, "device": numbers[num], "number": num, "value": v, "from": name}
            for (rule, num), (v, name) in sorted(best.items())]


def parse_io_max(text):
    """``{"maj:min": {rule: value}}`` of a cgroup v2 ``io.max`` (``max``, no limit, left out)."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts:
            continue
        rules = out.setdefault(parts[0], {})
        for kv in parts[1:]:
            key, _sep, value = kv.partition("=")
            if key in IO_MAX_KEYS and value.isdigit() and int(value) > 0:
                rules[IO_MAX_KEYS[key]] = int(value)
    return out


def io_max_line(number, rules):
    """The ``io.max`` line that sets ``rules`` (``{rule: value}``) for the device ``number``."""
    return " ".join([number] + ["%s=%d" % (IO_MAX_KEY_OF[r], int(v)) for r, v in sorted(rules.items())])


def io_max_rules(mount, rel, numbers):
    """cgroup v2 (nested: a child is held by every ancestor's io.max): the ``io.max``
    limits of the job's group and its ancestors for ``numbers``, as strictest_rules says them."""
    best = {}
    for path, name in ancestry(mount, rel):
        for num, rules in parse_io_max(_read(os.path.join(path, "io.max"))).items():
            if num not in numbers:
                continue
            for rule, value in rules.items():
                if (rule, num) not in best or value < best[(rule, num)][0]:
                    best[(rule, num)] = (value, name)
    return [{"rule": rule, "device": numbers[num], "number": num, "value": v, "from": name}
            for (rule, num), (v, name) in sorted(best.items())]


def parse_io_stat(text, numbers):
    """``{dev: [rios, rbytes, wios, wbytes]}`` of a cgroup v2 ``io.stat`` for the devices
    ``numbers`` (``{"maj:min": dev}``); a device the group has not touched yet has no line: zeros."""
    out = dict((d, [0, 0, 0, 0]) for d in numbers.values())
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] in numbers:
            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            out[numbers[parts[0]]] = [int(kv.get(k, 0)) for k in IO_STAT_KEYS]
    return out


def parse_blkio_v1(serviced, service_bytes, numbers):
    """The same from cgroup v1's ``blkio.throttle.io_serviced`` and ``io_service_bytes``."""
    out = dict((d, [0, 0, 0, 0]) for d in numbers.values())
    for text, col in ((serviced, 0), (service_bytes, 1)):
        for line in (text or "").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] in numbers and parts[1] in ("Read", "Write"):
                out[numbers[parts[0]]][col + (2 if parts[1] == "Write" else 0)] = int(parts[2])
    return out


def split_inherited(rules, parent_rel):
    """The job's limits (:func:`io_max_rules`) as a new group made under ``parent_rel`` sees
    them: a rule set by ``parent_rel`` or a group above it holds the new group by nesting
    (``applies: nested``); one set by a group below it, on the job's path but not the new
    group's, must be copied into the new group (``applies: copied``)."""
    return [dict(r, applies="nested" if within(parent_rel, r["from"]) else "copied") for r in rules]


def enforced_rules(inherited, caps, numbers):
    """What the new group itself must carry, per device: each copied rule and each impact
    cap (``caps``: ``{rule: value}``, ``impact.kernel_limits``), the stricter of the two when
    both limit the same thing. ``[{rule, device, number, value, from}]``, ``from`` the group
    the rule was copied from, or ``impact``."""
    best = {}
    for r in inherited:
        if r.get("applies") == "copied":
            best[(r["rule"], r["number"])] = {k: r[k] for k in ("rule", "device", "number", "value", "from")}
    for num, dev in numbers.items():
        for rule, value in sorted((caps or {}).items()):
            if value and value > 0 and ((rule, num) not in best or int(value) < best[(rule, num)]["value"]):
                best[(rule, num)] = {"rule": rule, "device": dev, "number": num, "value": int(value),
                                     "from": "impact"}
    return [best[k] for k in sorted(best)]


def group_state(path):
    """``(io available, io for the children, holds processes)`` of a cgroup v2 group: ``io`` in
    its ``cgroup.controllers``, ``io`` in its ``cgroup.subtree_control``, a PID in its
    ``cgroup.procs``."""
    def words(name):
        return (_read(os.path.join(path, name)) or "").split()
    return "io" in words("cgroup.controllers"), "io" in words("cgroup.subtree_control"), bool(words("cgroup.procs"))


def plan_leaf(mount, rel):
    """Where a cgroup v2 group of the benchmark's own can be made on a host without systemd:
    ``(parent rel, [groups whose cgroup.subtree_control gets +io, the root-most first])``.

    The parent is the deepest group on the job's path (its own group first) whose children
    have the io controller or can get it: every group from it up to the first one that
    already gives its children ``io`` must be able to give it, which cgroup v2 allows the
    root and, below it, only a group with no process of its own (the no-internal-process
    rule). The root always can, so this fails only where the io controller is not on cgroup
    v2 at all (OSError)."""
    chain = ancestry(mount, rel)                      # own group first, the root last
    states = [group_state(path) for path, _name in chain]
    if not states[-1][0]:
        raise OSError("the io controller is not available on cgroup v2 (cgroup.controllers of %s)" % mount)
    for i in range(len(chain)):
        need = []
        for j in range(i, len(chain)):
            _avail, sub, procs = states[j]
            if sub:
                break
            if procs and j != len(chain) - 1:
                need = None
                break
            need.append(chain[j][1])
        if need is not None:
            return chain[i][1], need[::-1]
    raise OSError("no group on the path of %s can give its children the io controller" % rel)


def methods(v1, v1_mounted, v2, v2_mount, systemd):
    """The ways to make the group on this host, in the order they are tried (module
    docstring): ``v1`` where the job is in a mounted v1 blkio hierarchy; on cgroup v2,
    ``unit`` then ``v2-own`` under systemd, ``v2-leaf`` without it."""
    out = []
    if v1 is not None and v1_mounted:
        out.append("v1")
    if v2 is not None and v2_mount:
        out.extend(("unit", "v2-own") if systemd else ("v2-leaf",))
    return out


def cgroup2_mount(candidates=CGROUP2_CANDIDATES):
    for root in candidates:
        if os.path.isfile(os.path.join(root, "cgroup.controllers")):
            return root
    return None


class Cgroup:
    """The benchmark's own block-I/O group (module docstring), made by :meth:`create` where
    the job's limits keep holding it (docs/compliance.md, "Limits inherited"). Where no way
    works, no group (``create`` says why). ``counters()`` gives ``{dev: [rios, rbytes, wios,
    wbytes]}`` for the devices it was made for; ``procs`` is the file a process writes its PID
    into to join it.

    ``caps``: the impact caps a v2 group carries as kernel limits (``{rule: value}``);
    ``weight``: the unit's ``IOWeight=``; ``label``: the run id in the unit's name. The
    ``v1_mount``, ``v2_mounts``, ``systemd_dir``, ``systemd_run``, ``systemctl``, ``proc`` and
    ``numbers`` (``{maj:min: dev}`` instead of the devices' own) arguments let the tests point
    it at a tree of their own."""

    _seq = 0

    def __init__(self, devices, name=None, proc_cgroup=None, caps=None, weight=None, label=None, numbers=None,
                 v1_mount=BLKIO_V1, v2_mounts=CGROUP2_CANDIDATES, systemd_dir=_units.SYSTEMD_DIR,
                 systemd_run=None, systemctl=None, proc="/proc"):
        if numbers is None:
            numbers = dict((devnum(d), d) for d in devices if devnum(d))
        self.numbers = dict(numbers)
        self.devices = [d for d in devices if d in self.numbers.values()]
        self.name = name or "fleetqual-%d-%d" % (os.getpid(), int(time.time() * 1000) % 1000000)
        self.proc_cgroup = proc_cgroup
        self.caps = dict(caps or {})
        self.weight = weight
        self.label = label
        self.v1_mount, self.v2_mounts, self.systemd_dir = v1_mount, v2_mounts, systemd_dir
        self.systemd_run, self.systemctl, self.proc = systemd_run, systemctl, proc
        self.v2_mount = None
        self.path = None
        self.parent = None
        self.home = None            # the job's own group: where a process left in ours goes back
        self.version = None
        self.method = None
        self.error = None
        self.inherited = []
        self.enforced = []          # the limits the group itself carries, read back
        self.enabled = []           # groups the job gave +io (v2-leaf), -io again at removal
        self.notes = []
        self.scope = None           # units.Scope of a unit
        self.unit = None
        self.slice = None

    def source(self):
        """The record's ``foreign.source``: ``cgroup-v1``, ``cgroup-v2``, or ``cgroup v2 unit
        <name>`` for a systemd unit."""
        if self.unit:
            return "cgroup v2 unit %s" % self.unit
        return "cgroup-v%d" % self.version

    def describe(self):
        """The record's ``foreign.cgroup``: where the group is, which limits it inherited and
        how (``applies``: ``copied`` into it or ``nested`` above it), and what it carries."""
        if not self.path:
            return None
        out = {"version": self.version, "method": self.method, "path": self.path, "parent": self.parent,
               "inherited": [dict(r, applies=r.get("applies") or ("copied" if self.version == 1 else "nested"))
                             for r in self.inherited],
               "enforced": [dict(r) for r in self.enforced]}
        if self.unit:
            out.update(unit=self.unit, slice=self.slice or "system.slice", io_weight=self.weight)
        if self.enabled:
            out["enabled_io"] = list(self.enabled)
        return out

    def _create_v1(self, rel):
        mount = self.v1_mount
        parent = os.path.join(mount, rel.strip("/")) if rel.strip("/") else mount
        path = os.path.join(parent, self.name)
        rules = strictest_rules(mount, rel, self.numbers)
        os.mkdir(path, 0o755)
        self.path, self.version, self.parent, self.home = path, 1, parent, parent
        for r in rules:
            _write(os.path.join(path, "blkio.throttle." + r["rule"]), "%s %d" % (r["number"], r["value"]))
        for num in self.numbers:
            if not any(r["rule"] == "read_iops_device" and r["number"] == num for r in rules):
                # activates the queue's throttling (and so the group's counters); 0 = no limit
                _write(os.path.join(path, "blkio.throttle.read_iops_device"), "%s 0" % num)
        # read back: a rule the kernel did not take would leave the benchmark unlimited
        for r in rules:
            got = read_rules(os.path.join(path, "blkio.throttle." + r["rule"])).get(r["number"])
            if got != r["value"]:
                raise OSError("the limit %s %s %d of %s did not hold in the new group (read back %s)"
                              % (r["rule"], r["device"], r["value"], r["from"], got))
        self.inherited = rules

    def _hold(self, enforced):
        """Read the v2 group's ``io.max`` back: a copied rule that does not hold is an error (the
        benchmark would be less limited than its session), an impact cap only a note."""
        got = parse_io_max(_read(os.path.join(self.path, "io.max")))
        held = []
        for r in enforced:
            value = got.get(r["number"], {}).get(r["rule"])
            if value == r["value"]:
                held.append(r)
            elif r["from"] != "impact":
                raise OSError("the limit %s %s %d of %s did not hold in the new group (read back %s)"
                              % (r["rule"], r["device"], r["value"], r["from"], value))
            else:
                self.notes.append("impact limit %s %s %d not enforced by the kernel (read back %s)"
                                  % (r["rule"], r["device"], r["value"], value))
        self.enforced = held

    def _create_unit(self, mount, rel):
        slice_name, slice_rel = _units.slice_of(rel)
        parent_rel = slice_rel or "/system.slice"
        Cgroup._seq += 1
        unit = _units.unit_name(self.label, os.getpid(), Cgroup._seq)
        rules = split_inherited(io_max_rules(mount, rel, self.numbers), parent_rel)
        enforced = enforced_rules(rules, self.caps, self.numbers)
        self.scope = _units.Scope(unit, slice_name, _units.properties(enforced, self.weight),
                                  systemd_run=self.systemd_run, systemctl=self.systemctl)
        self.unit, self.slice = unit, slice_name
        err = self.scope.start()
        if err:
            raise OSError(err)
        _v1, got = own_cgroups(_read(os.path.join(self.proc, str(self.scope.pid), "cgroup")) or "")
        if not got or os.path.basename(got) != unit:
            raise OSError("the unit's process is in group %s, not in the unit's" % got)
        path = os.path.join(mount, got.strip("/"))
        if not os.path.isfile(os.path.join(path, "io.stat")):
            raise OSError("the unit's group %s has no io.stat: the io controller is not on for it" % path)
        self.path, self.version, self.parent = path, 2, os.path.dirname(path)
        self.home = os.path.join(mount, rel.strip("/")) if rel.strip("/") else mount
        self.inherited = rules
        self._hold(enforced)

    def _create_v2(self, mount, rel, leaf):
        """``v2-own`` (``leaf`` false: a child of the job's own group, whose children have io
        already) or ``v2-leaf`` (:func:`plan_leaf`)."""
        home = os.path.join(mount, rel.strip("/")) if rel.strip("/") else mount
        if leaf:
            parent_rel, enable = plan_leaf(mount, rel)
        elif not group_state(home)[1]:
            raise OSError("the io controller is not enabled for the children of %s (cgroup.subtree_control)" % home)
        else:
            parent_rel, enable = rel, []
        self.home = home
        for group in enable:
            _write(os.path.join(mount, group.strip("/"), "cgroup.subtree_control"), "+io")
            self.enabled.append(group)
        parent = os.path.join(mount, parent_rel.strip("/")) if parent_rel.strip("/") else mount
        path = os.path.join(parent, self.name)
        os.mkdir(path, 0o755)
        self.path, self.version, self.parent = path, 2, parent
        self.inherited = split_inherited(io_max_rules(mount, rel, self.numbers), parent_rel)
        enforced = enforced_rules(self.inherited, self.caps, self.numbers)
        for num in self.numbers:
            mine = dict((r["rule"], r["value"]) for r in enforced if r["number"] == num)
            if mine:
                _write(os.path.join(path, "io.max"), io_max_line(num, mine))
        self._hold(enforced)

    def create(self):
        """Create it; return None, or why it could not be made (then there is no group)."""
        v1, v2 = own_cgroups(self.proc_cgroup)
        mount = self.v2_mount = cgroup2_mount(self.v2_mounts)
        todo = methods(v1, os.path.isfile(os.path.join(self.v1_mount, "blkio.throttle.io_serviced")), v2, mount,
                       _units.systemd_booted(self.systemd_dir))
        errors = []
        for method in todo:
            try:
                if method == "v1":
                    self._create_v1(v1)
                elif method == "unit":
                    self._create_unit(mount, v2)
                else:
                    self._create_v2(mount, v2, method == "v2-leaf")
                self.method = method
                return None
            except OSError as e:
                where = ("cgroup v1 blkio under %s" % v1 if method == "v1" else
                         "cgroup v2 unit %s" % self.unit if method == "unit" else "cgroup v2 under %s" % v2)
                errors.append("%s: %s" % (where, e))
                self.remove()
                self._forget()
        self.error = "; ".join(errors) or "the job is in no blkio (v1) or io (v2) cgroup it can make a child of"
        return self.error

    @property
    def procs(self):
        return os.path.join(self.path, "cgroup.procs") if self.path else None

    def counters(self):
        if not self.path:
            return None
        try:
            if self.version == 1:
                return parse_blkio_v1(_read(os.path.join(self.path, "blkio.throttle.io_serviced")),
                                      _read(os.path.join(self.path, "blkio.throttle.io_service_bytes")), self.numbers)
            with open(os.path.join(self.path, "io.stat")) as fh:
                return parse_io_stat(fh.read(), self.numbers)
        except (OSError, ValueError):
            return None

    def _pids(self):
        return (_read(self.procs) or "").split() if self.path else []

    def remove(self):
        """Remove the group: a unit's holder ends (and the unit is stopped if anything is still in
        it); a group of the job's own is removed, any process still in it moved back to the
        job's group first, and the ``+io`` the job gave is taken back."""
        if self.scope is not None:
            self.scope.close()
            if self._pids():
                self.scope.stop()
            self.scope = None
        elif self.path:
            home = self.home or self.parent or os.path.dirname(self.path)
            for _attempt in range(50):
                for pid in self._pids():
                    try:
                        _write(os.path.join(home, "cgroup.procs"), pid)
                    except OSError:
                        pass
                try:
                    os.rmdir(self.path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        self.path = None
        for group in reversed(self.enabled):
            try:
                _write(os.path.join(self.v2_mount, group.strip("/"), "cgroup.subtree_control"), "-io")
            except OSError:
                pass        # another group below uses it: it stays on
        self.enabled = []

    def _forget(self):
        """After a way that did not work: nothing of it is said in the record."""
        self.version = self.parent = self.home = self.unit = self.slice = None
        self.inherited, self.enforced, self.notes = [], [], []
