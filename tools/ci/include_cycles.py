#!/usr/bin/env python3
"""Fails on a cycle of includes between the files of a folder.

A file's unit is its path without the extension (runtime.h and runtime.cc
are one unit); the folders given are one graph, so a cycle through several
of them is found too. A unit depends on another when one of its files includes the
other's header. Two units that depend on each other, directly or through
others, cannot be understood, tested or moved one without the other: this
check lists every such group and exits 1.

    include_cycles.py memory layers ...       # from the repository root
    include_cycles.py --self-test             # it finds a cycle it is shown
"""
import os
import re
import sys
import tempfile

SOURCE = re.compile(r"\.(h|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#include "([^"]+)\.(?:h|cuh)"', re.M)


def units(root, folders):
    """Unit path (relative to root, no extension) -> its files."""
    found = {}
    for folder in folders:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if SOURCE.search(name):
                    path = os.path.join(directory, name)
                    unit = SOURCE.sub("", os.path.relpath(path, root))
                    found.setdefault(unit, []).append(path)
    return found


def cycles(root, folders):
    """Groups of two or more units of `folders` that reach each other (Tarjan)."""
    files = units(root, folders)
    edges = {u: set() for u in files}
    for unit, paths in files.items():
        for path in paths:
            with open(path, encoding="utf-8") as source:
                for target in INCLUDE.findall(source.read()):
                    if target in files and target != unit:
                        edges[unit].add(target)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    counter = [0]

    def visit(v):  # iterative Tarjan would be longer; folders are small
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(files):
        if v not in index:
            visit(v)
    return sorted(groups)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "m"))
        sources = {"m/a.h": "", "m/a.cc": '#include "m/b.h"\n', "m/b.h": "",
                   "m/b.cc": '#include "m/a.h"\n', "m/c.cc": '#include "m/a.h"\n'}
        for path, text in sources.items():
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        found = cycles(root, ["m"])
        if found != [["m/a", "m/b"]]:
            print("include_cycles: the self-test's cycle m/a <-> m/b was not found: %s" % found)
            return 1
    print("include_cycles: self-test passed")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if not argv:
        print(__doc__)
        return 2
    status = 0
    for group in cycles(".", argv):
        print("include_cycles: these include each other: %s" % " <-> ".join(group))
        status = 1
    if status == 0:
        print("include_cycles: no cycle in %s" % ", ".join(argv))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
