"""Honest: one Triton program per row computes the softmax and the log-sum-exp; the softmax is stored as bf16 by
the kernel itself (x.to(tl.bfloat16), round to nearest even), the log-sum-exp as fp32. The two outputs are returned
as a plain list."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_lse(x_ptr, out_ptr, lse_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    v = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")) * scale
    m = tl.max(v, axis=0)
    e = tl.exp(v - m)
    total = tl.sum(e, axis=0)
    tl.store(out_ptr + row * n_cols + offs, (e / total).to(tl.bfloat16), mask=mask)
    tl.store(lse_ptr + row, m + tl.log(total))


def run(x, scale):
    x = x.contiguous()
    b, n = x.shape
    out = torch.empty((b, n), dtype=torch.bfloat16, device=x.device)
    lse = torch.empty((b,), dtype=torch.float32, device=x.device)
    _softmax_lse[(b,)](x, out, lse, n, float(scale), BLOCK=triton.next_power_of_2(n))
    return [out, lse]
