#!/usr/bin/env python3
"""Checks the module structure of every crate under crates/: no import circle between the files of
one crate, and no file longer than LIMIT lines before its inline tests.

Usage: scripts/check-modules.py [--limit N] [ROOT]      (ROOT: the repository, default .)

A file's dependencies are the `crate::...`, `self::...` and `super::...` paths in its code before
its inline tests (its `#[cfg(test)] mod ... {`; comments and other `#[cfg(test)]` declarations
stripped), each resolved to the longest module prefix that is a
file of the crate. Two edges are not counted: into the crate root (lib.rs/main.rs re-export), and
between a module and its own submodules (a parent and its children are one unit). Exit status 0
when there is neither a circle nor a long file, 1 otherwise.
"""
import argparse
import os
import re
import sys

USE = re.compile(r"\buse\s+((?:crate|self|super)\b[^;]*);", re.S)
PATH = re.compile(r"\b(?:crate|self|super)(?:::(?:super|\w+))+")


def crate_files(src):
    """Module path (tuple) -> file, for every .rs file of a crate's src/ (bins, tests excluded)."""
    files = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src)[:-3].split(os.sep)
            if rel[0] in ("bin", "tests", "benches", "examples"):
                continue
            if rel == ["lib"] or rel == ["main"]:
                module = ()
            elif rel[-1] == "mod":
                module = tuple(rel[:-1])
            else:
                module = tuple(rel)
            files[module] = os.path.join(dirpath, name)
    return files


# The inline tests: a `#[cfg(test)]` module with a body (`mod tests { ... }`), or one in a file of
# its own at the end of the file (`mod tests;`); other attributes may stand between the two.
TESTS = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*(?:\{|;\s*\Z)")
# A test-only declaration before them (`#[cfg(test)] use ...;`, `#[cfg(test)] mod fixtures;`):
# not code of the module, but the module's code goes on after it.
TEST_ONLY = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?(?:use|mod)\b[^;{]*;")


def code_of(path):
    """A file's code before its inline tests, comments and test-only declarations stripped
    (line breaks kept, so that lines still count)."""
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    tests = TESTS.search(text)
    if tests:
        text = text[: tests.start()]
    return TEST_ONLY.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def flatten(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    head, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            if inner[start:i]:
                parts.append(inner[start:i])
            start = i + 1
    return [p for part in parts for p in flatten(head + part)]


def absolute(module, path):
    """A `crate::`/`self::`/`super::` path seen in `module` -> segments from the crate root."""
    segs = [s for s in path.split("::") if s]
    if segs and segs[0] == "crate":
        return segs[1:]
    # `self` is the module itself; each `super` one level up (a mod.rs is its directory's module).
    base = list(module)
    while segs and segs[0] in ("self", "super"):
        if segs.pop(0) == "super" and base:
            base.pop()
    return base + segs


def dependencies(files):
    graph = {m: set() for m in files}
    for module, path in files.items():
        code = code_of(path)
        paths = [p for tree in USE.findall(code) for p in flatten(tree)] + PATH.findall(code)
        for p in paths:
            segs = absolute(module, p)
            target = next((tuple(segs[:n]) for n in range(len(segs), 0, -1) if tuple(segs[:n]) in files), None)
            if target in (None, (), module):
                continue
            if target[: len(module)] == module or module[: len(target)] == target:
                continue
            graph[module].add(target)
    return graph


def circles(graph):
    """Strongly connected components of more than one module (Tarjan's, without recursion)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".")
    parser.add_argument("--limit", type=int, default=750)
    args = parser.parse_args()
    crates = os.path.join(args.root, "crates")
    problems = 0
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        files = crate_files(src)
        rel = lambda m: os.path.relpath(files[m], args.root)
        for component in circles(dependencies(files)):
            print("import circle: " + ", ".join(sorted(rel(m) for m in component)))
            problems += 1
        for module in sorted(files):
            lines = code_of(files[module]).count("\n")
            if lines > args.limit:
                print(f"too long: {rel(module)} has {lines} lines before its tests (limit {args.limit})")
                problems += 1
    print("module structure: " + ("ok" if problems == 0 else f"{problems} problem(s)"))
    return 0 if problems == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
