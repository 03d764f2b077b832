"""Chunked prefill: the queries of a new chunk attend to a paged cached prefix and, causally, to the chunk.

For sequence b with prefix length P_b = prefix_lens[b] (tokens in pages block_table[b, :]):

  keys of query i  = prefix tokens t < P_b  (K_b[t] = k_cache[block_table[b, t // page_size], t % page_size])
                     + chunk tokens j <= i  (k_new[b, j])
  out[b, i, h]     = sum over those keys of softmax(scale * q[b, i, h] . key) value        (GQA, G = Hq / Hkv)

Queries are processed in blocks of QB rows (a loop over shapes, not data). fp32 math (float64 for the
anchor), output in q's dtype.
"""

import torch

QB = 128


def run(q, k_new, v_new, k_cache, v_cache, block_table, prefix_lens, scale):
    bsz, C, Hq, D = q.shape
    page_size, Hkv = k_cache.shape[1], k_cache.shape[2]
    Lp = block_table.shape[1] * page_size
    G = Hq // Hkv
    f = torch.promote_types(q.dtype, torch.float32)
    pages = block_table.long()
    kp = k_cache[pages].reshape(bsz, Lp, Hkv, D)
    vp = v_cache[pages].reshape(bsz, Lp, Hkv, D)
    keys = torch.cat([kp.to(f), k_new.to(f)], dim=1).permute(0, 2, 3, 1)       # [b, Hkv, D, Lp + C]
    vals = torch.cat([vp.to(f), v_new.to(f)], dim=1).permute(0, 2, 1, 3)       # [b, Hkv, Lp + C, D]
    t = torch.arange(Lp + C, device=q.device)
    prefix_ok = (t[None, :] < prefix_lens.long()[:, None]) & (t[None, :] < Lp)  # [b, Lp + C]
    outs = []
    for s in range(0, C, QB):
        e = min(s + QB, C)
        qb = q[:, s:e].to(f).reshape(bsz, e - s, Hkv, G, D).permute(0, 2, 3, 1, 4)   # [b, Hkv, G, rows, D]
        scores = torch.matmul(qb, keys.unsqueeze(2)) * scale                         # [b, Hkv, G, rows, Lp + C]
        i = torch.arange(s, e, device=q.device)[:, None]
        chunk_ok = (t[None, :] >= Lp) & (t[None, :] - Lp <= i)                      # [rows, Lp + C]
        visible = prefix_ok[:, None, None, None, :] | chunk_ok
        scores = scores.masked_fill_(~visible, float("-inf"))
        scores = scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()      # in place: fewer temporaries
        p = scores.div_(scores.sum(dim=-1, keepdim=True))
        o = torch.matmul(p, vals.unsqueeze(2))
        outs.append(o.permute(0, 3, 1, 2, 4).reshape(bsz, e - s, Hq, D))
    return torch.cat(outs, dim=1).to(q.dtype)
