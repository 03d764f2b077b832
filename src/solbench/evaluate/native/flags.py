"""Which of a solution's ``compile_options`` reach the compilers and the linker: an allowlist.

A flag passes when it tunes code generation (optimisation levels, ``-f``/``-m`` code-generation switches,
architectures, standards, warnings, macros, nvcc's math and register options); what the built object then does
is judged from its symbols (``symbols``), so ``-fopenmp`` or ``-pthread`` pass here and their runtime calls are
judged there. A flag that would load code into the compiler, change the tools or their search paths, read
or write files of its choosing, or hand options to the linker or assembler (``-fplugin``, ``-B``, ``-specs``,
``-wrapper``, ``-ccbin``, ``-Wl,``, ``-Xlinker``, ``-include``, ``@file``, ``-o``, ``-M*``, ``-save-temps``,
``-fdump-*``, ``-fprofile-*``) is not on the list: the evaluation is a ``compile_error`` that names it.
Libraries come from the language (``cublas``: cuBLAS); ``ld_flags`` may name only libm, the CUDA driver and
the vendor libraries (``-l``), and the imports decide whether the solution may call them.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

_F = (r"(?:no-)?(?:fast-math|unroll(?:-all)?-loops|strict-aliasing|tree-(?:loop-)?vectorize|finite-math-only|"
      r"math-errno|omit-frame-pointer|reciprocal-math|associative-math|signed-zeros|trapping-math|"
      r"inline(?:-[a-z-]+)?|exceptions|permissive|diagnostics-[a-z-]+(?:=[a-z]+)?|PIC|pic|openmp|openmp-simd|"
      r"vect-cost-model(?:=[a-z]+)?|fp-contract=[a-z]+|max-errors=\d+|template-depth=\d+|"
      r"constexpr-[a-z-]+(?:=\d+)?|visibility-inlines-hidden|visibility=[a-z]+|prefetch-loop-arrays|"
      r"peel-loops|ipa-[a-z-]+|gcse(?:-[a-z]+)?|rounding-math|cx-limited-range|excess-precision=[a-z]+|"
      r"stack-protector(?:-[a-z]+)?|semantic-interposition|rtti|builtin|split-loops|tree-[a-z-]+|"
      r"align-[a-z]+(?:=\d+)?|function-sections|data-sections|var-tracking)")
_HOST = [
    r"-O[0-3sgz]?", r"-Ofast", r"-g[0-3]?", r"-w", r"-W(?:no-)?[a-z0-9][a-z0-9+=-]*", r"-D[A-Za-z_]\w*(?:=.*)?",
    r"-U[A-Za-z_]\w*", r"-std=(?:c|gnu)\+\+\d\d", r"-f" + _F, r"-pthread", r"-pedantic(?:-errors)?",
    r"-m(?:arch|tune|cpu|fpu|prefer-vector-width)=[\w.-]+", r"-m(?:no-)?[a-z][a-z0-9.-]*", r"-I(?!/)(?!.*\.\.)[\w./-]+",
]
_NVCC = [
    r"-O[0-3]", r"-g", r"-G", r"-w", r"-lineinfo", r"--generate-line-info", r"-?-use_fast_math",
    r"--expt-relaxed-constexpr", r"--expt-extended-lambda", r"--extended-lambda", r"--restrict",
    r"--extra-device-vectorization", r"-?-(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)",
    r"-D[A-Za-z_]\w*(?:=.*)?", r"-U[A-Za-z_]\w*", r"-std=c\+\+\d\d", r"-?-maxrregcount=\d+",
    r"-arch=(?:sm|compute)_\d+[af]?", r"-code=[\w,]+", r"-gencode=arch=compute_\d+[af]?,code=[\w,\[\]]+",
    r"-?-(?:res-usage|resource-usage)", r"-?-threads=\d+", r"-Wno-deprecated-gpu-targets", r"-W(?:no-)?[a-z-]+",
    r"-?-diag-suppress=[\d,]+", r"-I(?!/)(?!.*\.\.)[\w./-]+", r"-Xptxas=[\w,=.-]+", r"-Xcudafe=--diag_suppress=\w+",
]
#: nvcc options whose value is the next argument
_NVCC_PAIRS = {"-Xptxas", "--ptxas-options", "-Xcompiler", "--compiler-options", "-maxrregcount", "--maxrregcount",
               "-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code", "-t",
               "--threads", "-Xcudafe", "--diag-suppress"}
_PTXAS = re.compile(r"^(?:-v|--verbose|-O[0-3]|--warn-on-spills|-warn-spills|--warn-on-local-memory-usage|"
                    r"--allow-expensive-optimizations(?:=(?:true|false))?|-dlcm=c[ag]|--maxrregcount=\d+|"
                    r"-maxrregcount=\d+|--def-load-cache=c[ag])$")
#: libraries ``ld_flags`` may name; whether the solution may call into them is its imports' question (a CUDA
#: C++ solution that calls cuBLAS is ``native_symbol``, a cuBLAS solution is not)
_LIBRARIES = {"m", "cuda", "cublas", "cublasLt", "cudnn"}


def _full(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("^(?:" + "|".join(patterns) + ")$")


_HOST_RX, _NVCC_RX = _full(_HOST), _full(_NVCC)


def split(value: Any, what: str) -> list[str]:
    """A compile_options field as a list of arguments (a string is split like a shell would)."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    raise ValueError(f"compile_options.{what} must be a list of strings, not {value!r}"[:200])


def _refuse(flag: str, what: str) -> ValueError:
    return ValueError(f"compile_options.{what}: {flag[:80]!r} is not a flag solbench passes to the compiler "
                      f"(optimisation, code-generation, architecture, warning and macro flags are; docs/LANGUAGES.md)")


def host(flags: list[str], what: str = "cflags") -> list[str]:
    for f in flags:
        if not _HOST_RX.match(f):
            raise _refuse(f, what)
    return flags


def nvcc(flags: list[str], what: str = "cuda_cflags") -> list[str]:
    i = 0
    while i < len(flags):
        f = flags[i]
        name, _, value = f.partition("=")
        if f in _NVCC_PAIRS or (name in _NVCC_PAIRS and value and not _NVCC_RX.match(f)):
            if not value:
                if i + 1 >= len(flags):
                    raise _refuse(f, what)
                i += 1
                value = flags[i]
            _pair(name, value, what)
        elif not _NVCC_RX.match(f):
            raise _refuse(f, what)
        i += 1
    return flags


def _pair(name: str, value: str, what: str) -> None:
    parts = [p for p in re.split(r"[,\s]+", value) if p]
    if name in ("-Xptxas", "--ptxas-options"):
        ok = all(_PTXAS.match(p) for p in parts)
    elif name in ("-Xcompiler", "--compiler-options"):
        ok = all(_HOST_RX.match(p) for p in parts)
    elif name in ("-maxrregcount", "--maxrregcount", "-t", "--threads"):
        ok = value.isdigit()
    elif name in ("-Xcudafe", "--diag-suppress"):
        ok = bool(re.match(r"^(?:--diag_suppress=)?[\w,]+$", value))
    else:  # architectures
        ok = bool(re.match(r"^(?:arch=)?(?:sm|compute)_\d+[af]?(?:,code=[\w,\[\]]+)?$|^[\w,\[\]]+$", value))
    if not ok:
        raise _refuse(f"{name} {value}", what)


def libraries(flags: list[str], own: tuple[str, ...] = ()) -> list[str]:
    """``ld_flags``: ``-l`` of the listed libraries only."""
    out = []
    for f in flags:
        m = re.match(r"^-l([\w.+-]+)$", f)
        if not m or m.group(1) not in _LIBRARIES | set(own):
            raise ValueError(f"compile_options.ld_flags: {f[:80]!r} is not a library solbench links "
                             f"(allowed: {', '.join(sorted(('-l' + x for x in _LIBRARIES | set(own))))})")
        out.append(f)
    return out
