import torch


def run(x):
    acc = torch.promote_types(x.dtype, torch.float32)
    inter = x.shape[-1] // 2
    gate = x[..., :inter].to(acc)
    up = x[..., inter:].to(acc)
    silu = gate * torch.sigmoid(gate)
    return (silu * up).to(x.dtype)
