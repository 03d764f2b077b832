"""Causal GQA attention with logit soft-capping (Gemma-2), over whole prompts.

  s[b, h, i, j]   = cap * tanh(scale * q[b, i, h] . k[b, j, h // G] / cap)      for j <= i, -inf beyond
  out[b, i, h]    = sum_j softmax_j(s[b, h, i, :]) v[b, j, h // G]

Queries are processed in blocks of QB rows (a loop over shapes, not data). fp32 math (float64 for the
anchor), output in q's dtype.
"""

import torch

QB = 256


def run(q, k, v, scale, softcap):
    bsz, L, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    f = torch.promote_types(q.dtype, torch.float32)
    kf = k.to(f).permute(0, 2, 3, 1)                        # [b, Hkv, D, L]
    vf = v.to(f).permute(0, 2, 1, 3)                        # [b, Hkv, L, D]
    outs = []
    for s in range(0, L, QB):
        e = min(s + QB, L)
        qb = q[:, s:e].to(f).reshape(bsz, e - s, Hkv, G, D).permute(0, 2, 3, 1, 4)   # [b, Hkv, G, rows, D]
        scores = torch.matmul(qb, kf[..., :e].unsqueeze(2)) * scale                  # [b, Hkv, G, rows, e]
        scores = scores.div_(softcap).tanh_().mul_(softcap)
        i = torch.arange(s, e, device=q.device)[:, None]
        j = torch.arange(e, device=q.device)[None, :]
        scores = scores.masked_fill_(j > i, float("-inf"))
        scores = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()      # in place: fewer temporaries
        p = scores.div_(scores.sum(dim=-1, keepdim=True))
        o = torch.matmul(p, vf[:, :, None, :e])
        outs.append(o.permute(0, 3, 1, 2, 4).reshape(bsz, e - s, Hq, D))
    return torch.cat(outs, dim=1).to(q.dtype)
