"""out = residual + x @ W.T: x [M, K], W [N, K], residual [M, N], out [M, N].

Product and sum in promote_types(dtype, float32) (fp32 for bf16, float64 for the anchor), one rounding.
"""

import torch


def run(x, W, residual):
    acc = torch.promote_types(x.dtype, torch.float32)
    out = residual.to(acc) + torch.matmul(x.to(acc), W.to(acc).t())  # out[m, n] = r[m, n] + sum_k x[m, k] W[n, k]
    return out.to(residual.dtype)
