# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One piece of logic in one place: no top-level function or class name is
defined in two controller-side modules, so a helper cannot quietly exist twice with two
behaviours (as fmt_num once did in _common.py and report.py); and no
module-level constant is defined in two modules of plugin_utils or module_utils (as the
read/write mode lists once were, with different contents)."""
import ast
import collections
import os
import unitpaths

ROOT = unitpaths.ROOT
PLUGIN_UTILS = os.path.join(ROOT, "plugins", "plugin_utils")
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")


def _sources(*directories):
    """``{path relative to its directory: source}`` of every Python file below each directory
    (its packages included)."""
    out = {}
    for directory in directories or (PLUGIN_UTILS,):
        for dirpath, _dirs, files in sorted(os.walk(directory)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as fh:
                        out[os.path.relpath(path, os.path.dirname(directory))] = fh.read()
    return out


def defined_twice(sources):
    where = collections.defaultdict(list)
    for name, text in sources.items():
        for node in ast.parse(text, name).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                where[node.name].append(name)
    return {name: files for name, files in where.items() if len(files) > 1}


def test_no_helper_is_defined_twice_in_plugin_utils():
    sources = _sources()
    assert {"plugin_utils/fleet/aggregate.py", "plugin_utils/common/stats.py", "plugin_utils/common/fmt.py",
            "plugin_utils/judge/host.py"} <= set(sources)
    assert defined_twice(sources) == {}


def test_the_check_sees_a_second_definition():
    sources = _sources()
    sources["copy.py"] = "def median(values):\n    return sorted(values)[len(values) // 2]\n"
    assert ({name: sorted(files) for name, files in defined_twice(sources).items()}
            == {"median": ["copy.py", "plugin_utils/common/stats.py"]})


# --------------------------------------------------------------------------- constants

# Known duplicates, none left (workload.py's copy of MODES is gone): the test
# below fails on any other, and on an entry here that is no longer a duplicate (so the
# list only shrinks).
KNOWN_CONSTANTS = {}


def constants_defined_twice(sources):
    """{NAME: [files]} of the module-level constants (an UPPER_CASE name assigned a value)
    defined in more than one file. ``X = other.X`` and ``from m import X`` are aliases of
    the one definition, not a second one."""
    where = collections.defaultdict(list)
    for name, text in sources.items():
        for node in ast.parse(text, name).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if isinstance(value, (ast.Name, ast.Attribute)):
                continue
            for t in targets:
                if isinstance(t, ast.Name) and t.id.strip("_").isupper() and t.id != "__all__":
                    where[t.id].append(name)
    return {name: sorted(set(files)) for name, files in where.items() if len(set(files)) > 1}


def test_no_constant_is_defined_twice_in_plugin_utils_or_module_utils():
    found = constants_defined_twice(_sources(PLUGIN_UTILS, MODULE_UTILS))
    new = {k: v for k, v in found.items() if not set(v) <= set(KNOWN_CONSTANTS.get(k, ()))}
    assert new == {}
    gone = sorted(k for k, v in KNOWN_CONSTANTS.items() if k not in found or not v)
    assert gone == [], "no longer duplicated: remove from KNOWN_CONSTANTS: %s" % gone


def test_the_check_sees_a_second_constant_and_not_an_alias():
    sources = {"a.py": "READ_MODES = ('seqrd', 'rndrd')\n_LIMIT = 3\n",
               "b.py": "READ_MODES = ('rndrd', 'seqrd', 'read')\n",
               "c.py": "from a import READ_MODES\nLIMIT_ALIAS = a._LIMIT\n_LIMIT = 4\n",
               "d.py": "import a\nREAD_MODES = a.READ_MODES\nlower_case = 1\n"}
    assert constants_defined_twice(sources) == {"READ_MODES": ["a.py", "b.py"], "_LIMIT": ["a.py", "c.py"]}


# --------------------------------------------------------------------------- ranges

RANGE_TEXT = r"\d\s*(?:to|\.\.|-)\s*\d|(?:greater|less) than \d|between \d|>=?\s*\d|<=?\s*\d"


def test_iobench_documentation_repeats_no_range_of_the_option_table():
    """The range of an iobench option is written once, in the option table
    (module_utils/plan/options.py; docs/iobench.md is checked against it by
    test_iobench_options): the module's DOCUMENTATION points there instead of repeating it."""
    import re

    import yaml
    from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as opts
    from ansible_collections.fleetqual.storage.plugins.modules import iobench as mod
    doc = yaml.safe_load(mod.DOCUMENTATION)
    ranged = [o["name"] for o in opts.OPTIONS if ("min" in o or "max" in o) and o["name"] in doc["options"]]
    assert {"threads", "iodepth", "search_max", "search_step_time", "db_flushers"} <= set(ranged)

    def text(entry):
        d = entry.get("description")
        return " ".join(d) if isinstance(d, list) else str(d)
    repeated = {name: text(doc["options"][name]) for name in ranged if re.search(RANGE_TEXT, text(doc["options"][name]))}
    assert repeated == {}
    assert "docs/iobench.md" in text(doc) and "option table" in text(doc["options"]["threads"])


def test_the_range_check_sees_a_range_written_by_hand():
    import re
    for hand in ("Number of threads, 1 to 1024.", "1..4096 for iodepth", "greater than 0", "0-64 flushers"):
        assert re.search(RANGE_TEXT, hand), hand
    assert not re.search(RANGE_TEXT, "Binary default 64; 0 = no limit (C(--db-group-commit-max)).")
