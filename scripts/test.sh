#!/usr/bin/env bash
# Install what the tests need, then run every test: C unit tests and sanitizer runs,
# pytest (unit, iobench, integration, fleet over SSH, VM guests, browser, packaging),
# ansible-lint, ansible-doc, antsibull-changelog and antsibull-docs lint, the collection
# build, galaxy-importer on the built tarball, ansible-test sanity (docs/sanity.md) and the
# molecule default scenario.
# The whole command (setup included) runs in one control group (tests/suitecost.py), so the
# cost make test prints at its end counts it all; a machine without python3 yet is set up
# first.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every Python process of the command, setup's too, caches its bytecode under build/pycache
# as make test's do (the Makefile, docs/testing.md "What the suite costs"), so setup's pip
# compiles nothing at install time (scripts/setup.sh).
export PYTHONPYCACHEPREFIX="$PWD/build/pycache" PYTHONDONTWRITEBYTECODE=
if command -v python3 >/dev/null 2>&1; then
  exec python3 tests/suitecost.py run whole --out build/test-cost-whole.json -- \
    bash -c 'scripts/setup.sh --test && exec make test'
fi
scripts/setup.sh --test
exec make test
