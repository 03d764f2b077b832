"""One call of a subject, as both sides of an evaluation see it: its result as a list of outputs, its failure
as a short traceback, and whether the process's CUDA context survived it."""

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
