"""One call of a subject, as both sides of an evaluation see it: its result as a list of outputs, its arguments
copied, its failure as a short traceback, whether the process's CUDA context survived it, and the float32 math
mode it runs under."""

from __future__ import annotations

import traceback
from typing import Any


def as_list(result: Any) -> list[Any]:
    """A call's outputs in order (an operation whose only effect is on in-place inputs returns none)."""
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def copied(x: Any) -> Any:
    """A tensor's copy (plain values are passed as they are)."""
    import torch

    return x.clone() if isinstance(x, torch.Tensor) else x


def set_tf32(torch, on: bool) -> None:
    """TF32 for float32 matmuls and convolutions only where the problem opts in."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def cuda_healthy(torch) -> bool:
    """Whether this process's CUDA context still runs work (a sticky fault makes every call fail)."""
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def short_traceback(exc: BaseException) -> str:
    """The last frames of an exception, bounded for a result message."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(tb[-6:])[-3000:]
