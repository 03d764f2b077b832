"""Expert-load histogram, accumulated in place: expert_load[e] += #{(t, j): topk_ids[t, j] == e}."""

import torch


def run(topk_ids, expert_load):
    flat = topk_ids.reshape(-1).long()
    expert_load.scatter_add_(0, flat, torch.ones_like(flat, dtype=expert_load.dtype))
