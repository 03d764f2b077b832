import torch


def _unrotate(g, cos, sin):
    # g: [T, H, D]; cos, sin: [T, D/2], broadcast over heads; the transpose of the forward's rotation
    acc = torch.promote_types(g.dtype, torch.float32)
    half = g.shape[-1] // 2
    g1 = g[..., :half].to(acc)
    g2 = g[..., half:].to(acc)
    c = cos.to(acc)[:, None, :]
    s = sin.to(acc)[:, None, :]
    return torch.cat([g1 * c + g2 * s, g2 * c - g1 * s], dim=-1).to(g.dtype)


def run(grad_q, grad_k, cos, sin):
    return _unrotate(grad_q, cos, sin), _unrotate(grad_k, cos, sin)
