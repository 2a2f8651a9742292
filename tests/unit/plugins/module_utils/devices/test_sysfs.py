# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/devices/sysfs.py: the one sysfs reader of the target side, on a
fake tree under a temporary directory, and the check that disks.py, drives.py and
blockdev.py read sysfs only through it."""
import ast
import os
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.devices import sysfs

ROOT = unitpaths.ROOT
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")


def fake_disk(root, name="sdb", devnum="8:16", parts=(("sdb1", "8:17"),), holders=("dm-0",)):
    node = root / "devices" / "pci0000:00" / "block" / name
    node.mkdir(parents=True)
    (node / "size").write_text("2048\n")
    (node / "holders").mkdir()
    for h in holders:
        (node / "holders" / h).mkdir()
    for pname, pnum in parts:
        (node / pname).mkdir()
        (node / pname / "partition").write_text("1\n")
        (root / "dev" / "block").mkdir(parents=True, exist_ok=True)
        os.symlink(node / pname, root / "dev" / "block" / pnum)
    (node / "queue").mkdir()          # a subdirectory that is not a partition
    (root / "dev" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(node, root / "dev" / "block" / devnum)
    (root / "class" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(node, root / "class" / "block" / name)
    return node


def test_reads_text_ints_and_defaults(tmp_path):
    (tmp_path / "model").write_bytes(b"  SAMSUNG \xff\n")
    (tmp_path / "size").write_text("1953525168\n")
    (tmp_path / "ro").write_text("x\n")
    assert sysfs.read_text(str(tmp_path / "model")) == "SAMSUNG \ufffd"
    assert sysfs.read_text(str(tmp_path / "missing")) is None
    assert sysfs.read_text(str(tmp_path / "missing"), "") == ""
    assert sysfs.read_int(str(tmp_path / "size")) == 1953525168
    assert sysfs.read_int(str(tmp_path / "ro")) is None
    assert sysfs.read_int(str(tmp_path / "missing"), 0) == 0
    assert sysfs.read_bytes(str(tmp_path / "model")) == b"  SAMSUNG \xff\n"
    assert sysfs.listdir(str(tmp_path / "missing")) == []


def test_nodes_partitions_and_holders(tmp_path):
    node = fake_disk(tmp_path)
    root = str(tmp_path)
    assert sysfs.node_for_devnum(8, 16, root) == str(node)
    assert sysfs.node_for_rdev(os.makedev(8, 17), root) == str(node / "sdb1")
    assert sysfs.node_for_devnum(8, 32, root) is None
    assert sysfs.node_for_name("sdb", root) == str(node)
    assert sysfs.node_for_name("sdz", root) is None
    assert sysfs.partitions(str(node)) == ["sdb1"]
    assert sysfs.is_partition(str(node / "sdb1")) and not sysfs.is_partition(str(node))
    assert sysfs.holders(str(node)) == ["dm-0"]
    assert sysfs.slaves(str(node)) == []


def opens_files(path):
    """Names of the functions of a module that call open() themselves."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
                    out.append(fn.name)
    return out


def test_the_sysfs_readers_read_through_sysfs_py():
    for name in ("devices/disks.py", "devices/drives.py", "devices/blockdev.py", "devices/inventory.py"):
        assert opens_files(os.path.join(MODULE_UTILS, name)) == [], name
    # the check sees a reader of its own
    assert opens_files(os.path.join(MODULE_UTILS, "devices", "sysfs.py")) == ["read_bytes"]
