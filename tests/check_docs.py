"""Render the documentation of every plugin, module and role of the collection with ansible-doc.

Plugins are discovered from the tree, so a new plugin without documentation fails here; the
filters Ansible actually loads are compared with the documented ones, so a filter added to a
FilterModule without documentation, or a filter file that does not load, fails too.
Exit status is non-zero when any of them does not render.

It also reads every file of the checkout for references to the project's internal issue
tracker (the word issue followed by its number): users of the collection cannot see those issues, so
module documentation, docs/, code comments and tests name the concept and the doc page that
explains it instead.
"""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "fleetqual.storage"
DOC = os.path.join(os.path.dirname(sys.executable), "ansible-doc")


def targets():
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))):
        name = os.path.basename(path)[:-3]
        if name != "__init__":
            yield "module", "%s.%s" % (NS, name)
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "callback", "*.py"))):
        name = os.path.basename(path)[:-3]
        if name != "__init__":
            yield "callback", "%s.%s" % (NS, name)
    # A filter is documented by the DOCUMENTATION of the plugin file of its name (one filter
    # per file, as Galaxy lists them; the wrappers live in plugins/plugin_utils/filters/table.py).
    filters = set()
    for path in glob.glob(os.path.join(ROOT, "plugins", "filter", "*.py")):
        with open(path) as fh:
            if "\nDOCUMENTATION = " in fh.read():
                filters.add(os.path.basename(path)[:-3])
    for name in sorted(filters):
        yield "filter", "%s.%s" % (NS, name)
    for spec in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec.split(os.sep)[-3]
        with open(spec) as fh:
            entry_points = yaml.safe_load(fh)["argument_specs"]
        for ep in entry_points:
            yield "role", ("%s.%s" % (NS, role), ep)


ISSUE_REF = re.compile(r"\bissues?\s+#?[0-9]+", re.IGNORECASE)
# files that are not ours to word: the licence text
ISSUE_REF_EXEMPT = {"LICENSE"}


def checkout_files(root=ROOT):
    """Every file of the checkout: git's tracked and untracked-but-not-ignored files, or every
    file below ``root`` outside a git work tree (a collection tarball, for instance)."""
    proc = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          capture_output=True, check=False)
    if proc.returncode == 0:
        return sorted({p for p in proc.stdout.decode().split("\0") if p})
    out = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
        out.extend(os.path.relpath(os.path.join(top, f), root) for f in files)
    return sorted(out)


def issue_references(root=ROOT):
    """``path:line: text`` of every line that names an internal issue number."""
    found = []
    for rel in checkout_files(root):
        if rel in ISSUE_REF_EXEMPT:
            continue
        path = os.path.join(root, rel)
        try:
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError):   # binary files, links to nothing
            continue
        for n, line in enumerate(lines, 1):
            if ISSUE_REF.search(line):
                found.append("%s:%d: %s" % (rel, n, line.strip()[:160]))
    return found


def undocumented_filters(env, documented):
    """Problems with the filters Ansible loads: a filter file that does not load, or a filter
    without documentation (ansible-doc lists it as UNDOCUMENTED; Galaxy shows it bare)."""
    proc = subprocess.run([DOC, "-t", "filter", "--list", "--json", NS], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0 or proc.stderr.strip():
        return ["ansible-doc -t filter --list %s: %s" % (NS, proc.stderr.strip()[:2000])]
    listed = {name.split(".")[-1] for name in json.loads(proc.stdout)}
    return ["%s.%s has no documentation (DOCUMENTATION in plugins/filter/%s.py)" % (NS, name, name)
            for name in sorted(listed - documented)]


def main():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0")
    failures = 0
    count = 0
    refs = issue_references()
    for ref in refs:
        print("FAIL issue-ref " + ref)
    if refs:
        print("%d line(s) name an internal issue number: name the concept and its doc page instead" % len(refs))
    documented = {name[1].split(".")[-1] for name in targets() if name[0] == "filter"}
    for problem in undocumented_filters(env, documented):
        count += 1
        failures += 1
        print("FAIL filter   " + problem)
    for kind, name in targets():
        count += 1
        if kind == "role":
            argv = [DOC, "-t", "role", name[0], "-e", name[1]]
            label = "%s (entry point %s)" % name
        else:
            argv = [DOC, "-t", kind, name]
            label = name
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        ok = proc.returncode == 0 and len(proc.stdout) > 200 and "ERROR" not in proc.stderr
        print("%s %-8s %s" % ("ok  " if ok else "FAIL", kind, label))
        if not ok:
            failures += 1
            print(proc.stderr.strip()[:2000])
    if not os.path.isdir(os.path.join(ROOT, "build", "collections")):
        print("build/collections missing: run scripts/setup.sh")
        return 1
    print("ansible-doc: %d rendered, %d failed" % (count - failures, failures))
    return 1 if failures or refs or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
