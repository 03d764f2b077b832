"""Masked-layout MoE expert FFN: per expert e, rows c < masked_m[e] of x[e] go through SwiGLU and are
scaled by their routing weight; other rows are zero.

  g, u = x[e] @ w13[e, :I]^T, x[e] @ w13[e, I:]^T
  y[e] = ((silu(g) * u) @ w2[e]^T) * routing_weight[e, :, None] * (c < masked_m[e])

Math in promote_types(dtype, float32): fp32 for bf16 inputs, float64 for the anchor.
"""

import torch


def run(x, w13, w2, routing_weight, masked_m):
    f = torch.promote_types(x.dtype, torch.float32)
    I = w2.shape[2]
    xf = x.to(f)
    gu = torch.bmm(xf, w13.to(f).transpose(1, 2))
    h = torch.nn.functional.silu(gu[..., :I]) * gu[..., I:]
    y = torch.bmm(h, w2.to(f).transpose(1, 2))
    valid = torch.arange(x.shape[1], device=x.device)[None, :] < masked_m[:, None].long()
    y = y * (routing_weight.to(f) * valid.to(f))[..., None]
    return y.to(x.dtype)
