"""Role conventions that ansible-lint cannot express for a collection-wide prefix.

Every variable a role defines (defaults, vars, set_fact, register, task/loop vars) is
public `fleetqual_*` or internal `_fleetqual_*`, and every role documents its entry
points in meta/argument_specs.yml, with each public default declared there.
"""
import glob
import os

import pytest
import yaml
import unitpaths

ROOT = unitpaths.ROOT
ROLES = sorted(glob.glob(os.path.join(ROOT, "roles", "*")))
OK_PREFIXES = ("fleetqual_", "_fleetqual_")


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            if key in node:
                yield from _tasks(node[key])


def defined_names(role):
    """(file, name) for every variable the role defines."""
    for sub in ("defaults", "vars"):
        for path in glob.glob(os.path.join(role, sub, "**", "*.yml"), recursive=True):
            for name in (yaml.safe_load(open(path)) or {}):
                yield path, name
    for path in glob.glob(os.path.join(role, "tasks", "*.yml")):
        for task in _tasks(yaml.safe_load(open(path)) or []):
            if "register" in task:
                yield path, task["register"]
            for key in ("ansible.builtin.set_fact", "set_fact"):
                if isinstance(task.get(key), dict):
                    for name in task[key]:
                        if name not in ("cacheable",):
                            yield path, name
            for name in (task.get("vars") or {}):
                yield path, name
            loop_var = (task.get("loop_control") or {}).get("loop_var")
            if loop_var:
                yield path, loop_var


def test_there_are_roles():
    assert {os.path.basename(r) for r in ROLES} >= {"iobench", "qualify"}


@pytest.mark.parametrize("role", ROLES, ids=os.path.basename)
def test_role_variables_carry_the_collection_prefix(role):
    names = list(defined_names(role))
    assert names, "no variables found: the scanner is broken"
    bad = ["%s: %s" % (os.path.relpath(p, ROOT), n) for p, n in names if not n.startswith(OK_PREFIXES)]
    assert not bad, bad


@pytest.mark.parametrize("role", ROLES, ids=os.path.basename)
def test_public_defaults_are_declared_in_argument_specs(role):
    spec_path = os.path.join(role, "meta", "argument_specs.yml")
    assert os.path.exists(spec_path)
    spec = yaml.safe_load(open(spec_path))["argument_specs"]
    declared = set()
    for entry in spec.values():
        declared.update((entry.get("options") or {}).keys())
    defaults = set()
    for path in glob.glob(os.path.join(role, "defaults", "**", "*.yml"), recursive=True):
        defaults.update(n for n in (yaml.safe_load(open(path)) or {}) if not n.startswith("_"))
    assert defaults - declared == set()
