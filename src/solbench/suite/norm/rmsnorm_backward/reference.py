import torch


def run(grad_out, x, weight, eps):
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    g = grad_out.to(acc)
    w = weight.to(acc)
    hidden = x.shape[-1]
    # recompute the forward statistics
    rstd = torch.rsqrt((xf * xf).sum(dim=-1, keepdim=True) / hidden + eps)
    xhat = xf * rstd
    gw = g * w
    # d/dx of x * rstd(x): rstd * (gw - xhat * mean(gw * xhat))
    c = (gw * xhat).sum(dim=-1, keepdim=True) / hidden
    grad_x = rstd * (gw - xhat * c)
    grad_weight = (g * xhat).sum(dim=0)
    return grad_x.to(x.dtype), grad_weight.to(acc)
