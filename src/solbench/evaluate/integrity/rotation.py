"""Inputs for timed calls: a new address and new contents for every call, and outputs kept for re-checking.

Each timed call gets its inputs copied (outside the timed region) from one of a
few pristine sets into arenas at a shifting offset, with every floating input
scaled by a fresh factor near 1: a cache keyed on data pointers or on values
never sees the same key twice, and the reference can still judge the call.
A few calls, chosen at random, and the last one, are kept: their inputs and
outputs are copied after the call and re-checked against the reference, so a
solution that is right while checked and wrong (or cached) while timed fails.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch

from solbench.evaluate.arena import ALIGN, raw_nbytes
from solbench.evaluate.calls import copied

SLOTS = 61  # distinct offsets per arena (prime, so offsets and value sets do not cycle together)
KEPT_CALLS = 4  # at most: three calls picked at random, and the last


@dataclass
class Kept:
    call: int
    inputs_after: list[Any]  # the call's inputs as they were after it returned
    outputs: list[Any]


@dataclass
class TimedInputs:
    sources: list[list[Any]]  # pristine input sets
    dps_specs: list[tuple[tuple[int, ...], torch.dtype]]  # output buffers for destination-passing style
    device: torch.device
    picks: set[int] = field(default_factory=set)
    kept: list[Kept] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = random.SystemRandom()
        # one call early, one after the first cycle of addresses, one late (if timing gets that far); and the last
        self.picks = {rng.randrange(2, 30), rng.randrange(30, 90), rng.randrange(90, 300)}
        self._rng = rng
        first = self.sources[0]
        self._arenas: list[torch.Tensor | None] = []
        for x in first:
            if isinstance(x, torch.Tensor):
                self._arenas.append(torch.empty(x.numel() * x.element_size() + SLOTS * ALIGN, dtype=torch.uint8,
                                                device=self.device))
            else:
                self._arenas.append(None)
        self._out_arenas = [torch.empty(raw_nbytes(s, d) + SLOTS * ALIGN, dtype=torch.uint8, device=self.device)
                            for s, d in self.dps_specs]
        self.current: tuple[list[Any], list[torch.Tensor]] = ([], [])
        self._last_call = -1
        self._factors: dict[int, list[float]] = {}

    @staticmethod
    def _view(arena: torch.Tensor, slot: int, shape, dtype: torch.dtype) -> torch.Tensor:
        n = raw_nbytes(shape, dtype)
        off = slot * ALIGN
        return arena[off: off + n].view(dtype).view(shape)

    @staticmethod
    def _fill(dst: torch.Tensor, x: torch.Tensor, factor: float) -> None:
        if not x.is_floating_point():
            dst.copy_(x)
        elif x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            dst.copy_((x.to(torch.float32) * factor).to(x.dtype))
        else:
            torch.mul(x, factor, out=dst)

    def prepare(self, k: int) -> None:
        src = self.sources[k % len(self.sources)]
        slot = (k * 7 + 3) % SLOTS
        factors = [1.0 + self._rng.uniform(-0.25, 0.25) for _ in src]
        self._factors[k] = factors
        inputs: list[Any] = []
        for x, arena, factor in zip(src, self._arenas, factors):
            if arena is None:
                inputs.append(x)
                continue
            dst = self._view(arena, slot, x.shape, x.dtype)
            self._fill(dst, x, factor)
            inputs.append(dst)
        outs = [self._view(a, slot, s, d) for a, (s, d) in zip(self._out_arenas, self.dps_specs)]
        self.current = (inputs, outs)
        self._last_call = k

    def inputs_of(self, k: int) -> list[Any]:
        """Fresh tensors holding exactly what call ``k`` was given (rebuilt from its source and factors)."""
        src = self.sources[k % len(self.sources)]
        out: list[Any] = []
        for x, factor in zip(src, self._factors[k]):
            if isinstance(x, torch.Tensor):
                dst = torch.empty_like(x)
                self._fill(dst, x, factor)
                out.append(dst)
            else:
                out.append(x)
        return out

    def call_args(self) -> list[Any]:
        inputs, outs = self.current
        return inputs + outs

    def keep(self, k: int, result: Any, force: bool = False) -> None:
        self._last_result = result
        if k not in self.picks and not force:
            return
        inputs, outs = self.current
        if outs:
            produced = outs
        elif result is None:  # an operation whose only effect is on in-place inputs
            produced = []
        else:
            produced = list(result) if isinstance(result, (tuple, list)) else [result]
        self.kept.append(Kept(call=k, inputs_after=[copied(x) for x in inputs], outputs=[copied(x) for x in produced]))

    def keep_last(self, result: Any = None) -> None:
        if self._last_call >= 0 and all(kp.call != self._last_call for kp in self.kept):
            self.keep(self._last_call, result, force=True)
