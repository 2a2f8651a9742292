"""What the suite costs (tests/suitecost.py): a run's CPU counts the processes its command
left to init (a detached job, a daemon), which a process's own rusage cannot; the exit code
passes through; a process left running is named, not killed; the per-test records that
tests/conftest.py writes under a run reach the report; the report ranks what it is given."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import suitecost
from proctree import alive, wait_gone

HERE = os.path.dirname(os.path.abspath(suitecost.__file__))

# a grandchild that its parent leaves to init, spends CPU, writes what its own clock says it
# spent, and exits
ORPHAN = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:
        if os.fork() == 0:
            t = time.process_time()
            n = 0
            while time.process_time() - t < 0.6:
                n += 1
            own = os.times()
            with open(sys.argv[1], "w") as fh:
                fh.write(str(own.user + own.system))
            os._exit(0)
        os._exit(0)
    os.wait()
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    time.sleep(0.2)
    sys.exit(int(sys.argv[2]))
""")


def need_group():
    probe = suitecost.make_group("probe")
    if probe is None:
        pytest.skip("no control group can be made here (needs root and a cgroup filesystem)")
    os.rmdir(probe)


@pytest.mark.parametrize("rc", [0, 3])
def test_a_run_counts_the_cpu_of_a_process_left_to_init_and_passes_the_exit_code_on(tmp_path, rc):
    need_group()
    own, out = tmp_path / "own", tmp_path / "x.cost.json"
    assert suitecost.run("orphan", str(out), [sys.executable, "-c", ORPHAN, str(own), str(rc)]) == rc
    rec = json.loads(out.read_text())
    assert rec["rc"] == rc and rec["method"].startswith("cgroup"), rec
    # the grandchild's own clock is a lower bound of what its group was charged
    assert rec["cpu_s"] + 0.1 >= float(own.read_text()) > 0, (rec, own.read_text())
    assert rec["left_running"] == [] and not os.path.exists(rec["group"])


def test_a_process_left_running_is_named_and_left_alone(tmp_path):
    need_group()
    out, pidfile = tmp_path / "x.cost.json", tmp_path / "pid"
    code = ("import subprocess, sys; p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
            "open(sys.argv[1], 'w').write(str(p.pid))")
    assert suitecost.run("leak", str(out), [sys.executable, "-c", code, str(pidfile)]) == 0
    pid = int(pidfile.read_text())
    try:
        rec = json.loads(out.read_text())
        assert rec["left_running"] == [pid] and alive(pid), rec
    finally:
        os.kill(pid, 9)
        assert wait_gone(pid)
    assert suitecost.remove_group(rec["group"]) == [] and not os.path.exists(rec["group"])


def test_the_tests_of_a_stream_reach_the_report(tmp_path):
    need_group()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_two.py").write_text(textwrap.dedent("""
        import subprocess, sys
        def test_idle():
            assert True
        def test_busy(tmp_path):
            subprocess.run([sys.executable, "-c", %r, str(tmp_path / "own"), "0"], check=True)
            open(%r, "w").write((tmp_path / "own").read_text())
    """ % (ORPHAN, str(tmp_path / "busy-own"))))
    streams = tmp_path / "streams"
    env = dict(os.environ, FLEETQUAL_COST_TESTS=str(streams / "demo.tests"))
    env.pop(suitecost.ENV_GROUP, None)
    argv = [sys.executable, os.path.join(HERE, "suitecost.py"), "run", "demo", "--out", str(streams / "demo.cost.json"),
            "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path / "t"),
            "--confcutdir", str(tmp_path), "-c", os.devnull, "-p", "costplugin", str(tmp_path / "t")]
    env["PYTHONPATH"] = os.pathsep.join([HERE, env.get("PYTHONPATH", "")])
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    r = subprocess.run([sys.executable, os.path.join(HERE, "suitecost.py"), "report", str(streams)], env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    rec = json.loads((streams / "cost.json").read_text())
    by_id = {t["nodeid"].split("::")[-1]: t for t in rec["costliest"]}
    assert set(by_id) == {"test_idle", "test_busy"} and rec["tests"] == 2, rec
    assert by_id["test_busy"]["cpu_s"] + 0.1 >= float((tmp_path / "busy-own").read_text()), rec
    assert [s["name"] for s in rec["streams"]] == ["demo"] and rec["streams"][0]["cpu_s"] >= by_id["test_busy"]["cpu_s"]
    assert rec["costliest"][0]["nodeid"].endswith("test_busy") and "test_busy" in r.stdout, r.stdout
    # the machine's speed then, and the work in its units
    ref = rec["reference"]
    assert ref["cpu_s"] > 0 and rec["total"]["reference_units"] == round(rec["total"]["cpu_s"] / ref["cpu_s"]), rec
    assert "machine speed at the end: %s in %.3f CPU-s" % (ref["work"], ref["cpu_s"]) in r.stdout, r.stdout


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["vm", "fleet", "rest"]), st.floats(0, 1000, allow_nan=False)),
                max_size=40),
       st.integers(1, 20))
def test_the_report_ranks_the_costliest_tests(tests, top):
    recs = [{"nodeid": "t%d" % i, "cpu_s": cpu, "wall_s": 1.0, "stream": s} for i, (s, cpu) in enumerate(tests)]
    streams = [{"name": n, "wall_s": 1.0, "cpu_s": float(i)} for i, n in enumerate(["vm", "fleet", "rest"])]
    rec = suitecost.summarise(streams, recs, top=top)
    got = rec["costliest"]
    assert len(got) == min(top, len(recs)) and rec["tests"] == len(recs)
    assert [g["cpu_s"] for g in got] == sorted((r["cpu_s"] for r in recs), reverse=True)[:len(got)]
    assert rec["total"]["cpu_s"] == round(sum(s["cpu_s"] for s in streams), 1)
    assert [s["name"] for s in rec["streams"]] == ["rest", "fleet", "vm"]
    assert suitecost.render(rec).count("\n") == 3 + len(streams) + len(got)


def test_a_group_below_a_run_is_counted_in_it_and_removed_with_it(tmp_path):
    need_group()
    out, own = tmp_path / "x.cost.json", tmp_path / "own"
    # the command puts its own orphan in a group of its own below the run's (as a guest is)
    code = ("import os, subprocess, sys; sys.path.insert(0, %r); import suitecost; "
            "g = suitecost.make_group('sub', os.environ[suitecost.ENV_GROUP]); "
            "p = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], '0'], "
            "preexec_fn=lambda: suitecost.join(g, os.getpid())); p.wait()" % HERE)
    assert suitecost.run("nest", str(out), [sys.executable, "-c", code, ORPHAN, str(own)]) == 0
    rec = json.loads(out.read_text())
    assert rec["cpu_s"] + 0.1 >= float(own.read_text()) > 0, rec
    assert rec["left_running"] == [] and not os.path.exists(rec["group"]), rec


def test_a_run_with_a_share_runs_in_a_cpu_group_of_that_weight_removed_after(tmp_path):
    need_group()
    if suitecost.share_group("probe", 1024) is None:
        pytest.skip("no cgroup v1 cpu controller here (cgroup v2 alone: shares are left to the kernel)")
    os.rmdir(suitecost.share_group("probe", 1024))
    out, seen = tmp_path / "x.cost.json", tmp_path / "seen"
    code = ("import os, sys; g = os.environ[%r]; "
            "open(sys.argv[1], 'w').write(open(os.path.join(g, 'cpu.shares')).read().strip() + ' ' + "
            "str(str(os.getpid()) in open(os.path.join(g, 'cgroup.procs')).read().split()) + ' ' + g)"
            % suitecost.ENV_CPU)
    assert suitecost.run("share", str(out), [sys.executable, "-c", code, str(seen)], shares=3072) == 0
    shares, member, group = seen.read_text().split(" ", 2)
    assert (shares, member) == ("3072", "True"), seen.read_text()
    rec = json.loads(out.read_text())
    assert rec["cpu_shares"] == 3072 and rec["left_running"] == [] and not os.path.exists(group), rec
