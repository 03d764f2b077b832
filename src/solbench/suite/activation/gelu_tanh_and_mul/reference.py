import math

import torch


def run(x):
    acc = torch.promote_types(x.dtype, torch.float32)
    inter = x.shape[-1] // 2
    gate = x[..., :inter].to(acc)
    up = x[..., inter:].to(acc)
    inner = math.sqrt(2.0 / math.pi) * (gate + 0.044715 * gate * gate * gate)
    gelu = 0.5 * gate * (1.0 + torch.tanh(inner))
    return (gelu * up).to(x.dtype)
