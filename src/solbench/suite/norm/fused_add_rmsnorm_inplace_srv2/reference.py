"""In-place fused residual add + RMSNorm.

  residual <- x + residual                 (stored in residual's dtype)
  x        <- residual * rsqrt(mean(residual^2, -1) + eps) * weight

Math in promote_types(dtype, float32); the sum is rounded to the residual's dtype before the statistics.
"""

import torch


def run(x, residual, weight, eps):
    f = torch.promote_types(x.dtype, torch.float32)
    s = (x.to(f) + residual.to(f)).to(residual.dtype)
    residual.copy_(s)
    sf = s.to(f)
    r = torch.rsqrt(sf.pow(2).mean(dim=-1, keepdim=True) + eps)
    x.copy_((sf * r * weight.to(f)).to(x.dtype))
