# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/collect/probes.py, the kernel's capability probes (docs/kernel-log.md,
"Capability probes"): a failed WRITE_ZEROES, DISCARD, SECURE_ERASE or WRITE_SAME is a note on
its drive whatever the error word, every other operation's failure stays an error (the
operation judged by its name in the line, on the block layer's formats of old and new
kernels); the kernel log keeps the notes apart from the counts the judge uses, and a SCSI
disk's refused command (result and sense lines, then the CDB) is one note, not three errors."""
import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fleetqual.storage.plugins.module_utils.collect import kmsg, probes

# block/blk-core.c blk_errors[]: every error word the block layer prints
WORDS = ("operation not supported", "timeout", "critical space allocation", "recoverable transport",
         "critical target", "critical nexus", "critical medium", "protection", "kernel resource",
         "device resource", "nonblocking retry", "device offline", "I/O")
# include/linux/blk_types.h REQ_OP_* by number, as blk_op_str names them
OPS = {"READ": 0x0, "WRITE": 0x1, "FLUSH": 0x2, "DISCARD": 0x3, "SECURE_ERASE": 0x5, "WRITE_SAME": 0x7,
       "WRITE_ZEROES": 0x9, "ZONE_OPEN": 0xa, "ZONE_CLOSE": 0xb, "ZONE_FINISH": 0xc, "ZONE_APPEND": 0xd,
       "ZONE_RESET": 0xf, "ZONE_RESET_ALL": 0x11, "DRV_IN": 0x22, "DRV_OUT": 0x23}
PREFIXES = ("", "blk_update_request: ", "blk_print_req_error: ")


def request_line(word, op, dev="sdb", prefix=""):
    return "%s%s error, dev %s, sector 2048 op 0x%x:(%s) flags 0x800 phys_seg 0 prio class 2" % (
        prefix, word, dev, OPS[op], op)


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("op", sorted(probes.PROBE_OPS))
def test_a_failed_probe_operation_is_a_note_whatever_its_error_word(op, word, prefix):
    text = request_line(word, op, prefix=prefix)
    assert kmsg.classify(text) == (probes.PROBE, "note", [("block", "sdb")])
    assert probes.probe_op(text) == (op, word)


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("op", sorted(set(OPS) - set(probes.PROBE_OPS)))
def test_every_other_failed_operation_is_still_an_error(op, word, prefix):
    text = request_line(word, op, prefix=prefix)
    kind, severity, refs = kmsg.classify(text)
    assert kind != probes.PROBE and severity == "error" and refs[0] == ("block", "sdb")
    assert probes.probe_op(text) is None


@pytest.mark.parametrize("text", [
    # the op in the line decides, not a word elsewhere in it
    "I/O error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2 after WRITE_ZEROES",
    "operation not supported error, dev sdb, sector 2048 op 0x2:(FLUSH) flags 0x800 phys_seg 0 prio class 2",
    "print_req_error: I/O error, dev sda, sector 836148808",    # no op: an error
    "sd 0:0:0:0: [sda] tag#0 CDB: Read(10) 28 00 00 00 08 00 00 00 08 00",
])
def test_lines_that_are_not_probes(text):
    assert probes.probe_op(text) is None
    found = kmsg.classify(text)
    assert found is None or found[0] != probes.PROBE


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(sorted(OPS)), word=st.sampled_from(WORDS), prefix=st.sampled_from(PREFIXES),
       dev=st.from_regex(r"\A(?:sd[a-z]{1,2}|nvme[0-9]n[0-9]|loop[0-9]{1,3}|vd[a-z])\Z"),
       tail=st.text(st.characters(whitelist_categories=("Lu", "Ll", "Nd", "Zs")), max_size=30))
def test_property_a_note_exactly_when_the_lines_op_is_a_probe(op, word, prefix, dev, tail):
    text = request_line(word, op, dev, prefix) + tail
    kind, severity, refs = kmsg.classify(text)
    assert (kind == probes.PROBE) == (op in probes.PROBE_OPS)
    assert (severity == "note") == (op in probes.PROBE_OPS)
    assert refs[0] == ("block", dev)


def test_the_note_names_the_capability():
    assert probes.probe_note("WRITE_ZEROES") == "does not support write zeroes"
    assert probes.probe_note("DISCARD") == "does not support discard"
    assert probes.probe_op("sd 0:0:0:0: [sda] tag#7 CDB: Unmap/Read sub-channel 42 00 00 00 00 00 00 00 18 00") == (
        "DISCARD", "SCSI")


# --------------------------------------------------------------------------- the job's kernel log

class FakeSource:
    """A kernel log source that hands over the given texts as records, one batch per read."""

    name = "kmsg"

    def __init__(self, batches):
        self.batches = list(batches)
        self.lost = 0
        self.seq = 0

    def read(self):
        out = []
        for text in self.batches.pop(0) if self.batches else []:
            self.seq += 1
            out.append({"seq": self.seq, "usec": 1000000 * self.seq, "level": 3, "facility": 0, "text": text,
                        "fields": {}})
        return out

    def close(self):
        pass


def log_section(during=(), before=()):
    """The kernel section the job's KernelLog makes of ``before`` (its look-back) and
    ``during`` (read while a workload ran), over a sysfs that knows no device."""
    log = kmsg.KernelLog(sysfs_root="/nonexistent")
    source = FakeSource([list(before), list(during)])
    log.source = source
    log.look_back(source.read(), (0.0, 0.0))
    log.set_workload("over_cache-rndwr-t1")
    log.poll()
    return log.section()


ZERO_LOOP = request_line("operation not supported", "WRITE_ZEROES", "loop3")
READ_ERR = request_line("I/O", "READ", "loop3")


def test_the_kernel_log_keeps_probes_as_notes_and_counts_only_errors():
    sec = log_section(during=[ZERO_LOOP, ZERO_LOOP, READ_ERR], before=[ZERO_LOOP])
    assert sec["counts"] == {"loop3": {"io_error": 1}} and sec["counts_before"] == {}
    assert [m["text"] for m in sec["messages"]] == [READ_ERR]
    [note] = sec["notes"]
    assert (note["drive"], note["op"], note["note"], note["error"]) == (
        "loop3", "WRITE_ZEROES", "does not support write zeroes", "operation not supported")
    assert (note["count"], note["count_before"], note["lines"]) == (2, 1, 0)
    assert note["first"]["text"] == ZERO_LOOP and note["first"]["before_run"] is True


BLOG = ["sd 0:0:0:0: [sda] tag#0 FAILED Result: hostbyte=DID_OK driverbyte=DRIVER_OK cmd_age=0s",
        "sd 0:0:0:0: [sda] tag#0 Sense Key : Illegal Request [current]",
        "sd 0:0:0:0: [sda] tag#0 Add. Sense: Invalid command operation code",
        "sd 0:0:0:0: [sda] tag#0 CDB: Write same(16) 93 08 00 00 00 00 00 00 00 22 00 00 00 06 00 00",
        "critical target error, dev sda, sector 34 op 0x3:(DISCARD) flags 0x0 phys_seg 1 prio class 0"]


def test_a_scsi_disk_refusing_a_probe_command_is_one_note_not_sense_errors():
    other = "sd 0:0:0:0: [sda] tag#5 Sense Key : Medium Error [current]"
    sec = log_section(during=[other] + BLOG)
    # the refused command's own result and sense lines are the probe's; another command's stay
    assert sec["counts"] == {"sda": {"medium_error": 1}}
    assert [m["text"] for m in sec["messages"]] == [other]
    notes = dict((n["op"], n) for n in sec["notes"])
    assert sorted(notes) == ["DISCARD", "WRITE_SAME"]
    assert (notes["WRITE_SAME"]["count"], notes["WRITE_SAME"]["lines"]) == (1, 3)
    assert (notes["DISCARD"]["count"], notes["DISCARD"]["error"]) == (1, "critical target")


def test_sense_lines_of_a_command_that_was_not_a_probe_stay_errors():
    lines = ["sd 0:0:0:0: [sda] tag#2 Sense Key : Illegal Request [current]",
             "sd 0:0:0:0: [sda] tag#2 CDB: Read(10) 28 00 00 00 08 00 00 00 08 00"]
    sec = log_section(during=lines)
    assert sec["counts"] == {"sda": {"scsi_sense": 1}} and sec["notes"] == []
