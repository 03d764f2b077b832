"""C = A @ A.T (symmetric rank-k update, full matrix): A [N, K] fp32, C [N, N] fp32.

A library matmul in A's dtype (fp32 with TF32 off; float64 for the evaluator's anchor).
"""

import torch


def run(A):
    return torch.matmul(A, A.t())
