"""The trusted worker's harness: every module it uses is imported before any candidate exists."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from solbench.evaluate.trusted.worker import HARNESS_PACKAGES, harness
from tests.paths import SRC

#: loaded per solution, after the harness: a language's plug-in and the trusted build of native code
LAZY = ("solbench.evaluate.languages.", "solbench.evaluate.native")


def _imported(module: str) -> set[str]:
    """The solbench modules ``module``'s source imports, at any depth of its functions."""
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("solbench.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("solbench."):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if _is_module(full) else node.module)
    return out


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _loaded_after_harness() -> set[str]:
    """The solbench modules a fresh interpreter holds once it has imported the harness, as the worker does."""
    code = ("import importlib, json, sys\nfrom solbench.evaluate.trusted.worker import harness\n"
            "[importlib.import_module(m) for m in harness()]\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('solbench'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    return set(json.loads(out.stdout))


def test_the_harness_holds_every_module_of_its_packages():
    names = set(harness())
    for package in HARNESS_PACKAGES:
        folder = SRC / package.replace(".", "/")
        for f in folder.glob("*.py"):
            if f.stem != "__init__":
                assert f"{package}.{f.stem}" in names


def test_nothing_the_harness_imports_later_is_missing_from_it():
    """A module a harness module imports inside a function is imported after candidates exist unless the harness
    import already brought it in: then a candidate's tampering with it would not be in the snapshot."""
    loaded = _loaded_after_harness()
    missing = {}
    for module in harness():
        for dep in _imported(module):
            if dep not in loaded and not dep.startswith(LAZY):
                missing.setdefault(dep, []).append(module)
    assert not missing, missing
