#!/usr/bin/env bash
# Set everything up and qualify this machine with the quick profile.
# Extra arguments go to ansible-playbook (e.g. -e fleetqual_profile=standard).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/ansible-playbook playbooks/qualify.yml -e fleetqual_profile=quick "$@"
