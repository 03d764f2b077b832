"""Turn a problem's Python sources (reference, baseline) into modules, imported from real files.

A module compiled from a string has no file behind it: ``inspect.getsource`` fails, tracebacks show no
lines, and Triton's ``@triton.jit`` refuses the function ("@jit functions should be defined in a Python
file"). So every source is imported with importlib from a path: the problem's own file when it holds
exactly this source, else a copy written once, content-addressed, to solbench's source cache (an inline
``reference`` of a flashinfer-trace / SOL-ExecBench definition, a source given without a file).

On a machine whose work runs on the CPU a source that uses Triton is imported with Triton's interpreter
(``TRITON_INTERPRET=1``, read when ``@triton.jit`` decorates) and the interpreter made faithful for dots
and float casts the way the Triton plug-in makes it for candidates.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import traceback
import types
from pathlib import Path

from solbench.errors import UserError


class SourceError(UserError):
    """A problem's source (reference, baseline) that cannot be imported: one line naming its file."""


#: sources read by load_problem: digest -> the file they came from (None: inline, no file) and a name for a copy
_KNOWN: dict[str, tuple[Path | None, str]] = {}


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def remember_source(source: str, path: str | Path | None, stem: str = "reference") -> None:
    """Note where ``source`` came from (``path``; None for an inline reference), so that a later
    ``module_from_source(source, name)`` without a filename imports that file (or a copy named ``stem``)."""
    _KNOWN[_digest(source)] = (Path(path) if path else None, stem)


def cache_root() -> Path:
    """Where solbench writes files it derives (sources without a file of their own)."""
    explicit = os.environ.get("SOLBENCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.path.expanduser("~"), ".cache"))
    return Path(base) / "solbench"


def _writable(root: Path) -> bool:
    try:
        root.mkdir(parents=True, exist_ok=True)
        return os.access(root, os.W_OK)
    except OSError:
        return False


def source_file(source: str, stem: str = "module") -> Path:
    """A real file holding ``source``: ``<cache>/sources/<digest>/<stem>.py``, written once (atomically)."""
    digest = _digest(source)
    stem = re.sub(r"[^0-9A-Za-z_]+", "_", stem).strip("_") or "module"
    for root in (cache_root(), Path(tempfile.gettempdir()) / f"solbench-{os.getuid()}"):
        folder = root / "sources" / digest
        if not _writable(folder):
            continue
        path = folder / f"{stem}.py"
        try:
            if path.is_file() and path.read_text() == source:
                return path
            tmp = folder / f".{stem}.{os.getpid()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)
            return path
        except OSError:
            continue
    raise OSError("no writable directory for solbench's source cache (set SOLBENCH_CACHE_DIR)")


def _holds(path: Path, source: str) -> bool:
    try:
        return path.is_file() and path.read_text() == source
    except (OSError, UnicodeDecodeError):
        return False


def _runs_on_cpu() -> bool:
    device = os.environ.get("SOLBENCH_WORKER_DEVICE")
    if device:
        return device == "cpu"
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:
        return True


def _uses_triton(source: str) -> bool:
    return bool(re.search(r"^\s*(import triton|from triton\b)", source, re.MULTILINE))


def _prepare_triton(source: str) -> None:
    """Triton on a CPU-only worker: its interpreter, set before ``@triton.jit`` decorates the source's kernels."""
    if not _uses_triton(source) or not _runs_on_cpu():
        return
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        from solbench.problems.interpreter import patch_interpreter_dot

        patch_interpreter_dot()
    except Exception:  # no Triton here: the source's own import says so
        pass


def import_file(path: str | Path, name: str) -> types.ModuleType:
    """Import the file at ``path`` as a fresh module ``name`` (registered in sys.modules for pickling/inspect)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    no_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in problem folders
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        raise
    finally:
        sys.dont_write_bytecode = no_bytecode
    return module


def module_from_source(source: str, name: str, filename: str | Path | None = None) -> types.ModuleType:
    """``source`` as a fresh module named ``name``, imported from a real file.

    ``filename`` is the file the source came from (``reference.py``); it is imported when it holds exactly
    ``source``, else (an inline reference, a file changed since it was read, none given) a cached copy named
    after it is.
    """
    known, stem = _KNOWN.get(_digest(source), (None, None))
    path = Path(filename) if filename else known
    if path is None or not _holds(path, source):
        path = source_file(source, stem or (path.stem if path is not None else name))
    _prepare_triton(source)
    try:
        return import_file(path, name)
    except ModuleNotFoundError as exc:
        raise SourceError(f"{path}: needs the module {exc.name!r}, which is not installed") from exc
    except Exception as exc:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
        lineno = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else (lines[-1] if lines else None)
        text = " ".join(str(exc).split())[:300]
        raise SourceError(f"{path}{f':{lineno}' if lineno else ''}: cannot be imported: {type(exc).__name__}"
                          + (f": {text}" if text else "")) from exc


def entry(module: types.ModuleType, function: str = "run"):
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{module.__name__} defines no callable {function!r}")
    return fn
