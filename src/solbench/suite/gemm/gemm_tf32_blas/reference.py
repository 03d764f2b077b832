"""C = A @ B.T in fp32 with TF32 allowed: A [M, K], B [N, K] (nn.Linear layout), C [M, N], all fp32.

A plain library matmul. For the evaluator's anchor A and B arrive as float64 and the same line
runs in float64. The evaluator sets torch.backends.cuda.matmul.allow_tf32 = True for this problem (allow_tf32 in definition.json), so on the GPU torch runs this as a TF32 tensor-core GEMM; on the CPU it stays full fp32.
"""

import torch


def run(A, B):
    # C[m, n] = sum_k A[m, k] * B[n, k]
    return torch.matmul(A, B.t())
