"""plugins/filter/<name>.py over plugins/plugin_utils/filters/table.py: wiring through Ansible's templar, docs, and one
ad-hoc run."""
import importlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
import unitpaths

ROOT = unitpaths.ROOT
COLLECTIONS = os.path.join(ROOT, "build", "collections")
FIX = os.path.join(ROOT, "tests", "unit", "fixtures", "controller")
BIN = os.path.dirname(sys.executable)
FILTERS = ["plan", "plan_summary", "largest_working_set", "required_space", "expected_duration_s", "iobench_args",
           "validate_profile", "validate_rules", "validate_inputs", "workload_metrics", "workload_record", "judge",
           "first_failing_rule", "human_size", "diagnostics", "host_prometheus", "validate_arrays",
           "durability_plan", "durability_verdict"]


def load(name):
    with open(os.path.join(FIX, name + ".json")) as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def profiles():
    with open(os.path.join(ROOT, "roles", "qualify", "defaults", "main", "profiles.yml")) as fh:
        return yaml.safe_load(fh)["fleetqual_profiles"]


@pytest.fixture(scope="module")
def render():
    """A templar that resolves fleetqual.storage.* filters.

    conftest.py imports the collection as a plain namespace package; Ansible's collection
    finder must own ``ansible_collections`` to load plugins, so install it for this module
    only and put the previous state back afterwards (other test modules keep working).
    """
    from ansible.utils.collection_loader import AnsibleCollectionConfig
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    ours = AnsibleCollectionConfig.collection_finder is None
    saved = {}
    if ours:
        saved = {k: sys.modules.pop(k) for k in list(sys.modules)
                 if k == "ansible_collections" or k.startswith("ansible_collections.")}
        init_plugin_loader([COLLECTIONS])

    def _render(expr, **variables):
        return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expr))
    yield _render
    if ours:
        _AnsibleCollectionFinder._remove()
        for k in [k for k in sys.modules if k == "ansible_collections" or k.startswith("ansible_collections.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_filter_module_exports_every_documented_filter():
    """One plugin file per filter (Galaxy lists filters by file), its docs inside, its function
    the one in plugin_utils/filters/table.py; no other file under plugins/filter."""
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.filters.table import FILTERS as TABLE
    assert sorted(TABLE) == sorted(FILTERS)
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "plugins", "filter")) if f != "__pycache__")
    assert files == sorted(name + ".py" for name in FILTERS)
    for name in FILTERS:
        plugin = importlib.import_module("ansible_collections.fleetqual.storage.plugins.filter." + name)
        assert plugin.FilterModule().filters() == {name: TABLE[name]}
        doc = {key: yaml.safe_load(getattr(plugin, key)) for key in ("DOCUMENTATION", "RETURN")}
        assert doc["DOCUMENTATION"]["name"] == name
        assert doc["DOCUMENTATION"]["short_description"] and plugin.EXAMPLES.strip() and doc["RETURN"]["_value"]
        assert yaml.safe_load(plugin.EXAMPLES)


def test_plan_filters_through_templar(render, profiles):
    v = dict(fleetqual_profiles=profiles, fleetqual_profile="standard", fleetqual_cache_size="512M",
             ansible_memtotal_mb=4096, fleetqual_matrix=[], fleetqual_workload_overrides={})
    plan = render("{{ fleetqual_profile | fleetqual.storage.plan(cache_size=fleetqual_cache_size, "
                  "mem_total_mb=ansible_memtotal_mb, overrides=fleetqual_workload_overrides, "
                  "profiles=fleetqual_profiles, matrix=fleetqual_matrix) }}", **v)
    assert [w["id"] for w in plan][:2] == ["cache-rndrd-t1", "cache-rndrd-t64"]
    assert plan[0]["total_size"] == 256 * 1024 ** 2
    v["p"] = plan
    assert render("{{ p | fleetqual.storage.largest_working_set }}", **v) == 2 * 1024 ** 3
    assert render("{{ p | fleetqual.storage.largest_working_set | fleetqual.storage.human_size }}", **v) == "2.0 GiB"
    # 9 classic workloads + the serial_probe pair, 65 s each
    assert render("{{ p | fleetqual.storage.expected_duration_s }}", **v) == 715
    lines = render("{{ p | fleetqual.storage.plan_summary }}", **v)
    assert len(lines) == 12 and lines[0].startswith("[1/11] cache-rndrd-t1: rndrd, 1 thread")
    args = render("{{ p[8] | fleetqual.storage.iobench_args }}", **v)
    assert args["fsync_mode"] == "fdatasync" and "id" not in args


def test_validation_filters_through_templar(render, profiles):
    errs = render("{{ fleetqual_profiles | fleetqual.storage.validate_profile('stnadard') }}",
                  fleetqual_profiles=profiles)
    assert errs == ["fleetqual_profile: unknown profile 'stnadard'; known: burnin, compliance, durability, quick, san, standard"]
    errs = render("{{ fleetqual_profiles | fleetqual.storage.validate_profile('quick', matrix=m) }}",
                  fleetqual_profiles=profiles, m=[{"workload": "c", "mode": "rndrd", "working_set": "cache",
                                                   "threads": 0}])
    assert errs == ["fleetqual_matrix[0].threads: must be an integer between 1 and 1024, got 0"]
    errs = render("{{ t | fleetqual.storage.validate_rules }}", t=[{"min_iops": 1}, {"max_raed_p99_ms": 2}])
    assert errs[0].startswith("fleetqual_thresholds[1].max_raed_p99_ms: unknown key (did you mean max_read_p99_ms?)")
    assert render("{{ none | fleetqual.storage.validate_rules }}", none=None) == []


def test_judge_and_metrics_through_templar(render):
    recs = [load("vda_over_cache-rndrd-t8-slow"), load("nvme_log-seqwr-t1")]
    m = render("{{ r | fleetqual.storage.workload_metrics }}", r=recs[0])
    assert m["dev_aqu_sz"] == 7.9
    j = render("{{ w | fleetqual.storage.judge(t, expected_ids=ids) }}", w=recs,
               t=[{"workload": "over_cache", "max_read_p99_ms": 20}], ids=["over_cache-rndrd-t8", "log-seqwr-t1"])
    assert j["verdict"] == "FAIL"
    assert j["reasons"] == ["over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms "
                            "(device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, %util 99.6)"]
    assert render("{{ j | fleetqual.storage.first_failing_rule }}", j=j) == "max_read_p99_ms@over_cache"


def test_filter_errors_are_ansible_errors_with_the_messages(render):
    with pytest.raises(AnsibleError, match=r"fleetqual_matrix\[0\]: missing mode"):
        render("{{ [{'workload': 'c', 'total_size': '1M'}] | fleetqual.storage.plan }}")
    with pytest.raises(AnsibleError, match=r"fleetqual_thresholds\[0\]\.min_iops: must not be negative"):
        render("{{ [] | fleetqual.storage.judge([{'min_iops': -1}]) }}")


@pytest.mark.slow
def test_adhoc_debug_runs_the_judge_filter(tmp_path):
    """The wiring as a user sees it: ansible localhost -m debug with the collection path."""
    varsfile = tmp_path / "vars.json"
    varsfile.write_text(json.dumps({
        "records": [load("vda_over_cache-rndrd-t8-slow"), load("vda_cache-rndwr-t1-interrupted")],
        "fleetqual_thresholds": [{"workload": "over_cache", "max_read_p99_ms": 20}],
    }))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default")
    out = subprocess.run(
        [os.path.join(BIN, "ansible"), "localhost", "-m", "debug", "-e", "@%s" % varsfile, "-a",
         "msg={{ records | fleetqual.storage.judge(fleetqual_thresholds) }}"],
        env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path), check=False)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout[out.stdout.index("{"):])
    assert body["msg"]["verdict"] == "ERROR"
    assert body["msg"]["reasons"] == [
        "cache-rndwr-t1: run interrupted by SIGTERM after 12.3 s; partial results",
        "over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms (device vda: r/s 812, r_await 9.8 ms, aqu-sz 7.9, "
        "%util 99.6)"]


@pytest.mark.slow
def test_ansible_doc_renders_every_filter():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    out = subprocess.run([os.path.join(BIN, "ansible-doc"), "-t", "filter", "--json"]
                         + ["fleetqual.storage.%s" % n for n in FILTERS],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    docs = json.loads(out.stdout)
    assert sorted(docs) == sorted("fleetqual.storage.%s" % n for n in FILTERS)
    for name, doc in docs.items():
        assert doc["doc"]["short_description"], name
        assert doc["examples"], name


def test_role_expressions(render, profiles):
    """The expressions roles/qualify/tasks use, as written there."""
    v = dict(fleetqual_profiles=profiles, fleetqual_profile="quick", fleetqual_matrix=[], fleetqual_seed=42,
             fleetqual_cache_size="256M", ansible_facts={"memtotal_mb": 2048}, fleetqual_test_dir="/var/tmp/fleetqual",
             fleetqual_thresholds=[{"workload": "over_cache", "max_read_p99_ms": 20}])
    plan = render("{{ (fleetqual_matrix if fleetqual_matrix | length > 0 else "
                  "fleetqual_profiles[fleetqual_profile].matrix) | fleetqual.storage.plan("
                  "cache_size=fleetqual_cache_size, mem_total_mb=ansible_facts['memtotal_mb'] | default(0), "
                  "seed=fleetqual_seed) }}", **v)
    assert [w["id"] for w in plan] == ["cache-rndrd-t1", "over_cache-rndrd-t4", "over_cache-rndwr-t4", "log-seqwr-t1",
                                       "cache-rndwr-t1", "over_cache-rndwr-t1"]
    assert {w["seed"] for w in plan} == {42} and plan[0]["time"] == 4
    v["_fleetqual_plan"] = plan
    assert render("{{ _fleetqual_plan | map(attribute='dataset') | unique | list }}", **v) == [
        "cache-1x16M", "over_cache-16x4M", "log-1x16M"]
    problems = render("{{ {'fleetqual_profile': fleetqual_profile, 'fleetqual_profiles': fleetqual_profiles, "
                      "'fleetqual_matrix': fleetqual_matrix, 'fleetqual_cache_size': fleetqual_cache_size, "
                      "'fleetqual_test_dir': fleetqual_test_dir, 'fleetqual_thresholds': fleetqual_thresholds} "
                      "| fleetqual.storage.validate_inputs }}", **v)
    assert problems == []
    slow = load("vda_over_cache-rndrd-t8-slow")
    wl = dict(plan[1], id="over_cache-rndrd-t8")
    rec = render("{{ _fleetqual_wl | fleetqual.storage.workload_record(_fleetqual_result) }}",
                 _fleetqual_wl=wl, _fleetqual_result=slow["result"])
    assert rec["metrics"]["dev_r_s"] == 812.4
    j = render("{{ _fleetqual_records | default([]) | fleetqual.storage.judge(fleetqual_thresholds, "
               "expected_ids=_fleetqual_plan | default([]) | map(attribute='id') | list, "
               "error=_fleetqual_error | default(none)) }}", _fleetqual_records=[rec], **v)
    assert j["verdict"] == "ERROR"  # five planned workloads have no record
    assert j["reasons"][-1].startswith("over_cache-rndrd-t8: read p99 34.2 ms > limit 20 ms")


def test_validate_inputs_refuses_a_rule_that_matches_no_workload(render, profiles):
    """The validation play's expression (roles/qualify/tasks/validate.yml), with a typo in a rule's selector."""
    v = dict(fleetqual_profiles=profiles, fleetqual_profile="quick", fleetqual_matrix=[],
             fleetqual_workload_overrides={}, fleetqual_thresholds=[{"workload": "overcache", "min_iops": 1000000000}])
    problems = render("{{ {'fleetqual_profile': fleetqual_profile, 'fleetqual_profiles': fleetqual_profiles, "
                      "'fleetqual_matrix': fleetqual_matrix, 'fleetqual_workload_overrides': "
                      "fleetqual_workload_overrides, 'fleetqual_thresholds': fleetqual_thresholds} "
                      "| fleetqual.storage.validate_inputs }}", **v)
    assert len(problems) == 1 and "did you mean over_cache?" in problems[0]


def test_targets_and_drives_through_templar(render, profiles):
    """The plan filter expands over fleetqual_targets; the judge takes the drives."""
    v = dict(fleetqual_profiles=profiles, fleetqual_profile="quick", fleetqual_test_dir="/var/tmp/fleetqual",
             fleetqual_targets=[{"path": "/data1/fq"}, {"device": "/dev/sdb", "destroy_data": True, "size": "1G"}])
    expr = ("{{ fleetqual_profile | fleetqual.storage.plan(profiles=fleetqual_profiles, targets=fleetqual_targets, "
            "test_dir=fleetqual_test_dir) }}")
    plan = render(expr, **v)
    assert [w["target"] for w in plan] == ["fq"] * 6 + ["sdb"] * 6
    assert plan[6]["key"] == plan[6]["id"] + "@sdb" and plan[6]["device_size"] == plan[0]["total_size"]
    v["fleetqual_targets"] = []
    assert all("target" not in w for w in render(expr, **v))
    v["fleetqual_targets"] = [{"device": "/dev/sdb", "destroy_data": "yes"}]
    with pytest.raises(AnsibleError, match=r"fleetqual_targets\[0\].destroy_data: a raw device target destroys"):
        render(expr, **v)
    drives = [{"name": "sda", "model": "M", "serial": "S1",
               "health": {"collected": True, "tool": "smartctl", "passed": False, "problems": ["SMART FAILED"]}}]
    r = render("{{ [] | fleetqual.storage.judge([], drives=d) }}", d=drives)
    # no workload results is an ERROR of its own; the failing drive is reported beside it
    assert r["verdict"] == "ERROR" and r["reasons"] == [
        "no workload results for this host", "drive sda (M, serial S1): the drive's own health verdict is FAILED "
        "(SMART FAILED)"]
