import torch


def run(grad_out, x):
    acc = torch.promote_types(x.dtype, torch.float32)
    inter = x.shape[-1] // 2
    gate = x[..., :inter].to(acc)
    up = x[..., inter:].to(acc)
    g = grad_out.to(acc)
    s = torch.sigmoid(gate)
    silu = gate * s
    dsilu = s * (1.0 + gate * (1.0 - s))  # d silu(gate) / d gate
    d_gate = g * up * dsilu
    d_up = g * silu
    return torch.cat([d_gate, d_up], dim=-1).to(x.dtype)
