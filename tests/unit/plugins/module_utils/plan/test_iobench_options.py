"""One table of iobench's pass-through options in Python
(plugins/module_utils/plan/options.py). This test fails when that table, the binary's own
table (`iobench options --format json`), the module's documentation and docs/iobench.md
disagree."""
import json
import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as opts
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.job import workload
from ansible_collections.fleetqual.storage.plugins.modules import iobench as mod

import test_module_iobench
import unitpaths

iobench_binary = test_module_iobench.iobench_binary   # the session fixture that builds the binary

ROOT = unitpaths.ROOT
# C options the role does not pass through, and why
RUNNER_OWNED = {"format": "the runner always asks for json", "output": "the runner's private temp file",
                "devstat": "derived from the test directory's devices (device_counters)"}
NOT_PASSED_YET = {"passes": "iobench precondition, not run",
                  "live_log": "the job's impact guard sets it, not a workload",
                  "check": "the controller's option-space test (test_option_space.py), not a run"}
# table options whose entry in the DOCUMENTATION of plugins/modules/iobench.py is still to be
# written (that file is not this change's); each is checked as soon as it is documented
# Python type -> C type; int where C takes a float is a deliberate narrowing (whole seconds)
TYPES = {"int": {"int"}, "float": {"float"}, "raw": {"size"}, "bool": {"bool"}, "str": {"str"},
         "list": {"list"}, "path": {"path"}}
NARROWED = {"time", "warmup", "search_step_time"}


def c_table(binary):
    p = subprocess.run([binary, "options", "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30, check=False)
    if p.returncode == 2 and "options" in p.stderr:
        pytest.skip("this iobench has no 'options' subcommand yet: %s" % p.stderr.strip()[:200])
    assert p.returncode == 0, p.stderr
    return {o["name"]: o for o in json.loads(p.stdout)["options"]}


def test_python_table_agrees_with_the_c_table(iobench_binary):  # noqa: F811
    c = c_table(iobench_binary)
    py = opts.BY_NAME
    assert set(c) - set(py) - set(RUNNER_OWNED) - set(NOT_PASSED_YET) == set(), \
        "C options missing from plugins/module_utils/plan/options.py"
    assert set(py) - set(c) == set(), "Python options the binary does not know"
    for name, o in py.items():
        co = c[name]
        assert o["flag"] == co["flag"], name
        want = TYPES[o["type"]] | ({"float"} if name in NARROWED else set())
        assert co["type"] in want, (name, o["type"], co["type"])
        if co.get("choices") or (o.get("choices") and o["type"] != "list"):   # C lists carry no element choices
            assert sorted(o.get("choices") or []) == sorted(co.get("choices") or []), name
        if o["default"] is not None and not o.get("own_default"):
            assert str(o["default"]) == str(co["default"]), (name, o["default"], co["default"])
        if (o.get("group") or co.get("group")) and co.get("group") != name:   # not the group's own switch
            assert o.get("group") == co.get("group"), (name, o.get("group"), co.get("group"))
        # The same range (min, max, whether min itself is excluded) in both tables
        assert ("min" in o) == ("min" in co), (name, "range in one table only")
        if "min" in co:
            assert (float(o["min"]), float(o["max"]), bool(o.get("min_exclusive"))) == \
                (co["min"], co["max"], co["min_exclusive"]), (name, o, co)
        # the binary's default, which the rules between options assume for an unset option
        if co["default"] is not None and name not in ("dir", "mode", "device", "seed"):
            want = co["default"]
            if co["type"] == "size":
                want = parse_size(want)
            assert opts.BINARY_DEFAULTS[name] == want, (name, opts.BINARY_DEFAULTS[name], want)
    assert c["passes"]["max"] == opts.PRECONDITION_MAX_PASSES


def test_module_argument_spec_and_documentation_come_from_the_table():
    doc = yaml.safe_load(mod.DOCUMENTATION)["options"]
    for name, o in opts.BY_NAME.items():
        if o.get("module") is False:                   # a runner's option (start_at): no module parameter
            assert name not in mod.ARGUMENT_SPEC and name not in opts.PLAN_KEYS, name
            continue
        assert mod.ARGUMENT_SPEC[name]["type"] == o["type"], name
        assert name in doc and doc[name]["type"] == o["type"], name
        assert doc[name].get("default") == o["default"], name
        assert sorted(doc[name].get("choices") or []) == sorted(o.get("choices") or []), name
    assert set(doc) == set(mod.ARGUMENT_SPEC), set(doc) ^ set(mod.ARGUMENT_SPEC)
    assert set(workload.RUNNER_SPEC) & set(opts.BY_NAME) == set()


def test_every_python_option_is_documented_in_docs_iobench_md():
    with open(os.path.join(ROOT, "docs", "iobench.md")) as fh:
        text = fh.read()
    for o in opts.OPTIONS:
        assert re.search(r"^\| `%s[ `=]" % re.escape(o["flag"]), text, re.M), o["flag"]


def test_argv_follows_the_table():
    p = workload.defaults()
    p.update(binary="/b", dir="/d", mode="rndrd", total_size="1M", steady_state=True, ss_window=4, rate_iops=100,
             db_flushers=3)
    errors, sizes = workload.validate(dict(p, db_flushers=None))
    argv = opts.build_argv(p, sizes, "/o")
    assert argv[argv.index("--ss-window") + 1] == "4" and "--steady-state" in argv
    assert argv[argv.index("--rate-iops") + 1] == "100.0"
    assert "--db-flushers" not in argv                   # db options only with dbpattern
    assert "--ss-window" not in opts.build_argv(dict(p, steady_state=False), sizes, "/o")
    assert opts.workload_params({"id": "x", "mode": "rndrd", "dataset": "s", "threads": 4, "cleanup": True}) == \
        {"mode": "rndrd", "threads": 4}
    assert "cleanup" not in opts.PLAN_KEYS and "dir" not in opts.PLAN_KEYS and "steady_state" in opts.PLAN_KEYS
    assert "device" not in opts.PLAN_KEYS and "size" not in opts.PLAN_KEYS
    assert "--device" not in argv and "--size" not in argv


def test_argv_of_a_device_workload():
    """A device target: --device and --size (not 0) in the table's place, no file options."""
    p = workload.defaults()
    p.update(binary="/b", device="/dev/loop3", size="64M", mode="rndrw", time=5)
    errors, sizes = workload.validate(p)
    assert errors == []
    argv = opts.build_argv(p, sizes, "/o")
    assert argv[:6] == ["/b", "run", "--device", "/dev/loop3", "--size", str(64 << 20)]
    assert "--file-num" not in argv and "--total-size" not in argv and "--dir" not in argv
    errors, sizes = workload.validate(dict(p, size=0))
    assert errors == [] and "--size" not in opts.build_argv(dict(p, size=0), sizes, "/o")


def test_start_at_reaches_the_command_line_when_the_runner_sets_it():
    """The array job sets params["start_at"] (plugins/module_utils/job/lockstep.py); it
    is passed as --start-at, and never by a plain workload."""
    p = workload.defaults()
    p.update(binary="/b", dir="/d", mode="rndrd", total_size="16M")
    errors, sizes = workload.validate(p)
    assert errors == [] and "--start-at" not in opts.build_argv(p, sizes, "/o")
    p["start_at"] = 1795572226.336551
    errors, sizes = workload.validate(p)
    argv = opts.build_argv(p, sizes, "/o")
    assert errors == [] and argv[argv.index("--start-at") + 1] == "1795572226.336551"
    assert workload.validate(dict(p, start_at=-1))[0] == ["start_at must be between 0 and 100000000000, got -1"]
