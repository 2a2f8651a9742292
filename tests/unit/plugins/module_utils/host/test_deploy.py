"""Installing the controller's build on a host (module_utils/host/deploy.py): atomic, checked,
and safe when two runs deploy to the same directory at once."""
import hashlib
import os
import threading

import pytest

from ansible_collections.fleetqual.storage.plugins.module_utils.host import deploy


def _build(tmp_path, content=b"\x7fELF iobench build"):
    src = tmp_path / "iobench-static"
    src.write_bytes(content)
    return str(src), hashlib.sha256(content).hexdigest()


def test_a_directory_another_run_created_meanwhile_is_used(tmp_path, monkeypatch):
    """The directory did not exist when this install looked, and did when it created it (the
    other run's install got there between the two): installed all the same."""
    src, want = _build(tmp_path)
    binary = tmp_path / "bin" / "iobench"
    os.makedirs(binary.parent)
    looked = []
    real = os.path.isdir

    def isdir_before_the_other_run(path):
        looked.append(path)
        return False if len(looked) == 1 else real(path)
    monkeypatch.setattr(deploy.os.path, "isdir", isdir_before_the_other_run)
    deploy.install(src, str(binary), want)
    assert deploy.sha256_file(str(binary)) == want
    assert os.stat(binary).st_mode & 0o777 == 0o755


def test_installs_at_once_into_one_directory_leave_the_build_and_nothing_else(tmp_path):
    src, want = _build(tmp_path, os.urandom(1 << 20))
    binary = str(tmp_path / "bin" / "iobench")
    errors = []

    def one():
        try:
            deploy.install(src, binary, want)
        except deploy.DeployError as exc:       # pragma: no cover - the failure the test is for
            errors.append(exc)

    threads = [threading.Thread(target=one) for _n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert deploy.sha256_file(binary) == want
    assert os.listdir(os.path.dirname(binary)) == ["iobench"]


def test_a_copy_that_is_not_the_build_is_refused_and_nothing_installed(tmp_path):
    src, want = _build(tmp_path)
    binary = tmp_path / "bin" / "iobench"
    with pytest.raises(deploy.DeployError, match="the transfer is corrupt"):
        deploy.install(src, str(binary), "0" * 64)
    assert not binary.exists()
