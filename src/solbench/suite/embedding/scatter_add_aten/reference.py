"""MoE un-permute and combine with index_add_:

  token(j) = slot_of_row[j] // k,   w(j) = topk_weights.flatten()[slot_of_row[j]]
  out[t]   = sum over rows j with token(j) == t of w(j) * expert_out[j]

fp32 accumulation and output (float64 for the evaluator's anchor); the k rows of a token may be added in any order.
"""

import torch


def run(expert_out, slot_of_row, topk_weights):
    acc = torch.promote_types(expert_out.dtype, torch.float32)
    T, k = topk_weights.shape
    token = torch.div(slot_of_row, k, rounding_mode="floor")
    w = topk_weights.reshape(-1).index_select(0, slot_of_row).to(acc)
    rows = expert_out.to(acc) * w.unsqueeze(1)
    out = torch.zeros(T, expert_out.shape[1], dtype=acc, device=expert_out.device)
    return out.index_add_(0, token, rows)
