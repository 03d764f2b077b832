import torch


def run(grad_out, grad_residual, h, weight, eps):
    acc = torch.promote_types(h.dtype, torch.float32)
    hf = h.to(acc)
    g = grad_out.to(acc)
    w = weight.to(acc)
    hidden = h.shape[-1]
    rstd = torch.rsqrt((hf * hf).sum(dim=-1, keepdim=True) / hidden + eps)
    hhat = hf * rstd
    gw = g * w
    c = (gw * hhat).sum(dim=-1, keepdim=True) / hidden
    grad_h = rstd * (gw - hhat * c) + grad_residual.to(acc)
    grad_weight = (g * hhat).sum(dim=0)
    return grad_h.to(h.dtype), grad_weight
