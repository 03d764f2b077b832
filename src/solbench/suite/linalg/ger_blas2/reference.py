"""out = A + alpha * outer(x, y): A [M, N], x [M], y [N].

Computed in promote_types(dtype, float32) (fp32, float64 for the evaluator's anchor), cast to A's dtype.
"""

import torch


def run(A, x, y, alpha):
    acc = torch.promote_types(A.dtype, torch.float32)
    out = A.to(acc) + alpha * torch.outer(x.to(acc), y.to(acc))  # out[m, n] = A[m, n] + alpha x[m] y[n]
    return out.to(A.dtype)
