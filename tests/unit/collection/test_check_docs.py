"""tests/check_docs.py renders every plugin of a kind in one ansible-doc run, and still names
each plugin that does not render: a collection of two modules, one whose DOCUMENTATION is not
YAML, and a role with two entry points, rendered by the real ansible-doc."""
import importlib.util
import os

import unitpaths

GOOD = '''DOCUMENTATION = """
module: good
short_description: A module whose documentation renders
description: [It renders, with enough text for ansible-doc to print a whole page about it.]
author: [fleetqual]
options:
  path: {description: Where it looks., type: str, required: true}
"""
'''
BAD = 'DOCUMENTATION = """\nmodule: bad\nshort_description: [unclosed\n"""\n'
SPECS = """argument_specs:
  main: {short_description: The main entry point, options: {}}
  other: {short_description: Another entry point, options: {}}
"""


def load():
    spec = importlib.util.spec_from_file_location("check_docs", os.path.join(unitpaths.ROOT, "tests", "check_docs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def collection(tmp_path, modules):
    root = tmp_path / "ansible_collections" / "fq" / "t"
    (root / "plugins" / "modules").mkdir(parents=True)
    (root / "galaxy.yml").write_text("namespace: fq\nname: t\nversion: 1.0.0\nreadme: README.md\nauthors: [a]\n")
    for name, text in modules.items():
        (root / "plugins" / "modules" / (name + ".py")).write_text(text)
    (root / "roles" / "r" / "meta").mkdir(parents=True)
    (root / "roles" / "r" / "meta" / "argument_specs.yml").write_text(SPECS)
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1")


def test_one_run_per_kind_renders_every_plugin_and_entry_point(tmp_path):
    env = collection(tmp_path, {"good": GOOD, "also": GOOD.replace("module: good", "module: also")})
    got = load().rendered(env, [("module", "fq.t.also"), ("module", "fq.t.good"), ("role", ("fq.t.r", "main")),
                                ("role", ("fq.t.r", "other"))])
    assert [(entry[0].split()[1], entry[1]) for entry in got] == [
        ("fq.t.also", True), ("fq.t.good", True), ("fq.t.r", True), ("fq.t.r", True)]


def test_a_plugin_that_does_not_render_fails_by_name_and_the_others_still_pass(tmp_path):
    env = collection(tmp_path, {"good": GOOD, "bad": BAD})
    got = {label.split()[1]: (ok, err) for label, ok, err in
           load().rendered(env, [("module", "fq.t.bad"), ("module", "fq.t.good"), ("module", "fq.t.missing")])}
    assert got["fq.t.good"] == (True, "")
    assert got["fq.t.bad"][0] is False and "fq.t.bad" in got["fq.t.bad"][1]
    assert got["fq.t.missing"][0] is False


def test_an_entry_point_the_role_does_not_render_fails(tmp_path):
    env = collection(tmp_path, {"good": GOOD})
    got = load().rendered(env, [("role", ("fq.t.r", "main")), ("role", ("fq.t.r", "nosuch"))])
    assert [entry[1] for entry in got] == [True, False]
