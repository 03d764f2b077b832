"""Qwen2-VL multimodal rotary embedding (M-RoPE), sections [16, 24, 24] of the 64 frequencies.

  inv_freq[i]  = rope_theta ** (-2 i / D)                                   i < D / 2
  angle[t, i]  = positions[s(i), t] * inv_freq[i],  s(i) = 0 (t) for i < 16, 1 (h) for i < 40, else 2 (w)
  out          = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]                 x1, x2 = halves of each head

fp32 math (float64 for the evaluator's anchor), one rounding to the input dtype.
"""

import torch

SECTIONS = (16, 24, 24)


def _rotate(x, cos, sin):
    acc = cos.dtype
    half = x.shape[-1] // 2
    x1 = x[..., :half].to(acc)
    x2 = x[..., half:].to(acc)
    c = cos[:, None, :]
    s = sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def run(q, k, positions, rope_theta):
    f = torch.promote_types(q.dtype, torch.float32)
    D = q.shape[-1]
    half = D // 2
    inv_freq = 1.0 / (rope_theta ** (torch.arange(0, half, device=q.device, dtype=f) * 2 / D))
    pos = positions.to(f)                                    # [3, T]
    parts, start = [], 0
    for axis, n in enumerate(SECTIONS):
        parts.append(pos[axis][:, None] * inv_freq[start:start + n])
        start += n
    angle = torch.cat(parts, dim=-1)                         # [T, D/2]
    cos, sin = torch.cos(angle), torch.sin(angle)
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
