#!/usr/bin/env bash
# Run `ansible-test sanity --python 3.11` on a copy of the collection, with nothing
# downloaded from outside the package registries.
#
# ansible-test needs the collection at .../ansible_collections/fleetqual/storage as a real
# directory (it resolves symlinks), so the checkout is copied to
# build/ansible-test/ansible_collections/fleetqual/storage (without .venv, build, results
# and build products), with an empty git repository of its own. Each sanity test runs in its own virtual environment, which
# ansible-test fills from PyPI (--requirements) after bootstrapping pip with a
# get-pip-<version>.py that it downloads from its own host; that file is replaced by
# scripts/get_pip_from_wheel.py and the pip wheel of the same version from PyPI, in a HOME
# of its own under build/ansible-test (so nothing is written to the user's ~/.ansible).
# `--setup` (run by scripts/setup.sh --test) fetches the pip wheel, installs the stand-in and
# builds the sanity tests' venvs (ansible-test --prime-venvs) without running any test.
# Other arguments go to ansible-test sanity (e.g. --test pep8, plugins/modules/x.py).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/build/ansible-test
copy=$work/ansible_collections/fleetqual/storage
export HOME=$work/home

# ansible-test's pip version for Python 3.11 (get_venv_packages in ansible-test).
pip_version=$(.venv/bin/python - <<'EOF'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11", path="/unused"))["pip"])
EOF
)
cache=$HOME/.ansible/test/cache
mkdir -p "$cache"
if ! ls "$cache"/pip-"$pip_version"-py3-none-any.whl >/dev/null 2>&1; then
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$cache" "pip==$pip_version"
fi
cp scripts/get_pip_from_wheel.py "$cache/get_pip_${pip_version//./_}.py"

rm -rf "$copy"
mkdir -p "$copy"
tar -C "$root" -cf - \
  --exclude=./.git --exclude=./.venv --exclude=./.venv-packaging --exclude=./.venv-bmc --exclude=./build --exclude=./results \
  --exclude=./.pytest_cache --exclude=__pycache__ --exclude='*.pyc' --exclude=./bench/out \
  --exclude=./roles/iobench/files/src/iobench --exclude='./roles/iobench/files/src/iobench-*' \
  --exclude='./roles/iobench/files/src/*.o' --exclude='./roles/iobench/files/src/tests/*_test' \
  --exclude=./roles/iobench/files/src/tests/asan-obj \
  --exclude='./*.tar.gz' . | tar -C "$copy" -xf -

cd "$copy"
# The checkout's git repository ignores build/, so ansible-test (which lists files with
# `git ls-files --cached --others --exclude-standard`) would see nothing here: give the copy
# a repository of its own (no commit; untracked files are listed).
git init -q .
if [ "${1:-}" = "--setup" ]; then
  # Build the sanity tests' venvs now (from PyPI), so that running the tests downloads nothing.
  exec "$root/.venv/bin/ansible-test" sanity --python 3.11 --requirements --color no --prime-venvs
fi
exec "$root/.venv/bin/ansible-test" sanity --python 3.11 --requirements --color no "$@"
