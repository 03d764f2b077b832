"""Honest (issue 21, root cause 3): a Triton softmax whose launch plan uses math and functools (a memoized block
width per row length): the allowlist's standard-library share beside Triton's own packages."""
import functools
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    z = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")) * scale
    z = z - tl.max(z, axis=0)
    e = tl.where(mask, tl.exp(z), 0.0)
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


@functools.lru_cache(maxsize=None)
def _block(n_cols: int) -> int:
    return max(16, 1 << math.ceil(math.log2(max(n_cols, 1))))


def run(x, scale):
    x = x.contiguous()
    rows, n = x.shape
    out = torch.empty_like(x)
    _softmax_rows[(rows,)](x, out, n, float(scale), BLOCK=_block(n))
    return out
