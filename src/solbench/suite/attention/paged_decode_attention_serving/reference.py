"""GQA decode attention over a paged KV cache: gather each sequence's pages, then attend with a length mask.

  K_b[t] = k_cache[block_table[b, t // page_size], t % page_size]        (same for V)
  scores[b, h, t] = scale * q[b, h] . K_b[t, h // G]      for t < seq_lens[b], -inf beyond  (G = Hq / Hkv)
  out[b, h]       = sum_t softmax_t(scores[b, h, :]) V_b[t, h // G]

fp32 math (float64 for the evaluator's anchor), result cast to q's dtype.
"""

import torch


def run(q, k_cache, v_cache, block_table, seq_lens, scale):
    B, Hq, D = q.shape
    page_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    max_pages = block_table.shape[1]
    L = max_pages * page_size
    G = Hq // Hkv
    f = torch.promote_types(q.dtype, torch.float32)
    pages = block_table.long()
    k = k_cache[pages].reshape(B, L, Hkv, D).to(f)            # [B, L, Hkv, D], token t = page t // S, slot t % S
    v = v_cache[pages].reshape(B, L, Hkv, D).to(f)
    qg = q.to(f).reshape(B, Hkv, G, D)                        # query heads grouped by their KV head
    scores = torch.matmul(qg, k.permute(0, 2, 3, 1)) * scale  # [B, Hkv, G, L]
    valid = torch.arange(L, device=q.device)[None, :] < seq_lens.long()[:, None]   # [B, L]
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores)
    p = p / p.sum(dim=-1, keepdim=True)
    out = torch.matmul(p, v.permute(0, 2, 1, 3))              # [B, Hkv, G, D]
    return out.reshape(B, Hq, D).to(q.dtype)
