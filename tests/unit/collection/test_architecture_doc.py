"""docs/architecture.md stays true to the tree: every path it writes in
backticks exists, and every package and Python file under plugins/ and every C source of
iobench is named in it, so a new or renamed file cannot go unmapped. (The size of files and
packages is kept by collection/test_import_floors.py.)"""
import fnmatch
import glob
import os
import re
import unitpaths

ROOT = unitpaths.ROOT
DOC = os.path.join(ROOT, "docs", "architecture.md")
PATH_RE = re.compile(r"`((?:plugins|roles|docs|templates|playbooks|tests|bench)/[^`\s]+)`")


def doc_text():
    with open(DOC) as fh:
        return fh.read()


def named_paths(text):
    return sorted(set(PATH_RE.findall(text)))


def test_every_path_the_map_names_exists():
    names = named_paths(doc_text())
    assert len(names) > 50          # the map names the code, not a few examples
    missing = [p for p in names if not glob.glob(os.path.join(ROOT, p))]
    assert missing == []


def test_every_plugin_file_and_c_source_is_on_the_map():
    names = set(named_paths(doc_text()))
    files = [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True)
             if os.path.basename(p) != "__init__.py"]
    # a package is on the map by its directory (its __init__.py says what lives there)
    files += [os.path.relpath(os.path.dirname(p), ROOT) + "/"
              for p in glob.glob(os.path.join(ROOT, "plugins", "*", "*", "__init__.py"))]
    files += [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "roles", "iobench", "files", "src", "*.c"))]
    # alias modules of old names (nothing defined there) are not concepts of their own
    unmapped = sorted(f for f in files if not any(fnmatch.fnmatch(f, n) for n in names) and not is_alias_module(f))
    assert unmapped == []


def is_alias_module(rel):
    if not rel.endswith(".py"):
        return False
    with open(os.path.join(ROOT, rel)) as fh:
        src = fh.read()
    return rel.endswith(".py") and "Old name of" in src and not re.search(r"^(def|class) ", src, re.M)


def test_the_checks_see_a_missing_file_and_an_unmapped_one():
    text = "`plugins/plugin_utils/judge/verdict.py` and `plugins/plugin_utils/no_such_file.py`"
    names = named_paths(text)
    assert names == ["plugins/plugin_utils/judge/verdict.py", "plugins/plugin_utils/no_such_file.py"]
    assert [p for p in names if not glob.glob(os.path.join(ROOT, p))] == ["plugins/plugin_utils/no_such_file.py"]
