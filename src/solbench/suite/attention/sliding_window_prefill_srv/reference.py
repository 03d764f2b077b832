"""Causal sliding-window GQA attention over whole prompts (prefill of local-attention layers).

Query i of sequence b sees key j iff i - window[b] < j <= i (at most window[b] keys, itself included):

  scores[b, h, i, j] = scale * q[b, i, h] . k[b, j, h // G]       G = Hq / Hkv
  out[b, i, h]       = sum_j softmax_j(scores, masked to the window) v[b, j, h // G]

The queries are processed in blocks of QB rows (a loop over shapes, not data); each block scores against
the keys up to its last row and masks the rest. fp32 math (float64 for the anchor), output in q's dtype.
"""

import torch

QB = 256


def run(q, k, v, window, scale):
    bsz, L, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    f = torch.promote_types(q.dtype, torch.float32)
    kf = k.to(f).permute(0, 2, 3, 1)                        # [b, Hkv, D, L]
    vf = v.to(f).permute(0, 2, 1, 3)                        # [b, Hkv, L, D]
    w = window.long()[:, None, None, None, None]            # [b, 1, 1, 1, 1]
    outs = []
    for s in range(0, L, QB):
        e = min(s + QB, L)
        qb = q[:, s:e].to(f).reshape(bsz, e - s, Hkv, G, D).permute(0, 2, 3, 1, 4)   # [b, Hkv, G, rows, D]
        scores = torch.matmul(qb, kf[..., :e].unsqueeze(2)) * scale                  # [b, Hkv, G, rows, e]
        i = torch.arange(s, e, device=q.device)[:, None]
        j = torch.arange(e, device=q.device)[None, :]
        visible = (j <= i) & (j > i - w)
        scores = scores.masked_fill_(~visible, float("-inf"))
        scores = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()      # in place: fewer temporaries
        p = scores.div_(scores.sum(dim=-1, keepdim=True))
        o = torch.matmul(p, vf[:, :, None, :e])                                      # [b, Hkv, G, rows, D]
        outs.append(o.permute(0, 3, 1, 2, 4).reshape(bsz, e - s, Hq, D))
    return torch.cat(outs, dim=1).to(q.dtype)
