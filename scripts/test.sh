#!/usr/bin/env bash
# Install what the tests need, then run every test: C unit tests and sanitizer runs,
# pytest (unit, iobench, integration, fleet over SSH, browser, packaging), ansible-lint,
# ansible-doc, antsibull-changelog and antsibull-docs lint, the collection build,
# galaxy-importer on the built tarball, ansible-test sanity (docs/sanity.md) and the
# molecule default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
exec make test
