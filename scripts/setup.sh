#!/usr/bin/env bash
# Install what the collection's demo and tests need, and nothing that is already there.
#   scripts/setup.sh          runtime: compiler, sysstat, Python venv with ansible-core
#   scripts/setup.sh --test   also sshd, chromium, xmllint, filesystem tools; fio and sysbench for bench/
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_pkgs=(gcc make libc6-dev sysstat python3-venv)
test_pkgs=(fio sysbench openssh-server chromium libxml2-utils
           e2fsprogs util-linux dmsetup procps)
pkgs=("${runtime_pkgs[@]}")
[ "${1:-}" = "--test" ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/.installed ]; then
  echo "setup: creating .venv from requirements.txt"
  "$py" -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  touch .venv/.installed
fi

# Expose the checkout as ansible_collections/fleetqual/storage for Ansible and pytest.
mkdir -p build/collections/ansible_collections/fleetqual
ln -sfn "$PWD" build/collections/ansible_collections/fleetqual/storage
