"""AWX / Automation Platform packaging (part 4): the execution-environment
definition builds a context with ansible-builder, its introspection finds the
collection's runtime and system requirements through meta/execution-environment.yml, and
the pins are what this checkout runs with."""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
import unitpaths

ROOT = unitpaths.ROOT
BUILDER = os.path.join(os.path.dirname(sys.executable), "ansible-builder")


def _pins(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-r"):
                name, version = line.split("==")
                out[name.strip().lower()] = version.strip()
    return out


def test_runtime_requirements_are_separate_and_pinned_to_what_runs_here():
    runtime = _pins(os.path.join(ROOT, "requirements.txt"))
    dev = _pins(os.path.join(ROOT, "requirements-dev.txt"))
    assert set(runtime) == {"ansible-core", "jinja2", "jmespath", "prometheus-client"}
    assert not set(runtime) & set(dev) and "pytest" in dev and "ansible-builder" in dev
    with open(os.path.join(ROOT, "requirements-dev.txt"), encoding="utf-8") as f:
        assert "-r requirements.txt" in f.read()
    for name, version in runtime.items():
        assert importlib.metadata.version(name) == version, name


@pytest.mark.skipif(not os.path.exists(BUILDER), reason="ansible-builder not installed (requirements-dev.txt)")
def test_ansible_builder_create_and_introspection(tmp_path):
    with open(os.path.join(ROOT, "execution-environment.yml"), encoding="utf-8") as f:
        ee = yaml.safe_load(f)
    assert ee["version"] == 3
    ctx = tmp_path / "context"
    res = subprocess.run([BUILDER, "create", "-f", os.path.join(ROOT, "execution-environment.yml"), "-c", str(ctx),
                          "--output-filename", "Containerfile"], capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path), check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    containerfile = (ctx / "Containerfile").read_text()
    assert "quay.io/centos/centos:stream9" in containerfile
    assert "ansible-core==2.19.14" in containerfile and "ansible-runner==2.4.3" in containerfile
    assert "config-manager --set-enabled crb" in containerfile          # glibc-static lives there
    assert (ctx / "_build" / "bindep.txt").read_text() == open(os.path.join(ROOT, "bindep.txt")).read()
    assert (ctx / "_build" / "requirements.txt").read_text() == open(os.path.join(ROOT, "requirements.txt")).read()

    # what the build runs inside the image to collect the collections' dependencies:
    # it reads meta/execution-environment.yml of this collection
    dest = tmp_path / "collections" / "ansible_collections" / "fleetqual" / "storage"
    dest.mkdir(parents=True)
    shutil.copytree(os.path.join(ROOT, "meta"), str(dest / "meta"))
    for name in ("requirements.txt", "bindep.txt", "galaxy.yml"):
        shutil.copy(os.path.join(ROOT, name), str(dest / name))
    res = subprocess.run([sys.executable, str(ctx / "_build" / "scripts" / "introspect.py"), "introspect",
                          str(tmp_path / "collections")], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    found = yaml.safe_load(res.stdout)
    python = [re.sub(r"\s+#.*", "", p) for p in found["python"]]
    system = [re.sub(r"\s+#.*", "", p) for p in found["system"]]
    assert python == ["jinja2==3.1.6", "jmespath==1.1.0", "prometheus-client==0.26.0"]
    assert "gcc [platform:dpkg platform:rpm]" in system and "glibc-static [platform:rpm]" in system
    assert "libc6-dev [platform:dpkg]" in system and "make [platform:dpkg platform:rpm]" in system
