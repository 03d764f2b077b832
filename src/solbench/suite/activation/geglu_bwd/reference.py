import math

import torch


def run(grad_out, x):
    acc = torch.promote_types(x.dtype, torch.float32)
    inter = x.shape[-1] // 2
    gate = x[..., :inter].to(acc)
    up = x[..., inter:].to(acc)
    g = grad_out.to(acc)
    c = math.sqrt(2.0 / math.pi)
    t = torch.tanh(c * (gate + 0.044715 * gate * gate * gate))
    act = 0.5 * gate * (1.0 + t)
    dact = 0.5 * (1.0 + t) + 0.5 * gate * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * gate * gate)
    return torch.cat([g * up * dact, g * act], dim=-1).to(x.dtype)
