"""Baseline: dequantize both operands to bf16 (one elementwise pass each), then one bf16 cuBLAS GEMM.

The dequantized values are rounded to bf16 (relative error 2^-9 per element), well inside the bf16
output tolerance. On the CPU the same code runs.
"""

import torch

BLOCK = 128


def run(A, a_scale, B, b_scale):
    M, K = A.shape
    N = B.shape[0]
    KB = K // BLOCK
    NB = b_scale.shape[0]
    a = (A.to(torch.float32).reshape(M, KB, BLOCK) * a_scale[:, :, None]).reshape(M, K).to(torch.bfloat16)
    b_rows = b_scale[:, None, :].expand(NB, BLOCK, KB).reshape(NB * BLOCK, KB)[:N]
    b = (B.to(torch.float32).reshape(N, KB, BLOCK) * b_rows[:, :, None]).reshape(N, K).to(torch.bfloat16)
    return torch.matmul(a, b.t())
