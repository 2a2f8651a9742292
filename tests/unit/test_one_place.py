# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One piece of logic in one place (issue 13): no top-level function or class name is
defined in two controller-side modules, so a helper cannot quietly exist twice with two
behaviours (as fmt_num once did in _common.py and report.py)."""
import ast
import collections
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN_UTILS = os.path.join(ROOT, "plugins", "plugin_utils")


def _sources():
    out = {}
    for name in sorted(os.listdir(PLUGIN_UTILS)):
        if name.endswith(".py"):
            with open(os.path.join(PLUGIN_UTILS, name), encoding="utf-8") as fh:
                out[name] = fh.read()
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
    assert {"fleet.py", "stats.py", "fmt.py", "judge.py"} <= set(sources)
    assert defined_twice(sources) == {}


def test_the_check_sees_a_second_definition():
    sources = _sources()
    sources["copy.py"] = "def median(values):\n    return sorted(values)[len(values) // 2]\n"
    assert {name: sorted(files) for name, files in defined_twice(sources).items()} == {"median": ["copy.py", "stats.py"]}
