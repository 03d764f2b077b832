"""out = gelu(x @ W.T + b), exact (erf) GELU; x [M, K], W [N, K], b [N], out [M, N].

The GEMM, the bias add and the GELU run in fp32 (float64 for the evaluator's anchor) and the
result is rounded once to x's dtype, as a GEMM with a fused bias+GELU epilogue does.
"""

import torch


def run(x, W, b):
    acc = torch.promote_types(x.dtype, torch.float32)
    h = torch.matmul(x.to(acc), W.to(acc).t()) + b.to(acc)
    out = 0.5 * h * (1.0 + torch.erf(h * 0.7071067811865476))
    return out.to(x.dtype)
