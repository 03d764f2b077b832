"""Partial NeoX rotary embedding (rotary dim 32 of head dim 80): the first R channels rotate in halves,
the rest pass through.

  theta_i = pos * 10000^(-2i/R),  i < R/2
  out[i]       = x[i] cos - x[i + R/2] sin
  out[i + R/2] = x[i + R/2] cos + x[i] sin
"""

import torch

BASE = 10000.0
R = 32


def _rope(x, cos, sin):
    h = R // 2
    x1, x2, rest = x[..., :h], x[..., h:R], x[..., R:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def run(q, k, positions):
    f = torch.promote_types(q.dtype, torch.float32)
    inv = BASE ** (-torch.arange(0, R, 2, device=q.device, dtype=f) / R)
    ang = positions.to(f)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    return _rope(q.to(f), cos, sin).to(q.dtype), _rope(k.to(f), cos, sin).to(k.dtype)
