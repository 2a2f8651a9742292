#!/usr/bin/env bash
# Install what the collection's demo and tests need, and nothing that is already there.
#   scripts/setup.sh          runtime: compiler, sysstat, Python venv with ansible-core
#   scripts/setup.sh --test   also sshd, chromium, xmllint, filesystem tools, shellcheck, git,
#                             strace (system calls made slow on purpose in iobench's tests);
#                             fio and sysbench for bench/; python3-apt (the package module of
#                             the fleetqual_manage_packages test); fuse3, libfuse3-dev and
#                             pkg-config (the fault-injecting drive of tests/faultdrive);
#                             debootstrap (hosts of other Debian releases); sudo (non-root
#                             logins); mmdebstrap (the VM tier's guest image),
#                             qemu-system-x86, qemu-utils and nbdkit (the VM tier's guests
#                             and their drives); community.general in
#                             build/collections (the redfish and ipmi power methods'
#                             modules); the development requirements in .venv; the
#                             packaging tools in .venv-packaging; ansible-test's pip
#                             bootstrap (scripts/ansible-test-sanity.sh --setup)
#   scripts/setup.sh --long   also what only the long suite's labs need (make test-long runs
#                             it): tgt and iptables (the SAN lab's iSCSI target and its path
#                             cuts); libvirt-daemon, libvirt-daemon-driver-qemu and
#                             python3-libvirt (the BMC lab of tests/bmc: a private libvirtd
#                             whose domains sushy-tools and virtualbmc power off and on) and
#                             its emulators in .venv-bmc
#
# Python requirements, all pinned, all from PyPI:
#   requirements.txt                  the controller's runtime (what the collection needs;
#                                     also read by the execution environment)
#   requirements-dev.txt              tests and linters (pytest, molecule, ansible-lint, ...);
#                                     it includes requirements.txt. Installed with --test.
#   tests/packaging/requirements.txt  galaxy-importer, antsibull-changelog, antsibull-docs, in a
#                                     venv of their own without the runtime requirements, as
#                                     on Galaxy's importer (a filter that imports an optional
#                                     library unguarded vanishes there, and the check sees it)
set -euo pipefail
cd "$(dirname "$0")/.."

test_mode=false
long_mode=false
case "${1:-}" in
  --test) test_mode=true ;;
  --long) test_mode=true; long_mode=true ;;
esac

runtime_pkgs=(gcc make libc6-dev sysstat python3-venv)
test_pkgs=(fio sysbench openssh-server chromium libxml2-utils
           e2fsprogs util-linux dmsetup procps shellcheck git prometheus
           smartmontools nvme-cli python3-apt strace
           fuse3 libfuse3-dev pkg-config debootstrap sudo
           mmdebstrap qemu-system-x86 qemu-utils nbdkit)
long_pkgs=(tgt iptables libvirt-daemon libvirt-daemon-driver-qemu python3-libvirt)
pkgs=("${runtime_pkgs[@]}")
$test_mode && pkgs+=("${test_pkgs[@]}")
$long_mode && pkgs+=("${long_pkgs[@]}")

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

# community.general (redfish_command, ipmi_power) for the power methods' tests, from the
# ansible package of the ansible-core series requirements.txt pins (no Galaxy here)
community_general() {
  local ansible_pkg=ansible==12.3.0 cg=build/collections/ansible_collections/community/general
  [ -e "$cg/.installed-$ansible_pkg" ] && return 0
  echo "setup: installing community.general from $ansible_pkg into build/collections"
  rm -rf build/dl "$cg" && mkdir -p build/dl
  .venv/bin/pip download -q --disable-pip-version-check --no-deps -d build/dl "$ansible_pkg"
  .venv/bin/python - build/dl/ansible-*.whl build/collections <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("ansible_collections/community/general/")])
PY
  rm -rf build/dl
  touch "$cg/.installed-$ansible_pkg"
}

# venv DIR STAMP REQUIREMENTS...: create DIR and install the requirement files into it,
# again whenever one of them is newer than DIR's stamp (or the set of files changed).
venv() {
  local dir=$1 stamp=$1/.installed-$2 args=() f stale=false
  shift 2
  [ -x "$dir/bin/python" ] && [ -e "$stamp" ] || stale=true
  for f in "$@"; do
    args+=(-r "$f")
    [ "$f" -nt "$stamp" ] && stale=true
  done
  if $stale; then
    echo "setup: installing $* into $dir"
    local args_venv=()
    [ -n "${venv_args:-}" ] && args_venv=("$venv_args")
    [ -x "$dir/bin/python" ] || "$py" -m venv "${args_venv[@]}" "$dir"
    # Under a bytecode prefix (scripts/test.sh, make test) Python reads bytecode only from
    # there, never from the __pycache__ beside the packages: compiling them at install time
    # would be work that no process reads.
    local compile=()
    [ -n "${PYTHONPYCACHEPREFIX:-}" ] && compile=(--no-compile)
    "$dir/bin/pip" install -q --disable-pip-version-check "${compile[@]}" "${args[@]}"
    rm -f "$dir"/.installed*
    touch "$stamp"
  fi
}

if $test_mode; then
  # requirements-dev.txt includes requirements.txt; until it exists, requirements.txt
  # holds both.
  if [ -f requirements-dev.txt ]; then
    venv .venv dev requirements-dev.txt
  else
    venv .venv dev requirements.txt
  fi
  # The rest needs only .venv and nothing of each other: at once, each into a log of its own,
  # printed when it ends (a fresh machine's setup was 3.5 minutes one after the other).
  mkdir -p build/setup
  jobs_=(packaging community-general sanity)
  $long_mode && jobs_+=(bmc)
  job() {
    case $1 in
      packaging) venv .venv-packaging packaging tests/packaging/requirements.txt ;;
      # the BMC lab's emulators: Debian's own python3, whose python3-libvirt binds libvirt 9.0
      bmc) py=/usr/bin/python3 venv_args=--system-site-packages venv .venv-bmc bmc tests/bmc/requirements.txt ;;
      community-general) community_general ;;
      # the sanity tests' venvs (ansible-test --prime-venvs), built now so that no test downloads
      sanity) scripts/ansible-test-sanity.sh --setup ;;
    esac
  }
  pids=()
  for j in "${jobs_[@]}"; do
    job "$j" > "build/setup/$j.log" 2>&1 &
    pids+=($!)
  done
  failed=()
  for i in "${!jobs_[@]}"; do
    wait "${pids[$i]}" || failed+=("${jobs_[$i]}")
    cat "build/setup/${jobs_[$i]}.log"
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "setup: failed: ${failed[*]} (logs: build/setup/)" >&2
    exit 1
  fi
else
  # A runtime setup keeps a test setup that is already there (the stamp of a test setup
  # is newer than requirements.txt when it holds it).
  if [ ! -e .venv/.installed-dev ] || [ requirements.txt -nt .venv/.installed-dev ]; then
    venv .venv runtime requirements.txt
  fi
fi

# Expose the checkout as ansible_collections/fleetqual/storage for Ansible and pytest.
mkdir -p build/collections/ansible_collections/fleetqual
ln -sfn "$PWD" build/collections/ansible_collections/fleetqual/storage

