#!/usr/bin/env python3
"""Counts test cases in Bazel's test.xml files and prints "N passed, M failed".

Skipped cases (a GPU test on a machine without a GPU) are reported on their
own line and counted neither as passed nor as failed. A test binary that
crashed before writing its cases counts as one failure.
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
        if shards:
            for shard in shards:
                yield os.path.join(directory, shard)
        else:
            yield directory


def main(root, labels):
    passed = failed = skipped = 0
    failures = []
    for directory in test_dirs(root, labels):
        files = os.listdir(directory) if os.path.isdir(directory) else []
        if "test.xml" not in files:
            failed += 1
            failures.append(os.path.relpath(directory, root) + " (no result: did not build or run)")
            continue
        path = os.path.join(directory, "test.xml")
        target = os.path.relpath(directory, root)
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            failed += 1
            failures.append(target + " (unreadable test.xml)")
            continue
        cases = list(tree.iter("testcase"))
        target_failed = False
        for case in cases:
            name = case.get("classname", "") + "." + case.get("name", "")
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                target_failed = True
                failures.append(target + ": " + name)
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                skipped += 1
            else:
                passed += 1
        log = os.path.join(directory, "test.log")
        crashed = not cases
        if not crashed and not target_failed and os.path.exists(log):
            with open(log, errors="replace") as f:
                text = f.read()
            crashed = "[  FAILED  ]" in text or "Aborted" in text and "PASSED" not in text
        if crashed and not target_failed:
            failed += 1
            failures.append(target + " (crashed or reported failure outside a test case)")
    for f in failures:
        print("FAILED:", f)
    if skipped:
        print(f"{skipped} skipped")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs", sys.argv[2:]))
