"""C++/CUDA solutions as torch extensions (SOL-ExecBench's ``cuda_cpp`` and ``cutlass``), built once per key.

A solution is SOL-ExecBench's: ``entry_point`` ``main.cpp::run``, ``binding: "torch"``, sources such as
``kernel.h``, ``kernel.cu`` and ``main.cpp``, and optional ``compile_options`` (``cflags``, ``cuda_cflags``,
``ld_flags``) added after solbench's defaults (``-O3``). Every .cpp/.cc/.cxx/.c/.cu source is built by
``torch.utils.cpp_extension.load`` into one extension named ``sb_<key[:16]>``, which exposes the entry function
through ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`` (``m.def("run", ...)``) or ``TORCH_LIBRARY(ns, m)``
(``torch.ops.ns.run``). CUDA sources get ``-gencode=arch=compute_XY,code=sm_XY`` for the present device, with
the ``a`` suffix from sm_90 on (``compute_90a``/``sm_90a`` on the H100 and H200), unless their flags name an
architecture themselves.

Two sides:

- the trusted side (``evaluate.runner`` through ``build_cache.Carry``) asks ``unsupported_reason`` (CUDA sources
  on the CPU or without nvcc, a binding other than torch, a missing compiler or header package: an
  ``unsupported`` verdict with the reason and the install command) and ``build_plan``: the flags, the include
  directories and the cache key (sources, flags, toolchain versions, torch, packages, architecture). It hands
  the plan to the candidate (``SOLBENCH_BUILD_PLAN``) with the private build directory for the key
  (``SOLBENCH_BUILD_CACHE``), into which it copied the cached artefact if there is one;
- the candidate's process (``load``, inside its sandbox) imports the library when the directory holds a
  finished build (``cached``), and otherwise builds it in a child process under a limit
  (``SOLBENCH_COMPILE_TIMEOUT_S``, default 300 s: a child, since torch's builder waits on ninja without one;
  past the limit the child's whole process tree is killed), writes ``meta.json`` with the compile time and
  imports it. A failed build is a ``CompileError`` with the compiler's last lines.

On the CPU a solution of C++ sources only (a C++ torch extension) builds with the host compiler and runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from solbench.evaluate import build_cache
from solbench.evaluate.languages.base import CompileError, Language, Unsupported
from solbench.evaluate.languages.cuda_toolchain import (COMPILED, CUDA_SOURCES, TEXT, DEFAULT_TIMEOUT_S, _ARCH_FLAG, _texts, kernel_names, kernel_matches, _binding, _flags, _search_path, find_cuda_home, find_nvcc, toolchain, target_arch, arch_flags, compiler_tail, _kill_tree)

#: the child that builds: torch's JIT builder (which also imports the result once: a broken link fails here)
_BUILD_SCRIPT = """
import json, sys, time
args = json.loads(sys.argv[1])
from torch.utils.cpp_extension import load
t0 = time.perf_counter()
load(name=args["name"], sources=args["sources"], extra_cflags=args["cflags"], extra_cuda_cflags=args["cuda_cflags"],
     extra_ldflags=args["ld_flags"], extra_include_paths=args["include_paths"], build_directory=args["build_dir"],
     with_cuda=args["with_cuda"], is_python_module=args["python_module"], verbose=False)
print("\\nSOLBENCH_BUILD " + json.dumps({"compile_s": time.perf_counter() - t0}), flush=True)
"""


class CudaCpp(Language):
    name = "cuda_cpp"
    proof = True  # the profiled call's kernels are the sources' own __global__ functions (or the library's)
    #: flags before the solution's own (which come later, so they win)
    default_cflags: tuple[str, ...] = ("-O3",)
    default_cuda_cflags: tuple[str, ...] = ("-O3",)
    extra_ld_flags: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.compile_s: float | None = None  # seconds the build took (the cached build's own, when cached)
        self.cached: bool | None = None  # whether ``load`` found a finished build
        self.load_s: float | None = None  # seconds ``load`` took, build included

    @classmethod
    def with_library(cls, name: str, *ld_flags: str) -> type["CudaCpp"]:
        """The same language linked with a vendor library (``cublas``: ``-lcublas``)."""
        # the library's kernels are the solution's own work (integrity.kernel_origin names them)
        return type(f"CudaCpp_{name}", (cls,), {"name": name, "extra_ld_flags": tuple(ld_flags),
                                               "own_origins": frozenset({name})})

    # ---- what the solution builds against ---------------------------------------------------------------
    def include_dirs(self, dependencies: list[str] | tuple[str, ...] = ()) -> list[str]:
        """Header directories beyond torch's: CUTLASS's where a dependency names it and it is here."""
        if any("cutlass" in str(d).lower() for d in dependencies):
            return cutlass_dirs() or []
        return []

    def packages(self, include: list[str]) -> dict[str, str]:
        return {"include:" + d: _dir_version(d) for d in include}

    def unavailable(self, device: str) -> str | None:
        """A missing toolchain (asked by the trusted side before any candidate starts)."""
        if shutil.which(os.environ.get("CXX", "c++"), path=_search_path()) is None:
            return f"{self.name} needs a C++ compiler (c++, or $CXX) on PATH: apt-get install g++"
        if shutil.which("ninja", path=_search_path()) is None:
            return f"{self.name} needs ninja (torch's extension builder runs it): pip install ninja"
        return None

    def unsupported_reason(self, solution: Any, device: str) -> str | None:
        """Why this solution cannot be judged on ``device`` here, or None (trusted side)."""
        why = self.unavailable(device)
        if why:
            return why
        binding = getattr(solution.spec, "binding", None)
        if binding not in (None, "torch"):
            return f"{self.name}: binding {binding!r} is not supported; use \"torch\" (a torch extension)"
        cuda = sorted(s.path for s in solution.sources if Path(s.path).suffix in CUDA_SOURCES)
        if not cuda:
            return None
        if device == "cpu":
            return f"{self.name}: CUDA sources ({', '.join(cuda[:3])}) need a CUDA device; this evaluation runs on the CPU"
        import torch

        if not torch.version.cuda:
            return f"{self.name}: torch here ({torch.__version__}) is a CPU build; CUDA sources need a CUDA build"
        if find_nvcc() is None:
            return ("CUDA C++ needs nvcc and the CUDA headers (the CUDA toolkit), found neither under CUDA_HOME, "
                    "beside an nvcc on PATH nor in /usr/local/cuda; install the CUDA toolkit")
        return None

    def build_plan(self, solution: Any, device: str) -> dict[str, Any]:
        """The build as the trusted side decides it: flags, include directories, the cache key (JSON-able)."""
        spec = solution.spec
        options = (getattr(spec, "model_extra", None) or {}).get("compile_options") or {}
        if not isinstance(options, dict):
            raise ValueError(f"compile_options must be an object with cflags, cuda_cflags, ld_flags, not {options!r}")
        return self.plan(((s.path, s.content) for s in solution.sources), options, list(spec.dependencies), device)

    def plan(self, sources, options: dict[str, Any], dependencies: list[str], device: str) -> dict[str, Any]:
        import torch

        sources = list(sources)
        compiled = sorted(p for p, _ in sources if Path(p).suffix in COMPILED)
        # on a GPU C++ sources may use CUDA's headers and libraries too (ATen's CUDA API, cuBLAS)
        with_cuda = any(Path(p).suffix in CUDA_SOURCES for p in compiled) or (
            device not in (None, "", "cpu") and bool(torch.version.cuda) and find_cuda_home() is not None)
        arch = target_arch(device) if with_cuda else "cpu"
        cuda_cflags = [*self.default_cuda_cflags, *_flags(options.get("cuda_cflags"), "cuda_cflags")]
        if not any(_ARCH_FLAG.match(f) for f in cuda_cflags):
            cuda_cflags += arch_flags(arch)
        include = self.include_dirs(dependencies)
        flags = {"cflags": [*self.default_cflags, *_flags(options.get("cflags"), "cflags")],
                 "cuda_cflags": cuda_cflags if with_cuda else [],
                 "ld_flags": [*self.extra_ld_flags, *_flags(options.get("ld_flags"), "ld_flags")],
                 "include_paths": include, "with_cuda": with_cuda}
        torch_version = f"{torch.__version__} cuda {torch.version.cuda} git {torch.version.git_version}"
        key = build_cache.key(sources, flags, toolchain(with_cuda), torch_version, self.packages(include), arch)
        timeout = _timeout_s(os.environ.get("SOLBENCH_COMPILE_TIMEOUT_S"))
        return dict(flags, key=key, name=f"sb_{key[:16]}", language=self.name, sources=compiled, arch=arch,
                    timeout_s=timeout, cuda_home=find_cuda_home() if with_cuda else None)

    # ---- in the candidate's process ---------------------------------------------------------------------
    def load(self, staged: Path, entry_file: str, function: str) -> Callable:
        t0 = time.perf_counter()
        staged = Path(staged)
        if Path(entry_file).suffix not in TEXT or not (staged / entry_file).is_file():
            raise CompileError(f"entry file {entry_file} is not a C/C++/CUDA source of the solution")
        texts = _texts(staged)
        plan = self._plan_here(staged, texts)
        if not plan["sources"]:
            raise CompileError("no C/C++/CUDA source (.cpp, .cc, .cxx, .c, .cu) to build")
        python_module, namespace = _binding(texts)
        if not python_module and namespace is None:
            raise CompileError(f"the extension exposes nothing: bind {function!r} with PYBIND11_MODULE("
                               f"TORCH_EXTENSION_NAME, m) {{ m.def(\"{function}\", &{function}); }} or TORCH_LIBRARY")
        build_dir = Path(os.environ.get("SOLBENCH_BUILD_CACHE") or
                         Path(tempfile.gettempdir()) / "solbench-build" / plan["key"])
        build_dir.mkdir(parents=True, exist_ok=True)
        library = build_dir / f"{plan['name']}.so"
        meta = build_cache.read_meta(build_dir)
        self.cached = meta.get("key") == plan["key"] and library.is_file()
        fn = None
        if self.cached:
            try:
                fn = _entry(library, plan["name"], python_module, namespace, function)
            except (ImportError, OSError) as exc:  # a cached library that no longer loads: build it again
                print(f"solbench: {self.name}: the cached build did not load ({exc}); rebuilding", file=sys.stderr)
                self.cached = False
                (build_dir / build_cache.META).unlink(missing_ok=True)
        if fn is None:
            self.compile_s = self._build(staged, plan, build_dir, python_module)
            tmp = build_dir / f".{build_cache.META}.tmp"
            tmp.write_text(json.dumps({"key": plan["key"], "compile_s": round(self.compile_s, 3),
                                       "arch": plan["arch"], "language": self.name}))
            os.replace(tmp, build_dir / build_cache.META)  # last: the trusted side publishes once it appears
            try:
                fn = _entry(library, plan["name"], python_module, namespace, function)
            except (ImportError, OSError) as exc:
                raise CompileError(f"the built extension does not load: {exc}") from None
        else:
            self.compile_s = meta.get("compile_s") if isinstance(meta.get("compile_s"), (int, float)) else None
        self.load_s = time.perf_counter() - t0
        print(f"solbench: {self.name}: {'cached build' if self.cached else f'built in {self.compile_s:.1f} s'}, "
              f"loaded in {self.load_s:.2f} s", file=sys.stderr, flush=True)
        return fn

    def _plan_here(self, staged: Path, texts: dict[str, str]) -> dict[str, Any]:
        """The trusted side's plan; without one (this plug-in used on its own) the same plan computed here."""
        given = os.environ.get("SOLBENCH_BUILD_PLAN")
        if given:
            plan = json.loads(given)
            missing = [s for s in plan["sources"] if not (staged / s).is_file()]
            if missing:
                raise CompileError(f"sources {missing} are not in the staged solution")
            return plan
        files = {str(p.relative_to(staged)): p.read_text(errors="replace")
                 for p in sorted(staged.rglob("*")) if p.is_file() and not p.is_symlink()}
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        if any(Path(p).suffix in CUDA_SOURCES for p in files) and device == "cpu":
            raise Unsupported(f"{self.name}: CUDA sources need a CUDA device")
        return self.plan(files.items(), {}, [], device)

    def _build(self, staged: Path, plan: dict[str, Any], build_dir: Path, python_module: bool) -> float:
        """Build in a child process under the compile limit; returns the compile time in seconds."""
        (build_dir / "lock").unlink(missing_ok=True)  # torch's baton, left by a build killed earlier
        args = {"name": plan["name"], "sources": [str(staged / s) for s in plan["sources"]],
                "cflags": plan["cflags"], "cuda_cflags": plan["cuda_cflags"], "ld_flags": plan["ld_flags"],
                "include_paths": [str(staged), *plan["include_paths"]], "build_dir": str(build_dir),
                "with_cuda": plan["with_cuda"], "python_module": python_module}
        limit = _timeout_s(os.environ.get("SOLBENCH_COMPILE_TIMEOUT_S") or plan.get("timeout_s"))
        env = dict(os.environ, PATH=_search_path())
        if plan.get("cuda_home"):
            env["CUDA_HOME"] = plan["cuda_home"]
        proc = subprocess.Popen([sys.executable, "-c", _BUILD_SCRIPT, json.dumps(args)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=build_dir, env=env)
        try:
            out, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            try:  # a process that left the tree (a daemon the build started) may still hold the pipe
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.stdout.close()
            raise CompileError(f"the build did not finish within {limit:g} s (SOLBENCH_COMPILE_TIMEOUT_S)") from None
        text = out.decode(errors="replace")
        if proc.returncode != 0:
            raise CompileError("the build failed:\n" + compiler_tail(text, staged))
        report = [ln for ln in text.splitlines() if ln.startswith("SOLBENCH_BUILD ")]
        return float(json.loads(report[-1].split(" ", 1)[1])["compile_s"]) if report else float("nan")

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        """The language proof's names: the solution's own ``__global__`` functions."""
        return kernel_names(".", {p: t for p, t in sources.items() if p.endswith(TEXT)})

    def owns(self, kernel: str, names: set[str]) -> bool:
        return kernel_matches(kernel, names)


class Cutlass(CudaCpp):
    """CUDA C++ with CUTLASS and CuTe headers (the ``nvidia-cutlass`` package's, or a checkout at CUTLASS_PATH)."""

    name = "cutlass"
    default_cuda_cflags = ("-O3", "--expt-relaxed-constexpr")

    def include_dirs(self, dependencies: list[str] | tuple[str, ...] = ()) -> list[str]:
        return cutlass_dirs() or []

    def packages(self, include: list[str]) -> dict[str, str]:
        import importlib.metadata

        try:
            version = importlib.metadata.version("nvidia-cutlass")
        except importlib.metadata.PackageNotFoundError:  # a checkout (CUTLASS_PATH), or the package elsewhere
            version = "none"
        return dict(super().packages(include), **{"nvidia-cutlass": version})

    def unavailable(self, device: str) -> str | None:
        if cutlass_dirs() is None:
            return ("cutlass needs the CUTLASS/CuTe headers: neither the nvidia-cutlass package nor CUTLASS_PATH "
                    "is here; pip install nvidia-cutlass, or set CUTLASS_PATH to a CUTLASS checkout")
        return super().unavailable(device)

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        # CUTLASS's kernels are its templates' entry points, instantiated with the solution's types
        return super().kernel_names(sources) | {"cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel"}


def cutlass_dirs() -> list[str] | None:
    """CUTLASS's include directories (``include``, ``tools/util/include``): CUTLASS_PATH's, else the
    nvidia-cutlass package's (``cutlass_library/source``, looked for on sys.path, SOLBENCH_EXTRA_PATH and the
    cutlass language's own package folder, ``languages.packages``)."""
    from solbench.evaluate.languages import packages

    roots = []
    if os.environ.get("CUTLASS_PATH"):
        roots.append(Path(os.environ["CUTLASS_PATH"]))
    extra = [p for p in os.environ.get("SOLBENCH_EXTRA_PATH", "").split(os.pathsep) if p]
    extra += [str(packages.folder("cutlass"))] if packages.folder("cutlass") else []
    try:
        spec = importlib.machinery.PathFinder.find_spec("cutlass_library", sys.path + extra)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        roots.append(Path(spec.origin).parent / "source")
    for root in roots:
        for inc in (root / "include", root):
            if (inc / "cutlass" / "cutlass.h").is_file() and (inc / "cute").is_dir():
                util = inc.parent / "tools" / "util" / "include"
                return [str(inc)] + ([str(util)] if util.is_dir() else [])
    return None


def _dir_version(include: str) -> str:
    """A header directory's identity for the key: its path and CUTLASS's version header, if there is one."""
    version = Path(include) / "cutlass" / "version.h"
    try:
        return include + "\n" + version.read_text(errors="replace")[:20000]
    except OSError:
        return include


def _timeout_s(value: Any) -> float:
    try:
        return max(1.0, float(value))
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT_S


def _entry(library: Path, name: str, python_module: bool, namespace: str | None, function: str) -> Callable:
    """The entry function of a built library: from its Python module, else from torch.ops.<namespace>."""
    fn = None
    if python_module:
        spec = importlib.util.spec_from_file_location(name, library)
        if spec is None or spec.loader is None:
            raise ImportError(f"{library.name} is not an extension module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, function, None)
    if fn is None and namespace is not None:
        import torch

        if not python_module:
            torch.ops.load_library(str(library))
        try:
            fn = getattr(getattr(torch.ops, namespace), function)
        except (AttributeError, RuntimeError):
            fn = None
    if not callable(fn):
        raise CompileError(f"the extension defines no {function!r}: bind it with m.def(\"{function}\", ...)")
    return fn
