"""Baseline: bf16 matmuls (cuBLAS) and torch.addmm for the adapter term; the rank-R intermediate is rounded to bf16."""

import torch


def run(x, W, lora_A, lora_B, scaling):
    base = torch.matmul(x, W.t())
    low = torch.matmul(x, lora_A.t())
    return torch.addmm(base, low, lora_B.t(), alpha=scaling)
