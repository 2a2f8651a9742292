"""The packaging checks' own parts: the pip bootstrap stand-in and the tarball member rules."""

import ast
import fnmatch
import glob
import os
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import galaxy_import  # noqa: E402  pylint: disable=wrong-import-position

CACHE = os.path.join(ROOT, "build", "ansible-test", "home", ".ansible", "test", "cache")


def pip_wheel():
    wheels = sorted(glob.glob(os.path.join(CACHE, "pip-*-py3-none-any.whl")))
    if not wheels:
        pytest.fail("no pip wheel in %s: run scripts/setup.sh --test" % CACHE)
    return wheels[-1]


@pytest.mark.slow
def test_get_pip_stand_in_installs_pip_into_an_empty_venv(tmp_path):
    """What ansible-test does with get-pip.py: run it with the venv's python, pip==V, get-pip options."""
    wheel = pip_wheel()
    version = os.path.basename(wheel).split("-")[1]
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(wheel, cache)
    script = cache / ("get_pip_%s.py" % version.replace(".", "_"))
    shutil.copy(os.path.join(ROOT, "scripts", "get_pip_from_wheel.py"), script)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0

    # --no-index: everything must come from the wheel beside the script, nothing from a network.
    proc = subprocess.run([python, str(script), "--disable-pip-version-check", "--no-index",
                           "pip==%s" % version, "--no-setuptools", "--no-wheel"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("pip %s from %s" % (version, venv))
    # pip ran out of the wheel unpacked once beside it (the next venv's bootstrap reuses it),
    # and no half-unpacked copy is left
    assert (cache / os.path.basename(wheel)[:-len(".whl")] / "pip" / "__init__.py").is_file()
    assert not list(cache.glob(".unpack-*"))


def test_get_pip_stand_in_says_where_the_wheel_should_be(tmp_path):
    script = tmp_path / "get_pip_24_2.py"
    shutil.copy(os.path.join(ROOT, "scripts", "get_pip_from_wheel.py"), script)
    proc = subprocess.run([sys.executable, str(script), "pip==24.2"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "no pip-*-py3-none-any.whl beside %s" % tmp_path in proc.stderr


def test_members_of_a_complete_tarball_pass():
    names = ["README.md", "LICENSE", "CHANGELOG.md", "changelogs/changelog.yaml", "meta/runtime.yml",
             "playbooks/qualify.yml", "plugins/modules/iobench.py", "plugins/callback/qualify_report.py",
             "plugins/filter/plan.py", "plugins/plugin_utils/validate/__init__.py", "plugins/plugin_utils/validate/inputs.py",
             "plugins/module_utils/plan/__init__.py", "plugins/module_utils/plan/profiles.py",
             "roles/qualify/README.md", "roles/qualify/meta/main.yml", "roles/qualify/meta/argument_specs.yml",
             "roles/iobench/README.md", "roles/iobench/meta/main.yml", "roles/iobench/meta/argument_specs.yml",
             "roles/iobench/files/src/Makefile", "roles/iobench/files/src/main.c",
             "roles/iobench/files/src/iobench.h", "templates/report.html.j2", "docs/iobench.md",
             "examples/ansible.cfg", "requirements.txt", "extensions/prometheus/fleetqual-alerts.yml"]
    assert galaxy_import.check_members(names) == []


@pytest.mark.parametrize("member", [
    "tests/unit/plugins/module_utils/plan/test_plan.py", "tests/sanity/ignore-2.19.txt", "bench/bench_fleet.py", "molecule/default/molecule.yml",
    "Makefile", "scripts/setup.sh", "requirements-dev.txt", ".ci/run", "changelogs/fragments/12-packaging.yml",
    "roles/iobench/files/src/tests/hist_test.c", "roles/iobench/files/src/iobench", "roles/iobench/files/src/main.o",
    "plugins/filter/__pycache__/plan.cpython-311.pyc",
])
def test_a_development_file_in_the_tarball_fails(member):
    problems = galaxy_import.check_members(["README.md", member])
    assert "tarball ships a development file: %s (galaxy.yml build_ignore)" % member in problems


def test_a_tarball_without_license_or_c_sources_fails():
    problems = galaxy_import.check_members(["README.md", "roles/iobench/files/src/Makefile"])
    assert "tarball misses LICENSE" in problems
    assert "tarball misses roles/iobench/files/src/*.c" in problems
    assert "tarball misses README.md" not in problems


def test_documented_filters_are_yml_docs_and_py_files_with_documentation(tmp_path):
    (tmp_path / "plan.yml").write_text("DOCUMENTATION:\n  name: plan\n")
    (tmp_path / "judge.py").write_text('"""x"""\n\nDOCUMENTATION = r"""\nname: judge\n"""\n')
    (tmp_path / "bundle.py").write_text("class FilterModule:\n    pass\n")
    (tmp_path / "__init__.py").write_text("")
    assert galaxy_import.documented_filters(str(tmp_path)) == {"plan", "judge"}


FILTER_DOCS = sorted(glob.glob(os.path.join(ROOT, "plugins", "filter", "*.py")))


@pytest.mark.parametrize("path", FILTER_DOCS, ids=[os.path.basename(p) for p in FILTER_DOCS])
def test_filter_doc_names_its_filter_and_its_examples_are_yaml(path):
    """Each filter file documents the filter of its name (Galaxy matches them by name);
    read without importing, as Galaxy does."""
    with open(path) as fh:
        tree = ast.parse(fh.read())
    sections = ("DOCUMENTATION", "EXAMPLES", "RETURN")
    doc = {node.targets[0].id: node.value.value for node in tree.body
           if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in sections}
    doc["DOCUMENTATION"], doc["RETURN"] = yaml.safe_load(doc["DOCUMENTATION"]), yaml.safe_load(doc["RETURN"])
    assert doc["DOCUMENTATION"]["name"] == os.path.basename(path)[:-3]
    assert doc["DOCUMENTATION"]["short_description"]
    assert "_value" in doc["RETURN"]
    examples = yaml.safe_load(doc["EXAMPLES"])
    assert isinstance(examples, (list, dict)) and examples


def test_license_must_be_the_gplv3_text():
    with open(os.path.join(ROOT, "LICENSE")) as fh:
        assert galaxy_import.check_license(fh.read()) == []
    assert galaxy_import.check_license("GPL-3.0-or-later\n") == [
        "LICENSE is not the full text of the GNU GPL version 3 (galaxy.yml: GPL-3.0-or-later)"]


# The rules galaxy-importer's own ansible-lint run skips (-x) besides the profile; ours may skip
# only rules of these, or what the import's stand-in repository answers (galaxy_import.py).
IMPORTER_SKIPS = {"yaml", "var-naming", "avoid-dot-notation", "import-task-no-when", "single-entry-point", "use-loop"}
STAND_IN_ANSWERS = {"galaxy[no-repository]"}


def test_make_lint_covers_what_the_importers_ansible_lint_would_find():
    """The import does not run ansible-lint again (galaxy-importer.cfg): `make lint` runs the
    importer's profile, skips no rule the importer checks, and leaves out only files the tarball
    does not ship."""
    with open(os.path.join(ROOT, ".ansible-lint")) as fh:
        cfg = yaml.safe_load(fh)
    assert cfg["profile"] == "production"
    assert not cfg.get("enable_list") and not cfg.get("warn_list"), "a rule only warned about would pass the import"
    unsafe = [rule for rule in cfg.get("skip_list", [])
              if rule.split("[")[0] not in IMPORTER_SKIPS and rule not in STAND_IN_ANSWERS]
    assert unsafe == []
    shipped = [p for p in cfg.get("exclude_paths", [])
               if not any(fnmatch.fnmatch(p.rstrip("/"), pat) for pat in galaxy_import.FORBIDDEN + [".venv*"])]
    assert shipped == []
    with open(galaxy_import.CONFIG) as fh:
        assert "run_ansible_lint = False" in fh.read()
