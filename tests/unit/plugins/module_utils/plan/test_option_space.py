"""The controller and the binary agree on the option space.

Hypothesis generates a few hundred plan workloads per run, with values inside, at the edges
and just outside the ranges of the option table, and the rules between options in play
(search, steady state, dbpattern, engines, sizes). For each:

* every workload the controller (``plan.resolve``, what ``validate_inputs`` runs) accepts is
  accepted by the module's validation on the host (``workload.validate``) and by the real
  binary (``iobench run --check`` on the argv of ``iobench_options.build_argv``);
* every workload the binary refuses was refused by the controller first, with the option the
  binary names in its error named in one of the controller's errors.

A second property does the same on a raw device target (``targets.plan_targets``), where
it found an explicit working set off the 512-byte sector passing the controller.

The edges come from the Python table; if a row drifts from the C table, its edge values are
where the binary and the controller disagree (tests/unit/plugins/module_utils/plan/test_iobench_options.py says which
row)."""
import os
import re
import subprocess

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as opts
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P

import test_module_iobench

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary

NOWHERE = "/nonexistent/fleetqual-option-space"       # --check touches no file
SIMPLE = ("file_num", "block_size", "threads", "engine", "iodepth", "direct", "fsync_freq", "fsync_mode", "fsync_all",
          "fsync_end", "open_flags", "time", "requests", "warmup", "seed", "rw_ratio", "keep_cache", "report_interval",
          "rate_iops")
GROUPS = {g: tuple(o["name"] for o in opts.OPTIONS if o.get("group") == g and o.get("plan", True))
          for g in ("search", "db", "steady_state")}


def edges(name):
    """The row's bounds and the values just beyond them."""
    row = opts.BY_NAME[name]
    low, high, _open_low = opts.value_range(name)
    if row["type"] == "int" or row["how"] == "size":
        return sorted({v for v in (low, high, low - 1, high + 1) if v > 0 or row["how"] != "size"})
    eps = max(1e-9, abs(low) * 1e-6)
    return [low, high, low - eps, high * (1 + 1e-6) + 1e-6]


INSIDE = {"report_interval": [0, 0.005, 0.01, 0.25, 1.5], "time": [0, 1, 3], "requests": [0, 10, 1000],
          "block_size": [1000, 4096, 16384, 65536], "iodepth": [1, 2, 8], "threads": [1, 2, 4, 64],
          "ss_round_time": [0.5, 1.5, 3, 10], "db_log_block": [513, 1000, 4096, 32768], "db_log_size": [1 << 20, 40000],
          "ss_window": [3, 5, 10], "ss_max_rounds": [3, 25], "search_max": [4, 2048], "rate_iops": [0, 100],
          "file_num": [1, 2, 16], "rw_ratio": [0.5, 4]}


def value(name):
    """Three times in four a value from inside the range (or a typical one), else an edge: the
    rules between options need workloads whose values are each fine."""
    row = opts.BY_NAME[name]
    if row["type"] == "bool":
        return st.booleans()
    if row["type"] == "list":
        return st.lists(st.sampled_from(row["choices"]), max_size=2)
    if row.get("choices"):
        return st.sampled_from(list(row["choices"]) * 3 + ["bogus"])
    low, high, open_low = opts.value_range(name)
    mid = (low + high) // 2 if row["type"] == "int" or row["how"] == "size" else (low + high) / 2.0
    inside = st.sampled_from(INSIDE.get(name, []) + [mid, high] + ([] if open_low else [low]))
    return st.one_of(inside, inside, inside, st.sampled_from(edges(name)))


@st.composite
def workloads(draw):
    # a feature puts options that interact together: a group, or the engine, rate and
    # sequential-stripe rules
    feature = draw(st.sampled_from([None, "search", "steady_state", "db", "uring", "rate", "stripes"]))
    modes = list(opts.MODES)
    if feature == "search":
        modes = list(opts.RANDOM_MODES) * 3 + modes
    if feature == "db":
        modes = ["dbpattern"] * 3 + modes
    if feature == "stripes":
        modes = list(opts.SEQUENTIAL_MODES)
    e = {"workload": "w", "mode": draw(st.sampled_from(modes)),
         "total_size": draw(st.sampled_from([512, 16384, 65536, 1 << 20, 16 << 20, 2 << 30, (1 << 20) + 1]))}
    for name in draw(st.lists(st.sampled_from(SIMPLE), max_size=3, unique=True)):
        e[name] = draw(value(name))
    if feature == "uring":
        e["engine"] = draw(st.sampled_from(["io_uring", "sync"]))
        e["iodepth"] = draw(value("iodepth"))
    elif feature == "rate":
        e["rate_iops"] = draw(value("rate_iops"))
        e["engine"] = draw(st.sampled_from(["io_uring", "sync"]))
    elif feature == "stripes":
        e["threads"] = draw(st.sampled_from([1, 2, 4, 64, 1024]))
        e["total_size"] = draw(st.sampled_from([16384, 32768, 65536, 1 << 20]))
    if feature == "search":
        e["search"] = draw(st.sampled_from(["threads", "iodepth", "iodepth"]))
        if e["search"] == "iodepth" and draw(st.booleans()):
            e["engine"] = "io_uring"
    elif feature == "steady_state":
        e["steady_state"] = draw(st.booleans())
        if draw(st.booleans()):
            e["report_interval"] = draw(value("report_interval"))     # rounds are multiples of it
    group = {"search": "search", "steady_state": "steady_state", "db": "db"}.get(feature)
    stray = draw(st.sampled_from([None] * 8 + list(GROUPS)))       # now and then an option of another group
    for g in (group, stray):
        if g:
            for name in draw(st.lists(st.sampled_from(GROUPS[g]), max_size=3, unique=True)):
                if name not in ("search", "steady_state"):
                    e[name] = draw(value(name))
    return e


def check(binary, params, sizes):
    argv = opts.build_argv(dict(params, binary=binary), sizes, os.path.join(NOWHERE, "out.json")) + ["--check"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=30,
                       check=False)
    assert p.returncode in (0, 2), (argv, p.returncode, p.stderr)
    return p.returncode, p.stderr.strip(), argv


def raw_params(entry):
    """What the workload would ask of the binary if the controller let it through: the plan's
    built-in defaults under the entry, a search without time (the plan drops it)."""
    p = dict(P.BUILTIN_DEFAULTS, **{k: v for k, v in entry.items() if k in opts.BY_NAME})
    if p.get("search"):
        p.pop("time", None)
    p.setdefault("file_num", P.DEFAULT_FILE_NUM["explicit"])
    p["dir"] = NOWHERE
    return p


def named(errors, name):
    """One of the errors is about ``name``: its variable path ends with it
    (``fleetqual_matrix[0].NAME: ...`` or ``fleetqual_matrix[0].NAME (workload ID): ...``)."""
    pat = re.compile(r"^\S*\.%s(\[\d+\])?( \(workload [^)]*\))?: " % re.escape(name))
    return any(pat.search(e) for e in errors)


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(entry=workloads())
def test_controller_and_binary_agree(iobench_binary, entry):  # noqa: F811
    specs, errors = P.resolve([entry], cache_size="16M")
    note("entry=%r errors=%r" % (entry, errors))
    event("controller accepts" if not errors else "controller refuses")
    if not errors:
        for spec in specs:
            params = workload.defaults()
            params.update(opts.workload_params(spec))
            params.update(binary=iobench_binary, dir=NOWHERE)
            merrors, sizes = workload.validate(params)
            assert merrors == [], (spec, merrors)          # the host's module agrees with the controller
            rc, err, argv = check(iobench_binary, params, sizes)
            assert rc == 0, ("the controller accepted what the binary refuses", spec, argv, err)
    # the binary's verdict on what the entry asks, whatever the controller said
    p = raw_params(entry)
    sizes = {k: p[k] for k in opts.SIZE_OPTS if isinstance(p.get(k), int)}
    rc, err, argv = check(iobench_binary, p, sizes)
    event("binary refuses" if rc else "binary accepts")
    if rc == 2:
        assert errors, ("the binary refuses what the controller accepted", entry, argv, err)
        flag = re.search(r"--([a-z][a-z0-9-]*)", err)
        assert flag, err
        name = flag.group(1).replace("-", "_")
        # the controller names that option, or stopped earlier at a bad value of the entry (it
        # checks each value first, then the rules between options of a spec whose values hold;
        # the binary stops at its first error)
        value_errors = [e for e in errors if "(workload " not in e]
        assert named(errors, name) or value_errors, ("the controller's errors do not name %s" % name, err, errors)


# the options whose ranges once drifted, at their edges: both sides now agree
@pytest.mark.parametrize("extra, ok", [
    ({"steady_state": True, "ss_window": 1}, False),
    ({"steady_state": True, "ss_window": 2, "ss_max_rounds": 2}, True),
    ({"steady_state": True, "ss_range_pct": 1000}, True),
    ({"steady_state": True, "ss_range_pct": 1000.5}, False),
    ({"steady_state": True, "ss_range_pct": 0}, True),
    ({"steady_state": True, "ss_round_time": 0.1, "report_interval": 0.05}, True),
    ({"steady_state": True, "ss_round_time": 0.09}, False),
    ({"threads": 1024}, True),
    ({"threads": 1025}, False),
    ({"search": "threads", "search_max": 1024}, True),
    ({"search": "threads", "search_max": 1025}, False),
])
def test_drifted_options_agree_at_their_edges(iobench_binary, extra, ok):  # noqa: F811
    entry = dict({"workload": "w", "mode": "rndrd", "total_size": 16 << 20}, **extra)
    _specs, errors = P.resolve([entry], cache_size="16M")
    rc, err, _argv = check(iobench_binary, raw_params(entry), {"total_size": 16 << 20, "block_size": 16384})
    assert (errors == []) == ok, errors
    assert (rc == 0) == ok, err
    if not ok:
        name = re.search(r"--([a-z][a-z0-9-]*)", err).group(1).replace("-", "_")
        assert named(errors, name), (err, errors)


DEVICE = "/dev/disk/by-id/nvme-FLEETQUAL_OPTION_SPACE"     # --check opens nothing


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(entry=workloads(), size=st.sampled_from([None, 512, 64 << 20, 1 << 30, (64 << 20) + 512]))
def test_controller_and_binary_agree_on_a_device_target(iobench_binary, entry, size):  # noqa: F811
    """The same on a raw device target (plan.plan_targets: the region, O_DIRECT, no files):
    what the controller accepts, the module and ``iobench run --device ... --check`` accept."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.plan import targets as T
    target = dict({"device": DEVICE, "destroy_data": True}, **({"size": size} if size else {}))
    resolved, problems = T.resolve_targets([target])
    assert problems == []
    specs, errors = P.resolve([entry], cache_size="16M")
    if errors:
        return
    try:
        specs = T.plan_targets(specs, resolved, capacities={DEVICE: 8 << 30})
    except T.PlanError as exc:
        event("refused on the device target")
        note("device errors=%r" % exc.errors)
        return
    event("accepted on the device target")
    for spec in specs:
        params = workload.defaults()
        params.update(opts.workload_params(P.module_args(spec)))
        params.update(T.target_args(spec), binary=iobench_binary)
        merrors, sizes = workload.validate(params)
        assert merrors == [], (spec, merrors)
        rc, err, argv = check(iobench_binary, params, sizes)
        assert rc == 0, ("the controller accepted on a device what the binary refuses", spec, argv, err)
