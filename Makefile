# Developer entry points. scripts/setup.sh installs what these need.
VENV   := .venv/bin
SRC    := roles/iobench/files/src
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/build/collections
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: test test-c test-py lint docs-check galaxy molecule qualify clean

test: test-c test-py lint docs-check galaxy molecule
	@echo "make test: all suites passed"

test-c:
	$(MAKE) -C $(SRC) test

test-py:
	$(VENV)/pytest -q -p no:cacheprovider tests

lint:
	$(VENV)/ansible-lint --profile production --offline

docs-check:
	$(VENV)/python tests/check_docs.py

galaxy:
	rm -rf build/galaxy && mkdir -p build/galaxy
	$(VENV)/ansible-galaxy collection build --output-path build/galaxy --force .
	$(VENV)/ansible-galaxy collection install --force -p build/galaxy/installed build/galaxy/fleetqual-storage-*.tar.gz
	ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/build/galaxy/installed $(VENV)/ansible-playbook --syntax-check fleetqual.storage.qualify

molecule:
	$(VENV)/molecule test -s default

qualify:
	scripts/qualify-localhost.sh

clean:
	$(MAKE) -C $(SRC) clean
	rm -rf build
