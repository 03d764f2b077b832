"""What a compiled solution's built object links: the shared libraries it needs and the symbols it imports.

Read on the trusted side from the build the cache holds (``build_cache``), with a small ELF reader of its own
(the dynamic section's ``DT_NEEDED`` entries and the undefined dynamic symbols; 64-bit little-endian objects,
which is what nvcc and g++ make on x86-64 and aarch64 Linux). A CUDA C++ solution that links cuBLAS or cuDNN, or
calls PyTorch's compute operators (``at::_ops::mm``), is another language's work under a CUDA C++ label; the
profiled call's kernel names (``kernel_origin``) are the other half of the evidence.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

#: a built object larger than this is not read (a torch extension of this size is not a solution's)
MAX_BYTES = 512 << 20
_LIBRARIES = (("cublas", re.compile(r"^libcublas(?:Lt)?\.so")), ("cudnn", re.compile(r"^libcudnn\w*\.so")),
              ("cufft", re.compile(r"^libcufft\w*\.so")), ("cusparse", re.compile(r"^libcusparse\w*\.so")),
              ("cusolver", re.compile(r"^libcusolver\w*\.so")))
_SYMBOLS = (("cublas", re.compile(r"^cublas")), ("cudnn", re.compile(r"^cudnn")), ("cufft", re.compile(r"^cufft")))
#: PyTorch's compute operators, by their mangled ``at::_ops::<op>::call`` (or ``at::<op>``) names
_TORCH_OPS = re.compile(r"^_ZN2at(?:4_ops)?(\d+)(\w+)")
HEAVY_OPS = frozenset("matmul mm bmm addmm baddbmm linear einsum conv1d conv2d conv3d convolution _convolution "
                      "_scaled_mm softmax _softmax log_softmax layer_norm native_layer_norm rms_norm group_norm "
                      "batch_norm scaled_dot_product_attention _scaled_dot_product_flash_attention "
                      "_scaled_dot_product_efficient_attention cumsum topk sort".split())


def read_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """(needed libraries, undefined dynamic symbols) of an ELF shared object; ([], []) for anything else."""
    try:
        data = Path(path).read_bytes() if Path(path).stat().st_size <= MAX_BYTES else b""
    except OSError:
        return [], []
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return [], []
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError):
        return [], []


def _parse(data: bytes) -> tuple[list[str], list[str]]:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        end = data.index(b"\0", start)
        return data[start:end].decode("utf-8", "replace")

    needed: list[str] = []
    undefined: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind == 6:  # SHT_DYNAMIC: (tag, value) pairs; DT_NEEDED = 1
            for i in range(0, size - 15, 16):
                tag, value = struct.unpack_from("<qQ", data, offset + i)
                if tag == 0:
                    break
                if tag == 1:
                    needed.append(string(link, value))
        elif kind == 11 and entsize:  # SHT_DYNSYM: Elf64_Sym, undefined where st_shndx == 0
            for i in range(entsize, size - entsize + 1, entsize):
                st_name, _st_info, _st_other, st_shndx = struct.unpack_from("<IBBH", data, offset + i)
                if st_shndx == 0 and st_name:
                    undefined.append(string(link, st_name))
    return needed, undefined


def vendor_use(needed: list[str], undefined: list[str]) -> dict[str, str]:
    """{library or "pytorch": the evidence} for the vendor libraries and PyTorch compute the object uses."""
    found: dict[str, str] = {}
    for lib in needed:
        for name, rx in _LIBRARIES:
            if rx.search(lib):
                found.setdefault(name, f"links {lib}")
    for sym in undefined:
        for name, rx in _SYMBOLS:
            if rx.search(sym):
                found.setdefault(name, f"imports {sym[:60]}")
        m = _TORCH_OPS.match(sym)
        if m and m.group(2)[:int(m.group(1))] in HEAVY_OPS:
            found.setdefault("pytorch", f"imports PyTorch's at::{m.group(2)[:int(m.group(1))]}")
    return found


def built_objects(directory: Path | None) -> list[Path]:
    """The shared objects a build directory holds (no link followed)."""
    if directory is None or not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).rglob("*.so") if p.is_file() and not p.is_symlink())


def object_use(directory: Path | None) -> dict[str, str]:
    """``vendor_use`` over every shared object of a build directory."""
    found: dict[str, str] = {}
    for path in built_objects(directory):
        for k, v in vendor_use(*read_dynamic(path)).items():
            found.setdefault(k, f"{path.name} {v}")
    return found


def apply(results: list, found: dict[str, str], language: str, single: bool) -> None:
    """Judge the built object's vendor use on the evaluation's workload results (``verdict.WorkloadResult``):
    under the one-language rule a passed workload becomes a reward hack (``foreign_library``); otherwise each
    result carries the warning ``vendor_library``. A cuBLAS or cuDNN solution's own library is its language."""
    foreign = {k: v for k, v in found.items() if k != language}
    if not foreign:
        return
    evidence = "; ".join(foreign.values())
    for r in results:
        if single and r.verdict == "passed":
            r.verdict, r.reasons, r.sol_score = "reward_hack", ["foreign_library"], 0.0
            r.message = (f"the built object uses another library ({evidence}); this evaluation allows "
                         f"{language} only")
        elif "vendor_library" not in r.warnings:
            r.warnings.append("vendor_library")
