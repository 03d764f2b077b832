import torch


def _rotate(x, cos, sin):
    # x: [T, H, D]; cos, sin: [T, D/2], broadcast over heads
    acc = torch.promote_types(x.dtype, torch.float32)
    half = x.shape[-1] // 2
    x1 = x[..., :half].to(acc)
    x2 = x[..., half:].to(acc)
    c = cos.to(acc)[:, None, :]
    s = sin.to(acc)[:, None, :]
    out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return out.to(x.dtype)


def run(q, k, cos, sin):
    return _rotate(q, cos, sin), _rotate(k, cos, sin)
