"""y = W @ x for one decode token: W [N, K], x [K], y [N].

fp32 accumulation (float64 for the evaluator's anchor), one rounding to x's dtype.
"""

import torch


def run(W, x):
    acc = torch.promote_types(W.dtype, torch.float32)
    y = torch.mv(W.to(acc), x.to(acc))  # y[n] = sum_k W[n, k] * x[k]
    return y.to(x.dtype)
