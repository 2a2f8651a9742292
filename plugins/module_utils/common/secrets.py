# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one list of secret settings and the one function that masks them.

Whatever the collection returns, prints, stores or reports of a host's inputs (a task's
result, an error message, the host record, fleet.json, the reports) passes through
:func:`mask_secrets` first: the value of every secret key, at any depth of dicts and lists,
is replaced by :data:`MASK`. A secret key is one of :data:`SECRET_KEYS` or ends with one of
:data:`SECRET_SUFFIXES`, compared case-insensitively (``password``, ``PassWord``,
``ssh_key``). A secret that is None or empty (``""``, ``[]``, ``{}``) stays as it is: it
hides nothing, and it shows that no secret was given.

A power command (``fleetqual_power`` with ``method: command``, docs/durability.md) is shown by
its first word: the arguments of its ``off`` and ``on`` argv lists are masked too, since an
argv is where a password lands when it is not passed through the environment or a file.

An error message that quotes an input may hold a secret's value inside its text:
:func:`secret_values` collects the values of the secret keys of some inputs and
:func:`scrub` replaces each of them in a text by :data:`MASK`.

Standard library only: imported by modules on the host and by controller plugins."""

from __future__ import annotations

MASK = "********"
# keys whose value is a secret (a key equal to one of these, any case)
SECRET_KEYS = ("password", "passwd", "token", "secret")
# ... or ending with one of these (any case): ssh_key, api_key, private_key
SECRET_SUFFIXES = ("_key",)
# the argv lists of a mapping whose method is "command" (fleetqual_power): first word shown
COMMAND_ARGV_KEYS = ("off", "on")


def is_secret_key(key):
    """True when a mapping's ``key`` names a secret (a string, compared case-insensitively)."""
    if not isinstance(key, str):
        return False
    k = key.lower()
    return k in SECRET_KEYS or k.endswith(SECRET_SUFFIXES)


def _empty(value):
    return value is None or (isinstance(value, (str, bytes, list, tuple, dict)) and len(value) == 0)


def is_command(mapping):
    """True when ``mapping`` is a power command's settings (``method: command``, any case)."""
    method = mapping.get("method")
    return isinstance(method, str) and method.lower() == "command"


def _command_argv(argv):
    """A command's argv as the output shows it: its first word, each argument masked."""
    return [mask_secrets(argv[0])] + [MASK] * (len(argv) - 1) if argv else []


def mask_secrets(value):
    """A copy of ``value`` with the value of every secret key (:func:`is_secret_key`), at any
    depth inside dicts and lists (and tuples), replaced by :data:`MASK`; a None or empty secret
    is kept. Every other value is equal to the input's. The input is never changed: dicts and
    lists are new, other values (strings, numbers) are the input's own."""
    if isinstance(value, dict):
        command = is_command(value)
        return {k: (v if _empty(v) else MASK) if is_secret_key(k)
                else _command_argv(v) if command and k in COMMAND_ARGV_KEYS and isinstance(v, (list, tuple))
                else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, tuple):
        return tuple(mask_secrets(v) for v in value)
    return value


def secret_values(value):
    """The values of the secret keys inside ``value`` (any depth; a secret that is a dict or a
    list gives each of its scalars), as non-empty strings, longest first, without repeats: what
    :func:`scrub` must remove from a text."""
    found = set()

    def leaves(v):
        if isinstance(v, dict):
            for x in v.values():
                leaves(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                leaves(x)
        elif v is not None and not isinstance(v, bool):
            s = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            if s:
                found.add(s)

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if is_secret_key(k):
                    leaves(x)
                else:
                    walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(value)
    return sorted(found, key=lambda s: (-len(s), s))


def scrub(text, values):
    """``text`` with every occurrence of each of ``values`` (:func:`secret_values`) replaced by
    :data:`MASK`, the longest first."""
    if not isinstance(text, str):
        return text
    for s in sorted((v for v in values if v), key=len, reverse=True):
        text = text.replace(s, MASK)
    return text


__all__ = ["MASK", "SECRET_KEYS", "SECRET_SUFFIXES", "COMMAND_ARGV_KEYS", "is_command", "is_secret_key", "mask_secrets",
           "secret_values", "scrub"]
