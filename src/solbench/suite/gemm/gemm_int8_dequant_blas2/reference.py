"""C = (A @ B.T) * a_scale[:, None] * b_scale[None, :] -> bf16, with A [M, K] int8, B [N, K] int8.

The int32 accumulation is computed exactly in float64: |A[m, k] * B[n, k]| <= 127 * 127 < 2^14 and
K <= 131072 = 2^17, so every partial sum is an integer of magnitude below 2^31 < 2^53 and float64 holds it
exactly (float32 would not: it rounds integers above 2^24). Integer matmuls are not supported on every
device, so float64 is the portable exact formulation. The dequantization is done in float64 too
(promote_types of float64 and the scales' dtype) and rounded once to bf16 (kept in float64 for the
evaluator's anchor, whose scales arrive as float64).
"""

import torch


def run(A, B, a_scale, b_scale):
    exact = torch.float64  # exact for int8 x int8 sums up to K = 2^17 (see above)
    acc = torch.matmul(A.to(exact), B.to(exact).t())  # acc[m, n] = sum_k A[m, k] * B[n, k], an exact integer
    cdt = torch.promote_types(exact, a_scale.dtype)
    C = acc.to(cdt) * a_scale.to(cdt)[:, None] * b_scale.to(cdt)[None, :]
    # bf16 output for fp32 scales; the evaluator's anchor (float64 scales) keeps the result in float64
    out_dtype = torch.float64 if a_scale.dtype == torch.float64 else torch.bfloat16
    return C.to(out_dtype)
