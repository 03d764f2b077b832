"""Honest: two Triton kernels. The first reduces each row's sum of squares in chunks into a per-row rstd buffer
(scratch, never an output); the second reads it and writes the normalised, weighted row."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_rstd(x_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        acc += v * v
    mean = tl.sum(acc, axis=0) / n_cols
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(mean + eps))


@triton.jit
def _apply(x_ptr, w_ptr, rstd_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < n_cols
    r = tl.load(rstd_ptr + row)
    v = tl.load(x_ptr + row * n_cols + col, mask=mask, other=0.0)
    w = tl.load(w_ptr + col, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + col, v * r * w, mask=mask)


def run(x, w):
    x = x.contiguous()
    b, h = x.shape
    rstd = torch.empty((b,), dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    _row_rstd[(b,)](x, rstd, h, 1e-6, BLOCK=1024)
    _apply[(b, triton.cdiv(h, 1024))](x, w.contiguous(), rstd, out, h, BLOCK=1024)
    return out
