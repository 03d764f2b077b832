"""Baseline: torch.topk instead of a full-vocabulary sort (top_k <= 64 in every workload), then the same
top-p and inverse-CDF steps on the k candidates, mapped back to token ids."""

import torch

KMAX = 64


def run(logits, top_k, top_p, uniform):
    B, V = logits.shape
    kmax = min(KMAX, V)
    vals, ids = torch.topk(logits, kmax, dim=-1)                 # descending
    kth = torch.gather(vals, 1, (top_k.long() - 1)[:, None])
    keep = logits >= kth
    e = torch.exp(logits - vals[:, :1]) * keep
    p = e / e.sum(dim=-1, keepdim=True)
    ps = torch.gather(p, 1, ids)
    before = torch.cumsum(ps, dim=-1) - ps
    n_keep = (before < top_p[:, None]).sum(dim=-1, keepdim=True).clamp(min=1)
    thr = torch.gather(ps, 1, n_keep - 1)
    q = p * (p >= thr)
    c = torch.cumsum(q, dim=-1)
    idx = (c <= uniform[:, None] * c[:, -1:]).sum(dim=-1)
    pos = torch.arange(V, device=logits.device)
    last = torch.where(q > 0, pos, torch.zeros_like(pos)).amax(dim=-1)
    return torch.minimum(idx, last)
