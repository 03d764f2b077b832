"""Decode attention over an fp8 KV cache with per-KV-head scales (GQA).

  K = k_cache * k_scale[h],  V = v_cache * v_scale[h]
  o[b, i] = softmax(q[b, i] . K[b, :, h(i)] / sqrt(D)) @ V[b, :, h(i)],  h(i) = i // (Hq // Hkv)
"""

import math

import torch


def run(q, k_cache, v_cache, k_scale, v_scale):
    f = torch.promote_types(q.dtype, torch.float32)
    B, Hq, D = q.shape
    Hkv = k_cache.shape[2]
    g = Hq // Hkv
    k = k_cache.to(f) * k_scale.to(f)[:, None]
    v = v_cache.to(f) * v_scale.to(f)[:, None]
    qg = q.to(f).reshape(B, Hkv, g, D)
    s = torch.einsum("bhgd,bshd->bhgs", qg, k) / math.sqrt(D)
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhgs,bshd->bhgd", p, v)
    return o.reshape(B, Hq, D).to(q.dtype)
