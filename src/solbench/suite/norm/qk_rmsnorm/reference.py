import torch


def _head_rmsnorm(x, weight, eps):
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)  # one statistic per head
    return (xf * rstd * weight.to(acc)).to(x.dtype)


def run(q, k, q_norm_weight, k_norm_weight, eps):
    return _head_rmsnorm(q, q_norm_weight, eps), _head_rmsnorm(k, k_norm_weight, eps)
