# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's identity on the controller's side (docs/privileges.md): the start decides ONCE
per host who the run is on the host (root through become, or the login user); every later
step that reads or removes the job's files (the wait's raw polls, the cleanup module run,
the array's hand-over in the action ``lockstep``) runs as that identity, read from the
start's result (:data:`STARTED_VAR`), whatever its own task's become says."""

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.loader import become_loader


# the role registers the start's result under this name; O(started) defaults to it
STARTED_VAR = "_fleetqual_started"


# ------------------------------------------------------------------ identity (docs/privileges.md)
# The start decides ONCE per host who the run is on the host (root through become, or the login
# user); every later step that reads or removes the job's files (the wait's raw polls, the
# cleanup module run, the array's hand-over in action/lockstep.py) runs as that identity, read
# from the start's result, whatever its own task's become says.
IDENTITY_FACT = "fleetqual_identity"


# how a failed escalation reads in the start's module result, and what it means
BECOME_FAILURES = (("a password is required", "it asks for a password and none is given"),
                   ("missing sudo password", "it asks for a password and none is given"),
                   ("incorrect sudo password", "the password given (ansible_become_password) is refused"),
                   ("incorrect su password", "the password given (ansible_become_password) is refused"),
                   ("timeout waiting for privilege escalation", "it did not answer (a password prompt?)"),
                   ("not in the sudoers file", "the login user may not use sudo on the host"),
                   ("may not run sudo", "the login user may not use sudo on the host"),
                   ("sudo: not found", "sudo is not installed on the host"),
                   ("sudo: command not found", "sudo is not installed on the host"))


def escalates(action):
    """Whether ``action``'s connection runs its commands through become (Ansible's own rule,
    ``ActionBase._low_level_execute_command``: a become plugin, and another user or none named)."""
    conn = action._connection
    if getattr(conn, "become", None) is None:
        return False
    ruser = action._get_remote_user()
    buser = action.get_become_option("become_user")
    return bool(C.BECOME_ALLOW_SAME_USER or buser != ruser or not any((ruser, buser)))


def decide_identity(action, reported):
    """The host's identity from the start's module run (``reported``: ``host_start.identity``,
    who the module ran as) and the connection it ran over: ``{user, uid, become, method,
    become_user, login_user}``."""
    become = escalates(action)
    conn = action._connection
    ident = dict(reported or {})
    ident.update(become=become, method=conn.become.name if become else None,
                 become_user=action.get_become_option("become_user") if become else None)
    if not become:
        ident["login_user"] = ident.get("user")
        ident["login_uid"] = ident.get("uid")
    elif not ident.get("login_user"):
        ident["login_user"] = action._get_remote_user()
    return ident


def apply_identity(action, ident, task_vars):
    """Make ``action``'s connection escalate exactly as the start did (``ident``), whatever
    its own task's become says: drop the become plugin, or load the recorded one and set its
    options from the host's variables as the task executor does."""
    if not ident or "become" not in ident:
        return
    conn = action._connection
    want = bool(ident["become"])
    if want == escalates(action) and (not want or conn.become.name == ident.get("method")):
        return
    if not want:
        conn.set_become_plugin(None)
        action._play_context.become = False
        return
    plugin = become_loader.get(ident.get("method") or "sudo")
    if plugin is None:
        raise AnsibleActionFail("the become method %r the start used is not available" % ident.get("method"))
    conn.set_become_plugin(plugin)
    names = C.config.get_plugin_vars("become", plugin._load_name)
    options = dict((k, action._templar.template(task_vars[k])) for k in names if k in task_vars)
    keys = action._task.dump_attrs()
    keys["become_user"] = ident.get("become_user") or "root"
    if getattr(action._play_context, "become_pass", None):
        keys["become_pass"] = action._play_context.become_pass
    plugin.set_options(task_keys=keys, var_options=options)
    action._play_context.become = True


def become_refusal(host, res, action):
    """The start's refusal when its escalation failed (no password, sudo missing, ...): the
    host, why, and the variables that fix it; None when ``res`` is no such failure."""
    if not res.get("failed") or not escalates(action):
        return None
    text = " ".join(str(res.get(k) or "") for k in ("msg", "module_stderr", "module_stdout", "stderr")).lower()
    why = next((w for key, w in BECOME_FAILURES if key in text), None)
    if why is None:
        return None
    method = action._connection.become.name
    user = action._get_remote_user() or "the login user"
    return ("privileges: host %s: %s cannot escalate with %s: %s. Set ansible_become_password for %s (or "
            "ansible_become_method), allow %s passwordless %s, or set fleetqual_become: false to run as %s without "
            "root (a fleetqual_bin_dir and fleetqual_test_dir it can write, no raw devices, no cgroup attribution; "
            "docs/privileges.md)" % (host, user, method, why, host, user, method.split(".")[-1], user))
