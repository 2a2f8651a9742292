# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The power-cut test's inputs, checked on the controller before any host is contacted
(docs/durability.md): ``fleetqual_durability`` (the test's settings), ``fleetqual_power``
(how the controller cuts and restores the host's power) and the refusals that keep a power
cut away from what must never lose it.

:func:`durability_settings` returns the settings with their defaults, or the problems
(:func:`durability_plan`: with the targets resolved, for the role);
:func:`validate_power` checks a power action; :func:`power_cut_refusals` says why a host
must not be power-cut: no power action, the controller itself, a production host (its
profile carries production safety, as the compliance profile does), no target named, a
target not opted in with ``destroy_data: true``, a directory target on the root
filesystem's own top directories. Each problem names the host, the variable path and the
fix or the closest valid value."""

import difflib

from ansible_collections.fleetqual.storage.plugins.module_utils.common.numeric import is_int, is_number
from ansible_collections.fleetqual.storage.plugins.module_utils.common.size import parse_size
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.targets import resolve_targets
from ansible_collections.fleetqual.storage.plugins.module_utils.plan.vocabulary import type_name

DURABILITY_VAR = "fleetqual_durability"
POWER_VAR = "fleetqual_power"

# key -> (default, kind, low, high, what)
DURABILITY_KEYS = {
    "cycles": (3, "int", 1, 100, "power cuts, each after a writing phase and followed by a read-back"),
    "write_s": (10, "number", 1, 3600, "seconds of writing before each cut"),
    "threads": (4, "int", 1, 256, "writer threads per target"),
    "size": ("64M", "size", 1 << 20, 1 << 40, "the region written on each target"),
    "block_size": ("4K", "size", 4096, 1 << 20, "the size of each write, a multiple of 4 KiB"),
    "off_s": (5, "number", 0, 600, "seconds the power stays off"),
    "boot_timeout_s": (900, "number", 30, 7200, "seconds the host has to answer again after power on"),
}
# method -> (required keys, optional keys with their defaults)
POWER_METHODS = {
    "redfish": (("baseuri", "username", "password"),
                {"resource_id": None, "validate_certs": True, "ca_path": None, "timeout": 30}),
    "ipmi": (("name", "user", "password"), {"port": 623, "timeout": 30}),
    "command": (("off", "on"), {"timeout": 60}),
}
# the controller's own addresses: a host reached there is the machine that runs the playbook
# (unless through a forwarded port, as a virtual machine's sshd is: it is then a guest)
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1", "localhost.localdomain")
# directories whose filesystem is the system's own: a power cut there risks the host's boot
SYSTEM_TOPS = ("/", "/tmp", "/var", "/var/tmp", "/home", "/root", "/opt", "/srv", "/usr", "/etc", "/boot")


def _labelled(host, path):
    return "%s%s" % ("host %s: " % host if host else "", path)


def _did_you_mean(word, choices):
    found = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.5)
    return " (did you mean %s?)" % found[0] if found else ""


def _number(value, kind):
    if kind == "int":
        return value if is_int(value) else None
    if kind == "number":
        return value if is_number(value) else None
    try:
        return parse_size(value)
    except (TypeError, ValueError):
        return None


def _argv_shown(value):
    """A power command as messages show it: its type and first word, never the rest (an argument
    may be a secret; docs/durability.md says how a command gets a BMC password off its argv)."""
    if isinstance(value, list) and value:
        bad = [i for i, x in enumerate(value) if not (isinstance(x, str) and x)]
        return "a list of %d items starting with %s (item %d: %s)" % (
            len(value), _first_word(value[0]), bad[0], "empty" if value[bad[0]] == "" else type_name(value[bad[0]]))
    if isinstance(value, list):
        return "an empty list"
    if isinstance(value, str) and value.split():
        return "a string starting with %r (a list is needed: it is run without a shell)" % value.split()[0]
    return type_name(value) if value not in ("", None) else "nothing"


def _first_word(value):
    if isinstance(value, str):
        return repr(value.split()[0]) if value.split() else "an empty string"
    return type_name(value)


def durability_settings(value, host=None):
    """(settings with every default filled in, problems) of ``fleetqual_durability``."""
    out = {k: _number(spec[0], spec[1]) for k, spec in DURABILITY_KEYS.items()}
    if value in (None, {}):
        value = {}
    if not isinstance(value, dict):
        return out, ["%s: must be a mapping such as {cycles: 3}, got %s" % (_labelled(host, DURABILITY_VAR), type_name(value))]
    problems = []
    for key in value:
        if key not in DURABILITY_KEYS:
            where = _labelled(host, "%s.%s" % (DURABILITY_VAR, key))
            problems.append("%s: unknown key%s; known: %s" % (where, _did_you_mean(key, DURABILITY_KEYS), ", ".join(DURABILITY_KEYS)))
    for key, (default, kind, low, high, what) in DURABILITY_KEYS.items():
        if key not in value:
            continue
        raw = value[key]
        n = _number(raw, kind)
        path = _labelled(host, "%s.%s" % (DURABILITY_VAR, key))
        if n is None or isinstance(raw, bool):
            problems.append("%s: must be %s (%s), got %r" % (
                path, {"int": "a whole number", "number": "a number", "size": "a size such as 64M"}[kind], what, raw))
            continue
        if not low <= n <= high:
            near = min(max(n, low), high)
            problems.append("%s: must be between %s and %s (%s), got %r; closest valid: %s" % (
                path, low, high, what, raw, near))
            continue
        if key == "block_size" and n % 4096:
            problems.append("%s: must be a multiple of 4 KiB (the unit each write stamps and the check reads), got %r;"
                            " closest valid: %dK" % (path, raw, max(4, round(n / 4096) * 4)))
            continue
        out[key] = n if kind == "size" else raw
    if not problems and out["size"] < out["block_size"] * out["threads"]:
        problems.append("%s: %d bytes hold fewer blocks of %d bytes than the %d writer threads (each thread writes "
                        "blocks of its own); closest valid: %s" % (
                            _labelled(host, DURABILITY_VAR + ".size"), out["size"], out["block_size"], out["threads"],
                            "%dK" % (out["block_size"] * out["threads"] // 1024)))
    return out, problems


def validate_power(value, host=None):
    """The problems of ``fleetqual_power`` (None or {} = not configured: no problem here)."""
    if value in (None, {}):
        return []
    if not isinstance(value, dict):
        return ["%s: must be a mapping such as {method: redfish, baseuri: bmc.example.com, username: ..., "
                "password: ...}, got %s" % (_labelled(host, POWER_VAR), type_name(value))]
    method = value.get("method")
    if method not in POWER_METHODS:
        where = _labelled(host, POWER_VAR + ".method")
        return ["%s: must be one of %s, got %r%s" % (where, ", ".join(POWER_METHODS), method, _did_you_mean(method, POWER_METHODS))]
    required, optional = POWER_METHODS[method]
    problems = []
    for key in value:
        if key != "method" and key not in required and key not in optional:
            problems.append("%s: not a key of method %s%s; its keys: %s" % (
                _labelled(host, "%s.%s" % (POWER_VAR, key)), method, _did_you_mean(key, required + tuple(optional)),
                ", ".join(required + tuple(optional))))
    for key in required:
        v = value.get(key)
        if method == "command":
            # an argv list, run without a shell (nothing of it is ever parsed as shell syntax)
            if not (isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)):
                problems.append("%s: required for method command, the command run on the controller as an argv "
                                "list such as [virsh, destroy, db17], got %s" % (
                                    _labelled(host, "%s.%s" % (POWER_VAR, key)), _argv_shown(v)))
        elif not isinstance(v, str) or not v.strip():
            problems.append("%s: required for method %s, a non-empty string (a vault variable for a secret)" % (
                _labelled(host, "%s.%s" % (POWER_VAR, key)), method))
    if "timeout" in value and (not is_number(value["timeout"]) or isinstance(value["timeout"], bool)
                               or not 1 <= value["timeout"] <= 3600):
        where = _labelled(host, POWER_VAR + ".timeout")
        problems.append("%s: must be seconds between 1 and 3600, got %r" % (where, value["timeout"]))
    if method == "ipmi" and "port" in value and (not is_int(value["port"]) or not 1 <= value["port"] <= 65535):
        problems.append("%s: must be a port number (1-65535), got %r" % (_labelled(host, POWER_VAR + ".port"), value["port"]))
    if method == "redfish" and "ca_path" in value and (not isinstance(value["ca_path"], str) or not value["ca_path"]):
        problems.append("%s: must be the path, on the controller, of the CA certificate(s) the BMC's TLS certificate "
                        "is checked against, got %r" % (_labelled(host, POWER_VAR + ".ca_path"), value["ca_path"]))
    if method == "redfish" and "validate_certs" in value and not isinstance(value["validate_certs"], bool):
        problems.append("%s: must be true or false, got %r" % (_labelled(host, POWER_VAR + ".validate_certs"),
                                                               value["validate_certs"]))
    return problems


def power_cut_wanted(inputs):
    """True when the host's run includes the power-cut test: the durability profile, or
    burnin with a power action."""
    profile = inputs.get("fleetqual_profile")
    return profile == "durability" or (profile == "burnin" and bool(inputs.get(POWER_VAR)))


# method -> (the module it runs on the controller, the Python library that module needs or None)
POWER_MODULES = {"redfish": ("community.general.redfish_command", None),
                 "ipmi": ("community.general.ipmi_power", "pyghmi")}


def power_tools_missing(power, host=None, find_module=None, find_library=None):
    """What the controller lacks to run the host's power action: the collection's module or
    the Python library it needs (``find_module(name)`` / ``find_library(name)``: True when
    present; Ansible's plugin loader and importlib by default)."""
    method = (power or {}).get("method") if isinstance(power, dict) else None
    if method not in POWER_MODULES:
        return []
    module, library = POWER_MODULES[method]
    if find_module is None:
        from ansible.plugins.loader import module_loader

        def find_module(name):
            return module_loader.find_plugin_with_context(name).resolved
    if find_library is None:
        import importlib.util

        def find_library(name):
            return importlib.util.find_spec(name) is not None
    problems = []
    if not find_module(module):
        problems.append("%s: method %s runs %s on the controller, which is not installed there: install the "
                        "collection community.general (ansible-galaxy collection install community.general)" % (
                            _labelled(host, POWER_VAR + ".method"), method, module))
    if library and not find_library(library):
        problems.append("%s: method %s needs the Python library %s on the controller: pip install %s" % (
            _labelled(host, POWER_VAR + ".method"), method, library, library))
    return problems


def is_controller(connection, address, port):
    """True when a host so reached is the controller itself: the local connection, or SSH to
    one of the controller's own names on the standard port (a forwarded port reaches a guest)."""
    if connection == "local":
        return True
    return str(address or "").lower() in LOCAL_NAMES and port in (None, 22, "22")


def _on_system_top(path):
    p = "/" + "/".join(x for x in str(path).split("/") if x)
    return p in SYSTEM_TOPS


def power_cut_refusals(inputs, host=None, connection=None, address=None, port=None, safety=None):
    """Why this host must not be power-cut, before anything is contacted: the problems, each
    with its fix. ``inputs``: the host's variables (``fleetqual_power``, ``fleetqual_profile``,
    ``fleetqual_targets``); ``safety``: ``fleetqual_profile_safety`` (a profile with an entry
    there runs on production hosts)."""
    problems = []
    power = inputs.get(POWER_VAR)
    profile = inputs.get("fleetqual_profile")
    if power in (None, {}):
        problems.append("%s: the durability test cuts this host's power and needs a power action: set %s to "
                        "{method: redfish, baseuri: <BMC address>, username: ..., password: ...} (or method ipmi "
                        "or command; docs/durability.md)" % (_labelled(host, POWER_VAR), POWER_VAR))
    else:
        problems.extend(validate_power(power, host))
    if is_controller(connection, address, port):
        problems.append("%s: this host is the controller itself (connection %s, address %s): the playbook would cut "
                        "its own power; run the durability test from another machine" % (
                            _labelled(host, "ansible_host"), connection or "ssh", address))
    if isinstance(safety, dict) and profile in safety:
        problems.append("%s: profile %s runs on production hosts (it has production safety in "
                        "fleetqual_profile_safety): a production host is never power-cut; qualify it with the "
                        "durability profile before it holds production data" % (
                            _labelled(host, "fleetqual_profile"), profile))
    targets = inputs.get("fleetqual_targets")
    if not targets:
        problems.append("%s: the durability test writes only on targets opted in by name: list them, each with "
                        "destroy_data: true ({device: /dev/disk/by-id/..., destroy_data: true} or {path: /mnt/data/"
                        "fleetqual, destroy_data: true}); a power cut may damage what else the drive holds" % (
                            _labelled(host, "fleetqual_targets")))
    elif isinstance(targets, list):
        for i, t in enumerate(targets):
            if not isinstance(t, dict):
                continue            # resolve_targets says what is wrong with it
            where = _labelled(host, "fleetqual_targets[%d]" % i)
            if t.get("destroy_data") is not True:
                problems.append("%s.destroy_data: a power cut may damage what the drive under this target holds: "
                                "opt it in with destroy_data: true, got %s" % (
                                    where, "missing" if "destroy_data" not in t else repr(t.get("destroy_data"))))
            if "path" in t and _on_system_top(t["path"]):
                problems.append("%s.path: %s is a top directory of the system's own filesystem: a power cut there "
                                "risks the host's boot; use a directory on a drive of its own (a mount point such "
                                "as /mnt/data)" % (where, t["path"]))
    return problems


def durability_plan(settings, targets, host=None):
    """``{settings, targets}``: the settings with their defaults and the resolved targets;
    ValueError with every problem (the validation play refused them before any host was
    contacted)."""
    out, problems = durability_settings(settings, host)
    resolved, errors = resolve_targets(targets or [], host=host)
    problems += errors
    if problems:
        raise ValueError("; ".join(problems))
    return {"settings": out, "targets": resolved}


__all__ = ["DURABILITY_VAR", "POWER_VAR", "DURABILITY_KEYS", "POWER_METHODS", "durability_settings",
           "validate_power", "power_cut_wanted", "power_tools_missing", "is_controller", "power_cut_refusals",
           "durability_plan"]
