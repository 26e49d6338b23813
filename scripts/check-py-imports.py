#!/usr/bin/env python3
"""Checks that the modules of the rp Python package import no cycle.

Usage: check-py-imports.py PACKAGE_DIR

PACKAGE_DIR is a package folder (python/rp). Every `import rp.X`,
`from rp import X` and `from rp.X import ...` of each module counts,
also one inside a function: a function-level import hides a cycle from
the interpreter at load time, not from a reader, and it breaks when the
import moves. A cycle means the shared piece wants a module of its own
(rp._moe_common, rp.traces, rp._hf_folder). It prints each cycle as
`a -> b -> a` and exits 1 when there is one.
"""

import ast
import os
import sys


def imports_of(path, package, modules):
    """The package's modules that the file at `path` imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .X import ... / from . import X
                found.add((node.module or "").split(".")[0])
                if not node.module:
                    found.update(a.name for a in node.names)
            elif node.module == package:
                found.update(a.name for a in node.names)
            elif node.module and node.module.startswith(package + "."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package + "."):
                    found.add(alias.name.split(".")[1])
    return found & modules


def cycles(graph):
    """One cycle per strongly connected group of more than one module (or a
    module that imports itself), as a path from its first module back."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    paths = []
    for group in groups:
        start = min(group)
        # A shortest way back to `start` inside the group.
        back, frontier = {start: None}, [start]
        while True:
            last = next((f for f in frontier if start in graph[f]), None)
            if last is not None:
                break
            nxt = []
            for f in frontier:
                for w in sorted(graph[f] & group):
                    if w not in back:
                        back[w] = f
                        nxt.append(w)
            frontier = nxt
        path = [last]
        while back[path[-1]] is not None:
            path.append(back[path[-1]])
        paths.append(list(reversed(path)) + [start])
    return paths


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = os.path.abspath(argv[1])
    package = os.path.basename(folder)
    files = {name[:-3]: os.path.join(folder, name)
             for name in os.listdir(folder) if name.endswith(".py")}
    modules = set(files)
    graph = {m: imports_of(path, package, modules) for m, path in files.items()}
    found = cycles(graph)
    for path in found:
        print("import cycle: " + " -> ".join(f"{package}.{m}" for m in path))
    print(f"{len(modules)} modules, {len(found)} import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
