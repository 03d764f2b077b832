import torch
import torch.nn.functional as F


def run(grad_out, x, weight, bias):
    acc = torch.promote_types(x.dtype, torch.float32)
    W = weight.shape[-1]
    L = x.shape[-1]
    xf = x.to(acc)
    w = weight.to(acc)
    xp = F.pad(xf, (W - 1, 0))                                   # x[t - 3 + j] at xp[t + j]
    pre = bias.to(acc)[:, None]
    for j in range(W):
        pre = pre + w[:, j, None] * xp[..., j:j + L]
    s = torch.sigmoid(pre)
    g = grad_out.to(acc) * (s * (1.0 + pre * (1.0 - s)))        # through the SiLU
    gp = F.pad(g, (0, W - 1))                                    # g[t + 3 - j] at gp[t + 3 - j]
    grad_x = torch.zeros_like(xf)
    for j in range(W):
        grad_x = grad_x + w[:, j, None] * gp[..., W - 1 - j:W - 1 - j + L]
    grad_weight = torch.stack([(g * xp[..., j:j + L]).sum(dim=(0, 2)) for j in range(W)], dim=-1)
    grad_bias = g.sum(dim=(0, 2))
    return grad_x.to(x.dtype), grad_weight, grad_bias
