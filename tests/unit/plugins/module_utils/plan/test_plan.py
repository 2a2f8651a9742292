"""module_utils/plan/profiles.py: profiles, sizing rule, custom matrix, ids, validation messages."""
import os

import pytest
import yaml
import unitpaths

from ansible_collections.fleetqual.storage.plugins.module_utils.plan import profiles as P
from ansible_collections.fleetqual.storage.plugins.module_utils.plan import summary as P_summary
from ansible_collections.fleetqual.storage.plugins.plugin_utils.validate import inputs as V

ROOT = unitpaths.ROOT
PROFILES_FILE = os.path.join(ROOT, "roles", "qualify", "defaults", "main", "profiles.yml")
MIB, GIB = 1024 ** 2, 1024 ** 3


@pytest.fixture(scope="module")
def profiles():
    with open(PROFILES_FILE) as fh:
        data = yaml.safe_load(fh)
    assert "fleetqual_profiles" in data     # beside it: fleetqual_profile_safety
    return data["fleetqual_profiles"]


def ids(p):
    return [w["id"] for w in p]


def check_shape(p):
    assert len(set(ids(p))) == len(p), "ids must be unique"
    assert [w["index"] for w in p] == list(range(1, len(p) + 1))
    assert all(w["of"] == len(p) for w in p)
    for w in p:
        # a search is bounded by its steps instead of a time
        bound = ("search_max", "search_step_time") if "search" in w else ("time",)
        for key in ("id", "workload", "mode", "threads", "file_num", "total_size", "block_size",
                    "direct", "warmup", "index", "of", "working_set", "sizing") + bound:
            assert key in w, (w["id"], key)
        assert isinstance(w["total_size"], int) and isinstance(w["block_size"], int)
        assert w["total_size"] % w["file_num"] == 0 or w["working_set"] == "explicit"


# --------------------------------------------------------------------------- shipped profiles

def test_profiles_file_has_the_six_profiles(profiles):
    assert set(profiles) == {"quick", "standard", "san", "compliance", "burnin", "durability"}
    # burnin's hours are fleetqual_burnin_time, templated by Ansible before the plan sees them
    assert profiles["burnin"]["burnin"] == {"hours": "{{ fleetqual_burnin_time }}"}
    templated = dict(profiles, burnin=dict(profiles["burnin"], burnin={"hours": 24}))
    for name in profiles:
        assert V.validate_profile(templated, name) == []


def test_quick_is_short_small_and_direct(profiles):
    p = P.plan("quick", "256M", 2048, profiles=profiles)
    check_shape(p)
    assert ids(p) == ["cache-rndrd-t1", "over_cache-rndrd-t4", "over_cache-rndwr-t4", "log-seqwr-t1",
                      "cache-rndwr-t1", "over_cache-rndwr-t1"]
    assert P_summary.expected_duration_s(p) <= 30
    assert P_summary.largest_working_set(p) <= 100 * MIB
    assert all(w["direct"] for w in p if w["workload"] != "log")
    log = p[3]
    assert (log["fsync_freq"], log["fsync_mode"], log["direct"]) == (1, "fdatasync", False)


def test_standard_matrix(profiles):
    p = P.plan("standard", "256M", 16000, profiles=profiles)
    check_shape(p)
    assert ids(p) == [
        "cache-rndrd-t1", "cache-rndrd-t64", "cache-rndwr-t1", "cache-rndwr-t64",
        "over_cache-rndrd-t1", "over_cache-rndrd-t64", "over_cache-rndwr-t1", "over_cache-rndwr-t64",
        "log-seqwr-t1", "wser-1file-t64", "wser-128files-t64"]
    for w in p[:8]:
        assert w["direct"] is True and w["time"] == 60 and w["warmup"] == 5 and w["block_size"] == 16384
    cache = p[0]
    assert (cache["file_num"], cache["total_size"]) == (1, 128 * MIB)
    over = p[4]
    # O_DIRECT: RAM (16000 MiB) does not matter, 4 x 256M
    assert (over["file_num"], over["total_size"]) == (128, 1 * GIB)
    assert P_summary.expected_duration_s(p) == 11 * 65
    # the write serialization probe: 64 threads on 1 file vs 128 files, same total size, no fsync
    one, many = p[9], p[10]
    assert (one["file_num"], many["file_num"]) == (1, 128)
    assert one["total_size"] == many["total_size"] == over["total_size"]
    assert one["threads"] == many["threads"] == 64 and one["fsync_freq"] == many["fsync_freq"] == 0
    assert one["direct"] and many["direct"] and one["mode"] == many["mode"] == "rndwr"


def test_san_adds_sweep_and_mixes_without_repeating_standard(profiles):
    std = ids(P.plan("standard", "1G", 8000, profiles=profiles))
    p = P.plan("san", "1G", 8000, profiles=profiles)
    check_shape(p)
    assert ids(p)[:11] == std
    assert ids(p)[11:] == ["over_cache-rndrd-t2", "over_cache-rndrd-t4", "over_cache-rndrd-t8",
                           "over_cache-rndrd-t16", "over_cache-rndrd-t32",
                           "ra-seqrd-buffered", "ra-seqrd-direct",
                           "mix-rndrw-t64-r90", "mix-rndrw-t64-r80", "mix-rndrw-t64-r50",
                           "search-rndrd", "db-pattern"]
    # the read-ahead pair: one pass over the same file, buffered and O_DIRECT
    buf, dio = p[16], p[17]
    assert buf["dataset"] == dio["dataset"] and (buf["direct"], dio["direct"]) == (False, True)
    assert buf["requests"] * buf["block_size"] == buf["total_size"] and buf["warmup"] == 0
    sweep = sorted(w["threads"] for w in p if w["workload"] == "over_cache" and w["mode"] == "rndrd")
    assert sweep == [1, 2, 4, 8, 16, 32, 64]
    assert [w["rw_ratio"] for w in p if w["workload"] == "mix"] == [9, 4, 1]


def test_compliance_is_short_and_light(profiles):
    """The production-safe profile; standard's working sets (by working set and
    workload), 20 s each, at most 4 threads, no 64-thread writes."""
    std = {(w["workload"], w["mode"]): w for w in P.plan("standard", "256M", 8000, profiles=profiles)}
    p = P.plan("compliance", "256M", 8000, profiles=profiles)
    assert p and {(w["workload"], w["mode"]) for w in p} <= set(std)
    assert {w["time"] for w in p} == {20}
    assert max(w["threads"] for w in p) <= 4
    sized = [w for w in p if w["working_set"] in P.WORKING_SETS]       # the sizing rule's, not explicit sizes
    assert sized and [w["total_size"] for w in sized] == [std[(w["workload"], w["mode"])]["total_size"] for w in sized]


# --------------------------------------------------------------------------- sizing rule

def test_cache_is_half_the_declared_cache_in_one_file():
    (w,) = P.plan([{"workload": "cache", "mode": "rndrd", "working_set": "cache"}], "4G")
    assert (w["file_num"], w["total_size"]) == (1, 2 * GIB)
    assert "half" in w["sizing"]


def test_over_cache_direct_ignores_ram():
    (w,) = P.plan([{"workload": "over_cache", "mode": "rndrd", "working_set": "over_cache"}], "256M",
                  mem_total_mb=65536)
    assert (w["file_num"], w["total_size"]) == (128, 1 * GIB)
    # and needs no RAM figure at all
    (w,) = P.plan([{"workload": "over_cache", "mode": "rndrd", "working_set": "over_cache"}], "256M")
    assert w["total_size"] == 1 * GIB


def test_over_cache_buffered_doubles_ram_when_larger():
    spec = [{"workload": "over_cache", "mode": "rndrd", "working_set": "over_cache", "direct": False}]
    (w,) = P.plan(spec, "256M", mem_total_mb=4096)
    assert w["total_size"] == 8 * GIB
    assert "2 x RAM 4.0 GiB" in w["sizing"]
    # 4 x cache wins when the cache is bigger than half the RAM
    (w,) = P.plan(spec, "2G", mem_total_mb=2048)
    assert w["total_size"] == 8 * GIB


def test_over_cache_buffered_rounds_up_to_whole_blocks_per_file():
    spec = [{"workload": "over_cache", "mode": "rndrd", "working_set": "over_cache", "direct": False}]
    (w,) = P.plan(spec, "1M", mem_total_mb=7982)  # 2 x 7982 MiB is not a multiple of 128 x 16K
    unit = 128 * 16384
    assert w["total_size"] % unit == 0
    assert 2 * 7982 * MIB <= w["total_size"] < 2 * 7982 * MIB + unit


@pytest.mark.parametrize("mem", [None, 0, "0"])
def test_buffered_over_cache_without_ram_is_an_error_naming_the_fact(mem):
    spec = [{"workload": "over_cache", "mode": "rndrd", "working_set": "over_cache", "direct": False}]
    with pytest.raises(P.PlanError) as exc:
        P.plan(spec, "256M", mem_total_mb=mem)
    assert "fleetqual_matrix[0]" in str(exc.value) and "ansible_memtotal_mb" in str(exc.value)


def test_bad_ram_figure():
    with pytest.raises(P.PlanError, match="ansible_memtotal_mb: must be a number of MiB, got -1"):
        P.plan([{"workload": "c", "mode": "rndrd", "working_set": "cache"}], mem_total_mb=-1)


def test_seed_is_a_default_for_every_workload():
    p = P.plan([{"workload": "c", "mode": "rndrd", "working_set": "cache"},
                {"workload": "c", "mode": "rndwr", "working_set": "cache", "seed": 7}], seed=42)
    assert [w["seed"] for w in p] == [42, 7]
    assert "seed" not in P.plan([{"workload": "c", "mode": "rndrd", "working_set": "cache"}])[0]
    with pytest.raises(P.PlanError, match="fleetqual_seed: must be an integer >= 0"):
        P.plan([{"workload": "c", "mode": "rndrd", "working_set": "cache"}], seed="x")


def test_datasets_are_shared_by_workloads_on_the_same_files(profiles):
    p = P.plan("san", "256M", 8000, profiles=profiles)
    by_ds = {}
    for w in p:
        by_ds.setdefault(w["dataset"], set()).add((w["file_num"], w["total_size"]))
    assert sorted(by_ds) == ["cache-1x128M", "log-1x1G", "over_cache-128x8M", "over_cache-1x1G",
                             "readahead-1x4G"]
    assert all(len(v) == 1 for v in by_ds.values())
    # the over-cache set also holds db-pattern's 64 MiB log file
    assert P_summary.required_space(p) == 128 * MIB + GIB + (GIB + 64 * MIB) + GIB + 4 * GIB
    assert P_summary.largest_working_set(p) == 4 * GIB   # the read-ahead file
    assert P.dataset_name({"workload": "x", "file_num": 3, "total_size": 3 * 1000}) == "x-3x1000"


def test_explicit_total_size_is_used_as_given():
    (w,) = P.plan([{"workload": "log", "mode": "seqwr", "total_size": "1.5G", "file_num": 3}], "256M")
    assert (w["total_size"], w["file_num"], w["working_set"]) == (1536 * MIB, 3, "explicit")
    (w,) = P.plan([{"workload": "x", "mode": "seqrd", "total_size": 65536}])
    assert (w["total_size"], w["file_num"]) == (65536, 1)


def test_cache_size_accepts_bytes_and_suffixes():
    spec = [{"workload": "cache", "mode": "rndrd", "working_set": "cache"}]
    assert P.plan(spec, 512 * MIB)[0]["total_size"] == 256 * MIB
    assert P.plan(spec, "512MiB")[0]["total_size"] == 256 * MIB
    assert P.plan(spec)[0]["total_size"] == 128 * MIB  # default 256M


# --------------------------------------------------------------------------- custom matrix, ids

def test_custom_matrix_replaces_profile_matrix_and_keeps_defaults(profiles):
    mine = dict(profiles, base={"defaults": {"time": 20, "direct": False},
                                "matrix": [{"workload": "c", "mode": "seqrd", "total_size": "1M"}]})
    matrix = [{"workload": "cache", "mode": "rndrd", "working_set": "cache", "threads": 16}]
    p = P.plan("base", "256M", 4096, profiles=mine, matrix=matrix)
    assert ids(p) == ["cache-rndrd-t16"]
    assert p[0]["time"] == 20 and p[0]["direct"] is False  # the profile's defaults
    # an empty matrix means "not given"
    assert len(P.plan("quick", profiles=profiles, matrix=[])) == 6


def test_shipped_profiles_are_self_contained(profiles):
    """profiles[name].matrix alone gives the same plan as the profile by name."""
    for name, prof in profiles.items():
        if name == "burnin":
            # its matrix is one round; the profile's burnin key repeats it (test_burnin_plan.py)
            assert set(prof) == {"description", "burnin", "matrix"}, name
            continue
        assert set(prof) == {"description", "matrix"}, name
        assert P.plan(prof["matrix"], "1G", 8000) == P.plan(name, "1G", 8000, profiles=profiles), name


def test_extends_and_defaults_for_own_profiles():
    profiles = {
        "base": {"defaults": {"time": 30, "warmup": 2},
                 "matrix": [{"workload": "c", "mode": "rndrd", "working_set": "cache", "threads": [1, 8]}]},
        "more": {"extends": "base", "defaults": {"time": 10},
                 "matrix": [{"workload": "c", "mode": "rndrd", "working_set": "cache", "threads": [8, 16]},
                            {"workload": "c", "mode": "rndwr", "working_set": "cache", "time": 99}]},
    }
    p = P.plan("more", profiles=profiles)
    assert ids(p) == ["c-rndrd-t1", "c-rndrd-t8", "c-rndrd-t16", "c-rndwr-t1"]
    assert [w["time"] for w in p] == [10, 10, 10, 99]
    assert {w["warmup"] for w in p} == {2}


def test_matrix_list_as_first_argument_uses_builtin_defaults():
    p = P.plan([{"workload": "w", "mode": "rndwr", "total_size": "8M"}])
    assert p[0]["time"] == 60 and p[0]["warmup"] == 5 and p[0]["block_size"] == 16384
    assert p[0]["threads"] == 1 and p[0]["direct"] is True
    assert (p[0]["index"], p[0]["of"]) == (1, 1)


def test_profile_mapping_as_first_argument():
    prof = {"defaults": {"time": 7}, "matrix": [{"workload": "c", "mode": "seqrd", "total_size": "1M"}]}
    assert P.plan(prof)[0]["time"] == 7


def test_list_expansion_and_index_of():
    p = P.plan([{"workload": "s", "mode": "rndrd", "working_set": "cache", "threads": [1, 2, 4]},
                {"workload": "m", "mode": "rndrw", "working_set": "cache", "rw_ratio": [9, 1]}])
    assert ids(p) == ["s-rndrd-t1", "s-rndrd-t2", "s-rndrd-t4", "m-rndrw-t1-r90", "m-rndrw-t1-r50"]
    assert [(w["index"], w["of"]) for w in p] == [(i, 5) for i in range(1, 6)]


def test_identical_workloads_run_once_and_different_ones_get_suffixes():
    base = {"workload": "c", "mode": "rndrd", "working_set": "cache"}
    p = P.plan([base, dict(base), dict(base, block_size="4K"), dict(base, block_size="8K")])
    assert ids(p) == ["c-rndrd-t1", "c-rndrd-t1-2", "c-rndrd-t1-3"]


def test_explicit_ids_kept_and_duplicates_rejected():
    base = {"workload": "c", "mode": "rndrd", "working_set": "cache"}
    p = P.plan([dict(base, id="first"), dict(base, id="second")])
    assert ids(p) == ["first", "second"]
    with pytest.raises(P.PlanError) as exc:
        P.plan([dict(base, id="same"), dict(base, id="same", threads=2)])
    assert "fleetqual_matrix[1].id: duplicate id 'same'" in str(exc.value)
    p = P.plan([dict(base, id="sweep", threads=[1, 8])])
    assert ids(p) == ["sweep-t1", "sweep-t8"]


def test_overrides_apply_to_every_workload(profiles):
    p = P.plan("standard", "256M", 4096, profiles=profiles, overrides={"time": 3, "warmup": 0, "block_size": "4K"})
    assert {w["time"] for w in p} == {3} and {w["warmup"] for w in p} == {0}
    assert {w["block_size"] for w in p} == {4096}
    p = P.plan("quick", profiles=profiles, overrides={"total_size": "2M"})
    assert {w["total_size"] for w in p} == {2 * MIB}


def test_module_args_keeps_only_module_parameters(profiles):
    [w] = [w for w in P.plan("san", "256M", 4096, profiles=profiles) if w["id"] == "mix-rndrw-t64-r50"]
    args = P.module_args(w)
    assert set(args) <= set(P.MODULE_PARAMS)
    assert args["rw_ratio"] == 1 and "id" not in args and "index" not in args and "working_set" not in args


# --------------------------------------------------------------------------- validation messages

def errors_for(matrix=None, profile="quick", profiles=None, **kw):
    profiles = profiles if profiles is not None else {
        "quick": {"matrix": [{"workload": "c", "mode": "rndrd", "total_size": "1M"}]}}
    return V.validate_profile(profiles, profile, matrix=matrix, **kw)


def test_unknown_profile_lists_known_ones(profiles):
    assert V.validate_profile(profiles, "stnadard") == [
        "fleetqual_profile: unknown profile 'stnadard'; known: burnin, compliance, durability, quick, san, standard"]
    with pytest.raises(P.PlanError, match="known: burnin, compliance, durability, quick, san, standard"):
        P.plan("nope", profiles=profiles)


@pytest.mark.parametrize("entry, message", [
    ({"threads": 0}, "fleetqual_matrix[0].threads: must be an integer between 1 and 1024, got 0"),
    ({"threads": "8"}, "fleetqual_matrix[0].threads: must be an integer between 1 and 1024, got '8'"),
    ({"threads": [1, 0]}, "fleetqual_matrix[0].threads[1]: must be an integer between 1 and 1024, got 0"),
    ({"total_size": "-5M"}, "fleetqual_matrix[0].total_size: size must not be negative, got '-5M'"),
    ({"total_size": "12Q"}, "fleetqual_matrix[0].total_size: unknown size suffix 'Q'"),
    ({"total_size": "lots"}, "fleetqual_matrix[0].total_size: cannot parse size 'lots'"),
    ({"total_size": 0}, "fleetqual_matrix[0].total_size: must be greater than 0"),
    ({"mode": "randread"}, "fleetqual_matrix[0].mode: unknown mode 'randread'; known: seqwr, seqrewr, seqrd, "
                           "rndrd, rndwr, rndrw"),
    ({"treads": 4}, "fleetqual_matrix[0].treads: unknown key (did you mean threads?); known: id, workload"),
    ({"direct": "yes"}, "fleetqual_matrix[0].direct: must be true or false, got string 'yes'"),
    ({"time": -1}, "fleetqual_matrix[0].time: must be an integer between 0 and 10000000, got -1"),
    ({"fsync_mode": "sync"}, "fleetqual_matrix[0].fsync_mode: must be one of fsync, fdatasync"),
    ({"engine": "aio"}, "fleetqual_matrix[0].engine: must be one of sync, io_uring, got 'aio'"),
    ({"workload": "over-cache"}, "fleetqual_matrix[0].workload: must be a label"),
    ({"working_set": "cache"}, "fleetqual_matrix[0]: give either working_set or total_size, not both"),
    ({"block_size": 1000}, "fleetqual_matrix[0].block_size (workload c-rndrd-t1): block_size 1000 is not a multiple of 512"),
    ({"rw_ratio": 4}, "fleetqual_matrix[0].rw_ratio: only meaningful with mode rndrw"),
    ({"time": 0}, "fleetqual_matrix[0].time (workload c-rndrd-t1): time 0 (no limit) needs requests"),
    ({"file_num": 128, "total_size": "1M"}, "fleetqual_matrix[0].total_size (workload c-rndrd-t1): total_size 1048576 "
                                            "must be at least file_num x block_size (128 x 16384)"),
    ({"block_size": "512M"}, "fleetqual_matrix[0].block_size: must be between 1 and 256M, got '512M'"),
])
def test_bad_matrix_entries_name_the_path(entry, message):
    spec = {"workload": "c", "mode": "rndrd", "total_size": "1M"}
    spec.update(entry)
    errs = errors_for([spec])
    assert any(e.startswith(message) for e in errs), errs


def test_missing_mode_and_size():
    errs = errors_for([{"workload": "c"}, {"workload": "c", "mode": "rndrd"}, "x"])
    assert "fleetqual_matrix[0]: missing mode" in errs
    assert "fleetqual_matrix[1]: missing working_set (cache | over_cache) or total_size" in errs
    assert "fleetqual_matrix[2]: must be a mapping, got string" in errs


def test_matrix_must_be_a_list_and_cache_size_must_parse():
    assert "fleetqual_matrix: must be a list of workload specs, got mapping" in errors_for({"a": 1})
    errs = errors_for(cache_size="big")
    assert errs and errs[0].startswith("fleetqual_cache_size: cannot parse size 'big'")
    assert errors_for(cache_size=0) == ["fleetqual_cache_size: must be greater than 0, got 0"]


def test_bad_overrides_name_the_variable():
    errs = errors_for(overrides={"time": "x", "mode": "rndrd"})
    assert "fleetqual_workload_overrides.time: must be an integer between 0 and 10000000, got 'x'" in errs
    assert any(e.startswith("fleetqual_workload_overrides.mode: unknown key (not allowed here)") for e in errs)


def test_profile_structure_errors():
    profiles = {
        "a": {"extends": "zz", "matrix": []},
        "b": {"extends": "c"}, "c": {"extends": "b"},
        "d": {"matrix": [{"workload": "c", "mode": "rndrd", "total_size": "1M"}], "colour": "red",
              "defaults": {"threads": 0}},
        "e": {"description": "nothing"},
        "f": ["not", "a", "mapping"],
    }
    assert "fleetqual_profiles.a.extends: unknown profile 'zz'; known: a, b, c, d, e, f" in errors_for(
        profile="a", profiles=profiles)
    assert any("cycle b -> c -> b" in e for e in errors_for(profile="b", profiles=profiles))
    errs = errors_for(profile="d", profiles=profiles)
    assert "fleetqual_profiles.d.colour: unknown key; known: description, extends, defaults, matrix, burnin" in errs
    assert "fleetqual_profiles.d.defaults.threads: must be an integer between 1 and 1024, got 0" in errs
    assert errors_for(profile="e", profiles=profiles) == [
        "fleetqual_profiles.e.matrix: missing; a profile needs a list of workloads (or extends)"]
    assert errors_for(profile="f", profiles=profiles)[0].startswith("fleetqual_profiles.f: must be a mapping")


def test_errors_in_inherited_entries_name_where_they_are_defined():
    profiles = {"base": {"matrix": [{"workload": "c", "mode": "rndrd", "total_size": "1M", "threads": 0}]},
                "child": {"extends": "base"}}
    assert errors_for(profile="child", profiles=profiles) == [
        "fleetqual_profiles.base.matrix[0].threads: must be an integer between 1 and 1024, got 0"]


def test_validate_profile_argument_types():
    assert errors_for(profile=3)[0].startswith("fleetqual_profile: must be a profile name")
    assert V.validate_profile(None, "x")[0].startswith("fleetqual_profiles: must be a mapping")


def test_plan_error_lists_every_problem():
    with pytest.raises(P.PlanError) as exc:
        P.plan([{"workload": "c", "mode": "x", "total_size": "1M"}, {"workload": "c", "threads": 0}])
    assert len(exc.value.errors) == 2
    assert isinstance(exc.value, ValueError)


# --------------------------------------------------------------------------- summary helpers

def test_plan_summary_lines(profiles):
    p = P.plan("standard", "512M", 8000, profiles=profiles)
    lines = P_summary.plan_summary(p)
    assert len(lines) == len(p) + 1
    assert lines[5] == ("[6/11] over_cache-rndrd-t64: rndrd, 64 threads, 128 files x 16.0 MiB = 2.0 GiB "
                        "(over_cache), 16.0 KiB blocks, O_DIRECT, 60 s + 5 s warmup")
    assert lines[8] == ("[9/11] log-seqwr-t1: seqwr, 1 thread, 1 file of 1.0 GiB, 16.0 KiB blocks, buffered, "
                        "fdatasync every 1 write, 60 s + 5 s warmup")
    assert lines[-1] == ("11 workloads, about 11 min 55 s of measurement and warmup (prepare not included), "
                         "largest working set 2.0 GiB")
    san = P_summary.plan_summary(P.plan("san", profiles=profiles))
    assert "90/10 read/write" in san[18]


def test_largest_working_set_and_duration_of_empty_plan():
    assert P_summary.largest_working_set([]) == 0
    assert P_summary.expected_duration_s([]) == 0
    assert P_summary.expected_duration_s([{"time": 0, "requests": 1000, "warmup": 2}]) == 2
    assert P_summary.plan_summary([])[-1].startswith("0 workloads")


@pytest.mark.parametrize("n, text", [(512, "512 B"), (16384, "16.0 KiB"), (2 * GIB, "2.0 GiB"),
                                     (1536 * MIB, "1.5 GiB"), (3 * 1024 ** 4, "3.0 TiB")])
def test_human_size(n, text):
    assert P.human_size(n) == text


# --------------------------------------------------------------------------- validate_inputs

def test_validate_inputs_combines_every_check(profiles):
    good = {"fleetqual_profile": "standard", "fleetqual_profiles": profiles, "fleetqual_matrix": [],
            "fleetqual_cache_size": "256M", "fleetqual_test_dir": "/var/tmp/fleetqual",
            "fleetqual_thresholds": [{"workload": "over_cache", "max_read_p99_ms": 20}], "fleetqual_seed": 42}
    assert V.validate_inputs(good) == []
    bad = dict(good, fleetqual_profile="stnadard", fleetqual_cache_size="1X", fleetqual_test_dir="tmp/fq",
               fleetqual_thresholds=[{"max_raed_p99_ms": 2}], fleetqual_seed=-1)
    errs = V.validate_inputs(bad)
    assert "fleetqual_profile: unknown profile 'stnadard'; known: burnin, compliance, durability, quick, san, standard" in errs
    assert any(e.startswith("fleetqual_cache_size: unknown size suffix 'X'") for e in errs)
    assert "fleetqual_seed: must be an integer >= 0, got -1" in errs
    assert "fleetqual_test_dir: must be an absolute path, got 'tmp/fq'" in errs
    assert any(e.startswith("fleetqual_thresholds[0].max_raed_p99_ms: unknown key") for e in errs)


def test_validate_inputs_custom_matrix_and_paths(profiles):
    base = {"fleetqual_profile": "quick", "fleetqual_profiles": profiles}
    errs = V.validate_inputs(dict(base, fleetqual_matrix=[{"workload": "c", "mode": "rndrd", "threads": 0,
                                                           "working_set": "cache"}]))
    assert errs == ["fleetqual_matrix[0].threads: must be an integer between 1 and 1024, got 0"]
    # with a custom matrix the profile name is not used
    ok = dict(base, fleetqual_profile="whatever",
              fleetqual_matrix=[{"workload": "c", "mode": "rndrd", "working_set": "cache"}])
    assert V.validate_inputs(ok) == []
    for path, word in (("/var/tmp/../etc", "'..'"), ("/", "system directory"), ("/var/tmp/", "system directory"),
                       (3, "absolute path")):
        (err,) = V.validate_inputs({"fleetqual_test_dir": path})
        assert err.startswith("fleetqual_test_dir: ") and word in err
    assert V.validate_inputs({}) == []
    assert V.validate_inputs([]) == ["inputs: must be a mapping of variable name -> value, got list"]


# ---------------------------------------------------------------- search and dbpattern

def test_search_workload_drops_time_and_counts_its_steps():
    [w] = P.plan([{"workload": "search", "mode": "rndrd", "working_set": "over_cache",
                   "search": "threads", "search_bound_ms": 20, "search_max": 6,
                   "search_step_time": 3, "warmup": 2}], cache_size="16M")
    assert "time" not in w and "requests" not in w
    assert P_summary.search_steps(w) == 4            # 1, 2, 4, then the max 6
    assert P_summary.workload_duration_s(w) == 2 + 4 * 3
    assert P_summary.expected_duration_s([w]) == 14
    assert "search threads 1..6 for p99 <= 20 ms, 4 steps x 3 s" in P_summary.workload_line(w)
    assert P.module_args(w)["search"] == "threads" and "time" not in P.module_args(w)


@pytest.mark.parametrize("spec, message", [
    ({"mode": "seqrd", "search": "threads"}, "search (workload x-seqrd-t1): search needs mode rndrd, rndwr or rndrw"),
    ({"mode": "rndrd", "search": "iodepth"}, "search (workload x-rndrd-t1): search iodepth needs engine io_uring"),
    ({"mode": "rndrd", "search": "threads", "search_max": 2048}, "search_max must be between 1 and 1024 for search threads"),
    ({"mode": "rndrd", "search": "threads", "threads": 4}, "threads 4 cannot be combined with search threads"),
    ({"mode": "rndrd", "search": "threads", "requests": 100}, "remove requests"),
    ({"mode": "rndrd", "search_bound_ms": 5}, "search_bound_ms need search (threads or iodepth)"),
    ({"mode": "rndrd", "search": "depth"}, "search: must be one of threads, iodepth"),
    ({"mode": "rndrd", "search": "threads", "search_bound_ms": 0},
     "search_bound_ms: must be greater than 0 and at most 3600000, got 0"),
    ({"mode": "rndrd", "db_flushers": 2}, "db_flushers need mode dbpattern"),
    ({"mode": "dbpattern", "engine": "io_uring"}, "engine (workload x-dbpattern-t1): mode dbpattern runs with engine sync only"),
    ({"mode": "dbpattern", "db_log_block": "32K"}, "db_log_block 32768 must not be larger than block_size 16384"),
    ({"mode": "rndrd", "rate_iops": 10, "engine": "io_uring"}, "rate_iops needs engine sync"),
    ({"mode": "rndrd", "report_interval": 0.001}, "report_interval must be 0 (off) or at least 0.01 seconds"),
])
def test_search_and_db_options_are_validated(spec, message):
    entry = dict({"workload": "x", "working_set": "cache"}, **spec)
    with pytest.raises(P.PlanError) as exc:
        P.plan([entry], cache_size="16M")
    assert message in str(exc.value)


def test_dbpattern_space_includes_its_log_file():
    plan = P.plan([{"workload": "db", "mode": "dbpattern", "threads": 4, "working_set": "cache",
                    "db_log_size": "8M", "time": 2}], cache_size="16M")
    assert plan[0]["mode"] == "dbpattern"
    assert P_summary.required_space(plan) == 8 * 2 ** 20 + 8 * 2 ** 20


def test_san_runs_a_search_and_the_database_pattern(profiles):
    san = P.plan("san", profiles=profiles, cache_size="256M", mem_total_mb=4096)
    by_id = {w["id"]: w for w in san}
    assert by_id["search-rndrd"]["search"] == "threads" and "time" not in by_id["search-rndrd"]
    assert by_id["db-pattern"]["mode"] == "dbpattern" and by_id["db-pattern"]["threads"] == 16


@pytest.mark.parametrize("bound, ok", [(50, True), (0.5, True), (0, False), (-3, False), ("fast", False)])
def test_validate_inputs_checks_the_latency_bound(bound, ok):
    errors = V.validate_inputs({"fleetqual_latency_bound_ms": bound})
    assert (errors == []) is ok, errors
    if not ok:
        assert errors[0].startswith("fleetqual_latency_bound_ms: must be a number of milliseconds > 0")


# ------------------------------------------------------- rules that match no workload

def test_misspelled_workload_in_a_rule_is_refused_with_did_you_mean(profiles):
    inputs = {"fleetqual_profile": "quick", "fleetqual_profiles": profiles, "fleetqual_matrix": [],
              "fleetqual_thresholds": [{"workload": "overcache", "min_iops": 1000000000}]}
    (err,) = V.validate_inputs(inputs)
    assert err.startswith("fleetqual_thresholds[0] (min_iops@overcache): matches no workload of the plan "
                          "(profile quick): no workload has workload 'overcache' (did you mean over_cache?)")
    # the closest workloads of the plan are named
    assert err.endswith("closest workloads: over_cache-rndrd-t4, over_cache-rndwr-t4, over_cache-rndwr-t1")
    # spelled right, the same rule is valid
    inputs["fleetqual_thresholds"] = [{"workload": "over_cache", "min_iops": 1000000000}]
    assert V.validate_inputs(inputs) == []


def test_rule_whose_selectors_exist_but_never_together_is_refused(profiles):
    base = {"fleetqual_profile": "quick", "fleetqual_profiles": profiles}
    (err,) = V.validate_inputs(dict(base, fleetqual_thresholds=[
        {"name": "log-reads", "workload": "log", "mode": "rndrd", "max_read_p99_ms": 5}]))
    assert err.startswith("fleetqual_thresholds[0] (log-reads): matches no workload")
    assert "no workload has all of its selectors at once" in err
    (err,) = V.validate_inputs(dict(base, fleetqual_thresholds=[
        {"workload": "cache", "min_iops": 1}, {"threads": 64, "min_iops": 1}]))
    assert err.startswith("fleetqual_thresholds[1] (min_iops@*/*/t64)")
    assert "no workload has threads 64 (thread counts in the plan: 1, 4)" in err
    (err,) = V.validate_inputs(dict(base, fleetqual_thresholds=[{"id": ["log-seqwr-t1", "log-seqwr-t2"], "min_iops": 1},
                                                                {"id": "log-seqrw-t1", "min_iops": 1}]))
    assert "no workload has id 'log-seqrw-t1' (did you mean log-seqwr-t1?)" in err
    # diagnostic rules judge the host, not a workload: never refused for matching nothing
    assert V.validate_inputs(dict(base, fleetqual_thresholds=[{"diagnostic": "tipping_point",
                                                               "expect": "n/a"}])) == []


def test_rule_matching_on_some_hosts_is_refused_for_the_others(profiles):
    """validate.yml calls validate_inputs once per host with its own variables."""
    rules = [{"workload": "over_cache", "threads": 64, "max_read_p99_ms": 20}]
    hosts = {"db1": {"fleetqual_profile": "standard", "fleetqual_profiles": profiles, "fleetqual_thresholds": rules},
             "ci1": {"fleetqual_profile": "quick", "fleetqual_profiles": profiles, "fleetqual_thresholds": rules}}
    problems = {host: V.validate_inputs(inputs) for host, inputs in hosts.items()}
    assert problems["db1"] == []
    (err,) = problems["ci1"]
    assert "(profile quick)" in err and "no workload has threads 64" in err
    # a custom matrix is named as the plan
    custom = dict(hosts["ci1"], fleetqual_matrix=[{"workload": "c", "mode": "rndrd", "working_set": "cache"}])
    (err,) = V.validate_inputs(custom)
    assert "matches no workload of the plan (fleetqual_matrix)" in err and "closest workloads: c-rndrd-t1" in err
    # a plan that does not build is reported as such, not as rules that match nothing
    broken = dict(hosts["ci1"], fleetqual_profile="stnadard")
    assert V.validate_inputs(broken) == [
        "fleetqual_profile: unknown profile 'stnadard'; known: burnin, compliance, durability, quick, san, standard"]


# ------------------------------------------------ per-workload overrides, steady state (10.4)

def test_overrides_by_workload_id_apply_to_that_workload_only(profiles):
    p = P.plan("quick", profiles=profiles, overrides={
        "warmup": 2, "over_cache-rndrd-t4": {"time": 30, "steady_state": True, "ss_max_rounds": 12,
                                             "description": "the disk reads"}})
    w = {x["id"]: x for x in p}
    assert w["over_cache-rndrd-t4"]["time"] == 30 and w["over_cache-rndrd-t4"]["steady_state"] is True
    assert w["over_cache-rndrd-t4"]["description"] == "the disk reads"
    assert {x["time"] for x in p if x["id"] != "over_cache-rndrd-t4"} == {4}
    assert {x["warmup"] for x in p} == {2}
    assert "steady_state" not in w["cache-rndrd-t1"]
    args = P.module_args(w["over_cache-rndrd-t4"])
    assert args["steady_state"] is True and args["ss_max_rounds"] == 12
    # steady state: the duration is an upper bound of rounds x round time
    assert P_summary.workload_duration_s(w["over_cache-rndrd-t4"]) == 2 + 12 * 10
    assert "steady state: rounds of 10 s, up to 12, + 2 s warmup" in P_summary.workload_line(w["over_cache-rndrd-t4"])


def test_bad_overrides_by_id_name_the_id_and_the_closest():
    errs = errors_for(overrides={"c-rndrd-t2": {"time": 3}, "c-rndrd-t1": {"threads": 4, "time": -1}})
    assert errs[0].startswith("fleetqual_workload_overrides.c-rndrd-t1.threads: unknown key (not allowed here)")
    assert errs[1] == "fleetqual_workload_overrides.c-rndrd-t1.time: must be an integer between 0 and 10000000, got -1"
    assert errs[2] == ("fleetqual_workload_overrides.c-rndrd-t2: no workload of the plan has this id "
                       "(did you mean c-rndrd-t1?); ids: c-rndrd-t1")
    assert len(errs) == 3
    # a scalar under an unknown key is still a misspelled setting
    assert errors_for(overrides={"tmie": 3})[0].startswith(
        "fleetqual_workload_overrides.tmie: unknown key (did you mean time?)")


@pytest.mark.parametrize("entry, message", [
    ({"steady_state": "yes"}, "fleetqual_matrix[0].steady_state: must be true or false, got string 'yes'"),
    # The binary's ranges (ss_window 2..100, ss_range_pct 0..1000, ss_round_time a float >= 0.1)
    ({"steady_state": True, "ss_window": 1}, "fleetqual_matrix[0].ss_window: must be an integer between 2 and 100, got 1"),
    ({"steady_state": True, "ss_range_pct": 1001}, "fleetqual_matrix[0].ss_range_pct: must be a number between 0 and 1000"),
    ({"steady_state": True, "ss_round_time": 0.05}, "fleetqual_matrix[0].ss_round_time: must be a number between 0.1 and 86400"),
    ({"steady_state": True, "ss_window": 10, "ss_max_rounds": 5}, "fleetqual_matrix[0].ss_max_rounds (workload c-rndrd-t1): "
                                                                  "ss_max_rounds 5 must be at least ss_window 10"),
    ({"steady_state": True, "ss_round_time": 1.5, "report_interval": 1}, "fleetqual_matrix[0].ss_round_time (workload "
                                                                         "c-rndrd-t1): ss_round_time 1.5 must be a multiple"),
    ({"steady_state": True, "ss_metric": "iopz"}, "fleetqual_matrix[0].ss_metric: must be one of iops, mib_per_sec, lat_p99_us"),
    ({"ss_max_rounds": 10}, "fleetqual_matrix[0].ss_max_rounds (workload c-rndrd-t1): ss_max_rounds given without "
                            "steady_state: true"),
    ({"steady_state": True, "search": "threads"}, "fleetqual_matrix[0].steady_state (workload c-rndrd-t1): steady_state "
                                                  "cannot be combined with search"),
    ({"precondition": -1}, "fleetqual_matrix[0].precondition: must be an integer between 0 and 100"),
    ({"precondition": 101}, "fleetqual_matrix[0].precondition: must be an integer between 0 and 100"),
])
def test_steady_state_and_precondition_are_validated(entry, message):
    errs = errors_for([dict({"workload": "c", "mode": "rndrd", "total_size": "1M"}, **entry)])
    assert any(e.startswith(message) for e in errs), errs


def test_plan_passes_steady_state_and_precondition_through():
    [w] = P.plan([{"workload": "fresh", "mode": "rndwr", "total_size": "64M", "steady_state": True,
                   "ss_round_time": 5, "precondition": 2}])
    assert w["steady_state"] is True and w["ss_round_time"] == 5 and w["precondition"] == 2
    assert "precondition" not in P.module_args(w)   # the role runs it, not the workload's iobench run
    assert "preconditioned (2 passes)" in P_summary.workload_line(w)


def test_rule_requiring_steady_state_needs_a_workload_that_runs_it(profiles):
    base = {"fleetqual_profile": "quick", "fleetqual_profiles": profiles,
            "fleetqual_thresholds": [{"workload": "over_cache", "mode": "rndwr", "require_steady_state": True}]}
    (err,) = V.validate_inputs(base)
    assert err == ("fleetqual_thresholds[0] (require_steady_state@over_cache/rndwr): requires steady state, but no "
                   "workload it matches runs with steady_state: true (over_cache-rndwr-t4, over_cache-rndwr-t1); "
                   "set it in the matrix or in fleetqual_workload_overrides")
    ok = dict(base, fleetqual_workload_overrides={"over_cache-rndwr-t4": {"steady_state": True}})
    assert V.validate_inputs(ok) == []


def test_a_new_table_option_without_a_rule_is_checked_by_its_row(monkeypatch):
    """An option added to plugins/module_utils/plan/options.py is validated by its row: type,
    choices and range (the binary's own), with no rule of the plan's."""
    from ansible_collections.fleetqual.storage.plugins.module_utils.plan import options as iobench_options
    rows = dict(iobench_options.BY_NAME, new_int={"name": "new_int", "type": "int", "min": 0, "max": 9, "how": "value"},
                new_choice={"name": "new_choice", "type": "str", "choices": ["a", "b"]},
                new_flag={"name": "new_flag", "type": "bool"})
    monkeypatch.setattr(iobench_options, "BY_NAME", rows)
    errors = []
    assert P._check_value("new_int", 3, "m", errors) == 3 and P._check_value("new_choice", "b", "m", errors) == "b"
    assert P._check_value("new_int", -1, "m", errors) is None
    assert P._check_value("new_choice", "c", "m", errors) is None
    assert P._check_value("new_flag", "yes", "m", errors) is None
    assert errors == ["m.new_int: must be an integer between 0 and 9, got -1", "m.new_choice: must be one of a, b, got 'c'",
                      "m.new_flag: must be true or false, got string 'yes'"]
    # the plan's keys are the table's
    assert set(P.MODULE_PARAMS) >= set(iobench_options.PLAN_KEYS) - {"prepare"}
