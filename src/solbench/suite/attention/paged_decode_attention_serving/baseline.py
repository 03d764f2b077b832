"""Baseline: gather the pages in bf16, then scaled_dot_product_attention with a boolean length mask.

The G query heads of one KV head are the G query rows of one attention head, so no KV expansion is needed.
"""

import torch
import torch.nn.functional as F


def run(q, k_cache, v_cache, block_table, seq_lens, scale):
    B, Hq, D = q.shape
    page_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    L = block_table.shape[1] * page_size
    pages = block_table.long()
    k = k_cache[pages].reshape(B, L, Hkv, D).transpose(1, 2)   # [B, Hkv, L, D]
    v = v_cache[pages].reshape(B, L, Hkv, D).transpose(1, 2)
    mask = (torch.arange(L, device=q.device)[None, :] < seq_lens.long()[:, None])[:, None, None, :]
    out = F.scaled_dot_product_attention(q.reshape(B, Hkv, Hq // Hkv, D), k, v, attn_mask=mask, scale=scale)
    return out.reshape(B, Hq, D)
