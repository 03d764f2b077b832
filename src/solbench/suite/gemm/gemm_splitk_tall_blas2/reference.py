"""C = A @ B.T: A [M, K] (few rows, long K), B [N, K], C [M, N].

Computed in promote_types(dtype, float32) (fp32 for bf16, float64 for the evaluator's anchor), one rounding to A's dtype.
"""

import torch


def run(A, B):
    acc = torch.promote_types(A.dtype, torch.float32)
    C = torch.matmul(A.to(acc), B.to(acc).t())  # C[m, n] = sum_k A[m, k] * B[n, k]
    return C.to(A.dtype)
