"""Baseline: one bf16 matmul (cuBLAS) for gate and up together, then F.silu(g) * u in bf16 (unfused epilogue)."""

import torch
import torch.nn.functional as F


def run(x, W_gu):
    gu = torch.matmul(x, W_gu.t())
    g, u = gu.chunk(2, dim=-1)
    return F.silu(g) * u
