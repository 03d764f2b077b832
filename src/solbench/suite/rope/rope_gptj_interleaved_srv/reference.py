"""Rotary position embedding, GPT-J (interleaved pairs) layout, with a cos/sin cache indexed by position.

For token t at position p = positions[t], pair i < R/2 of every head: x0 = x[2i], x1 = x[2i + 1],
  out[2i]     = x0 * cos_cache[p, i] - x1 * sin_cache[p, i]
  out[2i + 1] = x1 * cos_cache[p, i] + x0 * sin_cache[p, i]
dims R..D-1 (partial rotary) pass through unchanged. fp32 math (float64 for the anchor), one rounding.
"""

import torch


def _rotate(x, c, s):
    T, H, D = x.shape
    R = 2 * c.shape[-1]
    f = torch.promote_types(x.dtype, torch.float32)
    xr = x[..., :R].to(f).reshape(T, H, R // 2, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    c = c.to(f)[:, None, :]
    s = s.to(f)[:, None, :]
    rot = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).reshape(T, H, R)
    return torch.cat([rot, x[..., R:].to(f)], dim=-1).to(x.dtype)


def run(q, k, cos_cache, sin_cache, positions):
    c = cos_cache[positions]                      # [T, R/2]
    s = sin_cache[positions]
    return _rotate(q, c, s), _rotate(k, c, s)
