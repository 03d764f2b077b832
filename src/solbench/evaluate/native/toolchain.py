"""The toolchain a native build uses, and the ninja file that drives it (``build``): where the compilers, torch's
and CUDA's headers and libraries are, the flags of a host compile, an nvcc compile and the link, and an object's
name for a source's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any


# ---- the tools --------------------------------------------------------------------------------------
def search_path() -> str:
    """PATH with this interpreter's directory (where pip puts ninja) in front."""
    return os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def tool(name: str) -> str | None:
    found = shutil.which(name, path=search_path())
    return os.path.realpath(found) if found else None


@lru_cache(maxsize=1)
def torch_dirs() -> dict[str, Any]:
    """torch's and Python's include and library directories, the C++ standard and ABI torch was built with."""
    import sysconfig

    import torch
    import torch.utils.cpp_extension as ext

    text = Path(ext.__file__).read_text(errors="replace")
    return {"include": ext.include_paths("cpu"), "lib": ext.library_paths("cpu")[0],
            "python_include": sysconfig.get_path("include", scheme="posix_prefix"),
            "std": "-std=c++20" if "'-std=c++20'" in text else "-std=c++17",
            "abi": f"-D_GLIBCXX_USE_CXX11_ABI={int(getattr(torch._C, '_GLIBCXX_USE_CXX11_ABI', 1))}",
            "nvcc_flags": list(getattr(ext, "COMMON_NVCC_FLAGS", []))}


@lru_cache(maxsize=2)
def cuda_dirs(kind: str) -> tuple[str, ...]:
    """torch's own include (``include``) or library (``lib``) directories for a CUDA build: torch's, the CUDA
    toolkit's and cuDNN's (CUDNN_HOME), as torch's extension builder finds them."""
    import torch.utils.cpp_extension as ext

    return tuple(ext.include_paths("cuda") if kind == "include" else ext.library_paths("cuda"))


@lru_cache(maxsize=2)
def library_dirs(cuda_home: str | None) -> tuple[str, ...]:
    """Where the libraries a solution's library needs are found (for telling a denied import from a missing one)."""
    dirs = [torch_dirs()["lib"]]
    if cuda_home:
        dirs += [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib"), *cuda_dirs("lib")]
    cxx = tool(os.environ.get("CXX", "c++"))
    if cxx:
        try:
            out = subprocess.run([cxx, "-print-file-name=libstdc++.so"], capture_output=True, text=True, timeout=30)
            dirs.append(os.path.dirname(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    dirs += ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
             "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    return tuple(d for d in dirs if d and os.path.isdir(d))


# ---- the ninja file -------------------------------------------------------------------------------------
def quote(arg: str) -> str:
    import shlex

    return shlex.quote(str(arg)).replace("$", "$$")


def write_ninja(out: Path, rules: dict[str, list[str]], builds: list[tuple[str, str, list[str]]], defaults: str) -> None:
    """Write ``build.ninja``: ``defaults`` are the outputs a plain ``ninja`` builds (space-separated)."""
    lines = ["ninja_required_version = 1.3"]
    for name, command in rules.items():
        lines += [f"rule {name}", "  command = " + " ".join(command)]
    for output, rule, inputs in builds:
        lines.append(f"build {output}: {rule} " + " ".join(i.replace(" ", "$ ").replace(":", "$:") for i in inputs))
    lines.append(f"default {defaults}")
    (out / "build.ninja").write_text("\n".join(lines) + "\n")


def host_flags(plan: dict[str, Any], src: Path, out: Path) -> list[str]:
    t = torch_dirs()
    dirs = cuda_dirs("include") if plan.get("with_cuda") and plan.get("cuda_home") else t["include"]
    inc = [a for d in dirs for a in ("-isystem", d)] + ["-isystem", t["python_include"]]
    inc += [a for d in plan.get("include_paths") or [] for a in ("-I", d)]
    own = [f"-I{src / f[2:]}" if f.startswith("-I") else f for f in plan["cflags"]]
    return ["-fPIC", t["std"], t["abi"], "-ffunction-sections", "-fdata-sections", "-include",
            str(out / "solbench_prelude.h"), f"-DTORCH_EXTENSION_NAME={plan['name']}",
            "-DTORCH_API_INCLUDE_EXTENSION_H", "-I", str(src), *inc, *own]


def nvcc_flags(plan: dict[str, Any], src: Path, out: Path) -> list[str]:
    host = host_flags(dict(plan, cflags=[]), src, out)
    keep = [a for a in host if a not in ("-fPIC", "-ffunction-sections", "-fdata-sections") and not a.startswith("-std")]
    own = [f"-I{src / f[2:]}" if f.startswith("-I") else f for f in plan["cuda_cflags"]]
    std = [] if any(f.startswith(("-std", "--std")) for f in own) else [torch_dirs()["std"]]
    return [*keep, *torch_dirs()["nvcc_flags"], "--compiler-options", "-fPIC,-ffunction-sections,-fdata-sections",
            *std, *own]


def link_flags(plan: dict[str, Any]) -> list[str]:
    t = torch_dirs()
    flags = ["-Wl,--gc-sections", "-Wl,--version-script=exports.map", "-Wl,--as-needed", f"-L{t['lib']}", "-lc10",
             "-ltorch_cpu", "-ltorch"]
    if plan.get("with_cuda") and plan.get("cuda_home"):
        flags += ["-lc10_cuda", "-ltorch_cuda", *(f"-L{d}" for d in cuda_dirs("lib")[1:]), "-lcudart"]
    return flags + list(plan.get("libraries") or []) + list(plan.get("ld_flags") or [])


def object_name(path: str) -> str:
    stem = path.replace("/", "__")
    return stem + (".cuda.o" if path.endswith(".cu") else ".o")
