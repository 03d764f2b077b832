"""Another kernel language, compiler or vendor library inside a solution: a CuTe DSL solution that imports Triton,
a CUDA C++ one that includes cuBLAS or calls ``at::matmul``, anything that reaches for ``torch.compile``.

Under the one-language rule (``Policy.single_language``: an experiment arm's, or a problem's) such a use is a
reject (``foreign_language``): the comparison between languages is only fair when each solution's own language
does the work. Otherwise it is a warning (``other_language``); the profiler's account of whose kernels ran
(``integrity.kernel_origin``) then decides whether the solution's own kernels did enough of the work.
"""

from __future__ import annotations

import re

from .rules import REJECT, WARN, on_cpp, on_name, rule

rule("foreign_language", REJECT,
     "The evaluation allows one language only, and the solution uses another language, compiler or vendor library.")
rule("other_language", WARN,
     "The solution uses another kernel language, compiler or vendor library beside its own: the profiled call "
     "shows whose kernels did the work.")

#: Python packages that bring another language's kernels, by the language they belong to ("" for none: a
#: compiler or a library whatever the solution's language)
PACKAGES: dict[str, str] = {
    "triton": "triton", "cutlass": "cute_dsl", "tilelang": "tilelang", "tvm": "tvm_tirx", "cuda.tile": "cutile",
    "cudnn": "cudnn_frontend", "torch.utils.cpp_extension": "cuda_cpp", "cupy": "", "numba": "", "pycuda": "",
    "jax": "", "torch.compile": "", "torch._inductor": "", "torch._dynamo": "", "torch.backends.cudnn": "",
    "flash_attn": "", "flashinfer": "", "xformers": "", "transformer_engine": "", "deep_gemm": "", "vllm": "",
    "sgl_kernel": "", "apex": "", "liger_kernel": "",
}
#: what each language may import beyond its own package (TileLang is built on TVM)
ALSO_ALLOWED: dict[str, frozenset[str]] = {
    "tilelang": frozenset({"tvm"}), "cudnn_frontend": frozenset({"torch.backends.cudnn"}),
}
_CPP_LANGS = frozenset({"cuda_cpp", "cuda", "cutlass", "cublas", "cudnn"})

#: C++: headers and calls of vendor libraries, by the language they would make the solution; each regex runs only
#: where the text holds one of its gate's substrings (or, for PyTorch, identifiers): a match needs one of them
_CPP_USES: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("cublas", ("cublas",), re.compile(r"#\s*include\s*[<\"](?:cublas|cublasLt)\w*\.h|\bcublas(?:Lt)?[A-Z]\w*\s*\(")),
    ("cudnn", ("cudnn",), re.compile(r"#\s*include\s*[<\"]cudnn\w*\.h|\bcudnn[A-Z]\w*\s*\(")),
    ("cutlass", ("cutlass/", "cute/"), re.compile(r"#\s*include\s*[<\"](?:cutlass|cute)/")),
    ("", ("cufft", "cusparse", "cusolver", "curand", "nccl", "cub/device", "thrust"),
     re.compile(r"#\s*include\s*[<\"](?:cufft|cusparse|cusolver|curand|nccl|cub/device|thrust)\w*")),
    # PyTorch's compute from C++: the operators whose work a kernel of the solution's should have done
    ("pytorch", ("at", "torch", "matmul", "mm", "bmm", "softmax", "log_softmax", "topk"),
     re.compile(r"\b(?:at|torch)::(?:native::)?(?:matmul|mm|bmm|addmm|baddbmm|linear|einsum|conv\w*|"
                r"_scaled_mm|softmax|log_softmax|layer_norm|rms_norm|group_norm|batch_norm|"
                r"scaled_dot_product_attention|_flash_attention\w*|sum|mean|cumsum|topk|sort|"
                r"embedding|gelu|silu|exp|tanh)\s*\(|\.\s*(?:matmul|mm|bmm|softmax|log_softmax|topk)\s*\(")),
)


def _family(language: str) -> str:
    return "cuda_cpp" if language in ("cuda", "cuda_cpp") else language


def _rule(single: bool) -> str:
    return "foreign_language" if single else "other_language"


@on_name(("foreign_language", "other_language"), when=lambda s: s.language not in ("pytorch", "python", "torch"))
def foreign_package(s, name: str, node, what: str) -> None:
    """A Python solution in one kernel language importing or calling another's package."""
    own = _family(s.language)
    for package, language in PACKAGES.items():
        if name != package and not name.startswith(package + "."):
            continue
        if language == own or package in ALSO_ALLOWED.get(own, ()):
            return
        if own in _CPP_LANGS and language == "cuda_cpp":
            return
        kind = f"{language}'s package" if language else "a compiler or kernel library"
        s.add(_rule(s.policy.single_language), node, f"{what} {name} ({kind}) in a {s.language} solution")
        return


@on_cpp(("foreign_language", "other_language"))
def foreign_cpp(ctx) -> None:
    """A C++ solution including or calling a vendor library, or PyTorch's compute, that its language is not."""
    own = _family(ctx.policy.language or "cuda_cpp")
    # the includes are read in the text (string blanking would hide a quoted header's name)
    with_includes = None
    for library, gate, rx in _CPP_USES:
        if library == own:
            continue
        if library == "pytorch":
            if not ctx.idents.intersection(gate):
                continue
            m = rx.search(ctx.code)
        else:
            if not any(g in ctx.text for g in gate):
                continue
            with_includes = with_includes or _includes_kept(ctx)
            m = rx.search(with_includes)
        if m:
            kind = {"pytorch": "PyTorch's compute", "": "a CUDA library"}.get(library, f"{library}")
            ctx.add(_rule(ctx.policy.single_language), m.start(),
                    f"uses {m.group(0).strip()[:60]} ({kind}) in a {own} solution")


def _includes_kept(ctx) -> str:
    """The code with ``#include "..."`` lines restored (string blanking empties quoted header names)."""
    lines = ctx.code.split("\n")
    original = ctx.text.split("\n")
    return "\n".join(o if o.lstrip().startswith("#") and "include" in o else c
                     for c, o in zip(lines, original + [""] * (len(lines) - len(original))))
