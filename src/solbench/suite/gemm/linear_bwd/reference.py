import torch


def run(x, weight, grad_out):
    acc = torch.promote_types(x.dtype, torch.float32)
    g = grad_out.to(acc)
    grad_x = g @ weight.to(acc)          # [T, N] x [N, K]
    grad_weight = g.t() @ x.to(acc)      # [N, T] x [T, K]
    return grad_x.to(x.dtype), grad_weight
