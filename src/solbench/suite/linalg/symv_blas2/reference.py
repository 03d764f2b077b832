"""y = S @ x with S = tril(A) + tril(A, -1)^T (only A's lower triangle is used).

Computed in promote_types(dtype, float32) (fp32, float64 for the evaluator's anchor), cast to x's dtype.
"""

import torch


def run(A, x):
    acc = torch.promote_types(A.dtype, torch.float32)
    Al = A.to(acc)
    S = torch.tril(Al) + torch.tril(Al, diagonal=-1).t()  # symmetric, from the lower triangle
    return torch.mv(S, x.to(acc)).to(x.dtype)
