import torch


def run(x, residual, weight, eps):
    acc = torch.promote_types(x.dtype, torch.float32)
    # the residual stream is stored in the input dtype; the norm reads the stored value
    residual_out = (x.to(acc) + residual.to(acc)).to(x.dtype)
    h = residual_out.to(acc)
    rstd = torch.rsqrt((h * h).mean(dim=-1, keepdim=True) + eps)
    out = (h * rstd * weight.to(acc)).to(x.dtype)
    return out, residual_out
