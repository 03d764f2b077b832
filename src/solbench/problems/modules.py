"""Turn a problem's Python sources (reference, baseline) into modules."""

from __future__ import annotations

import sys
import types
from pathlib import Path


def module_from_source(source: str, name: str, filename: str | Path | None = None) -> types.ModuleType:
    """Execute ``source`` as a fresh module named ``name`` (registered in sys.modules for pickling/inspect)."""
    module = types.ModuleType(name)
    module.__file__ = str(filename or f"<{name}>")
    sys.modules[name] = module
    code = compile(source, module.__file__, "exec")
    exec(code, module.__dict__)  # noqa: S102 - trusted problem sources only
    return module


def entry(module: types.ModuleType, function: str = "run"):
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{module.__name__} defines no callable {function!r}")
    return fn
