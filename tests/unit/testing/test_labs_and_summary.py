"""The test run's own honesty: a lab that cannot run fails under `make test` (tests/labs.py)
and skips otherwise, and the closing summary (tests/junit_summary.py) names every skipped
test with its reason, counted from real pytest JUnit files."""
import os
import subprocess
import sys

import pytest

import junit_summary
import labs

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LAB_TEST = '''
import labs

def test_needs_a_lab():
    labs.unavailable("the lab needs tgtd")
'''


def _run_pytest(tmp_path, require):
    (tmp_path / "test_lab.py").write_text(LAB_TEST)
    xml = tmp_path / "out.xml"
    env = dict(os.environ, PYTHONPATH=TESTS)
    env.pop(labs.REQUIRE_ENV, None)
    if require:
        env[labs.REQUIRE_ENV] = "1"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "-c", os.devnull, "--junitxml", str(xml), str(tmp_path / "test_lab.py")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, env=env,
                       cwd=str(tmp_path))
    return p, xml


@pytest.mark.parametrize("value, expected", [("1", True), ("0", False), ("", False), (None, False)])
def test_labs_are_required_only_when_make_test_says_so(value, expected):
    environ = {} if value is None else {labs.REQUIRE_ENV: value}
    assert labs.required(environ) is expected


def test_a_missing_lab_skips_alone_and_fails_under_make_test(tmp_path, capsys):
    (tmp_path / "alone").mkdir()
    alone, xml_alone = _run_pytest(tmp_path / "alone", False)
    assert alone.returncode == 0, alone.stdout
    assert junit_summary.counts(str(xml_alone)) == (1, 0, 1)
    assert junit_summary.skips(str(xml_alone)) == ["test_lab::test_needs_a_lab: the lab needs tgtd"]
    assert junit_summary.main([str(xml_alone)]) == 0
    out = capsys.readouterr().out
    assert "skipped: test_lab::test_needs_a_lab: the lab needs tgtd" in out
    assert "pytest: 0 passed, 0 failed, 1 skipped" in out

    (tmp_path / "required").mkdir()
    required, xml_required = _run_pytest(tmp_path / "required", True)
    assert required.returncode == 1, required.stdout
    assert "the lab needs tgtd (make test requires every lab" in required.stdout
    assert junit_summary.counts(str(xml_required)) == (1, 1, 0)
    assert junit_summary.main([str(xml_required)]) == 1


def test_a_stream_without_its_file_counts_as_a_failure(tmp_path, capsys):
    assert junit_summary.main([str(tmp_path / "missing.xml")]) == 1
    assert "pytest: 0 passed, 1 failed, 0 skipped" in capsys.readouterr().out
