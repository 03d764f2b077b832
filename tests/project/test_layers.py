"""The package's layers (pyproject.toml's import-linter contract) and no import cycle anywhere in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

grimp = pytest.importorskip("grimp", reason="import-linter (the test extra) is not installed")


def test_the_layer_contract_holds():
    """records, problems at the bottom; then analysis and hardware; evaluate; store and report; agents and
    experiments; the CLI on top: a module imports only from its own layer or those below."""
    tool = Path(sys.executable).parent / "lint-imports"
    r = subprocess.run([str(tool), "--no-cache", "--config", str(ROOT / "pyproject.toml")], capture_output=True,
                       text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def _cycles(graph) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's algorithm, without
    recursion: the process's recursion limit stays as the other tests expect it)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle():
    """Imports inside functions count too: a cycle hidden behind a function-local import is still a cycle."""
    sys.path.insert(0, str(ROOT / "src"))
    try:
        graph = grimp.build_graph("solbench")
    finally:
        sys.path.remove(str(ROOT / "src"))
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_one():
    class Graph:
        modules = {"a", "b", "c"}
        edges = {"a": {"b"}, "b": {"a"}, "c": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert _cycles(Graph()) == [["a", "b"]]
    Graph.edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _cycles(Graph()) == [["a", "b", "c"]]
    Graph.edges = {"a": {"b"}, "b": {"c"}, "c": set()}
    assert _cycles(Graph()) == []
