"""Where a profiled kernel came from, told by its name: the solution's own language, PyTorch, a vendor library, a
compiler the solution did not declare, or a copy.

The language proof (``integrity.language``) profiles one call of a solution and gets (kernel name, device time)
pairs. Each kernel is given one *origin*: vendor libraries and PyTorch's own kernels are recognised first, so that a
kernel of the solution's named like one of theirs counts for them, not for the solution; then the solution's own
kernels, by the names its language plug-in read from its sources (``Language.kernel_names``, computed on the
trusted side); everything else is ``other``. An ``Account`` of one call sums device time by origin.

The patterns are facts about the names NVIDIA's libraries and PyTorch give their kernels on Hopper (CUPTI reports
them demangled): cuBLAS's ``nvjet_*`` and ``sm90_xmma_gemm_*`` kernels and its GEMV/reduction kernels (whose
parameter types name ``cublas``), cuDNN's ``cudnn*``, ``*_xmma_fprop/dgrad/wgrad_*`` and generated SDPA kernels,
ATen's ``at::native::`` kernels, PyTorch's flash and memory-efficient attention, Inductor's ``triton_*`` kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

#: origins, in the order they are tried (``own`` sits between the vendors and PyTorch's eager kernels)
CUBLAS, CUDNN, INDUCTOR, COPY, TORCH, OWN, OTHER = "cublas", "cudnn", "inductor", "copy", "torch", "own", "other"
#: origins that are another language's work: a solution that must stay in one language may not use them
FOREIGN = frozenset({CUBLAS, CUDNN, INDUCTOR, OTHER})

_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (  # (origin, pattern, on the whole name?)
    (COPY, re.compile(r"^\[?(?:memcpy|memset)", re.IGNORECASE), True),
    (CUDNN, re.compile(r"cudnn|xmma_(?:fprop|dgrad|wgrad)|^(?:void\s+)?(?:sm\d+|ampere|hopper)_\w*(?:fprop|dgrad|"
                       r"wgrad|scudnn)|generated_fort_native_sdpa|implicit_convolve_sgemm|fft2d_r2c", re.IGNORECASE), True),
    (CUBLAS, re.compile(r"cublas|^nvjet_|^(?:void\s+)?(?:sm\d+|ampere|volta|turing|hopper|maxwell)_\w*(?:gemm|gemv)"
                        r"|xmma_gemm|^(?:void\s+)?(?:gemv2[NT]_kernel|gemvNSP|gemmk1_kernel|gemmSN_|splitKreduce_kernel|"
                        r"dot_kernel|reduce_1Block_kernel|scal_kernel|axpy_kernel_val)", re.IGNORECASE), True),
    (INDUCTOR, re.compile(r"^triton_(?:poi|per|red|tem|for)_"), False),
    (TORCH, re.compile(r"^(?:at|at_cuda_detail|c10|pytorch_flash|flash|PyTorchMemEffAttention)::|fmha_cutlass|"
                       r"^(?:\(anonymous namespace\)::)?(?:cunn_|softmax_warp_|CatArrayBatchedCopy|"
                       r"(?:vectorized_|unrolled_)?elementwise_kernel|reduce_kernel|index_elementwise)"), False),
)


def head(name: str) -> str:
    """A demangled kernel name's qualified name: ``void at::native::f<4, T>(float*)`` -> ``at::native::f``."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    cut = min((i for i in (text.find("<"), text.find("(")) if i >= 0), default=len(text))
    return text[:cut].strip()


def origin(name: str, own: Callable[[str], bool], own_origins: frozenset[str] = frozenset()) -> str:
    """The origin of one kernel. ``own`` tells the solution's own kernels by name; ``own_origins`` are origins
    that are the solution's own language (a cuBLAS solution's cuBLAS kernels). The libraries' and PyTorch's
    patterns are tried first (PyTorch's on the kernel's qualified name, not its parameter types, which name c10
    types in many a solution's kernel): a solution's kernel named like theirs counts for them."""
    qualified = head(name)
    for kind, pattern, whole in _PATTERNS:
        if pattern.search(name if whole else qualified):
            return OWN if kind in own_origins else kind
    return OWN if own(name) else OTHER


@dataclass
class Account:
    """Device time of one profiled call by origin (microseconds), and the longest kernels of each."""

    us: dict[str, float] = field(default_factory=dict)
    longest: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.us.values())

    def share(self, *origins: str) -> float | None:
        """The share of device time of these origins; None when the call ran nothing on the device."""
        total = self.total
        return sum(self.us.get(o, 0.0) for o in origins) / total if total > 0 else None

    def foreign(self) -> dict[str, float]:
        """Share of device time of each foreign origin present (another language's or a library's kernels)."""
        total = self.total
        return {o: us / total for o, us in self.us.items() if o in FOREIGN and us > 0 and total > 0}

    def describe(self, origins: Iterable[str]) -> str:
        """'cublas 81% (nvjet_tst_128x256...)' for each of ``origins`` present, longest first."""
        total = self.total or 1.0
        parts = [f"{o} {self.us[o] / total:.0%} ({self.longest[o][0][:60]})"
                 for o in sorted(origins, key=lambda o: -self.us.get(o, 0.0)) if self.us.get(o)]
        return ", ".join(parts) or "none"


def account(kernels: Iterable[tuple[str, float]], own: Callable[[str], bool],
            own_origins: frozenset[str] = frozenset()) -> Account:
    """Sum (name, microseconds) pairs by origin."""
    acc = Account()
    for name, us in kernels:
        if not isinstance(name, str) or not isinstance(us, (int, float)) or not us > 0 or us != us:
            continue
        o = origin(name, own, own_origins)
        acc.us[o] = acc.us.get(o, 0.0) + float(us)
        if us > acc.longest.get(o, ("", -1.0))[1]:
            acc.longest[o] = (name, float(us))
    return acc
