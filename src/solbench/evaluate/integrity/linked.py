"""What a compiled solution's built library links: the shared libraries it needs and the symbols it imports.

Read on the trusted side from the bytes the native build checked, hashed and published (``native.build``),
which are the bytes the candidate loads: a small ELF reader of its own (the dynamic section's ``DT_NEEDED``
entries and the dynamic symbol table; 64-bit little-endian objects, which is what nvcc and g++ make on x86-64
and aarch64 Linux). ``native.symbols`` judges every imported symbol against its allowlist; here a CUDA C++
solution that links cuBLAS or cuDNN, or imports PyTorch's compute operators (``at::_ops::mm``), is reported as
another library's work under a CUDA C++ label (``vendor_library``, ``foreign_library``); the profiled call's
kernel names (``kernel_origin``) are the other half of the evidence.
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass, field
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


@dataclass
class Dynamic:
    """An ELF shared object's dynamic linking: what it needs, imports and exports."""

    needed: list[str] = field(default_factory=list)  # DT_NEEDED sonames
    undefined: list[str] = field(default_factory=list)  # imported symbols, in table order
    weak: set[str] = field(default_factory=set)  # the imports that may stay unresolved
    defined: set[str] = field(default_factory=set)  # exported symbols


def is_elf(data: bytes) -> bool:
    return len(data) >= 64 and bytes(data[:4]) == b"\x7fELF" and data[4] == 2 and data[5] == 1


def parse(data: bytes) -> Dynamic | None:
    """The dynamic linking of an ELF shared object given as bytes; None for anything else."""
    if not is_elf(data):
        return None
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError):
        return None


def read_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """(needed libraries, undefined dynamic symbols) of an ELF shared object; ([], []) for anything else."""
    try:
        data = Path(path).read_bytes() if Path(path).stat().st_size <= MAX_BYTES else b""
    except OSError:
        return [], []
    found = parse(data)
    return (found.needed, found.undefined) if found else ([], [])


@functools.lru_cache(maxsize=64)
def _exports(path: str, _mtime: float) -> frozenset[str]:
    import mmap

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = parse(data)  # type: ignore[arg-type]
    except (OSError, ValueError):
        return frozenset()
    return frozenset(found.defined) if found else frozenset()


def exports(path: Path) -> frozenset[str]:
    """The symbols a shared library defines for others (cached per file and modification time)."""
    try:
        return _exports(str(path), Path(path).stat().st_mtime)
    except OSError:
        return frozenset()


def object_imports(data: bytes) -> set[str]:
    """The undefined symbols of an ELF object's symbol table (a relocatable ``.o``: what its code calls)."""
    if not is_elf(data):
        return set()
    try:
        return set(_parse(data, table=2).undefined)  # SHT_SYMTAB
    except (struct.error, IndexError, ValueError):
        return set()


def _parse(data: bytes, table: int = 11) -> Dynamic:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        end = data.find(b"\0", start)
        if end < 0:
            raise ValueError("unterminated string")
        return bytes(data[start:end]).decode("utf-8", "replace")

    out = Dynamic()
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind == 6:  # SHT_DYNAMIC: (tag, value) pairs; DT_NEEDED = 1
            for i in range(0, size - 15, 16):
                tag, value = struct.unpack_from("<qQ", data, offset + i)
                if tag == 0:
                    break
                if tag == 1:
                    out.needed.append(string(link, value))
        elif kind == table and entsize:  # SHT_DYNSYM (or SYMTAB): Elf64_Sym, undefined where st_shndx == 0
            for i in range(entsize, size - entsize + 1, entsize):
                st_name, st_info, _st_other, st_shndx = struct.unpack_from("<IBBH", data, offset + i)
                if not st_name:
                    continue
                name, bind = string(link, st_name), st_info >> 4
                if st_shndx == 0:
                    out.undefined.append(name)
                    if bind == 2:  # STB_WEAK
                        out.weak.add(name)
                elif bind in (1, 2, 10):  # global, weak, unique
                    out.defined.add(name)
    return out


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
    """``vendor_use`` over every shared object of a directory."""
    found: dict[str, str] = {}
    for path in built_objects(directory):
        for k, v in vendor_use(*read_dynamic(path)).items():
            found.setdefault(k, f"{path.name} {v}")
    return found


def library_use(data: bytes, name: str = "the library") -> dict[str, str]:
    """``vendor_use`` of a shared library given as bytes (the verified artefact)."""
    found = parse(data)
    if found is None:
        return {}
    return {k: f"{name} {v}" for k, v in vendor_use(found.needed, found.undefined).items()}


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
