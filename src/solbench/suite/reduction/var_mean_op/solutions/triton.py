"""var_mean over the last dim of fp32 x [M, N]: unbiased variance (correction 1) and mean, fp32 [M] each.

Each program takes a tile of ROWS rows. Two-pass statistics in fp32: first the row sums (mean), then the sum of
squared deviations from that mean (no cancellation of a one-pass E[x^2] - E[x]^2). When a row fits one BLOCK
(N <= 4096) the tile stays in registers between the passes; longer rows loop over BLOCK-wide column blocks twice
(the second pass mostly hits L2).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _var_mean_kernel(x_ptr, var_ptr, mean_ptr, M, N, stride_x,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = rows < M
    cols = tl.arange(0, BLOCK)
    row_ptr = x_ptr + rows[:, None] * stride_x
    if SINGLE:
        mask = rmask[:, None] & (cols[None, :] < N)
        x = tl.load(row_ptr + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        m2 = tl.sum(d * d, axis=1)
    else:
        acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for c0 in range(0, N, BLOCK):
            c = c0 + cols
            mask = rmask[:, None] & (c[None, :] < N)
            acc += tl.load(row_ptr + c[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=1) / N
        acc2 = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
        for c0 in range(0, N, BLOCK):
            c = c0 + cols
            mask = rmask[:, None] & (c[None, :] < N)
            x = tl.load(row_ptr + c[None, :], mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, x - mean[:, None], 0.0)
            acc2 += d * d
        m2 = tl.sum(acc2, axis=1)
    tl.store(var_ptr + rows, m2 / (N - 1), mask=rmask)
    tl.store(mean_ptr + rows, mean, mask=rmask)


def run(x, var=None, mean=None):
    M, N = x.shape
    if var is None:
        var = torch.empty((M,), dtype=torch.float32, device=x.device)
    if mean is None:
        mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    if M == 0:
        return var, mean
    if x.stride(1) != 1:
        x = x.contiguous()
    single = N <= 4096
    block = triton.next_power_of_2(N) if single else 4096
    rows = max(1, min(64, 4096 // block))
    num_warps = 8 if rows * block >= 4096 else 4
    _var_mean_kernel[(triton.cdiv(M, rows),)](x, var, mean, M, N, x.stride(0),
                                              ROWS=rows, BLOCK=block, SINGLE=single, num_warps=num_warps)
    return var, mean
