# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/common/secrets.py, the one list of secret settings and the one mask: the
value of every secret key, at any depth of dicts and lists, is masked; every other value is
the input's; the input is never changed."""
import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.common.secrets import (
    COMMAND_ARGV_KEYS, MASK, SECRET_KEYS, is_command, is_secret_key, mask_secrets, scrub, secret_values)

MARKER = "fq-MARKER-7f3a"


def _any_case(draw_word):
    return st.tuples(draw_word, st.lists(st.booleans(), min_size=40, max_size=40)).map(
        lambda wf: "".join(c.upper() if up else c.lower() for c, up in zip(wf[0], wf[1])))


# every key of the list, in any case, and names ending with _key (ssh_key, API_KEY, _key)
SECRET = _any_case(st.one_of(st.sampled_from(SECRET_KEYS),
                             st.text("abcxyz_", max_size=8).map(lambda s: s + "_key")))
# keys that are not secrets (a secret word inside a longer name is not one: keyring, tokens,
# password_hint, key, secretary)
ORDINARY = st.one_of(st.sampled_from(["method", "baseuri", "username", "user", "name", "port", "key", "keys",
                                      "keyring", "tokens", "password_hint", "secretary", "_key_id", "off", "on"]),
                     st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(SECRET, ORDINARY), inner, max_size=4)), max_leaves=30)


def _empty(v):
    return v is None or (isinstance(v, (str, list, dict)) and len(v) == 0)


def _check(original, masked, path="$"):
    """Walk the input and its masked copy together: a secret key's non-empty value is MASK,
    an empty one is kept, every other value equal; returns how many values were masked."""
    n = 0
    if isinstance(original, dict):
        assert isinstance(masked, dict) and list(masked) == list(original), path
        for k, v in original.items():
            where = "%s.%s" % (path, k)
            if not is_secret_key(k) and is_command(original) and k in COMMAND_ARGV_KEYS and isinstance(v, list):
                # a power command's argv: its first word, every argument masked
                assert masked[k][1:] == [MASK] * (len(v) - 1), where
                n += len(v) - 1 + (_check(v[0], masked[k][0], where + "[0]") if v else 0)
            elif is_secret_key(k) and not _empty(v):
                assert masked[k] == MASK, where
                n += 1
            elif is_secret_key(k):
                assert masked[k] == v, where
            else:
                n += _check(v, masked[k], where)
    elif isinstance(original, list):
        assert isinstance(masked, list) and len(masked) == len(original), path
        for i, (v, m) in enumerate(zip(original, masked)):
            n += _check(v, m, "%s[%d]" % (path, i))
    else:
        assert masked == original and type(masked) is type(original), path
    return n


def _count_secrets(value):
    if isinstance(value, dict):
        return sum(1 if is_secret_key(k) and not _empty(v)
                   else len(v) - 1 + (_count_secrets(v[0]) if v else 0)
                   if not is_secret_key(k) and is_command(value) and k in COMMAND_ARGV_KEYS and isinstance(v, list)
                   else _count_secrets(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_count_secrets(v) for v in value)
    return 0


@settings(deadline=None, max_examples=300)
@given(value=VALUES)
def test_every_secret_is_masked_at_any_depth_every_other_value_kept_and_the_input_unchanged(value):
    before = copy.deepcopy(value)
    masked = mask_secrets(value)
    assert value == before                              # not mutated
    assert _check(value, masked) == _count_secrets(value)
    assert mask_secrets(masked) == masked               # masking twice changes nothing more


@settings(deadline=None, max_examples=200)
@given(value=VALUES, key=SECRET, depth=st.lists(st.one_of(ORDINARY, st.just(0)), max_size=5))
def test_a_marker_under_a_secret_key_at_any_depth_is_gone_from_the_masked_copy(value, key, depth):
    """A marker password put under a secret key somewhere in the structure is in no part of
    the masked copy's JSON, and secret_values names it, so scrub removes it from a text."""
    inner = {key: MARKER, "sibling": value}
    for step in reversed(depth):
        inner = [inner] if step == 0 else {step: inner}
    doc = json.dumps(mask_secrets(inner))
    assert MARKER not in doc and MASK in doc
    assert MARKER in secret_values(inner)
    assert MARKER not in scrub("refused: %r" % (inner,), secret_values(inner))
    assert MARKER in json.dumps(inner)                  # the input still holds it


@settings(deadline=None, max_examples=100)
@given(program=st.text(min_size=1, max_size=12), args=st.lists(st.text(max_size=12), max_size=5),
       method=st.sampled_from(["command", "COMMAND", "Command"]))
def test_a_power_command_is_shown_by_its_first_word(program, args, method):
    """The argv lists of a command power method: the program is shown, every argument masked
    (a password put on the argv against the docs' advice is not printed); another method's
    lists and the command's other keys are kept."""
    power = {"method": method, "off": [program] + args + [MARKER], "on": [program, MARKER], "timeout": 30,
             "name": "kept"}
    masked = mask_secrets({"fleetqual_power": power})["fleetqual_power"]
    assert masked == {"method": method, "off": [program] + [MASK] * (len(args) + 1), "on": [program, MASK],
                      "timeout": 30, "name": "kept"}
    assert MARKER not in json.dumps(masked) and power["off"][-1] == MARKER
    other = {"method": "redfish", "off": [program, MARKER]}
    assert mask_secrets(other) == other


def test_the_list_and_its_edges():
    power = {"method": "redfish", "baseuri": "10.20.0.17", "username": "admin", "password": MARKER,
             "Token": "t0k", "PASSWD": 5, "client_secret": "not a listed key", "secret": {"nested": "x"},
             "ssh_key": ["a", "b"], "Api_Key": "k", "key": "kept", "keyring": "kept",
             "on": [{"password": ""}, {"password": None}, {"token": []}]}
    inputs = {"h1": {"fleetqual_power": power, "fleetqual_profile": "durability"}}
    masked = mask_secrets(inputs)["h1"]["fleetqual_power"]
    assert masked == {"method": "redfish", "baseuri": "10.20.0.17", "username": "admin", "password": MASK,
                      "Token": MASK, "PASSWD": MASK, "client_secret": "not a listed key", "secret": MASK,
                      "ssh_key": MASK, "Api_Key": MASK, "key": "kept", "keyring": "kept",
                      # a None or empty secret stays as it is: it hides nothing
                      "on": [{"password": ""}, {"password": None}, {"token": []}]}
    assert power["password"] == MARKER and power["secret"] == {"nested": "x"}
    assert mask_secrets(("a", {"password": "p"})) == ("a", {"password": MASK})
    assert mask_secrets("password") == "password" and mask_secrets(None) is None
    assert {1: "x", None: "y"} == mask_secrets({1: "x", None: "y"})     # keys that are not strings
    assert secret_values(inputs) == [MARKER, "t0k", "5", "a", "b", "k", "x"]
    assert scrub("ab %s %s" % (MARKER, MARKER), [MARKER, ""]) == "ab %s %s" % (MASK, MASK)
    assert scrub(None, [MARKER]) is None
