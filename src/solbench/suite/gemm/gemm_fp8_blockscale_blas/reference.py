"""Block-scaled FP8 GEMM (DeepSeek-V3 layout).

  out[m, n] = sum_k (A[m, k] * a_scale[m, k // 128]) * (B[n, k] * b_scale[n // 128, k // 128])

A [M, K] fp8 with 1x128 per-token-group scales a_scale [M, K/128]; B [N, K] fp8 with 128x128 block
scales b_scale [ceil(N/128), K/128]. Upcasting fp8 to fp32 is exact; the dequantized operands are
multiplied in the scales' float dtype (fp32, or float64 when the evaluator upcasts everything for its
anchor) and the result is rounded once to bf16 (kept in float64 for the anchor).
"""

import torch

BLOCK = 128


def run(A, a_scale, B, b_scale):
    dt = torch.promote_types(a_scale.dtype, torch.float32)
    M, K = A.shape
    N = B.shape[0]
    KB = K // BLOCK
    NB = b_scale.shape[0]
    a = (A.to(dt).reshape(M, KB, BLOCK) * a_scale.to(dt)[:, :, None]).reshape(M, K)
    # per-row scales of B: row n uses block row n // 128 (the last block row may be partial)
    b_rows = b_scale.to(dt)[:, None, :].expand(NB, BLOCK, KB).reshape(NB * BLOCK, KB)[:N]
    b = (B.to(dt).reshape(N, KB, BLOCK) * b_rows[:, :, None]).reshape(N, K)
    out = torch.matmul(a, b.t())
    out_dtype = torch.float64 if dt == torch.float64 else torch.bfloat16
    return out.to(out_dtype)
