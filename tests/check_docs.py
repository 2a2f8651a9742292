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
    for kind in ("callback", "strategy"):
        for path in sorted(glob.glob(os.path.join(ROOT, "plugins", kind, "*.py"))):
            name = os.path.basename(path)[:-3]
            if name != "__init__":
                yield kind, "%s.%s" % (NS, name)
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


def _argv(kind, names):
    return [DOC, "-t", kind] + list(names)


def _sections(kind, stdout):
    """name -> its rendered text, from one ansible-doc run over several plugins or roles (each
    starts at a header line: ``> MODULE ns.col.name (path)``, ``> ROLE: *ns.col.name* (path)``)."""
    head = re.compile(r"^> ROLE: \*(\S+)\*" if kind == "role" else r"^> %s (\S+)" % kind.upper(), re.MULTILINE)
    marks = list(head.finditer(stdout))
    return {m.group(1): stdout[m.start():marks[i + 1].start() if i + 1 < len(marks) else len(stdout)]
            for i, m in enumerate(marks)}


def _judge(kind, targets_, sections, stderr):
    """(label, ok, error) of each target from one run's sections and its stderr."""
    out = []
    for name in targets_:
        if kind == "role":
            text = sections.get(name[0], "")
            ok = bool(re.search(r"^ENTRY POINT: \*%s\*" % re.escape(name[1]), text, re.MULTILINE))
            label = "%-8s %s (entry point %s)" % (kind, name[0], name[1])
        else:
            text = sections.get(name, "")
            ok = len(text) > 200
            label = "%-8s %s" % (kind, name)
        out.append((label, ok, stderr.strip() if not ok else ""))
    return out


def rendered(env, all_targets):
    """(label, ok, error) of every target: ansible-doc renders each kind's plugins (each role's
    entry points) in one run, about the cost of rendering one; a run that fails (ansible-doc
    stops at the first plugin it cannot render) is repeated one plugin at a time, so each
    failure names its own plugin."""
    by_kind = {}
    for kind, name in all_targets:
        by_kind.setdefault(kind, []).append(name)
    out = []
    for kind, names in by_kind.items():
        plugins = sorted({n[0] for n in names}) if kind == "role" else names
        proc = subprocess.run(_argv(kind, plugins), capture_output=True, text=True, env=env, check=False)
        if proc.returncode == 0 and "ERROR" not in proc.stderr:
            out += _judge(kind, names, _sections(kind, proc.stdout), proc.stderr)
            continue
        for plugin in plugins:
            one = subprocess.run(_argv(kind, [plugin]), capture_output=True, text=True, env=env, check=False)
            mine = [n for n in names if (n[0] if kind == "role" else n) == plugin]
            judged = _judge(kind, mine, _sections(kind, one.stdout), one.stderr)
            if one.returncode != 0:
                judged = [(entry[0], False, one.stderr.strip()) for entry in judged]
            out += judged
    return out


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
    for label, ok, err in rendered(env, list(targets())):
        count += 1
        print("%s %s" % ("ok  " if ok else "FAIL", label))
        if not ok:
            failures += 1
            print(err[:2000])
    if not os.path.isdir(os.path.join(ROOT, "build", "collections")):
        print("build/collections missing: run scripts/setup.sh")
        return 1
    print("ansible-doc: %d rendered, %d failed" % (count - failures, failures))
    return 1 if failures or refs or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
