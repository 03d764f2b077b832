"""No process of the package is started with a ``preexec_fn``: Python run in the forked copy of a threaded
process (the runner's build pool, compiles ahead and slots are threads) takes the interpreter's at-fork locks in
the parent and may find a lock another thread held at the fork; a run on an H100 deadlocked so. A child that
needs a parent-death signal sets it after exec (``namespaces.die_with_parent``, told its starter's pid).
tests/evaluate/isolation/test_lifetime.py checks the trusted worker's and the slot's starts by what they do."""

from __future__ import annotations

import ast

from tests.paths import SRC


def test_no_process_is_started_with_a_preexec_fn():
    found = []
    for path in sorted((SRC / "solbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and any(k.arg == "preexec_fn" for k in node.keywords):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []
