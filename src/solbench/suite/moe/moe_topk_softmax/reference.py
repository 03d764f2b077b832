"""MoE router: renormalised top-k of a softmax.

  p[t, e]            = exp(g[t, e] - max_e g[t]) / sum_e exp(g[t, e] - max_e g[t])
  ids[t, 0..k-1]     = experts sorted by descending g[t, e], ties by ascending e, first k
  weights[t, j]      = p[t, ids[t, j]] / sum_i p[t, ids[t, i]]

The selection sorts the logits themselves (a stable descending sort), so it is
exact and identical in fp32 and in the evaluator's float64 anchor.
"""

import torch


def _math_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def run(gating, top_k):
    g = gating.to(_math_dtype(gating))
    m = g.amax(dim=-1, keepdim=True)
    e = torch.exp(g - m)
    p = e / e.sum(dim=-1, keepdim=True)
    ids = torch.sort(g, dim=-1, descending=True, stable=True).indices[:, :top_k]
    w = torch.gather(p, 1, ids)
    w = w / w.sum(dim=-1, keepdim=True)
    return w, ids.to(torch.int32)
