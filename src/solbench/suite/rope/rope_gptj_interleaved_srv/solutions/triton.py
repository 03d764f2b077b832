import torch
import triton
import triton.language as tl


@triton.jit
def _rope_gptj_kernel(x_ptr, out_ptr, cos_ptr, sin_ptr, pos_ptr, n_heads, D: tl.constexpr, R2: tl.constexpr,
                      BLOCK_H: tl.constexpr, BLOCK_R2: tl.constexpr, BLOCK_P: tl.constexpr):
    # grid: (tokens, head blocks); rotate pairs (2i, 2i+1) for i < R2, copy dims 2*R2..D-1 unchanged
    t = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < n_heads
    pos = tl.load(pos_ptr + t).to(tl.int64)
    i = tl.arange(0, BLOCK_R2)
    imask = i < R2
    c = tl.load(cos_ptr + pos * R2 + i, mask=imask, other=0.0)
    s = tl.load(sin_ptr + pos * R2 + i, mask=imask, other=0.0)
    row = (t * n_heads + heads.to(tl.int64)) * D          # [BLOCK_H]
    rmask = hmask[:, None] & imask[None, :]
    e_off = row[:, None] + 2 * i[None, :]
    x0 = tl.load(x_ptr + e_off, mask=rmask, other=0.0).to(tl.float32)
    x1 = tl.load(x_ptr + e_off + 1, mask=rmask, other=0.0).to(tl.float32)
    y0 = x0 * c[None, :] - x1 * s[None, :]
    y1 = x1 * c[None, :] + x0 * s[None, :]
    tl.store(out_ptr + e_off, y0.to(out_ptr.dtype.element_ty), mask=rmask)
    tl.store(out_ptr + e_off + 1, y1.to(out_ptr.dtype.element_ty), mask=rmask)
    if D > 2 * R2:
        p = tl.arange(0, BLOCK_P)
        pmask = hmask[:, None] & (p[None, :] < D - 2 * R2)
        p_off = row[:, None] + 2 * R2 + p[None, :]
        tl.store(out_ptr + p_off, tl.load(x_ptr + p_off, mask=pmask), mask=pmask)


def _launch(x, out, cos_cache, sin_cache, positions):
    t, h, d = x.shape
    r2 = cos_cache.shape[1]
    if t == 0 or h == 0:
        return
    block_h = min(triton.next_power_of_2(h), 16)
    block_p = max(triton.next_power_of_2(max(d - 2 * r2, 1)), 16)
    grid = (t, triton.cdiv(h, block_h))
    _rope_gptj_kernel[grid](x, out, cos_cache, sin_cache, positions, h, D=d, R2=r2,
                            BLOCK_H=block_h, BLOCK_R2=triton.next_power_of_2(r2), BLOCK_P=block_p, num_warps=4)


def run(q, k, cos_cache, sin_cache, positions, q_out=None, k_out=None):
    # returns (q_out, k_out); also writes into preallocated outputs if given
    if q_out is None:
        q_out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if k_out is None:
        k_out = torch.empty_like(k, memory_format=torch.contiguous_format)
    q = q.contiguous()
    k = k.contiguous()
    cos_cache = cos_cache.contiguous()
    sin_cache = sin_cache.contiguous()
    positions = positions.contiguous()
    _launch(q, q_out, cos_cache, sin_cache, positions)
    _launch(k, k_out, cos_cache, sin_cache, positions)
    return q_out, k_out
