"""W8A8 int8 GEMM with per-token and per-channel scales: out = (A @ B.T) * a_scale[:, None] * b_scale[None, :].

The int8 products are accumulated exactly, as int8 tensor cores do in int32: the reference multiplies in
float64, which holds every integer sum of K <= 65536 products of int8 values exactly (|sum| < 2^31).
The exact accumulator is then converted to the scales' math dtype (fp32, float64 for the evaluator's anchor),
scaled, and rounded once to bf16 (float64 for the anchor).
"""

import torch


def run(A, B, a_scale, b_scale):
    f = torch.promote_types(a_scale.dtype, torch.float32)
    acc = torch.matmul(A.to(torch.float64), B.to(torch.float64).t())        # exact int32 accumulator
    out = acc.to(f) * a_scale.to(f)[:, None] * b_scale.to(f)[None, :]
    out_dtype = torch.bfloat16 if f == torch.float32 else f
    return out.to(out_dtype)
