import torch


def run(x, weight, bias, eps):
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    mean = xf.mean(dim=-1, keepdim=True)
    centered = xf - mean
    var = (centered * centered).mean(dim=-1, keepdim=True)  # biased variance
    rstd = torch.rsqrt(var + eps)
    out = centered * rstd * weight.to(acc) + bias.to(acc)
    return out.to(x.dtype)
