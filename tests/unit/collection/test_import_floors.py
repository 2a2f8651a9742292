# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The imports of the collection run one way (docs/architecture.md, "Floors and rooms"):

* floors: the plugins (action, filter, callback, lookup) import plugin_utils and
  module_utils, never another plugin file; the modules import module_utils only (AnsiballZ
  ships nothing else to the host); plugin_utils imports plugin_utils and module_utils;
  module_utils imports module_utils only;
* rooms: every package under plugin_utils/ and module_utils/ says in its ``__init__.py``
  which packages of its floor it may import (a line ``May import: ...``); its modules import
  no other, and those declarations form no circle;
* no import circle between modules, and no import of a collection module inside a function
  (the usual way to hide one);
* no name with a leading underscore is imported from another module;
* no package holds more than 15 Python files, and no file under plugins/ is over 700 lines.

Each check is a function of ``{module: source}`` so that the tests below also show it
seeing a violation."""
import ast
import collections
import os
import re
import unitpaths


ROOT = unitpaths.ROOT
PLUGINS = os.path.join(ROOT, "plugins")
PFX = "ansible_collections.fleetqual.storage.plugins."
UTILS = ("plugin_utils", "module_utils")
PLUGIN_TYPES = ("action", "filter", "callback", "lookup", "doc_fragments")
MAX_FILES = 15
MAX_LINES = 700


def tree_sources(root=PLUGINS):
    """``{dotted module under plugins: source}``; a package is its ``__init__`` (``x.y``)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), root)[:-3].replace(os.sep, ".")
                with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                    out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = fh.read()
    return out


def imports_of(module, source, modules):
    """``[(target module, names, top_level, lineno)]`` of the collection imports in a source.
    ``from pkg import mod`` names the module ``pkg.mod`` when that is a module."""
    tree = ast.parse(source, module)
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PFX):
            base = node.module[len(PFX):]
            mods = {}
            for a in node.names:
                target = base + "." + a.name if base + "." + a.name in modules else base
                mods.setdefault(target, []).append(a.name if target == base else None)
            for target, names in mods.items():
                out.append((target, [n for n in names if n], id(node) in top, node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PFX):
                    out.append((a.name[len(PFX):], [], id(node) in top, node.lineno))
    return out


def floor(module):
    head = module.split(".")[0]
    return head if head in UTILS or head == "modules" else "plugins"


def room(module):
    """``plugin_utils.judge`` for ``plugin_utils.judge.host``; None outside a package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in UTILS and len(parts) >= 2 else None


ALLOWED_FLOORS = {"plugins": {"plugin_utils", "module_utils"}, "plugin_utils": {"plugin_utils", "module_utils"},
                  "module_utils": {"module_utils"}, "modules": {"module_utils"}}


def declared_rooms(sources):
    """``{room: set of rooms it may import}`` from each package's ``May import:`` line:
    ``module_utils`` alone allows every room of module_utils; ``<floor>: a, b`` names rooms."""
    out = {}
    for module, text in sources.items():
        if module.count(".") != 1 or module.split(".")[0] not in UTILS:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        found = re.search(r"May import: (.*?)\.\s*$", doc, re.S | re.M)
        if not found:
            out[module] = None
            continue
        allowed = set()
        for part in found.group(1).replace("\n", " ").split(";"):
            part = part.strip()
            if part == "module_utils":
                allowed.update(m for m in sources if m.count(".") == 1 and m.startswith("module_utils."))
            elif ":" in part:
                fl, names = part.split(":", 1)
                allowed.update("%s.%s" % (fl.strip(), n.strip()) for n in names.split(","))
        out[module] = allowed
    return out


def violations(sources):
    """Every broken rule, as sentences (empty: the tree keeps them all)."""
    modules = set(sources)
    bad = []
    declared = declared_rooms(sources)
    for r, allowed in sorted(declared.items()):
        if allowed is None:
            bad.append("%s: its __init__.py says nothing of what it may import (a line 'May import: ...')" % r)
    for module, text in sorted(sources.items()):
        for target, names, top_level, line in imports_of(module, text, modules):
            where = "%s:%d imports %s" % (module, line, target)
            if floor(target) not in ALLOWED_FLOORS[floor(module)] or target.split(".")[0] in PLUGIN_TYPES + ("modules",):
                bad.append("%s: %s may not import from %s" % (where, floor(module), floor(target)))
            mine, theirs = room(module), room(target)
            if mine and theirs and mine != theirs and theirs not in (declared.get(mine) or set()):
                bad.append("%s: %s may not import %s (its __init__.py's 'May import:')" % (where, mine, theirs))
            if not top_level:
                bad.append("%s inside a function: import at the top (a hidden import hides a circle)" % where)
            for n in names:
                if n.startswith("_"):
                    bad.append("%s: the private name %s (make it public or keep it in its module)" % (where, n))
    bad += ["import circle: %s" % " -> ".join(c) for c in circles(module_graph(sources))]
    bad += ["circle in the packages' 'May import:' lines: %s" % " -> ".join(c)
            for c in circles({k: v or set() for k, v in declared.items()})]
    return bad


def module_graph(sources):
    modules = set(sources)
    graph = collections.defaultdict(set)
    for module, text in sources.items():
        for target, _names, _top, _line in imports_of(module, text, modules):
            if target != module and target in modules:
                graph[module].add(target)
    return graph


def circles(graph):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_the_imports_run_one_way_with_no_circle():
    sources = tree_sources()
    assert len([m for m in sources if m.startswith("plugin_utils.")]) > 40
    assert violations(sources) == []


def test_every_package_is_small_and_every_file_under_700_lines():
    sources = tree_sources()
    per_package = collections.Counter(m.rsplit(".", 1)[0] for m in sources if room(m) and m.count(".") == 2)
    per_package.update(m for m in sources if room(m) and m.count(".") == 1)   # its __init__.py
    assert per_package and max(per_package.values()) <= MAX_FILES, per_package.most_common(3)
    flat = [m for m in sources if m.split(".")[0] in UTILS and m.count(".") == 1 and m not in per_package]
    assert flat == []        # every module of plugin_utils and module_utils lives in a package
    long = {m: t.count("\n") for m, t in sources.items() if t.count("\n") > MAX_LINES}
    assert long == {}


# --------------------------------------------------------------------------- the checks see

def small_tree(**changes):
    base = {
        "module_utils.common": '"""Helpers.\n\nMay import: nothing of this collection.\n"""\n',
        "module_utils.common.size": "def parse():\n    return 1\n",
        "module_utils.plan": '"""Plans.\n\nMay import: module_utils: common.\n"""\n',
        "module_utils.plan.profiles": "from %smodule_utils.common.size import parse\n" % PFX,
        "plugin_utils.judge": '"""Judge.\n\nMay import: module_utils; plugin_utils: metrics.\n"""\n',
        "plugin_utils.judge.host": "from %splugin_utils.metrics.workload import m\n" % PFX,
        "plugin_utils.metrics": '"""Metrics.\n\nMay import: module_utils.\n"""\n',
        "plugin_utils.metrics.workload": "from %smodule_utils.plan import profiles\n\ndef m():\n    pass\n" % PFX,
        "action.job": "from %splugin_utils.judge.host import judge\n" % PFX,
        "modules.job": "from %smodule_utils.plan.profiles import parse\n" % PFX,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def test_the_checks_pass_a_clean_tree_and_see_each_kind_of_violation():
    assert violations(small_tree()) == []
    upward = violations(small_tree(**{"module_utils.common.size": "from %splugin_utils.judge import host\n" % PFX}))
    assert any("module_utils may not import from plugin_utils" in v for v in upward)
    sideways = violations(small_tree(**{"action.job": "from %saction import lockstep\n" % PFX, "action.lockstep": ""}))
    assert any("action.job:1 imports action.lockstep: plugins may not import from plugins" in v for v in sideways)
    module = violations(small_tree(**{"modules.job": "from %splugin_utils.judge.host import judge\n" % PFX}))
    assert any("modules may not import from plugin_utils" in v for v in module)
    undeclared = violations(small_tree(**{"plugin_utils.metrics.workload": "from %splugin_utils.judge.host import x\n" % PFX}))
    assert any("plugin_utils.metrics may not import plugin_utils.judge" in v for v in undeclared)
    assert any(v.startswith("import circle: plugin_utils.judge.host -> plugin_utils.metrics.workload") for v in undeclared)
    hidden = violations(small_tree(**{"plugin_utils.judge.host": "def f():\n    from %splugin_utils.metrics import workload\n" % PFX}))
    assert any("inside a function" in v for v in hidden)
    private = violations(small_tree(**{"plugin_utils.judge.host": "from %splugin_utils.metrics.workload import _m\n" % PFX}))
    assert any("the private name _m" in v for v in private)
    silent = violations(small_tree(**{"plugin_utils.metrics": '"""Metrics."""\n'}))
    assert any("plugin_utils.metrics: its __init__.py says nothing" in v for v in silent)
    ring = violations(small_tree(**{"plugin_utils.metrics": '"""M.\n\nMay import: plugin_utils: judge.\n"""\n'}))
    assert any(v.startswith("circle in the packages") for v in ring)


def test_a_circle_of_three_modules_is_one_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
