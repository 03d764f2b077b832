"""Baseline: torch.bmm on the bf16 operands (cuBLAS, fp32 accumulation), no fp32 copy of the keys."""

import torch


def run(keys, q):
    return torch.bmm(keys, q.unsqueeze(-1)).squeeze(-1)
