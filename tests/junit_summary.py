"""One closing line for the pytest streams of `make test` (Makefile: test-fleet, test-fleet2,
test-unit, test-rest, test-vm).

`make test` runs the pytest suites as several processes at once, each writing a JUnit XML file;
this reads them and prints ``pytest: N passed, N failed, N skipped`` alone on a line, the
count of every stream together, after one line per skipped test with its reason (a skip is
never silent). A stream whose file is missing (its pytest did not get as
far as writing it) counts as a failure, so the line never claims a complete run it did
not see. Exit status: 0 when every file was read and nothing failed or erred.
"""
import sys
import xml.etree.ElementTree as ET


def counts(path):
    """(tests, failures + errors, skipped) of one pytest JUnit file."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = failed = skipped = 0
    for s in suites:
        tests += int(s.get("tests", 0))
        failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
        skipped += int(s.get("skipped", 0))
    return tests, failed, skipped


def skips(path):
    """``["<class>::<name>: <reason>"]``: the skipped tests of one pytest JUnit file."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        skip = case.find("skipped")
        if skip is not None:
            out.append("%s::%s: %s" % (case.get("classname"), case.get("name"),
                                       skip.get("message") or (skip.text or "").strip() or "no reason given"))
    return out


def main(paths):
    tests = failed = skipped = 0
    missing = []
    for path in paths:
        try:
            t, f, s = counts(path)
        except (OSError, ET.ParseError) as exc:
            missing.append("%s (%s)" % (path, exc))
            continue
        tests += t
        failed += f
        skipped += s
        for line in skips(path):
            print("skipped: %s" % line)
    for m in missing:
        print("junit_summary: no result from %s" % m, file=sys.stderr)
    failed += len(missing)
    passed = tests - failed - skipped + len(missing)
    print("pytest: %d passed, %d failed, %d skipped" % (max(passed, 0), failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
