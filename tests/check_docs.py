"""Render the documentation of every plugin, module and role of the collection with ansible-doc.

Plugins are discovered from the tree, so a new plugin without documentation fails here.
Exit status is non-zero when any of them does not render.
"""
import glob
import os
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
    # Filters may be documented by YAML files named after each filter.
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "filter", "*.yml"))):
        yield "filter", "%s.%s" % (NS, os.path.basename(path)[:-4])
    for spec in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec.split(os.sep)[-3]
        with open(spec) as fh:
            entry_points = yaml.safe_load(fh)["argument_specs"]
        for ep in entry_points:
            yield "role", ("%s.%s" % (NS, role), ep)


def main():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0")
    failures = 0
    count = 0
    for kind, name in targets():
        count += 1
        if kind == "role":
            argv = [DOC, "-t", "role", name[0], "-e", name[1]]
            label = "%s (entry point %s)" % name
        else:
            argv = [DOC, "-t", kind, name]
            label = name
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        ok = proc.returncode == 0 and len(proc.stdout) > 200 and "ERROR" not in proc.stderr
        print("%s %-8s %s" % ("ok  " if ok else "FAIL", kind, label))
        if not ok:
            failures += 1
            print(proc.stderr.strip()[:2000])
    if not os.path.isdir(os.path.join(ROOT, "build", "collections")):
        print("build/collections missing: run scripts/setup.sh")
        return 1
    print("ansible-doc: %d rendered, %d failed" % (count - failures, failures))
    return 1 if failures or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
