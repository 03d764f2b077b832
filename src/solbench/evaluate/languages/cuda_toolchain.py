"""The C++ sources and the toolchain of the compiled languages (``cuda_cpp``, ``cutlass``, ``cublas``, ``cudnn``):
the kernels a solution's sources define, nvcc and the host compiler, the architecture flags for the present
device, the compiler's output trimmed for a verdict, and killing a build's process tree."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path


COMPILED = (".cpp", ".cc", ".cxx", ".c", ".cu")
CUDA_SOURCES = (".cu",)
#: files scanned for kernels and bindings
TEXT = COMPILED + (".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc")
DEFAULT_TIMEOUT_S = 300.0
_ARCH_FLAG = re.compile(r"^(-arch|--gpu-architecture|-gencode|--generate-code|-code|--gpu-code)\b")
_STRIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
_ATTRS = r"(?:(?:__launch_bounds__|__cluster_dims__|__maxnreg__|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)\s*)*"
_KERNEL = re.compile(r"\b__global__\b[^;{}()]*?\bvoid\s+" + _ATTRS + r"([A-Za-z_]\w*)\s*(?:<[^;{}()]*>\s*)?\(")
_KERNEL_LATE = re.compile(r"\bvoid\s+__global__\s+" + _ATTRS + r"([A-Za-z_]\w*)\s*\(")


def strip_code(text: str) -> str:
    """C/C++/CUDA text with comments and string literals blanked out."""
    return _STRIP.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _texts(staged: Path) -> dict[str, str]:
    out = {}
    for path in sorted(Path(staged).rglob("*")):
        if path.suffix in TEXT and path.is_file() and not path.is_symlink():
            out[str(path.relative_to(staged))] = path.read_text(errors="replace")
    return out


def kernel_names(staged: str | Path, texts: dict[str, str] | None = None) -> set[str]:
    """The ``__global__`` functions the solution's own sources define (templates by their name)."""
    names: set[str] = set()
    for text in (texts if texts is not None else _texts(Path(staged))).values():
        code = strip_code(text)
        names.update(m.group(1) for m in _KERNEL.finditer(code))
        names.update(m.group(1) for m in _KERNEL_LATE.finditer(code))
    return names


def kernel_matches(profiled: str, names: set[str]) -> bool:
    """Whether a profiler's kernel name is one of ``names``: demangled (``void ns::axpy_kernel<float>(...)``,
    ``axpy_kernel(float const*, ...)``) or mangled (``_Z11axpy_kernelPKfS0_Pff``, ``_ZN2ns11axpy_kernel...``)."""
    for n in names:
        q = re.escape(n)
        # qualified names may pass through anonymous namespaces: void (anonymous namespace)::k<8>(...)
        if re.match(rf"^(?:void\s+)?(?:(?:\w+|\(anonymous namespace\))::)*{q}\s*(?:<|\(|$)", profiled) or \
                re.match(rf"^_Z(?:N(?:\d+\w+?)*?)?{len(n)}{q}", profiled):
            return True
    return False


def _search_path() -> str:
    """PATH with this interpreter's directory (where pip puts ninja) in front."""
    return os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def find_cuda_home() -> str | None:
    """The CUDA toolkit's root (``bin/nvcc``, ``include/cuda_runtime.h``): CUDA_HOME, CUDA_PATH, the real nvcc's
    (an nvcc on PATH may be a wrapper script, from which torch would guess wrong), else /usr/local/cuda."""
    nvcc = shutil.which("nvcc", path=_search_path())
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None, "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK) and \
                os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    return None


def find_nvcc() -> str | None:
    home = find_cuda_home()
    return os.path.join(home, "bin", "nvcc") if home else None


def _version(exe: str | None) -> str | None:
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return (r.stdout + r.stderr).strip() if r.returncode == 0 else None


@functools.lru_cache(maxsize=4)
def toolchain(with_cuda: bool) -> dict[str, str | None]:
    """What the binary depends on besides its sources and flags: the compilers' and ninja's --version output,
    the Python ABI and the machine."""
    cxx = shutil.which(os.environ.get("CXX", "c++"), path=_search_path())
    return {"cxx": _version(cxx), "nvcc": _version(find_nvcc()) if with_cuda else None,
            "ninja": _version(shutil.which("ninja", path=_search_path())),
            "python": sys.implementation.cache_tag, "machine": platform.machine()}


def target_arch(device: str) -> str:
    """``sm_90a`` for a device of compute capability 9.0 (the ``a`` features from 9.0 on), ``cpu`` on the CPU."""
    if not device or device == "cpu":
        return "cpu"
    import torch

    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def arch_flags(arch: str) -> list[str]:
    if not arch.startswith("sm_"):
        return []
    n = arch[3:]
    return [f"-gencode=arch=compute_{n},code=sm_{n}"]


def compiler_tail(output: str, staged: str | Path | None = None, limit: int = 1800) -> str:
    """The build log's last lines as a compile error shows them: ninja's command echoes dropped, the first
    ``error`` line kept, paths relative to the solution."""
    if staged:
        output = output.replace(str(staged).rstrip("/") + "/", "")
    if "Error building extension '" in output:  # torch's RuntimeError: what follows is ninja's output
        output = output.split("Error building extension '", 1)[1].split(": ", 1)[-1]
    lines = [ln.rstrip()[:400] for ln in output.splitlines()
             if ln.strip() and not re.match(r"^\[\d+/\d+\] ", ln) and not ln.startswith("SOLBENCH_BUILD ")
             and "-DTORCH_EXTENSION_NAME=" not in ln]
    tail = lines[-25:]
    first = next((ln for ln in lines if re.search(r"\berror\b", ln, re.IGNORECASE)), None)
    if first is not None and first not in tail:
        tail = [first, "..."] + tail
    return "\n".join(tail)[-limit:]


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (ninja and the compilers it started)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, frontier = {pid}, [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier.extend(kids)
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
