"""The audit's judgement of its calls' outputs (``audit``): every audited call's outputs checked for presence (no
sentinel of the pre-fill left: a call that did not do its work by its end), and a share of them, drawn by the
trusted side after the bracket (on the CPU every one), against the reference."""

from __future__ import annotations

import random
import secrets
from typing import Any, Callable

from solbench.evaluate.boundary.ring import BOOL_SENTINEL, stacked
from solbench.evaluate.trusted.outcomes import Rejected

RECHECK = 0.4  # the share of audited calls judged against the reference (every one is checked for presence)
RECHECK_PER_BRACKET = 2.0  # ... and in a group of calls, this many of each bracket's, drawn among them, on average


class Recheck:
    """An audited call's outputs judged: each one for presence (no sentinel left), a share against the reference
    too, drawn by the trusted side (``recheck_share``); ``recheck`` None (a null candidate) judges nothing."""

    def __init__(self, recheck: Callable | None, boost: float = 1.0, every: bool = False):
        """``boost``: how many times ``recheck_share`` a call is judged (a short audit's fewer brackets, each
        judging more of its calls: ``audit.SHORT_LOOK``); ``every``: judge every call (the CPU's audit, as its
        timed calls: with one call per bracket a call answered cheaply and wrongly would otherwise lower the
        audit's low quantile, and so its resolution, whenever it was not drawn)."""
        self.recheck, self.checked, self.boost, self.every = recheck, 0, boost, every
        self.rng = random.Random(secrets.randbits(64))

    def __call__(self, outs: list[Any], inputs: list[Any], after: list[Any], key: dict[str, int],
                 group: int = 1, unwritten: bool | None = None) -> None:
        """``key``: where the call's inputs came from (``ring.set_key``), for the failure's record; ``unwritten``:
        whether its outputs still hold a sentinel, where already known (``unwritten_calls``)."""
        if unwritten is None:
            unwritten = _unwritten(outs)
        if self.recheck is None or not (unwritten or self.every
                                        or self.rng.random() < recheck_share(group) * self.boost):
            return
        self.checked += 1
        bad = self.recheck(outs, inputs, after)
        if bad:
            raise Rejected([bad[0]], f"audited call re-checked: {bad[1]}", failure={"draw": "timed", **key})


def recheck_share(group: int) -> float:
    """The chance that an audited call of a bracket of ``group`` calls is judged against the reference:
    ``RECHECK``, and in larger groups ``RECHECK_PER_BRACKET`` of each bracket on average. A call is picked after
    its bracket has ended, so a solution that skips the work of a share f of its calls is found in each bracket
    with a chance of about min(1, f * group * share): a saving large enough to pass the audit (``AGREE``) cannot
    go unseen over a dozen brackets, while a small workload's groups of 64 calls cost two comparisons each, not 26."""
    return min(RECHECK, RECHECK_PER_BRACKET / max(1, group))


def unwritten_calls(calls: list[list[Any]]) -> list[bool]:
    """Per call (its outputs), whether some output still holds the sentinel (``_unwritten``), read back at once;
    where each output of the calls is a row of one tensor (a group's copies out: ``Slots.take_group``), in one
    reduction per output."""
    import torch

    by_rows = _rows_left(calls)
    if by_rows is not None:
        return by_rows
    flags = [_sentinel_left(outs) for outs in calls]
    if not any(isinstance(f, torch.Tensor) for f in flags):
        return [bool(f) for f in flags]
    dev = next(f.device for f in flags if isinstance(f, torch.Tensor))
    return [bool(v) for v in torch.stack([f if isinstance(f, torch.Tensor) else torch.tensor(bool(f), device=dev)
                                          for f in flags]).tolist()]


def _rows_left(calls: list[list[Any]]) -> list[bool] | None:
    """``unwritten_calls`` where every tensor output of the calls is a row of one tensor per output (``stacked``),
    else None."""
    import torch

    if not calls or any(len(outs) != len(calls[0]) for outs in calls):
        return None
    left = None
    for i in range(len(calls[0])):
        xs = [outs[i] for outs in calls]
        tensors = sum(isinstance(x, torch.Tensor) for x in xs)
        if not tensors or (tensors == len(xs) and not any(x.numel() for x in xs)):  # nothing to leave unwritten
            continue
        rows = stacked(xs) if tensors == len(xs) else None
        if rows is None:
            return None
        one = _left_per_row(rows.reshape(len(xs), -1))
        left = one if left is None else left | one
    return [False] * len(calls) if left is None else [bool(v) for v in left.tolist()]


def _unwritten(outs: list[Any]) -> bool:
    """Whether some output element still holds the sentinel (for floats: any NaN; an honest output holds none,
    since NaN fails every comparison): the call's work was not all done by its end."""
    return bool(_sentinel_left(outs))


def _sentinel_left(outs: list[Any]):
    """``_unwritten`` as a boolean tensor on the outputs' device (False where no output is a tensor)."""
    import torch

    left = False
    for x in outs:
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        one = _left_per_row(x.reshape(1, -1))[0]
        left = one if left is False else left | one
    return left


def _left_per_row(flat):
    """Per row of ``flat`` (one call's output, flattened), whether the sentinel is left: any NaN for floats, any
    sentinel byte for booleans (no boolean holds it), every element the sentinel for integers (whose maximum an
    output may hold)."""
    import torch

    if flat.is_floating_point():
        return torch.isnan(flat).any(dim=1)
    if flat.dtype == torch.bool:
        return (flat.view(torch.uint8) == BOOL_SENTINEL).any(dim=1)
    return (flat == torch.iinfo(flat.dtype).max).all(dim=1)
