"""GQA decode attention over a full contiguous KV cache, written out (no SDPA).

  scores[b, h, t] = scale * sum_d q[b, h, d] * k_cache[b, t, h // G, d]      G = Hq / Hkv
  p[b, h, :]      = softmax over t of scores[b, h, :]
  out[b, h, d]    = sum_t p[b, h, t] * v_cache[b, t, h // G, d]

fp32 math (float64 for the evaluator's anchor), result cast to q's dtype.
"""

import torch


def _math_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def run(q, k_cache, v_cache, scale):
    B, Hq, D = q.shape
    Hkv = k_cache.shape[2]
    group = Hq // Hkv
    dt = _math_dtype(q)
    qf = q.to(dt).reshape(B, Hkv, group, D)                  # query heads grouped by their KV head
    kf = k_cache.to(dt).permute(0, 2, 3, 1)                  # [B, Hkv, D, L]
    vf = v_cache.to(dt).permute(0, 2, 1, 3)                  # [B, Hkv, L, D]
    scores = torch.matmul(qf, kf) * scale                    # [B, Hkv, G, L]
    scores = scores - scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores)
    p = p / p.sum(dim=-1, keepdim=True)
    out = torch.matmul(p, vf)                                # [B, Hkv, G, D]
    return out.reshape(B, Hq, D).to(q.dtype)
