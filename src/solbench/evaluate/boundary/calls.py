"""One call of a subject, as both sides of an evaluation see it: its result as a list of outputs (exact types
only), its arguments copied without running any of the solution's code, its failure as a short traceback,
whether the process's CUDA context survived it, and the float32 math mode and CPU threads it runs under."""

from __future__ import annotations

import traceback
from typing import Any

PLAIN_SCALARS = (int, float, bool)


def _torch_result_tuples() -> frozenset:
    """torch's own result tuples (``torch.return_types``: structseqs whose iteration is torch's C code), as they
    are when the harness is imported, before any solution: a class registered there later is not among them."""
    try:
        import torch.return_types as rt
    except ImportError:
        return frozenset()
    return frozenset(v for v in vars(rt).values() if isinstance(v, type) and issubclass(v, tuple)
                     and v.__iter__ is tuple.__iter__ and v.__getitem__ is tuple.__getitem__)


TORCH_RESULT_TUPLES = _torch_result_tuples()


def _sequence(result: Any) -> bool:
    """An exact tuple or list, or one of torch's own result tuples. Iterating any other subclass would run the
    solution's code."""
    t = type(result)
    return t in (tuple, list) or t in TORCH_RESULT_TUPLES


def as_list(result: Any) -> list[Any]:
    """A call's outputs in order (an operation whose only effect is on in-place inputs returns none). Only a
    plain sequence (``_sequence``) is unpacked."""
    if result is None:
        return []
    if _sequence(result):
        return list(result)
    return [result]


def not_plain_tensor(x: Any) -> str | None:
    """Why a tensor output is not an honest one (a subclass, no real storage), or None. Other types are left to
    ``not_plain``."""
    import torch

    if not isinstance(x, torch.Tensor):
        return None
    if type(x) is not torch.Tensor:
        return f"output is a {type(x).__name__}, a torch.Tensor subclass"
    if x.is_meta or x.device.type == "meta":
        return "output has no real storage"
    try:
        if x.numel() and x.untyped_storage().nbytes() == 0:
            return "output has no real storage"
    except (RuntimeError, NotImplementedError):
        return "output has no real storage"
    return None


def not_plain(result: Any) -> str | None:
    """Why a call's result must not be touched any further, or None. A result is plain when it is None, an exact
    ``torch.Tensor`` with real storage, an exact int/float/bool, or a plain sequence of those (an exact tuple or
    list, or one of torch's result tuples such as ``torch.max``'s): none of them runs the solution's code when it
    is read, copied, iterated or converted."""
    import torch

    items = list(result) if _sequence(result) else [result]
    if not _sequence(result) and isinstance(result, (tuple, list)):
        return f"result is a {type(result).__name__}, a {type(result).__mro__[1].__name__} subclass"
    for x in items:
        if x is None or type(x) in PLAIN_SCALARS:
            continue
        if isinstance(x, torch.Tensor):
            why = not_plain_tensor(x)
            if why:
                return why
            continue
        return f"output is a {type(x).__name__}"
    return None


def copied(x: Any) -> Any:
    """A tensor's copy (plain values are passed as they are), made with torch's override machinery switched off,
    so neither a subclass nor a mode pushed by the solution sees it."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    with torch._C.DisableTorchFunction():
        return torch.Tensor.clone(x)


def set_tf32(torch, on: bool) -> None:
    """TF32 for float32 matmuls and convolutions only where the problem opts in."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def set_threads(torch, n: int) -> None:
    """The same CPU thread count in the trusted worker and in every candidate, so their CPU times compare."""
    if n and n > 0:
        torch.set_num_threads(int(n))


def warm_threads(torch) -> None:
    """Run a parallel reduction and a matrix product, so that every CPU thread pool a call may use exists now:
    before a sealed candidate's filter (``seccomp``) forbids new threads, after the fork that lost the zygote's."""
    torch.ones(1 << 20).sum()
    torch.ones(256, 256) @ torch.ones(256, 256)
    try:
        import numpy

        numpy.ones((256, 256), dtype=numpy.float32) @ numpy.ones((256, 256), dtype=numpy.float32)
    except ImportError:
        pass


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
