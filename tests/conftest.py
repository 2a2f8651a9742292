"""Shared pytest setup: make the repository importable as ansible_collections.fleetqual.storage.

The collection lives at the repository root. Ansible (and Python imports in unit tests)
expect it at <path>/ansible_collections/fleetqual/storage, so we expose the checkout
through a symlink under build/collections and put that path first on sys.path. The tests'
own shared helpers beside this file (proctree.py, suitecost.py, costplugin.py, propertycap.py) are
importable by every test directory. Under `make test` it also records what each test costs
(costplugin.py) and caps the examples of each property test (propertycap.py).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "fleetqual", "storage")


def _ensure_link():
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    if os.path.islink(LINK) and os.readlink(LINK) == ROOT:
        return
    if os.path.lexists(LINK):
        os.unlink(LINK)
    os.symlink(ROOT, LINK)


_ensure_link()
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.append(TESTS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS)


# What each test costs under `make test` (tests/costplugin.py): its hooks, found here by name.
from costplugin import pytest_runtest_protocol, pytest_sessionfinish  # noqa: E402,F401  pylint: disable=unused-import
# How many examples a property test runs under `make test` (tests/propertycap.py).
from propertycap import pytest_collection_modifyitems  # noqa: E402,F401  pylint: disable=unused-import
