"""Python kernel DSLs beside Triton: CuTe DSL, TileLang, TVM TIRx, cuTile, and cuDNN's Python frontend.

Each is a Python module whose entry function launches kernels written in the DSL. A plug-in says which package
it needs (and how to install it), whether it needs a GPU, and which toolchain; ``unavailable(device)`` is asked
by the trusted side before any candidate starts, so a missing package or toolchain is an ``unsupported``
verdict with the reason and the install command, never a crash. Loading is Python's (``Language.load``).
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess

from solbench.evaluate.languages.base import Language, decorated_functions


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


@functools.lru_cache(maxsize=None)
def _import_error(module: str) -> str | None:
    """Why ``module`` fails to import, asked once per process in a child of its own (the trusted side imports no
    kernel language): its last error line, or None."""
    import sys

    code = f"import {module}"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the import check failed: {exc}"
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else f"exit status {done.returncode}")[:300]


class PythonDSL(Language):
    """A DSL embedded in Python: its package must import, and it runs on a CUDA device."""

    #: import name that must be present
    module = ""
    #: how to get it
    install = ""
    #: the decorators (by their last name) that make a Python function one of the DSL's kernels
    kernel_decorators: tuple[str, ...] = ()
    #: how the DSL names a kernel compiled from function ``{name}`` (a regular expression over the profiler's
    #: demangled name; ``{name}`` is the function's, escaped)
    kernel_pattern = r"(?:^|_){name}(?:_|$)"

    def install_hooks(self, device: str) -> None:
        """The DSL's runtime is imported before the harness's snapshot: what it installs at import (CuTe DSL sets
        ``sys.excepthook``) is then part of the baseline, not a change the solution made."""
        if device != "cpu" and self.module:
            importlib.import_module(self.module)

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        return decorated_functions(sources, self.kernel_decorators) if self.kernel_decorators else set()

    def owns(self, kernel: str, names: set[str]) -> bool:
        import re

        return any(re.search(self.kernel_pattern.format(name=re.escape(n)), kernel) for n in names)

    def unavailable(self, device: str) -> str | None:
        if device == "cpu":
            return f"{self.name} kernels need a CUDA device (this evaluation runs on the CPU)"
        if self.module and not _has_module(self.module):
            return f"{self.name} needs the Python package {self.module!r}, not installed here: {self.install}"
        broken = _import_error(self.module) if self.module else None
        if broken:
            return f"{self.name}: the package {self.module!r} is here but does not import ({broken}): {self.install}"
        return None


class CuteDSL(PythonDSL):
    name = "cute_dsl"
    module = "cutlass.cute"
    install = "pip install nvidia-cutlass-dsl"
    kernel_decorators = ("kernel",)
    # CuTe DSL 4.x names the kernel of ``@cute.kernel def f`` kernel_cutlass_f_<mangled arguments>_<n> (the
    # middle cut at 180 characters; ``set_name_prefix`` renames it, which the proof then does not recognise)
    kernel_pattern = r"^kernel_cutlass_{name}(?:_.*)?_\d+$"
    proof = True  # the names above, read from CuTe DSL 4.8.1's PTX .entry lines


class TileLang(PythonDSL):
    name = "tilelang"
    module = "tilelang"
    install = "pip install tilelang (it pins apache-tvm-ffi below 0.1.13: keep it in an environment of its own)"
    kernel_decorators = ("prim_func",)  # T.prim_func main -> main_kernel


class TvmTirx(PythonDSL):
    name = "tvm_tirx"
    module = "tvm"
    install = "pip install apache-tvm==0.25.0.post1 (MetaKernelBench's pin; tir_pipeline='tirx')"
    kernel_decorators = ("prim_func",)

    def unavailable(self, device: str) -> str | None:
        why = super().unavailable(device)
        if why is None and not _has_module("tvm.tirx"):
            return f"tvm_tirx needs TVM with the tvm.tirx module (apache-tvm 0.25 or newer): {self.install}"
        return why


class CuTile(PythonDSL):
    name = "cutile"
    module = "cuda.tile"
    install = "pip install cuda-tile (on Hopper it also needs CUDA 13.3 or newer for tileiras)"
    kernel_decorators = ("kernel",)

    def unavailable(self, device: str) -> str | None:
        why = super().unavailable(device)
        if why is not None:
            return why
        tileiras = shutil.which("tileiras")
        if tileiras is None:
            return "cutile needs the tileiras compiler (CUDA 13.3 or newer on Hopper), not on PATH here"
        try:
            out = subprocess.run([tileiras, "--version"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cutile: tileiras --version failed ({exc})"
        version = _cuda_release(out)
        if version is not None and version < (13, 3):
            return (f"cutile on Hopper needs tileiras from CUDA 13.3 or newer; this machine's is "
                    f"{version[0]}.{version[1]}")
        return None


class CuDNNFrontend(PythonDSL):
    """cuDNN's Python frontend (SOL-ExecBench's ``cudnn_frontend``; its C++ ``cudnn`` is a compiled language)."""
    name = "cudnn_frontend"
    module = "cudnn"
    install = "pip install nvidia-cudnn-frontend"
    own_origins = frozenset({"cudnn"})


def _cuda_release(text: str) -> tuple[int, int] | None:
    """The "release X.Y" of an NVIDIA tool's --version output."""
    import re

    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None
