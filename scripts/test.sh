#!/usr/bin/env bash
# Install what the tests need, then run every test: C unit tests and sanitizer runs,
# pytest (unit, iobench, integration, fleet over SSH, browser), ansible-lint, ansible-doc,
# the collection build, and the molecule default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
exec make test
