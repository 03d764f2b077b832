"""Row-wise scaled FP8 GEMM: out = (A @ B.T) * a_scale[:, None] * b_scale[None, :].

A and B hold fp8 (e4m3) values; upcasting them to fp32 is exact and every product
of two e4m3 values is exact in fp32, so this is the fp8 tensor-core GEMM with fp32
accumulation. The scales are applied in fp32, then the result is rounded to bf16.
For the evaluator's anchor every floating input arrives as float64 and the whole
computation, the result included, stays in float64.
"""

import torch


def _math_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def run(A, B, a_scale, b_scale):
    dt = _math_dtype(A)
    acc = torch.matmul(A.to(dt), B.to(dt).t())  # [M, N], sum_k A[m, k] * B[n, k]
    out = acc * a_scale.to(dt)[:, None] * b_scale.to(dt)[None, :]
    out_dtype = torch.float64 if dt == torch.float64 else torch.bfloat16
    return out.to(out_dtype)
