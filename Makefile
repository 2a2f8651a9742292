# Developer entry points. scripts/setup.sh installs what these need.
VENV   := .venv/bin
# galaxy-importer, antsibull-changelog and antsibull-docs: a venv without the collection's
# runtime requirements, as on Galaxy (tests/packaging/requirements.txt).
PKGVENV := $(CURDIR)/.venv-packaging/bin
SRC    := roles/iobench/files/src
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/build/collections
export PATH := $(CURDIR)/.venv/bin:$(PATH)
# Python caches the bytecode of this checkout's own code (the collection's plugins and
# module_utils, the tests) under build/pycache, outside the tree, even where the environment
# sets PYTHONDONTWRITEBYTECODE (an empty value turns it off): the suite starts several hundred
# Python processes that import the same modules (module runs, ansible-playbook and its
# workers), and each compiled them from source again (docs/testing.md, "What the suite costs").
export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache
export PYTHONDONTWRITEBYTECODE :=

PYTEST := $(VENV)/pytest -q -p no:cacheprovider
# The tests of the suite: every test but those marked long, which `make test-long` adds
# (docs/testing.md, "The long suite": guests of their own, minutes of wall each).
SUITE := not long
# The parallel test run's JUnit files and pytest base directories (one per stream).
STREAMS := $(CURDIR)/build/test-streams

.PHONY: test stream-vm stream-chroots fleet-chroots stream-fleet stream-fleet2 stream-unit stream-rest stream-checks stream-c test-c test-py test-fleet test-fleet2 test-unit test-rest checks lint docs-check changelog-lint docs-lint galaxy \
	galaxy-import galaxy-import-release sanity molecule qualify clean

# Every suite, as six streams under one make -j8: the benchmark's build, then the fleet
# tests that run no fleet and the kernel-error tests, the unit tests and every other pytest
# directory (they use that build); beside them from the start the C tests, the VM tier (its
# image builds and its guest boots while the other streams run) and the static checks; in
# the long suite also the fleet tests that wait on detached jobs (stream-fleet) and the
# build of the distro tests' chroots (fleet-chroots, below). Most of their time is spent
# waiting on workloads, sshd round trips, guests and subprocesses rather than on the CPU.
# Each stream's output is printed
# whole when it ends (--output-sync), and one closing line counts every pytest stream
# (tests/junit_summary.py). A lab that setup.sh provides but cannot run here fails its tests
# instead of skipping them (tests/labs.py).
# Each stream runs in a control group of its own (tests/suitecost.py), so its CPU seconds count
# every process it started, wherever re-parented (detached jobs, sshd sessions, guests); at the
# end the cost of each stream, of the whole command and of the 15 costliest tests is printed
# and written to build/test-streams/cost.json (docs/testing.md, "What the suite costs").
test: export FLEETQUAL_REQUIRE_LABS := 1
# each property test runs at most this many examples; the long suite runs each its own count
# (tests/propertycap.py, docs/testing.md "Property tests")
test: export FLEETQUAL_PROPERTY_EXAMPLES ?= 100
test:
	rm -rf $(STREAMS) && mkdir -p $(STREAMS)
	$(MAKE) -j8 --output-sync=target stream-vm stream-checks $(LONG_ONLY_STREAMS) stream-c stream-fleet2 stream-unit stream-rest; rc=$$?; \
	python3 tests/suitecost.py report $(STREAMS) || rc=1; \
	$(VENV)/python tests/junit_summary.py $(LONG_ONLY_XML) $(STREAMS)/fleet2.xml $(STREAMS)/kernel.xml $(STREAMS)/unit.xml $(STREAMS)/rest.xml \
	    $(STREAMS)/vm.xml || rc=1; \
	[ $$rc -eq 0 ] && echo "make test: all suites passed"; exit $$rc

# The streams of the long suite only: the distro tests' chroots (minutes of debootstrap; every
# test that runs a host in one is long) and the fleet stream whose tests wait on detached jobs
# (every fleet test that runs a playbook over SSH is long: 600-700 CPU-s together).
LONG_ONLY_STREAMS = $(if $(findstring long or,$(SUITE)),stream-chroots stream-fleet)
LONG_ONLY_XML = $(if $(findstring long or,$(SUITE)),$(STREAMS)/fleet.xml)

# The long suite: the same streams with every test, the long ones too (docs/testing.md,
# "The long suite"; tens of minutes more on 2 cores).
.PHONY: test-long
test-long:
	scripts/setup.sh --long
	$(MAKE) test SUITE="long or not long" FLEETQUAL_PROPERTY_EXAMPLES=full

COST := python3 tests/suitecost.py run
STREAM_vm := test-vm
STREAM_fleet := test-fleet
STREAM_fleet2 := test-fleet2
STREAM_unit := test-unit
STREAM_rest := test-rest
STREAM_checks := checks
STREAM_c := test-c
STREAM_chroots := fleet-chroots
# The VM stream, the static checks and the C tests start at once: the guest image's build
# (debootstrap, minutes on a fresh machine) and the BMC lab overlap them; the fleet and the
# other pytest tests wait only for the benchmark's build (they use roles/iobench/files/src/iobench,
# and their session fixtures' own `make iobench` must find it up to date, not build it at
# once in four processes). They waited for the whole C tests, once: 150 s of a loaded
# machine before the unit stream, the run's longest, could start.
stream-fleet stream-fleet2 stream-unit stream-rest: iobench-build
.PHONY: iobench-build
iobench-build:
	$(MAKE) -C $(SRC) iobench
# a static pattern rule: make applies no implicit rule to a .PHONY target
# Each stream's share of the CPU when all compete (cgroup v1 cpu.shares; tests/suitecost.py
# share_group): the VM tier, the critical path, four guests' worth; the static checks, which
# wait on nothing, half of one. Whatever runs inside a stream (guests at nice -5) weighs in
# that stream only, and the kernel's threads (a loop device's worker) are not starved by it.
SHARES_vm := 4096
SHARES_fleet := 1024
SHARES_fleet2 := 1024
SHARES_unit := 1024
SHARES_rest := 1024
SHARES_c := 1024
SHARES_checks := 512
SHARES_chroots := 512
stream-vm stream-fleet stream-fleet2 stream-unit stream-rest stream-checks stream-c stream-chroots: stream-%:
	FLEETQUAL_COST_TESTS=$(STREAMS)/$*.tests $(COST) $* --cpu-shares $(SHARES_$*) --out $(STREAMS)/$*.cost.json -- \
	    $(MAKE) --no-print-directory $(STREAM_$*)

test-c:
	$(MAKE) -C $(SRC) test

# Every pytest test in one process (a developer's run; `make test` runs the same tests as
# the streams below).
test-py:
	$(PYTEST) tests

# The fleet tests in two streams (each its own session of loopback hosts): the detached-job,
# array, killed-device, secrets and interrupt modules, mostly waiting on jobs that run for minutes; and
# the others, then every other test that provokes kernel I/O errors (marker kernel_errors: the
# kernel rate-limits its "I/O error, dev ..." lines machine-wide, so two such tests at once
# could hide each other's lines; the fleet's own such tests are in this stream too).
FLEET_WAITS := tests/fleet/test_fleet_detached.py tests/fleet/test_fleet_array.py \
	tests/fleet/test_fleet_killed_device.py tests/fleet/test_fleet_secrets.py tests/fleet/test_fleet_interrupt.py
test-fleet:
	FLEETQUAL_LOOP_RANGE=1000-1049 $(PYTEST) --basetemp=$(STREAMS)/fleet-tmp --junitxml=$(STREAMS)/fleet.xml -m "$(SUITE)" $(FLEET_WAITS)

# The chroots of the other Debian releases the distro tests run hosts in (tests/fleet/chroots.py):
# built from the start, beside the C tests and the first fleet tests, on a machine that lacks
# them (minutes of debootstrap; in the fleet2 stream's first distro test they held its 21 minutes
# up by five); the distro tests, last in their stream, wait for them on each release's lock.
fleet-chroots:
	$(VENV)/python tests/fleet/chroots.py build

test-fleet2:
	FLEETQUAL_LOOP_RANGE=1050-1099 $(PYTEST) --basetemp=$(STREAMS)/fleet2-tmp --junitxml=$(STREAMS)/fleet2.xml -m "$(SUITE)" tests/fleet \
	    $(addprefix --ignore=,$(FLEET_WAITS)); rc=$$?; \
	FLEETQUAL_LOOP_RANGE=1100-1199 $(PYTEST) --basetemp=$(STREAMS)/kernel-tmp --junitxml=$(STREAMS)/kernel.xml -m "kernel_errors and ($(SUITE))" tests \
	    --ignore=tests/fleet --ignore=$(VM_TESTS) || { e=$$?; [ $$e -eq 5 ] || rc=1; }; exit $$rc

# Every other pytest test, in two streams: the unit tests, and the benchmark's, integration,
# browser and packaging tests. Each spends most of its wall waiting on subprocesses, so once
# the VM tier and the checks have ended the two use the two cores one stream left half idle.
test-unit:
	FLEETQUAL_LOOP_RANGE=1200-1249 $(PYTEST) --basetemp=$(STREAMS)/unit-tmp --junitxml=$(STREAMS)/unit.xml -m "not kernel_errors and ($(SUITE))" tests/unit

test-rest:
	FLEETQUAL_LOOP_RANGE=1250-1299 $(PYTEST) --basetemp=$(STREAMS)/rest-tmp --junitxml=$(STREAMS)/rest.xml -m "not kernel_errors and ($(SUITE))" tests \
	    --ignore=tests/unit --ignore=tests/fleet --ignore=$(VM_TESTS) --ignore=$(BMC_TESTS)

# The VM tier (tests/vm, docs/testing.md "The VM tier"): Debian 12 guests under QEMU, in a
# pytest process of its own (its guests boot while its first tests are collected). The BMC
# lab's tests (tests/bmc) run first in it, while the guests boot: the VM stream finished five
# minutes before the others, the rest stream last.
VM_TESTS := tests/vm
BMC_TESTS := tests/bmc
.PHONY: test-vm
test-vm:
	mkdir -p $(STREAMS)
	FLEETQUAL_LOOP_RANGE=1300-1399 $(PYTEST) --basetemp=$(STREAMS)/vm-tmp --junitxml=$(STREAMS)/vm.xml -m "$(SUITE)" $(BMC_TESTS) $(VM_TESTS)

# The static checks, one after the other; the molecule scenario (it qualifies localhost, as
# tests/integration's quick run does) in the long suite only.
checks:
	$(MAKE) lint
	$(MAKE) docs-check
	$(MAKE) changelog-lint
	$(MAKE) docs-lint
	$(MAKE) galaxy-import
	$(MAKE) sanity
	$(if $(findstring long or,$(SUITE)),$(MAKE) molecule,@echo "molecule: in the long suite (make test-long)")

lint:
	$(VENV)/ansible-lint --profile production --offline

docs-check:
	$(VENV)/python tests/check_docs.py

# The changelog fragments and config (changelogs/) are valid for antsibull-changelog.
changelog-lint:
	$(PKGVENV)/antsibull-changelog lint

# Every plugin's and role's documentation is valid for the Ansible docsite (antsibull-docs).
docs-lint:
	PATH=$(PKGVENV):$$PATH $(PKGVENV)/antsibull-docs lint-collection-docs --plugin-docs .

galaxy:
	rm -rf build/galaxy && mkdir -p build/galaxy
	$(VENV)/ansible-galaxy collection build --output-path build/galaxy --force .
	$(VENV)/ansible-galaxy collection install --force -p build/galaxy/installed build/galaxy/fleetqual-storage-*.tar.gz
	ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/build/galaxy/installed $(VENV)/ansible-playbook --syntax-check fleetqual.storage.qualify

# galaxy-importer on the tarball `make galaxy` built, as Galaxy imports it (tests/packaging).
galaxy-import: galaxy
	$(PKGVENV)/python tests/packaging/galaxy_import.py build/galaxy/fleetqual-storage-*.tar.gz

# The same, and galaxy.yml must name the real repository (Galaxy refuses an upload without).
galaxy-import-release: galaxy
	$(PKGVENV)/python tests/packaging/galaxy_import.py --require-repository build/galaxy/fleetqual-storage-*.tar.gz

# ansible-test sanity --python 3.11 on a copy under build/ansible-test (docs/sanity.md).
# ansible-test sanity on what the collection ships (galaxy.yml's build_ignore leaves out the
# tests, scripts, bench/ and molecule/: they are not in the artifact Galaxy checks), then
# pycodestyle on those (pylint on them cost 40 CPU-s of the suite's 1,200).
UNSHIPPED_CODE := tests/ scripts/ bench/ molecule/
sanity:
	scripts/ansible-test-sanity.sh $(addprefix --exclude ,$(UNSHIPPED_CODE))
	scripts/ansible-test-sanity.sh --test pep8 $(UNSHIPPED_CODE)

molecule:
	FLEETQUAL_LOOP_RANGE=1400-1499 $(VENV)/molecule test -s default

qualify:
	scripts/qualify-localhost.sh

clean:
	$(MAKE) -C $(SRC) clean
	rm -rf build
