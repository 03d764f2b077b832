"""Where a kernel language's own Python packages are, and whether they import.

Two DSLs can need packages that cannot share one path: TileLang puts its own fork of TVM on the path as ``tvm``,
which shadows apache-tvm's (TVM TIRx), and each brings its own ``cuda-bindings``. So a language's packages may
live in a folder of their own, ``$SOLBENCH_LANG_ROOT/<language>`` (what ``scripts/carry-language.sh`` installs
on the GPU machine). Only the candidate of a solution in that language gets its folder on the path, as a site
directory (its ``.pth`` files run, as they would in site-packages); the trusted side never imports a kernel
language, and asks a child process of its own whether one imports. Packages installed in the environment itself
work as well, for every language.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

ROOT_ENV = "SOLBENCH_LANG_ROOT"
#: the exit status of the probe's child when the module is not there at all (not broken: missing)
_MISSING = 3
_PROBE = """import importlib, site, sys
if sys.argv[2]:
    before = list(sys.path)
    site.addsitedir(sys.argv[2])
    sys.path[:] = [p for p in sys.path if p not in before] + before
try:
    importlib.import_module(sys.argv[1])
except ModuleNotFoundError as exc:
    if exc.name and (sys.argv[1] == exc.name or sys.argv[1].startswith(exc.name + ".")):
        sys.exit(%d)
    raise
""" % _MISSING


def root() -> Path | None:
    value = os.environ.get(ROOT_ENV)
    return Path(value) if value else None


def folder(language: str) -> Path | None:
    """``$SOLBENCH_LANG_ROOT/<language>`` where it exists, else None."""
    base = root()
    if base is None:
        return None
    path = base / language
    return path if path.is_dir() else None


def activate(language: str) -> None:
    """In the candidate's process, before the solution is imported: the language's folder on the path as a
    site directory, ahead of the environment's site-packages (as PYTHONPATH would put it), so that the
    language's own ``cuda-bindings`` is the one imported."""
    path = folder(language)
    if path is None or str(path) in sys.path:
        return
    import site

    before = list(sys.path)
    site.addsitedir(str(path))
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + before


@functools.lru_cache(maxsize=None)
def probe(language: str, module: str) -> tuple[str, str] | None:
    """Whether ``module`` imports with ``language``'s packages, asked once per process in a child of its own:
    None, ``("missing", "")`` or ``("broken", its last error line)``."""
    path = folder(language)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, module, str(path) if path else ""],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return ("broken", f"the import check failed: {exc}")
    if done.returncode == 0:
        return None
    if done.returncode == _MISSING:
        return ("missing", "")
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    return ("broken", (lines[-1] if lines else f"exit status {done.returncode}")[:300])
