#!/usr/bin/env python3
"""Counts test cases in Bazel's test.xml files and prints "N passed, M failed".

    test_summary.py ROOT [LABEL...]
    test_summary.py --logs NAME ROOT [LABEL...] [--logs NAME ROOT [LABEL...]] [--check NAME RC]...

Each --logs group is one Bazel test run (e.g. the normal build and the
sanitized one, whose results live in different folders); NAME prefixes its
failures. Each --check is one more case that passed when RC is 0 (e.g. the
format check). Skipped cases (a GPU test on a machine without a GPU) are
reported on their own line and counted neither as passed nor as failed. A
test binary that crashed before writing its cases counts as one failure.
"""
import os
import sys
import xml.etree.ElementTree as ET


def test_dirs(root, labels):
    """Directories holding the results of `labels` (all under root if none)."""
    if not labels:
        for directory, subdirs, files in os.walk(root, followlinks=True):
            if any(d.startswith("shard_") for d in subdirs):
                continue  # its shards are walked instead
            if "test.xml" in files or "test.log" in files:
                yield directory
        return
    for label in labels:
        package, _, name = label.lstrip("/").partition(":")
        directory = os.path.join(root, package, name)
        # A sharded test keeps each shard's cases in its own folder; the
        # test.xml beside them holds only some of them.
        shards = sorted(d for d in (os.listdir(directory) if os.path.isdir(directory) else [])
                        if d.startswith("shard_"))
        # Folders of an earlier shard count (shard_1_of_4 after a change to
        # 6 shards) stay behind: count only the newest run's.
        if shards:
            newest = max(shards, key=lambda d: os.path.getmtime(os.path.join(directory, d)))
            total = newest.rpartition("_of_")[2]
            shards = [d for d in shards if d.rpartition("_of_")[2] == total]
        if shards:
            for shard in shards:
                yield os.path.join(directory, shard)
        else:
            yield directory


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []

    def fail(self, what):
        self.failed += 1
        self.failures.append(what)


def count_dir(directory, target, tally):
    files = os.listdir(directory) if os.path.isdir(directory) else []
    if "test.xml" not in files:
        tally.fail(target + " (no result: did not build or run)")
        return
    try:
        tree = ET.parse(os.path.join(directory, "test.xml"))
    except ET.ParseError:
        tally.fail(target + " (unreadable test.xml)")
        return
    cases = list(tree.iter("testcase"))
    target_failed = False
    for case in cases:
        name = case.get("classname", "") + "." + case.get("name", "")
        if case.find("failure") is not None or case.find("error") is not None:
            target_failed = True
            tally.fail(target + ": " + name)
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            tally.skipped += 1
        else:
            tally.passed += 1
    log = os.path.join(directory, "test.log")
    crashed = not cases
    if not crashed and not target_failed and os.path.exists(log):
        with open(log, errors="replace") as f:
            text = f.read()
        crashed = "[  FAILED  ]" in text or "Aborted" in text and "PASSED" not in text
    if crashed and not target_failed:
        tally.fail(target + " (crashed or reported failure outside a test case)")


def parse(argv):
    """Groups of (name, root, labels) and checks of (name, rc)."""
    if not argv or argv[0] not in ("--logs", "--check"):
        root = argv[0] if argv else "bazel-testlogs"
        return [("", root, argv[1:])], []
    groups, checks, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--check" and i + 2 < len(argv):
            checks.append((argv[i + 1], argv[i + 2]))
            i += 3
        elif argv[i] == "--logs":
            j = i + 3
            while j < len(argv) and argv[j] not in ("--logs", "--check"):
                j += 1
            groups.append((argv[i + 1], argv[i + 2], argv[i + 3:j]))
            i = j
        else:
            sys.exit("test_summary.py: unexpected argument " + argv[i])
    return groups, checks


def main(argv):
    groups, checks = parse(argv)
    tally = Tally()
    for name, root, labels in groups:
        prefix = name + ": " if name else ""
        for directory in test_dirs(root, labels):
            count_dir(directory, prefix + os.path.relpath(directory, root), tally)
    for name, rc in checks:
        if rc == "0":
            tally.passed += 1
        else:
            tally.fail(name + " (exit code " + rc + ")")
    for f in tally.failures:
        print("FAILED:", f)
    if tally.skipped:
        print(f"{tally.skipped} skipped")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 and tally.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
