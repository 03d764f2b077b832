"""Multi-head cross-attention of decoder queries over a fixed set of encoder keys and values (no mask).

  out[b, i, h] = sum_s softmax_s(scale * q[b, i, h] . k[b, s, h]) v[b, s, h]

fp32 math (float64 for the anchor), output in q's dtype.
"""

import torch


def run(q, k, v, scale):
    f = torch.promote_types(q.dtype, torch.float32)
    qf = q.to(f).permute(0, 2, 1, 3)                        # [b, H, Lq, D]
    kf = k.to(f).permute(0, 2, 3, 1)                        # [b, H, D, S]
    vf = v.to(f).permute(0, 2, 1, 3)                        # [b, H, S, D]
    scores = torch.matmul(qf, kf) * scale                   # [b, H, Lq, S]
    scores = scores - scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores)
    p = p / p.sum(dim=-1, keepdim=True)
    return torch.matmul(p, vf).permute(0, 2, 1, 3).to(q.dtype)
