"""The C option table: `iobench options --format json`, --help and the config echo
all come from it; the docs describe every option in it."""
import json
import os
import re
import subprocess

from iobench_helpers import ROOT, SMALL

DOC = os.path.join(ROOT, "docs", "iobench.md")


def table(iobench):
    p = subprocess.run([iobench, "options", "--format", "json"], capture_output=True, text=True, timeout=30, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["options"]


def test_table_rows_are_complete_and_unique(iobench):
    rows = table(iobench)
    assert len(rows) >= 35
    names = [r["name"] for r in rows]
    flags = [r["flag"] for r in rows]
    assert len(set(names)) == len(names) and len(set(flags)) == len(flags)
    for r in rows:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", r["name"]), r
        assert r["flag"] == "--" + r["name"].replace("_", "-"), r     # module name <-> flag, one rule
        assert r["type"] in ("path", "int", "float", "size", "bool", "str", "list"), r
        assert r["help"], r
    byname = {r["name"]: r for r in rows}
    assert byname["block_size"]["default"] == "16K" and byname["block_size"]["type"] == "size"
    assert byname["engine"]["choices"] == ["sync", "io_uring"]
    assert byname["fsync_end"]["default"] is True and byname["direct"]["default"] is False
    assert byname["db_group_commit_max"]["group"] == "db"


def test_help_lists_every_row(iobench):
    out = subprocess.run([iobench, "--help"], capture_output=True, text=True, check=False).stdout
    for r in table(iobench):
        assert re.search(r"^  %s[ \[]" % re.escape(r["flag"]), out, re.M), r["flag"]


def test_docs_list_every_row(iobench):
    doc = open(DOC).read()
    for r in table(iobench):
        assert re.search(r"^\| `%s[ `=\\]" % re.escape(r["flag"]), doc, re.M), "docs/iobench.md lacks " + r["flag"]


def test_config_echo_holds_the_table_defaults(ib, prepared, iobench):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrd", "--requests", "10")
    assert r.rc == 0, r
    cfg = r.json["config"]
    sizes = {"16K": 16384, "2G": 2 << 30, "256M": 256 << 20}
    checked = 0
    for row in table(iobench):
        key = row.get("config_key")
        if not key or row["group"] or row["name"] in ("total_size", "file_num", "time", "requests", "seed", "dir", "mode"):
            continue                     # given on the command line above, or derived
        want = row["default"]
        want = sizes.get(want, want) if row["type"] == "size" else want
        if key == "open_flags":
            want = []
        assert cfg[key] == want, (key, cfg[key], want)
        checked += 1
    assert checked >= 15


def test_every_value_option_reaches_the_config(ib, prepared):
    r = ib("run", "--dir", prepared, *SMALL, "--mode", "rndrw", "--requests", "50", "--rw-ratio", "3",
           "--fsync-freq", "7", "--fsync-mode", "fdatasync", "--report-interval", "0.5", "--warmup", "0.1",
           "--seed", "42", "--fsync-end=off", "--keep-cache", "--engine", "io_uring", "--iodepth", "2")
    assert r.rc == 0, r
    c = r.json["config"]
    assert (c["rw_ratio"], c["fsync_freq"], c["fsync_mode"], c["report_interval_s"], c["warmup_s"], c["seed"],
            c["fsync_end"], c["keep_cache"], c["engine"], c["iodepth"]) == \
        (3, 7, "fdatasync", 0.5, 0.1, 42, False, True, "io_uring", 2)


def test_options_bad_format(iobench):
    p = subprocess.run([iobench, "options", "--format", "xml"], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and "--format" in p.stderr


def test_ranges_written_in_the_docs_are_the_tables(iobench):
    """A range docs/iobench.md states for an option (`A..B`, the last one of its line)
    is the row's min..max, so the page cannot drift from the binary."""
    doc = open(DOC).read()
    checked = 0
    for r in table(iobench):
        m = re.search(r"^\| `%s[ `=\\].*$" % re.escape(r["flag"]), doc, re.M)
        ranges = re.findall(r"(\d+(?:\.\d+)?)\.\.(\d+(?:\.\d+)?)", m.group(0)) if m else []
        if not ranges:
            continue
        assert "min" in r, (r["flag"], "the docs state a range the table does not check")
        assert (float(ranges[-1][0]), float(ranges[-1][1])) == (r["min"], r["max"]), (r["flag"], ranges[-1])
        checked += 1
    assert checked >= 7
