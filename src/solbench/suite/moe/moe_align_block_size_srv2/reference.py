"""MoE block alignment: flat indices grouped by expert (ascending within an expert), each expert's
segment padded with the sentinel T*topk to a multiple of the block size B.

  count[e]       = #{i : flat[i] == e}                      flat = topk_ids.flatten(), i = t * topk + j
  padded[e]      = ceil(count[e] / B) * B,  start[e] = sum_{e' < e} padded[e']
  sorted_ids[start[e] + r] = r-th i (ascending) with flat[i] == e;  other slots = T*topk
  expert_ids[b]  = e with start[e] <= b*B < start[e] + padded[e];  -1 past the last block
  num_tokens_post_pad = sum_e padded[e]

Integer-only; E and B are the constants of the definition (DeepSeek-V3, 256 experts; block 64).
"""

import torch

E = 256
B = 64


def run(topk_ids):
    T, topk = topk_ids.shape
    n = T * topk
    dev = topk_ids.device
    flat = topk_ids.reshape(-1).long()
    counts = torch.zeros(E, dtype=torch.int64, device=dev).scatter_add(0, flat, torch.ones_like(flat))
    padded = (counts + B - 1) // B * B
    start = torch.cumsum(padded, 0) - padded
    unpadded_start = torch.cumsum(counts, 0) - counts
    sorted_e, order = torch.sort(flat, stable=True)
    rank = torch.arange(n, device=dev) - unpadded_start[sorted_e]
    dest = start[sorted_e] + rank
    max_p = n + E * (B - 1)
    max_b = (max_p + B - 1) // B
    sorted_ids = torch.full((max_p,), n, dtype=torch.int64, device=dev).scatter(0, dest, order)
    block_end = torch.cumsum(padded // B, 0)
    blocks = torch.arange(max_b, device=dev)
    eid = torch.searchsorted(block_end, blocks, right=True)
    total = padded.sum().reshape(1)
    eid = torch.where(blocks * B < total, eid, torch.full_like(eid, -1))
    return sorted_ids.to(torch.int32), eid.to(torch.int32), total.to(torch.int32)
