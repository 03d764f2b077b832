"""Python kernel DSLs beside Triton: CuTe DSL, TileLang, TVM TIRx, cuTile, and cuDNN's Python frontend.

Each is a Python module whose entry function launches kernels written in the DSL. A plug-in says which package
it needs (and how to install it), whether it needs a GPU, and which toolchain; ``unavailable(device)`` is asked
by the trusted side before any candidate starts, so a missing package or toolchain is an ``unsupported``
verdict with the reason and the install command, never a crash. Loading is Python's (``Language.load``).
"""

from __future__ import annotations

import importlib
import shutil
import subprocess

from solbench.evaluate.languages import packages
from solbench.evaluate.languages.base import Language, decorated_functions


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
        """The language's own package folder goes on the path (``packages``), and the DSL's runtime is imported
        before the harness's snapshot: what it installs at import (CuTe DSL sets ``sys.excepthook``) is then part
        of the baseline, not a change the solution made."""
        packages.activate(self.name)
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
        return self._import_problem(self.module)

    def _import_problem(self, module: str, missing: str = "") -> str | None:
        found = packages.probe(self.name, module) if module else None
        if found is None:
            return None
        kind, detail = found
        if kind == "missing":
            return missing or f"{self.name} needs the Python package {module!r}, not installed here: {self.install}"
        return f"{self.name}: the package {module!r} is here but does not import ({detail}): {self.install}"


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
    install = ("pip install tilelang 'apache-tvm-ffi<0.1.13' (its TVM fork is imported as tvm: keep it apart from "
               "apache-tvm, in an environment or a $SOLBENCH_LANG_ROOT/tilelang folder of its own)")
    kernel_decorators = ("prim_func",)
    # TileLang (like the TVM it is built on) names the kernel of ``@T.prim_func def f`` extern "C" f_kernel, a
    # second one of the same function f_kernel_1 (read from TileLang 0.1.15's generated CUDA source)
    kernel_pattern = r"^{name}_kernel(?:_?\d+)?$"
    proof = True


class TvmTirx(PythonDSL):
    name = "tvm_tirx"
    module = "tvm"
    install = ("pip install 'apache-tvm[cuda]==0.25.0.post1' 'apache-tvm-ffi<0.1.13' (MetaKernelBench's pins; "
               "tir_pipeline='tirx')")
    kernel_decorators = ("prim_func",)
    # TVM's split of host and device code names the kernel of ``@T.prim_func def f`` extern "C" f_kernel (read
    # from apache-tvm 0.25's generated CUDA source)
    kernel_pattern = r"^{name}_kernel(?:_?\d+)?$"
    proof = True

    def install_hooks(self, device: str) -> None:
        """TVM compiles CUDA through NVRTC from ``cuda-bindings``; where NVRTC does not load, through nvcc (its
        ``TVM_CUDA_COMPILE_MODE``) when nvcc is on the path."""
        import os

        packages.activate(self.name)  # its cuda-bindings first
        if device != "cpu" and "TVM_CUDA_COMPILE_MODE" not in os.environ and shutil.which("nvcc"):
            try:
                from cuda.bindings import nvrtc

                nvrtc.nvrtcVersion()
            except Exception:  # noqa: BLE001 - a missing package or library: nvcc then
                os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
        super().install_hooks(device)

    def unavailable(self, device: str) -> str | None:
        why = super().unavailable(device)
        return why or self._import_problem(
            "tvm.tirx", f"tvm_tirx needs TVM with the tvm.tirx module (apache-tvm 0.25 or newer): {self.install}")


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
