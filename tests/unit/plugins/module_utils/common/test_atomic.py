# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/common/atomic.py, the one atomic file writer: a reader sees the old
content or the new one, the mode is the one asked for, and a failed write leaves neither
a half-written file nor a temporary file behind."""
import json
import os
import stat

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.common.atomic import write_atomic, write_json_atomic


def test_text_and_pieces_replace_the_file_with_the_mode_asked(tmp_path):
    path = str(tmp_path / "sub" / "fleet.json")
    assert write_atomic(path, "old\n") == path
    inode = os.stat(path).st_ino
    write_atomic(path, iter(["a", "b", "\n"]), mode=0o600)
    with open(path, encoding="utf-8") as f:
        assert f.read() == "ab\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.stat(path).st_ino != inode          # renamed into place, not rewritten in place
    assert sorted(os.listdir(tmp_path / "sub")) == ["fleet.json"]


def test_json_with_fsync(tmp_path):
    path = str(tmp_path / "status.json")
    write_json_atomic(path, {"state": "running", "n": 3}, fsync=True)
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == {"state": "running", "n": 3}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "report.md")
    write_atomic(path, "complete\n")

    def pieces():
        yield "half"
        raise RuntimeError("renderer failed")

    with pytest.raises(RuntimeError):
        write_atomic(path, pieces())
    with open(path, encoding="utf-8") as f:
        assert f.read() == "complete\n"
    assert os.listdir(tmp_path) == ["report.md"]
    with pytest.raises(TypeError):
        write_json_atomic(path, {"not json": object()})
    assert os.listdir(tmp_path) == ["report.md"]
