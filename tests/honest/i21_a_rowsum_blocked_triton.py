"""Honest: a row sum in Triton, one program per row: blocks of 1024 columns added lane by lane into a 1024-wide
fp32 accumulator (lane l sums every 1024th column from l), reduced with tl.sum at the end."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, N, BLOCK):
        cols = k0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, 0))


def run(x):
    x = x.contiguous()
    B, N = x.shape
    out = torch.empty(B, dtype=torch.float32, device=x.device)
    _rowsum[(B,)](x, out, N, BLOCK=1024)
    return out
