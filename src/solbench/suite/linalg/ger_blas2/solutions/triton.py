"""Rank-1 update out = A + alpha * x y^T in fp32, A/out [M, N], x [M], y [N].

Memory bound: A read once, out written once. Grid (cdiv(M, BM), cdiv(N, BN)); each program loads its [BM, BN] tile
of A (int64 row offsets), the BM entries of x and BN entries of y, and stores A + alpha * (x * y) (the reference's
rounding order: the outer product, then the scale, then the add).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _ger_kernel(a_ptr, x_ptr, y_ptr, out_ptr, M, N, stride_a, stride_o, alpha,
                BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    rm = rows < M
    cm = cols < N
    mask = rm[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows, mask=rm, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + cols, mask=cm, other=0.0).to(tl.float32)
    a = tl.load(a_ptr + rows[:, None] * stride_a + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    out = a + alpha * (x[:, None] * y[None, :])
    tl.store(out_ptr + rows[:, None] * stride_o + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


def run(A, x, y, alpha, out=None):
    M, N = A.shape
    if out is None:
        out = torch.empty_like(A)
    if M == 0 or N == 0:
        return out
    if A.stride(1) != 1:
        A = A.contiguous()
    x = x.contiguous()
    y = y.contiguous()
    bn = min(256, triton.next_power_of_2(N))
    bm = max(1, min(64, 4096 // bn, triton.next_power_of_2(M)))
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _ger_kernel[grid](A, x, y, out, M, N, A.stride(0), out.stride(0), float(alpha), BM=bm, BN=bn, num_warps=4)
    return out
