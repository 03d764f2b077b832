"""C++/CUDA solutions (SOL-ExecBench's ``cuda_cpp``, ``cutlass``, ``cublas``, ``cudnn``), built by the trusted side.

A solution is SOL-ExecBench's: ``entry_point`` ``main.cpp::run``, ``binding: "torch"``, sources such as
``kernel.h``, ``kernel.cu`` and ``main.cpp``, and optional ``compile_options`` (``cflags``, ``cuda_cflags``,
``ld_flags``, from an allowlist: ``native.flags``) added after solbench's defaults (``-O3``). The entry point is
bound with ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }`` as in a torch extension, but
solbench's prelude turns that body into a table of plain function pointers (``native.sources``), so the
solution's library needs no Python: its Python side is solbench's own binding. CUDA sources get
``-gencode=arch=compute_XY,code=sm_XY`` for the present device, with the ``a`` suffix from sm_90 on
(``compute_90a``/``sm_90a`` on the H100 and H200), unless their flags name an architecture themselves.

Two sides:

- the trusted side (``evaluate.runner`` through ``build_cache.Carry``) asks ``unsupported_reason`` (a missing
  compiler or header package, CUDA kernels on the CPU or without nvcc, a binding other than torch: an
  ``unsupported`` verdict with the reason) and ``build_plan`` (flags, include directories, the cache key), then
  builds, checks and hashes the library before the candidate starts (``native.build``) and copies it, with the
  binding, into the candidate's private directory;
- the candidate's process (``load``) reads both, checks their sha256 against the trusted side's
  (``SOLBENCH_BUILD_PLAN``), loads those exact bytes from sealed memory files and binds the entry point. It
  builds nothing.

On the CPU a solution whose sources define no CUDA kernel (``__global__``, or CUTLASS's templates) is built
with the host compiler, its ``.cu`` files as C++, and runs: a ``.cu`` file is no reason for ``unsupported``.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable

from solbench.evaluate import build_cache
from solbench.evaluate.languages.base import CompileError, Language
from solbench.evaluate.languages.cuda_toolchain import (COMPILED, CUDA_SOURCES, TEXT, DEFAULT_TIMEOUT_S, _ARCH_FLAG,
                                                        _search_path, arch_flags, find_cuda_home, find_nvcc,
                                                        kernel_matches, kernel_names, strip_code, target_arch,
                                                        toolchain)
from solbench.evaluate.native import flags as native_flags

_CUTLASS_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:cutlass|cute)/")
#: the binding module, per sha256, once per process
_BINDINGS: dict[str, Any] = {}


class CudaCpp(Language):
    name = "cuda_cpp"
    compiled = True
    proof = True  # the profiled call's kernels are the sources' own __global__ functions (or the library's)
    #: flags before the solution's own (which come later, so they win)
    default_cflags: tuple[str, ...] = ("-O3",)
    default_cuda_cflags: tuple[str, ...] = ("-O3",)
    extra_ld_flags: tuple[str, ...] = ()  # the language's own library (cublas: -lcublas)

    def __init__(self) -> None:
        self.load_s: float | None = None  # seconds ``load`` took
        self._library: Any = None  # the loaded library, kept for the process's life

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
            return f"{self.name} needs ninja (solbench's build runs it): pip install ninja"
        if shutil.which("c++filt") is None:
            return f"{self.name} needs c++filt (binutils) to read the built library's imports: apt-get install binutils"
        return None

    def defined_kernels(self, texts: dict[str, str]) -> list[str]:
        """The CUDA kernels the sources define: ``__global__`` functions (and CUTLASS's, for cutlass)."""
        found = sorted(kernel_names(".", texts))
        if self.name == "cutlass" and any(_CUTLASS_INCLUDE.search(strip_code(t)) or _CUTLASS_INCLUDE.search(t)
                                          for t in texts.values()):
            found.append("CUTLASS's kernel templates")
        return found

    def unsupported_reason(self, solution: Any, device: str) -> str | None:
        """Why this solution cannot be judged on ``device`` here, or None (trusted side)."""
        why = self.unavailable(device)
        if why:
            return why
        binding = getattr(solution.spec, "binding", None)
        if binding not in (None, "torch"):
            return f"{self.name}: binding {binding!r} is not supported; use \"torch\" (a torch extension)"
        cuda = sorted(s.path for s in solution.sources if Path(s.path).suffix in CUDA_SOURCES)
        if device == "cpu":
            if self.own_origins:
                return (f"{self.name}: the solution calls {self.name}, which needs a CUDA device; this evaluation "
                        "runs on the CPU")
            kernels = self.defined_kernels({s.path: s.content for s in solution.sources if s.path.endswith(TEXT)})
            if kernels:
                return (f"{self.name}: CUDA kernels ({', '.join(kernels[:3])}) need a CUDA device; this evaluation "
                        "runs on the CPU")
            return None  # host code only: .cu files are built as C++
        if not cuda:
            return None
        import torch

        if not torch.version.cuda:
            return f"{self.name}: torch here ({torch.__version__}) is a CPU build; CUDA sources need a CUDA build"
        if find_nvcc() is None:
            return ("CUDA C++ needs nvcc and the CUDA headers (the CUDA toolkit), found neither under CUDA_HOME, "
                    "beside an nvcc on PATH nor in /usr/local/cuda; install the CUDA toolkit")
        return None

    def build_plan(self, solution: Any, device: str) -> dict[str, Any]:
        """The build as the trusted side decides it: flags, include directories, the cache key (JSON-able).
        ValueError for compile_options outside the allowlist."""
        spec = solution.spec
        options = (getattr(spec, "model_extra", None) or {}).get("compile_options") or {}
        if not isinstance(options, dict):
            raise ValueError(f"compile_options must be an object with cflags, cuda_cflags, ld_flags, not {options!r}")
        return self.plan(((s.path, s.content) for s in solution.sources), options, list(spec.dependencies), device)

    def plan(self, sources, options: dict[str, Any], dependencies: list[str], device: str) -> dict[str, Any]:
        import torch

        from solbench.evaluate.native.toolchain import tool

        sources = list(sources)
        compiled = sorted(p for p, _ in sources if Path(p).suffix in COMPILED)
        cpu = device in (None, "", "cpu")
        # on a GPU C++ sources may use CUDA's headers and libraries too (ATen's CUDA API, cuBLAS)
        with_cuda = not cpu and (any(Path(p).suffix in CUDA_SOURCES for p in compiled) or (
            bool(torch.version.cuda) and find_cuda_home() is not None))
        arch = target_arch(device) if with_cuda else "cpu"
        cuda_cflags = [*self.default_cuda_cflags,
                       *native_flags.nvcc(native_flags.split(options.get("cuda_cflags"), "cuda_cflags"))]
        if not any(_ARCH_FLAG.match(f) for f in cuda_cflags):
            cuda_cflags += arch_flags(arch)
        own_libs = tuple(f[2:] for f in self.extra_ld_flags)
        include = self.include_dirs(dependencies)
        flags = {"cflags": [*self.default_cflags, *native_flags.host(native_flags.split(options.get("cflags"), "cflags"))],
                 "cuda_cflags": cuda_cflags if with_cuda else [],
                 "ld_flags": native_flags.libraries(native_flags.split(options.get("ld_flags"), "ld_flags"), own_libs),
                 "libraries": list(self.extra_ld_flags), "include_paths": include, "with_cuda": with_cuda,
                 "cuda_as_cpp": cpu, "native": native_digest()}
        torch_version = f"{torch.__version__} cuda {torch.version.cuda} git {torch.version.git_version}"
        key = build_cache.key(sources, flags, toolchain(with_cuda), torch_version, self.packages(include), arch)
        timeout = _timeout_s(os.environ.get("SOLBENCH_COMPILE_TIMEOUT_S"))
        return dict(flags, key=key, name=f"sb_{key[:16]}", language=self.name, sources=compiled, arch=arch,
                    timeout_s=timeout, cuda_home=find_cuda_home() if with_cuda else None,
                    nvcc=find_nvcc() if with_cuda else None, torch_version=torch_version,
                    cxx=tool(os.environ.get("CXX", "c++")))

    # ---- in the candidate's process ---------------------------------------------------------------------
    def load(self, staged: Path, entry_file: str, function: str) -> Callable:
        """The entry point from the trusted side's build: both libraries' hashes checked, then loaded from
        sealed memory files holding exactly the checked bytes."""
        import ctypes

        t0 = time.perf_counter()
        if Path(entry_file).suffix not in TEXT or not (Path(staged) / entry_file).is_file():
            raise CompileError(f"entry file {entry_file} is not a C/C++/CUDA source of the solution")
        given = os.environ.get("SOLBENCH_BUILD_PLAN")
        if not given:
            raise CompileError(f"{self.name}: no trusted build for this solution (native solutions are built by the "
                               "runner before the candidate starts)")
        plan = json.loads(given)
        limit = int(plan.get("bytes_limit") or 256 << 20)
        binding = _binding(plan["binding"], plan["binding_sha256"], limit)
        data = _verified(plan["library"], plan["sha256"], limit)
        try:
            self._library = _dlopen(ctypes, data)
            address = ctypes.cast(self._library.solbench_native_module, ctypes.c_void_p).value
        except (OSError, AttributeError) as exc:
            raise CompileError(f"the built library does not load: {exc}") from None
        functions = binding.bind(address)
        fn = functions.get(function)
        if not callable(fn):
            raise CompileError(f"the extension defines no {function!r}: bind it with m.def(\"{function}\", "
                               f"&{function}) in PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)")
        self.load_s = time.perf_counter() - t0
        print(f"solbench: {self.name}: loaded the verified build {plan['sha256'][:16]} in {self.load_s:.2f} s",
              file=sys.stderr, flush=True)
        return fn

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        """The language proof's names: the solution's own ``__global__`` functions."""
        return kernel_names(".", {p: t for p, t in sources.items() if p.endswith(TEXT)})

    def owns(self, kernel: str, names: set[str]) -> bool:
        return kernel_matches(kernel, names)


def native_digest() -> str:
    """A hash of solbench's native build (prelude, binding, flags allowlist, symbol allowlist, build steps, the
    toolchain's flags): part of every key, so a change to any of them builds and checks again."""
    from solbench.evaluate import native

    h = hashlib.sha256()
    for name in ("sources.py", "symbols.py", "flags.py", "build.py", "toolchain.py"):
        h.update((Path(native.__file__).parent / name).read_bytes())
    return h.hexdigest()


def _verified(path: str, sha256: str, limit: int) -> bytes:
    """A file's bytes (no link followed, a regular file within ``limit``) whose sha256 is ``sha256``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CompileError(f"the trusted build's library is missing ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or max(st.st_size, st.st_blocks * 512) > limit:
            raise CompileError("the trusted build's library is not a regular file within its size bound")
        data = f.read(limit + 1)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CompileError("the trusted build's library does not match its hash: it was changed after the build")
    return data


def _sealed(data: bytes) -> tuple[int, str]:
    """A descriptor of an anonymous memory file holding ``data``, sealed against any change, and its path."""
    import fcntl

    fd = os.memfd_create("solbench-native", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    return fd, f"/proc/self/fd/{fd}"


def _private_copy(data: bytes) -> str:
    """Where memory files cannot be mapped executable: a fresh read-only file of this process's own."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="solbench-native-")
    path = os.path.join(folder, "library.so")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o500)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _dlopen(ctypes: Any, data: bytes) -> Any:
    try:
        fd, path = _sealed(data)
    except (OSError, AttributeError):
        fd, path = -1, _private_copy(data)
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError:
        if fd < 0:
            raise
        return ctypes.CDLL(_private_copy(data), mode=os.RTLD_NOW | os.RTLD_LOCAL)  # a memfd without exec


def _binding(path: str, sha256: str, limit: int) -> Any:
    """solbench's binding module, imported from the verified bytes (once per process and hash)."""
    if sha256 in _BINDINGS:
        return _BINDINGS[sha256]
    data = _verified(path, sha256, limit)
    name = "solbench_native_binding"
    try:
        _fd, where = _sealed(data)
    except (OSError, AttributeError):
        where = _private_copy(data)
    loader = importlib.machinery.ExtensionFileLoader(name, where)
    spec = importlib.util.spec_from_loader(name, loader, origin=where)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError:
        where = _private_copy(data)
        loader = importlib.machinery.ExtensionFileLoader(name, where)
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader, origin=where))
        loader.exec_module(module)
    _BINDINGS[sha256] = module
    return module


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
