"""MoE token permutation: copies of each token's row, grouped by expert (stable order within an expert).

  flat[i]        = topk_ids[t, j]            with i = t * topk + j
  src_index      = stable argsort of flat     (by expert id, ties by i)
  permuted[r]    = hidden[src_index[r] // topk]
  expert_offsets = [0, cumulative count of rows per expert]

Pure data movement: the rows are copied unchanged (float64 rows in the evaluator's anchor).
"""

import torch


def run(hidden, topk_ids, num_experts):
    T, topk = topk_ids.shape
    flat = topk_ids.reshape(-1).long()
    _, src_index = torch.sort(flat, stable=True)
    permuted = hidden[src_index // topk]
    counts = torch.zeros(num_experts, dtype=torch.int64, device=hidden.device)
    counts = counts.scatter_add(0, flat, torch.ones_like(flat))
    offsets = torch.cat([counts.new_zeros(1), torch.cumsum(counts, dim=0)])
    return permuted, src_index, offsets.to(torch.int32)
