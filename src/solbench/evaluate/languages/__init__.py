"""Language plug-ins, one file each; ``get_language`` maps a Solution's ``spec.language`` to one.

SOL-ExecBench's languages are all known here (pytorch, triton, cute_dsl, cutile, cudnn_frontend; the compiled
cuda_cpp, cutlass, cudnn, cublas), with TileLang and TVM TIRx beside them. A known language whose package or toolchain is missing on this
machine is an ``unsupported`` verdict with the reason and the install command (``Language.unavailable``); only
a name no plug-in knows is a user error.
"""

from solbench.errors import UserError
from solbench.evaluate.languages.base import CompileError, Language, Unsupported
from solbench.evaluate.languages.dsl import CuDNNFrontend, CuteDSL, CuTile, TileLang, TvmTirx
from solbench.evaluate.languages.pytorch import PyTorch
from solbench.evaluate.languages.triton import Triton

LANGUAGES: dict[str, type[Language]] = {
    "pytorch": PyTorch, "python": PyTorch, "torch": PyTorch, "triton": Triton,
    "cute_dsl": CuteDSL, "cute-dsl": CuteDSL, "tilelang": TileLang, "tvm_tirx": TvmTirx, "tirx": TvmTirx,
    "cutile": CuTile, "cudnn_frontend": CuDNNFrontend,
}

from solbench.evaluate.languages.cuda_cpp import CudaCpp, Cutlass  # noqa: E402  (after the Python plug-ins)

# the C++ plug-ins: torch's extension builder; cuBLAS and cuDNN solutions are CUDA C++ linked against the library
LANGUAGES.update({"cuda_cpp": CudaCpp, "cuda": CudaCpp, "cutlass": Cutlass,
                  "cublas": CudaCpp.with_library("cublas", "-lcublas"),
                  "cudnn": CudaCpp.with_library("cudnn", "-lcudnn")})


def get_language(name: str) -> Language:
    try:
        return LANGUAGES[name.lower()]()
    except KeyError:
        known = sorted({cls.name for cls in LANGUAGES.values()})
        raise UserError(f"unknown solution language {name!r}; known: {', '.join(known)}") from None


__all__ = ["CompileError", "Language", "Unsupported", "get_language", "LANGUAGES"]
