"""X = L^{-1} B with L = tril(R, -1) / sqrt(N) + diag(|d| + 1) (lower triangular, well conditioned).

Computed in promote_types(dtype, float32) (fp32, float64 for the evaluator's anchor), cast to B's dtype.
"""

import math

import torch


def run(R, d, B):
    acc = torch.promote_types(B.dtype, torch.float32)
    n = R.shape[0]
    L = torch.tril(R.to(acc), diagonal=-1) / math.sqrt(max(n, 1)) + torch.diag(d.to(acc).abs() + 1)
    X = torch.linalg.solve_triangular(L, B.to(acc), upper=False)  # L @ X = B
    return X.to(B.dtype)
