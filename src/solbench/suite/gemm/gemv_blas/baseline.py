"""Baseline: torch.mv on the bf16 operands (cuBLAS GEMV, fp32 accumulation), no fp32 copy of the weight."""

import torch


def run(W, x):
    return torch.mv(W, x)
