"""What a host that did not pass prints (plugin_utils/report/brief.py): for any host, verdict,
reasons and record path the line is bounded (brief.message_limit), on one line, and holds the
verdict and the start of the first reason; the reasons left out are counted with the file
that holds them."""
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.plugin_utils.report import brief

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000)
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./", min_size=1, max_size=60)
VERDICT = st.sampled_from(["PASS", "FAIL", "ERROR", "UNREACHABLE", "INCONCLUSIVE"])


@settings(max_examples=300, deadline=None)
@given(host=WORD, verdict=VERDICT, reasons=st.lists(TEXT, max_size=12), where=st.one_of(st.none(), WORD),
       max_reasons=st.integers(1, 5), max_chars=st.integers(1, 400))
def test_message_is_bounded_and_keeps_the_verdict_and_first_reason(host, verdict, reasons, where, max_reasons, max_chars):
    msg = brief.message(host, verdict, reasons, where, max_reasons=max_reasons, max_chars=max_chars)
    assert len(msg) <= brief.message_limit(host, verdict, where, max_reasons=max_reasons, max_chars=max_chars)
    assert "\n" not in msg
    assert msg.startswith("%s: %s" % (host, verdict))
    kept = [brief.one_line(r) for r in reasons if brief.one_line(r)]
    if kept:
        # the first reason, whole or up to its ellipsis
        first, was_cut = brief.cut(kept[0], max_chars)
        assert first in msg
        assert first.rstrip(brief.ELLIPSIS).rstrip()[:max_chars - 1] in msg
        assert was_cut == (len(kept[0]) > max_chars)
    dropped = max(0, len(kept) - max_reasons)
    if dropped:
        assert msg.endswith("(+%d more in %s)" % (dropped, where) if where else "(+%d more)" % dropped), msg
    elif where and any(len(r) > max_chars for r in kept):
        assert msg.endswith("(in full in %s)" % where), msg
    elif any(len(r) > max_chars for r in kept):
        assert msg.endswith(" (cut)"), msg
    else:
        # nothing left out, nothing cut: every reason whole, no note
        assert msg == " ".join(p for p in ("%s: %s" % (host, verdict), "; ".join(kept)) if p)


@settings(max_examples=200, deadline=None)
@given(value=TEXT, where=st.one_of(st.none(), WORD), limit=st.integers(1, 1000))
def test_text_is_bounded(value, where, limit):
    out = brief.text(value, where, limit=limit)
    assert "\n" not in out
    assert len(out) <= limit + len(str(where or "")) + brief.NOTE_MAX
    line = brief.one_line(value)
    if len(line) <= limit:
        assert out == line
    else:
        assert out.startswith(line[:limit - 1].rstrip())
        assert out.endswith("(in full in %s)" % where if where else "(cut)")


def test_examples():
    reasons = ["out-rndrd-t1: IOPS 22358 < limit 1000000000000", "x" * 500, "third", "fourth", "fifth"]
    msg = brief.message("db1", "FAIL", reasons, "/srv/results/r1/db1.json")
    assert msg.startswith("db1: FAIL out-rndrd-t1: IOPS 22358 < limit 1000000000000; xxx")
    assert "x" * 299 + brief.ELLIPSIS + "; third" in msg and "fourth" not in msg
    assert msg.endswith("(+2 more in /srv/results/r1/db1.json)")
    assert brief.message("db1", "PASS", []) == "db1: PASS"
    assert brief.message("db1", "ERROR", ["task 'x' failed:\n  line one\n  line two"]) == \
        "db1: ERROR task 'x' failed: line one line two"
    assert brief.text("short") == "short"


def test_a_failed_start_prints_its_brief_and_leaves_its_whole_result_to_the_rescue(tmp_path):
    """plugins/action/qualify_host.py: a failed start's printed result is its bounded message
    and the file holding its whole result; the rescue gets the whole result and message back;
    a wait that failed after storing the record hands that record over."""
    import json

    from ansible_collections.fleetqual.storage.plugins.action import qualify_host as qh
    long_msg = "preflight of /data: refused " + " ".join("name-%d" % i for i in range(200))
    res = {"failed": True, "changed": True, "msg": long_msg, "facts": {"kernel": "6.1"}, "plan": [{"id": "w"}] * 50,
           "drives": {"drives": [{"name": "sda"}]}, "preflight": {"filesystem": "ext4"}, "identity": {"become": False}}
    out = qh.brief_start(dict(res), "db1", str(tmp_path / ".progress"))
    path = str(tmp_path / ".progress" / ".failed-start-db1")
    assert out["start_file"] == path and out["failed"] is True and out["changed"] is True
    assert set(out) == {"failed", "changed", "msg", "start_file"}, out
    assert out["msg"].startswith("preflight of /data: refused name-0 ") and out["msg"].endswith("\u2026 (cut)")
    assert len(out["msg"]) <= brief.MAX_CHARS + brief.NOTE_MAX
    started, error = qh.whole_start(out, {"task": "Start", "msg": out["msg"]})
    assert error == {"task": "Start", "msg": long_msg}
    assert started["facts"] == res["facts"] and started["identity"] == res["identity"] and len(started["plan"]) == 50
    # another task's failure keeps its own message
    assert qh.whole_start(out, {"task": "Install sysstat", "msg": "no package"})[1]["msg"] == "no package"
    # not a host's progress record for the fleet line (plugin_utils/remote/progress.py reads <host>.json)
    from ansible_collections.fleetqual.storage.plugins.plugin_utils.remote import progress as job_progress
    assert job_progress.read_progress(str(tmp_path / ".progress")) == []
    # no progress directory: the result as it was
    assert qh.brief_start(dict(res), "db1", None) == res

    record = {"verdict": "ERROR", "reasons": ["task 'Wait' failed: " + "x" * 900, "r2", "r3", "r4"],
              "results_file": str(tmp_path / "run" / "db1.json")}
    failed = qh.outcome("db1", record, {"task": "Wait", "msg": "x"}, fail=True)
    assert set(failed) == {"changed", "failed", "verdict", "results_file", "msg"}
    assert failed["msg"].endswith("(+1 more in %s)" % record["results_file"]) and "r3" in failed["msg"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "db1.json").write_text(json.dumps(record))
    args = {"error": {"task": "Wait", "msg": failed["msg"]}}
    assert qh.stored_by_wait(args, {qh.RESULT_VAR: failed}) == record
    # the rescue of another failure (an earlier play's result left registered) does not take it
    assert qh.stored_by_wait({"error": {"task": "Start", "msg": "refused"}}, {qh.RESULT_VAR: failed}) is None
    rescued = qh.outcome("db1", record, {"task": "Wait", "msg": "x"}, fail=False)
    assert rescued["record"] == record and rescued["ansible_stats"]["data"]["fleetqual_report"] == record
    assert "failed" not in rescued


@settings(max_examples=200, deadline=None)
@given(result=st.fixed_dictionaries({}, optional={"msg": TEXT, "rc": st.integers(-2, 3), "stderr": TEXT, "module_stdout": TEXT}),
       chars=st.integers(1, 300), lines=st.integers(1, 25))
def test_the_bounded_callbacks_failure_text_is_bounded(result, chars, lines):
    """plugins/callback/bounded.py: what it prints of a failed result of any task: at most
    ``failure_lines`` lines of ``failure_chars`` characters (the last with the note), starting
    with the message's first line."""
    from ansible_collections.fleetqual.storage.plugins.callback.bounded import failure_text
    out = failure_text(result, chars, lines).split("\n")
    assert 1 <= len(out) <= lines
    note = len("the -v output") + brief.NOTE_MAX
    assert all(len(ln) <= chars + note for ln in out), out
    first = next((ln for ln in str(result.get("msg") or "").strip().splitlines() if ln.strip()), None)
    if first is not None:
        assert out[0].startswith(brief.cut(first, chars)[0].rstrip(brief.ELLIPSIS)[:max(0, chars - 1)].rstrip())
