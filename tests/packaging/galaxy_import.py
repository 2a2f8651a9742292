"""Import the built collection tarball with galaxy-importer, as Galaxy and Automation Hub do.

    .venv-packaging/bin/python tests/packaging/galaxy_import.py build/galaxy/fleetqual-storage-X.tar.gz

Run by `make galaxy-import` in .venv-packaging, a venv with galaxy-importer and ansible-core
but without the collection's runtime requirements (jmespath, ...), as on Galaxy. Fails
(exit 1) on:

- any ERROR or WARNING that galaxy-importer logs (it shows them on the collection's page);
- content that Galaxy would list without documentation: every filter, module, callback
  and other plugin must have its ansible-doc documentation (a filter file whose import
  fails, or a .py file under plugins/filter that is not a documented filter, shows as an
  undocumented item); every role needs a README and a description;
- a tarball that misses what the collection needs (LICENSE, README, changelog, the C
  sources iobench is built from, ...) or ships development files (tests/, bench/,
  molecule/, Makefile, scripts/, development requirements, ...).

galaxy-importer requires `repository` in galaxy.yml. While galaxy.yml has none (the project
has no public repository yet, and a placeholder is worse than nothing), the import is run on a
copy of the tarball whose MANIFEST.json names a stand-in, and the check says so; with
--require-repository (for a release) a missing repository fails.
"""

import argparse
import fnmatch
import io
import json
import logging
import os
import sys
import tarfile
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "galaxy-importer.cfg")

# What the tarball must ship (fnmatch patterns; each must match at least one member).
REQUIRED = [
    "README.md", "LICENSE", "CHANGELOG.md", "changelogs/changelog.yaml", "meta/runtime.yml",
    "playbooks/qualify.yml", "plugins/modules/*.py", "plugins/callback/*.py",
    "plugins/filter/*", "plugins/plugin_utils/*/__init__.py", "plugins/plugin_utils/*/*.py",
    "plugins/module_utils/*/__init__.py", "plugins/module_utils/*/*.py",
    "roles/qualify/README.md", "roles/qualify/meta/main.yml", "roles/qualify/meta/argument_specs.yml",
    "roles/iobench/README.md", "roles/iobench/meta/main.yml", "roles/iobench/meta/argument_specs.yml",
    "roles/iobench/files/src/Makefile", "roles/iobench/files/src/*.c", "roles/iobench/files/src/*.h",
    "templates/*", "docs/*.md", "examples/ansible.cfg", "requirements.txt",
    # the Prometheus alerting rules for compliance runs (docs/compliance.md)
    "extensions/prometheus/*.yml",
]
# What it must not ship: development, test and benchmark files, build products.
FORBIDDEN = [
    "tests", "tests/*", "bench", "bench/*", "molecule", "molecule/*", "scripts", "scripts/*",
    ".ci", ".ci/*", "Makefile", "requirements-dev.txt", "pytest.ini", "ansible.cfg",
    ".ansible-lint", ".gitignore", "inventory", "inventory/*", "build", "build/*",
    "results", "results/*", ".venv*", "changelogs/fragments", "changelogs/fragments/*",
    "roles/iobench/files/src/tests", "roles/iobench/files/src/tests/*",
    "roles/iobench/files/src/iobench", "roles/iobench/files/src/iobench-*",
    "*.o", "*.pyc", "*/__pycache__", "*/__pycache__/*", "*.tar.gz",
]
# Content types that Galaxy lists with their ansible-doc documentation.
DOCUMENTED_TYPES = {"module", "filter", "test", "callback", "lookup", "inventory", "connection",
                    "become", "cache", "cliconf", "httpapi", "netconf", "shell", "strategy", "vars"}
STAND_IN_REPOSITORY = "https://repository.invalid/fleetqual/storage"


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)
        print(("%s: %s" % (record.levelname, record.getMessage())) if record.levelno > logging.INFO
              else record.getMessage())


def check_members(names):
    problems = []
    for pattern in REQUIRED:
        if not fnmatch.filter(names, pattern):
            problems.append("tarball misses %s" % pattern)
    for name in names:
        bad = [p for p in FORBIDDEN if fnmatch.fnmatch(name, p)]
        if bad:
            problems.append("tarball ships a development file: %s (galaxy.yml build_ignore)" % name)
    return problems


def with_repository(tarball, workdir):
    """A copy of the tarball whose MANIFEST.json names a stand-in repository.

    MANIFEST.json is not in FILES.json's checksums, so the copy imports like the original."""
    path = os.path.join(workdir, os.path.basename(tarball))
    with tarfile.open(tarball) as src, tarfile.open(path, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name == "MANIFEST.json":
                manifest = json.loads(data)
                manifest["collection_info"]["repository"] = STAND_IN_REPOSITORY
                data = json.dumps(manifest, indent=4).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    return path


def check_license(text):
    """galaxy.yml says GPL-3.0-or-later: LICENSE must be the GPL version 3 text."""
    if "GNU GENERAL PUBLIC LICENSE" in text and "Version 3, 29 June 2007" in text and len(text) > 30000:
        return []
    return ["LICENSE is not the full text of the GNU GPL version 3 (galaxy.yml: GPL-3.0-or-later)"]


def documented_filters(directory):
    """Filters documented in the checkout: <name>.yml, or <name>.py carrying DOCUMENTATION."""
    names = set()
    for entry in os.listdir(directory):
        stem, ext = os.path.splitext(entry)
        if ext == ".yml":
            names.add(stem)
        elif ext == ".py" and stem != "__init__":
            with open(os.path.join(directory, entry)) as fh:
                if "\nDOCUMENTATION = " in fh.read():
                    names.add(stem)
    return names


def check_result(result, filter_names):
    problems = []
    for item in result["docs_blob"]["contents"]:
        kind, name = item["content_type"], item["content_name"]
        if kind in DOCUMENTED_TYPES and not item.get("doc_strings"):
            problems.append("%s %s is listed without documentation" % (kind, name))
        if kind == "role" and not item.get("readme_html"):
            problems.append("role %s has no README" % name)
    for item in result["contents"]:
        if item["content_type"] == "role" and not item.get("description"):
            problems.append("role %s has no description (meta/main.yml galaxy_info)" % item["name"])
    if "<" in (result.get("requires_ansible") or ""):
        problems.append("meta/runtime.yml requires_ansible %r has an upper bound" % result["requires_ansible"])
    listed = {i["name"] for i in result["contents"] if i["content_type"] == "filter"}
    for name in sorted(filter_names - listed):
        problems.append("filter %s is documented in plugins/filter/ but Galaxy does not list it (does its"
                        " plugin file import without the collection's optional libraries?)" % name)
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("tarball")
    parser.add_argument("--require-repository", action="store_true",
                        help="fail when galaxy.yml has no repository (Galaxy refuses such an upload)")
    args = parser.parse_args()

    os.environ["GALAXY_IMPORTER_CONFIG"] = CONFIG
    # galaxy-importer runs ansible-doc and ansible-lint from PATH: this venv's.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    from galaxy_importer import collection, config  # pylint: disable=import-outside-toplevel

    with tarfile.open(args.tarball) as tar:
        names = [m.name for m in tar.getmembers()]
        problems = check_members(names)
        if "LICENSE" in names:
            problems.extend(check_license(tar.extractfile("LICENSE").read().decode()))
    with open(os.path.join(ROOT, "galaxy.yml")) as fh:
        galaxy = yaml.safe_load(fh)
    filter_names = documented_filters(os.path.join(ROOT, "plugins", "filter"))

    logger = logging.getLogger("galaxy_import_check")
    logger.setLevel(logging.INFO)
    handler = Collect()
    logger.addHandler(handler)
    cfg = config.Config(config_data=config.ConfigFile.load())

    with tempfile.TemporaryDirectory(prefix="galaxy-import-") as tmp:
        tarball = args.tarball
        if not galaxy.get("repository"):
            if args.require_repository:
                problems.append("galaxy.yml has no repository: Galaxy requires one")
            print("NOTE: galaxy.yml has no repository; galaxy-importer requires one, so this import "
                  "runs on a copy whose MANIFEST.json names %s. Set the real one in galaxy.yml "
                  "before publishing (make galaxy-import-release checks it)." % STAND_IN_REPOSITORY)
            tarball = with_repository(tarball, tmp)
        os.environ.setdefault("ANSIBLE_LOCAL_TEMP", os.path.join(tmp, "ansible-tmp"))
        name = os.path.basename(tarball)[:-len(".tar.gz")]
        namespace, coll, version = name.split("-", 2)
        result = None
        with open(tarball, "rb") as fh:
            try:
                result = collection.import_collection(
                    fh, collection.CollectionFilename(namespace, coll, version), logger=logger, cfg=cfg)
            except Exception as exc:  # the importer's own errors and anything unexpected
                logger.error("The import failed: %s", exc)

    for record in handler.records:
        if record.levelno >= logging.WARNING:
            problems.append("galaxy-importer %s: %s" % (record.levelname, record.getMessage()))
    if result is not None:
        problems.extend(check_result(result, filter_names))
        counts = {}
        for item in result["contents"]:
            counts[item["content_type"]] = counts.get(item["content_type"], 0) + 1
        print("imported: " + ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())))
    for problem in problems:
        print("FAIL " + problem)
    print("galaxy-importer: %s" % ("%d problem(s)" % len(problems) if problems else "clean import"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
