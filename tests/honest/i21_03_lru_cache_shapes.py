"""Honest (issue 21, root cause 3): the standard library's allowed share at work. A chunked softmax whose chunk
width comes from a memoized plan keyed on the row length (functools.lru_cache over ints, math for the rounding,
a frozen dataclass for the plan, typing for the annotations)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class Plan:
    chunk: int
    chunks: int


@functools.lru_cache(maxsize=64)
def plan(n: int, target: Optional[int] = None) -> Plan:
    chunk = min(n, 1 << max(4, math.ceil(math.log2(max(n, 1))) - 1)) if target is None else target
    return Plan(chunk=chunk, chunks=math.ceil(n / chunk))


def run(x: torch.Tensor, scale) -> torch.Tensor:
    z = x * scale
    p = plan(z.shape[-1])
    row_max = torch.full(z.shape[:-1], -math.inf, dtype=z.dtype, device=z.device)
    for c in range(p.chunks):
        part = z[..., c * p.chunk:(c + 1) * p.chunk]
        row_max = torch.maximum(row_max, part.amax(dim=-1))
    e = torch.exp(z - row_max.unsqueeze(-1))
    return e / e.sum(dim=-1, keepdim=True)
