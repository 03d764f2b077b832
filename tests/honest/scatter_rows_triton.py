"""Honest: an in-place partial update in Triton. One program per written row copies vals[i] into cache[idx[i]];
the other N - M rows of the cache are never touched, so the call produces only M * D elements."""
import triton
import triton.language as tl


@triton.jit
def _scatter_rows(cache_ptr, vals_ptr, idx_ptr, d, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < d
    row = tl.load(idx_ptr + i)
    v = tl.load(vals_ptr + i * d + col, mask=mask)
    tl.store(cache_ptr + row * d + col, v, mask=mask)


def run(cache, vals, idx):
    m, d = vals.shape
    block = min(triton.next_power_of_2(d), 1024)
    _scatter_rows[(m, triton.cdiv(d, block))](cache, vals.contiguous(), idx.contiguous(), d, BLOCK=block)
