"""Causal GQA prefill attention, written out (no SDPA).

  scores[b, h, s, t] = scale * sum_d q[b, s, h, d] * k[b, t, h // G, d]     G = Hq / Hkv
  p[b, h, s, :]      = softmax over t of scores, with t > s masked out
  out[b, s, h, d]    = sum_t p[b, h, s, t] * v[b, t, h // G, d]

Scores and softmax in fp32 (float64 for the evaluator's anchor), result cast to q's dtype.
"""

import torch


def _math_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def run(q, k, v, scale):
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    group = Hq // Hkv
    dt = _math_dtype(q)
    qf = q.to(dt).permute(0, 2, 1, 3)                                   # [B, Hq, S, D]
    kf = k.to(dt).repeat_interleave(group, dim=2).permute(0, 2, 1, 3)   # [B, Hq, S, D]
    vf = v.to(dt).repeat_interleave(group, dim=2).permute(0, 2, 1, 3)   # [B, Hq, S, D]
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale            # [B, Hq, S, S]
    causal = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores)
    p = p / p.sum(dim=-1, keepdim=True)
    out = torch.matmul(p, vf)                                           # [B, Hq, S, D]
    return out.permute(0, 2, 1, 3).contiguous().to(q.dtype)
