"""Gemma RMSNorm: out = x * rsqrt(mean(x^2, -1) + eps) * (1 + weight), math in fp32."""

import torch


def run(x, weight, eps):
    f = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f)
    r = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * r * (1.0 + weight.to(f))).to(x.dtype)
