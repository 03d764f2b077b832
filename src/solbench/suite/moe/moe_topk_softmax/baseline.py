"""Baseline: torch.softmax + torch.topk + renormalisation (the Hugging Face router's ops)."""

import torch


def run(gating, top_k):
    p = torch.softmax(gating.float(), dim=-1)
    w, ids = torch.topk(p, top_k, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), ids.to(torch.int32)
