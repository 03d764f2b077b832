"""Ghost replay, the language proof's second half: with the solution's DSL kernels launched as no-ops, its output
must not come out as it does with them.

In the candidate's process, ``ghost_mode`` makes every Triton launch a no-op and fills every fresh allocation
with NaN (or -1), so stale memory cannot stand in for the kernels' work. On the trusted side,
``reproduced_share`` compares the ghost call's outputs with the real call's on the same inputs: the share of
the elements the real call produced (every element of a fresh output; the elements an in-place output changed)
that the ghost call reproduced bit for bit. The DSL kernels must account for the output, not a token part of
it: a share above ``MAX_REPRODUCED`` is ``ghost_replay``. A ghost call that fails, or returns outputs of other
shapes or types, gives no evidence here; the other half of the proof (the profiler on the GPU, the
interpreter's store count on the CPU) then decides alone.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

MAX_REPRODUCED = 0.5
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@contextlib.contextmanager
def ghost_mode() -> Iterator[None]:
    """Triton kernels launch as no-ops and fresh allocations are filled with NaN (so stale memory cannot pass)."""
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    try:
        from triton.runtime.jit import JITFunction

        patch(JITFunction, "run", lambda self, *a, **k: None)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        patch(InterpretedFunction, "run", lambda self, *a, **k: None)
    except ImportError:
        pass

    def poisoned(fn: Callable) -> Callable:
        def alloc(*args, **kwargs):
            t = fn(*args, **kwargs)
            if t.is_floating_point():
                t.fill_(float("nan"))
            elif t.dtype != torch.bool:
                t.fill_(-1)
            return t
        return alloc

    for name in ("empty", "empty_like", "empty_strided"):
        patch(torch, name, poisoned(getattr(torch, name)))
    patch(torch.Tensor, "new_empty", poisoned(torch.Tensor.new_empty))
    try:
        yield
    finally:
        for owner, name, value in reversed(patches):
            setattr(owner, name, value)


def _bits(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous().reshape(-1)
    if x.dtype == torch.bool:
        return x.view(torch.uint8)
    return x.view(_INT_OF_SIZE[x.element_size()]) if x.element_size() in _INT_OF_SIZE else x


def produced(out: torch.Tensor, before: torch.Tensor | None) -> torch.Tensor:
    """Which elements of an output a call produced (flat): all of a fresh output (``before`` None), the changed
    ones of an in-place output."""
    bits = _bits(out)
    return torch.ones_like(bits, dtype=torch.bool) if before is None else bits != _bits(before.to(out.device))


def reproduced_share(real: list[Any], ghost: list[Any], before: list[Any]) -> float | None:
    """The share of the produced output elements that the ghost call reproduced, or None where there is no
    evidence (nothing produced; the ghost outputs differ in number, type, shape or dtype). ``before[i]`` is
    output i's value before the call for an in-place output, None for a fresh one."""
    if len(real) != len(ghost):
        return None
    total = 0
    same = 0
    for r, g, b in zip(real, ghost, before):
        if not isinstance(r, torch.Tensor):
            continue
        if type(g) is not torch.Tensor or g.shape != r.shape or g.dtype != r.dtype or g.device != r.device:
            return None
        rb, gb = _bits(r), _bits(g)
        mask = produced(r, b)
        total += int(mask.sum())
        same += int(((rb == gb) & mask).sum())
    return same / total if total else None
