"""What a solution may import and ship: the modules on the allowlist (one list for every Python language), the
source suffixes each kind of language accepts, and the module aliases of the kernel packages the scanner does not
import itself.

docs/STATIC_RULES.md (``import_not_allowed``) gives the reason for every entry. An entry ending in ``.*`` allows
the module and everything below it; any other entry allows that module alone (its functions and classes, not its
submodules). ``DENIED`` takes subtrees back out of an allowed one.
"""

from __future__ import annotations

#: the standard library's share: each reaches nothing beyond its own computation (docs/STATIC_RULES.md)
STDLIB_ALLOWED = (
    "math cmath numbers functools itertools operator typing typing_extensions dataclasses enum collections "
    "collections.abc abc random struct array bisect heapq copy contextlib warnings json colorsys __future__"
)
#: PyTorch's and NumPy's share: the tensor API and its public numeric and device namespaces
TORCH_ALLOWED = (
    "torch torch.nn.* torch.cuda torch.cuda.graphs torch.cuda.streams torch.cuda.random torch.cuda.nvtx "
    "torch.cuda.amp.* torch.amp.* torch.cpu.* torch.accelerator torch.backends.* torch.autograd "
    "torch.autograd.function torch.autograd.grad_mode torch.autograd.forward_ad torch.autograd.functional "
    "torch.func torch.linalg torch.fft torch.special torch.sparse torch.nested torch.signal.* torch.random "
    "torch.functional torch.types torch.version torch.torch_version torch.return_types torch.library "
    "torch.utils.dlpack torch.ops.* numpy numpy.random.* numpy.linalg.* numpy.fft.* numpy.typing numpy.dtypes "
    "numpy.exceptions"
)
#: each Python kernel language's own packages; every Python language may import them all, and the one-language rule
#: judges a solution that uses another language's (``foreign_language``, ``other_language``)
LANGUAGE_PACKAGES: dict[str, str] = {
    "triton": "triton triton.language.* triton.tools.tensor_descriptor",
    "cute_dsl": "cutlass cutlass.cute.* cutlass.utils.* cutlass.pipeline.* cutlass.torch cuda.bindings.driver",
    "tilelang": "tilelang tilelang.language.* tilelang.jit.* tilelang.layout.* tilelang.intrinsics.* tvm tvm.tir.* "
                "tvm.script.* tvm.ir.* tvm.target.*",
    "tvm_tirx": "tvm tvm.tirx.* tvm.tir.* tvm.script.* tvm.ir.* tvm.target.* tvm.runtime tvm_ffi",
    "cutile": "cuda.tile.*",
    "cudnn_frontend": "cudnn.*",
}
#: inside an allowed subtree, what stays out (besides private modules, which never count as allowed): threads and
#: devices (torch.nn.parallel), another vendor's backend, benchmarking helpers and compiler internals
DENIED = "torch.nn.parallel triton.language.extra.hip cutlass.cute.testing cutlass.base_dsl tilelang.jit.adapter"
#: the languages whose sources are C, C++ and CUDA (every other language's are Python)
COMPILED_LANGUAGES = frozenset({"cuda_cpp", "cuda", "cpp", "cutlass", "cublas", "cudnn"})
#: the source suffixes each kind of language accepts: Python and data that nothing executes; C, C++ and CUDA text
#: that the C++ scan reads (a data file could be #included into a compiled source, so none is accepted there)
PYTHON_SUFFIXES = (".py", ".json", ".md", ".txt")
CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".inl", ".ipp", ".tcc",
                ".cuinl", ".inc")
#: module attributes of the kernel packages that are other modules under another name (the scanner does not import
#: a kernel language, so these come from the installed packages: tests/evaluate/integrity/test_import_allowlist.py
#: checks them)
ALIASES: dict[tuple[str, str], str] = {
    ("triton.language.core", "builtins"): "builtins", ("triton.language.core", "inspect"): "inspect",
    ("triton.language.core", "typing"): "typing", ("triton.language.core", "math"): "math",
    ("triton.language.core", "knobs"): "triton.knobs", ("triton.language.core", "ir"): "triton._C.libtriton.ir",
    ("triton.language.extra", "pkgutil"): "pkgutil", ("triton.language.extra", "module"): "triton.language.extra.hip",
    ("triton.language.extra.cuda.gdc", "core"): "triton.language.core",
    ("triton.language.extra.cuda.libdevice", "core"): "triton.language.core",
    ("triton.language.extra.cuda.utils", "core"): "triton.language.core",
    ("triton.language.extra.hip.libdevice", "core"): "triton.language.core",
    ("triton.language.extra.hip.utils", "core"): "triton.language.core",
    ("triton.language.math", "core"): "triton.language.core",
    ("triton.language.random", "tl"): "triton.language.core", ("triton.language.random", "math"): "triton.language.math",
    ("triton.language.semantic", "builtins"): "builtins", ("triton.language.semantic", "warnings"): "warnings",
    ("triton.language.semantic", "numbers"): "numbers", ("triton.language.semantic", "ir"): "triton._C.libtriton.ir",
    ("triton.language.semantic", "tl"): "triton.language.core",
    ("triton.language.standard", "core"): "triton.language.core",
    ("triton.language.standard", "math"): "triton.language.math",
}
#: the roots whose modules the scanner may import to read their namespaces (trusted dependencies of the harness);
#: the kernel languages' packages are never imported on the trusted side
INTROSPECTED_ROOTS = frozenset({"torch", "numpy"})


class Allowlist:
    """The modules a solution may import: exact entries, subtrees, and what is denied inside a subtree."""

    def __init__(self, entries: str, denied: str = DENIED):
        self.exact = frozenset(e for e in entries.split() if not e.endswith(".*"))
        self.trees = tuple(sorted({e[:-2] for e in entries.split() if e.endswith(".*")}, key=len, reverse=True))
        self.denied = tuple(sorted(set(denied.split()), key=len, reverse=True))
        #: every allowed module's parent packages (a chain may pass through them to reach the allowed one)
        self.parents = frozenset(".".join(e.split(".")[:i]) for e in self.exact | set(self.trees)
                                 for i in range(1, e.count(".") + 1))
        self._memo: dict[str, bool] = {}

    def allows(self, module: str) -> bool:
        known = self._memo.get(module)
        if known is None:
            known = self._memo[module] = self._allows(module)
        return known

    def _allows(self, module: str) -> bool:
        if module in self.exact:
            return True
        tree = next((t for t in self.trees if module == t or module.startswith(t + ".")), None)
        if tree is None or any(p.startswith("_") and not p.startswith("__") for p in module[len(tree):].split(".")):
            return False
        deny = next((d for d in self.denied if module == d or module.startswith(d + ".")), None)
        return deny is None or len(deny) < len(tree)

    def names_module(self, name: str) -> bool:
        """Whether the name is an entry, the root of a subtree or the parent of one (so a module, whatever is
        installed here)."""
        return name in self.exact or name in self.trees or name in self.parents or name in self.denied


_LIST: list[Allowlist] = []


def allowlist() -> Allowlist:
    """The modules a Python solution may import, whatever its language."""
    if not _LIST:
        _LIST.append(Allowlist(" ".join((STDLIB_ALLOWED, TORCH_ALLOWED, *LANGUAGE_PACKAGES.values()))))
    return _LIST[0]


def suffixes(language: str) -> tuple[str, ...]:
    """The source suffixes a solution in ``language`` may ship."""
    return CPP_SUFFIXES if (language or "").lower() in COMPILED_LANGUAGES else PYTHON_SUFFIXES
