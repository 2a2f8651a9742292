"""Security properties of the roles and playbooks, read from their YAML.

* no task runs a shell: no ``shell``, ``raw`` or ``script``, and ``command`` only with an
  ``argv`` list (never a free-form or ``cmd`` string that a template could split);
* privilege escalation only where it is needed: ``become`` is truthy only on the package
  installation and the binary install/deploy tasks, never on a play;
* every file the roles create on a host or the controller has an explicit mode, and the
  results and test directories are owner-only.

The runtime side (results 0600 in a 0700 directory, test and data set directories 0700
while iobench runs, binary root:root 0755 with the controller's checksum) is checked over
SSH on the fleet in test_fleet_qualify.py (long suite) and, on localhost, in
tests/integration/test_qualify_playbook.py.
"""
import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK_FILES = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))
                    + glob.glob(os.path.join(ROOT, "roles", "*", "handlers", "*.yml")))
PLAYBOOKS = sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
SHELL_MODULES = {"shell", "raw", "script", "ansible.builtin.shell", "ansible.builtin.raw",
                 "ansible.builtin.script", "ansible.legacy.shell", "ansible.legacy.raw"}
COMMAND_MODULES = {"command", "ansible.builtin.command", "ansible.legacy.command"}
TASK_KEYWORDS = {"name", "when", "register", "loop", "loop_control", "vars", "become", "become_user",
                 "delegate_to", "delegate_facts", "run_once", "changed_when", "failed_when", "check_mode",
                 "tags", "notify", "block", "rescue", "always", "ignore_errors", "ignore_unreachable",
                 "no_log", "environment", "until", "retries", "delay", "args", "timeout", "throttle",
                 "listen", "any_errors_fatal", "diff", "module_defaults", "collections", "become_method"}
# (file relative to the repo, task or block name) allowed to escalate
BECOME_ALLOWED = {
    ("roles/qualify/tasks/after_start.yml", "Install sysstat for iostat and vmstat"),
    ("roles/iobench/tasks/build_target.yml", "Install build tools"),
    ("roles/iobench/tasks/build_target.yml", "Build and install on the host"),
    ("roles/iobench/tasks/deploy.yml", "Install the controller's build"),
    # One module run installs the binary in fleetqual_bin_dir AND preflights and
    # starts the job, so the measuring path escalates as the deploy did (fleetqual_become)
    ("roles/qualify/tasks/start.yml", "Check, deploy, plan, preflight and start the measurement job (one module run)"),
    ("roles/qualify/tasks/main.yml", "Wait for the measurement job, then judge, clean up and store (one module run after the polls)"),
    ("roles/qualify/tasks/main.yml", "Record the failure as this host's error, remove what the run created, store it"),
    # the power-cut test (docs/durability.md) writes the opted-in targets and /dev/shm, as the
    # measuring path does, with the same escalation (fleetqual_become)
    ("roles/qualify/tasks/durability_cycle.yml", "Start the writers, cycle {{ _fleetqual_cycle }}"),
    ("roles/qualify/tasks/durability_cycle.yml",
     "Copy every witness of what was acknowledged, for the controller to keep, cycle {{ _fleetqual_cycle }}"),
    ("roles/qualify/tasks/durability_cycle.yml", "Read every acknowledged write back, cycle {{ _fleetqual_cycle }}"),
    ("roles/qualify/tasks/durability.yml", "Remove what the power-cut test created (witnesses, a directory target's files)"),
    # an array member's probe reads the job status an earlier run's start left, as the identity
    # that start had (fleetqual_become; docs/operations.md "Arrays"); it changes nothing
    ("roles/qualify/tasks/main.yml",
     "Read what an earlier run left on each member of an array (an array is attached whole or not at all)"),
    # a power-cut cycle a killed run left: read back and removed as the cycle's own steps are
    ("roles/qualify/tasks/durability_recover.yml",
     "Read back every write the witnesses of that cut name, run: {{ _fleetqual_dur_interrupted.run_id }}"),
    ("roles/qualify/tasks/durability_recover.yml",
     "Remove what that run left of its power-cut test (writers, witnesses, a directory target's files), run: "
     "{{ _fleetqual_dur_interrupted.run_id }}"),
    # the operator's stop (playbooks/stop.yml) signals the job the measuring path started, as
    # the identity that started it (fleetqual_become)
    ("roles/qualify/tasks/stop.yml", "Stop the host's measurement job (SIGTERM, then its final status within the grace)"),
}


def walk(tasks, path, parents=()):
    for t in tasks or []:
        if not isinstance(t, dict):
            continue
        yield path, t, parents
        for key in ("block", "rescue", "always"):
            if key in t:
                yield from walk(t[key], path, parents + (t,))


def all_tasks():
    for path in TASK_FILES:
        yield from walk(yaml.safe_load(open(path)), os.path.relpath(path, ROOT))
    for path in PLAYBOOKS:
        for play in yaml.safe_load(open(path)) or []:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from walk(play.get(key), os.path.relpath(path, ROOT))


def module_of(task):
    keys = [k for k in task if k not in TASK_KEYWORDS and not k.startswith("with_")]
    return keys[0] if keys else None


def test_the_scan_sees_the_tasks():
    names = [t.get("name") for _path, t, _parents in all_tasks()]
    assert len(names) > 30 and "Copy iobench to the host" in names


def test_no_task_runs_a_shell():
    bad = ["%s: %s (%s)" % (p, t.get("name"), module_of(t)) for p, t, _parents in all_tasks() if module_of(t) in SHELL_MODULES]
    assert not bad, bad


def test_command_only_with_an_argv_list():
    seen = 0
    for path, task, _parents in all_tasks():
        mod = module_of(task)
        if mod in COMMAND_MODULES:
            seen += 1
            args = task[mod]
            argv = args.get("argv") if isinstance(args, dict) else None
            # a YAML list, or one Jinja expression that is the whole list (never a shell string)
            whole_expr = isinstance(argv, str) and argv.strip().startswith("{{") and argv.strip().endswith("}}") \
                and argv.strip().count("{{") == 1
            assert isinstance(argv, list) or whole_expr, \
                "%s: %r runs command without an argv list" % (path, task.get("name"))
            assert "cmd" not in args and "_raw_params" not in args
    assert seen >= 2


def _truthy_become(task):
    v = task.get("become")
    return v is not None and v is not False and str(v).strip().lower() not in ("false", "no")


def test_become_only_on_install_and_deploy_tasks():
    found = {(p, t.get("name")) for p, t, _parents in all_tasks() if _truthy_become(t)}
    assert found == BECOME_ALLOWED, found ^ BECOME_ALLOWED
    # and it is the role's switch (off when connecting as root), never a hard-coded yes
    for p, t, _parents in all_tasks():
        if _truthy_become(t):
            assert t["become"] == "{{ fleetqual_become }}", (p, t.get("name"))


def test_no_play_escalates():
    for path in PLAYBOOKS:
        for play in yaml.safe_load(open(path)) or []:
            assert not play.get("become"), (path, play.get("name"))


def test_escalated_tasks_do_not_touch_results_or_test_files():
    """Test files and results are written as the connecting user: no escalation on the
    test_dir/iobench modules or on the controller-side result tasks."""
    for path, task, parents in all_tasks():
        mod = module_of(task) or ""
        if mod.endswith(("test_dir", ".iobench")) or task.get("delegate_to") == "localhost":
            # the innermost explicit become decides (a task's own become: false overrides its block's)
            explicit = [p.get("become") for p in list(parents) + [task] if "become" in p]
            assert not explicit or not _truthy_become({"become": explicit[-1]}), (path, task.get("name"))


@pytest.mark.parametrize("module", ["ansible.builtin.file", "ansible.builtin.copy", "ansible.builtin.template"])
def test_every_created_file_has_an_explicit_mode(module):
    for path, task, _parents in all_tasks():
        if module_of(task) == module:
            args = task[module]
            if args.get("state") == "absent":
                continue
            assert "mode" in args, "%s: %r creates a file without an explicit mode" % (path, task.get("name"))


def test_results_and_test_dirs_are_owner_only(tmp_path):
    # the records are written by the action that receives them: 0600 in a 0700
    # run directory, also when the run directory already exists from the progress files
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as job_action
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.judge import record as host_record
    run_dir = tmp_path / "results" / "run1"
    job_action.progress_dir_ready(str(run_dir / ".progress"))
    path = host_record.store({"results_file": str(run_dir / "h1.json"), "verdict": "PASS"})
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(run_dir).st_mode & 0o777 == 0o700
    assert os.stat(run_dir / ".progress").st_mode & 0o777 == 0o700
    # a re-run with the same run id keeps the replaced record beside it, owner-only too
    host_record.store({"results_file": path, "verdict": "FAIL"})
    (kept,) = [n for n in os.listdir(run_dir) if n.startswith("h1.json.")]
    assert os.stat(run_dir / kept).st_mode & 0o777 == 0o600
    # the test directory is made by bench_dir's logic: 0700, marker 0600
    src = open(os.path.join(ROOT, "plugins", "module_utils", "host", "bench_dir.py")).read()
    assert "os.makedirs(path, mode=0o700)" in src and "os.mkdir(sub, 0o700)" in src
