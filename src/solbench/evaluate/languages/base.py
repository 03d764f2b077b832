"""The language plug-in point: how a solution's sources become a callable.

A plug-in says which environment variables must be set before the candidate's
process imports anything, builds the callable from staged sources (a failure
there is a compile_error verdict), and may declare a device unsupported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Callable


class CompileError(Exception):
    """The solution could not be built or imported."""


class Unsupported(Exception):
    """The solution cannot be judged on this device (e.g. an unfaithful interpreter)."""


class Language:
    name = "base"
    #: does the CPU run this language's kernels (possibly interpreted)?
    interpreted_on_cpu = False

    def environment(self, device: str) -> dict[str, str]:
        return {}

    def install_hooks(self, device: str) -> None:
        """Called in the candidate's process before the solution is imported."""

    def load(self, staged: Path, entry_file: str, function: str) -> Callable:
        path = staged / entry_file
        if not path.is_file():
            raise CompileError(f"entry file {entry_file} not found")
        module_name = "solbench_candidate_" + Path(entry_file).stem.replace("-", "_").replace(".", "_")
        # appended, not prepended: a solution file named like a package it imports (triton.py) must not shadow it
        sys.path.append(str(staged))
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except Exception as exc:  # any import-time failure is the solution's fault
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc
        fn = getattr(module, function, None)
        if not callable(fn):
            raise CompileError(f"{entry_file} defines no callable {function!r}")
        return fn
