"""Baseline: gather the pages in bf16, append the chunk, then scaled_dot_product_attention with a boolean mask."""

import torch
import torch.nn.functional as F


def run(q, k_new, v_new, k_cache, v_cache, block_table, prefix_lens, scale):
    bsz, C, Hq, D = q.shape
    page_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    Lp = block_table.shape[1] * page_size
    pages = block_table.long()
    k = torch.cat([k_cache[pages].reshape(bsz, Lp, Hkv, D), k_new], dim=1).transpose(1, 2)
    v = torch.cat([v_cache[pages].reshape(bsz, Lp, Hkv, D), v_new], dim=1).transpose(1, 2)
    t = torch.arange(Lp + C, device=q.device)
    i = torch.arange(C, device=q.device)[:, None]
    mask = ((t < prefix_lens.long()[:, None]) & (t < Lp))[:, None, :] | ((t >= Lp) & (t - Lp <= i))[None]
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask[:, None], scale=scale,
                                         enable_gqa=True)
    return out.transpose(1, 2)
