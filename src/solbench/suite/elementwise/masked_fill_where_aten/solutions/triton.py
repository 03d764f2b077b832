import torch
import triton
import triton.language as tl


@triton.jit
def _masked_scale_kernel(s_ptr, m_ptr, o_ptr, plane, scale, BLOCK: tl.constexpr):
    # grid: (blocks of one [Sq, Sk] plane, B * H planes); the mask is the same for every plane
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    base = tl.program_id(1).to(tl.int64) * plane
    valid = offs < plane
    keep = tl.load(m_ptr + offs, mask=valid, other=0) != 0
    # a score is only read where the mask keeps it
    s = tl.load(s_ptr + base + offs, mask=valid & keep, other=0.0)
    out = tl.where(keep, s * scale, float("-inf"))
    tl.store(o_ptr + base + offs, out, mask=valid)


def run(scores, causal_mask, scale, out=None):
    if out is None:
        out = torch.empty_like(scores)
    assert scores.is_contiguous() and out.is_contiguous() and causal_mask.is_contiguous()
    sq, sk = scores.shape[-2], scores.shape[-1]
    plane = sq * sk
    planes = scores.numel() // plane if plane else 0
    if planes == 0:
        return out
    mask_u8 = causal_mask.view(torch.uint8)
    block = 2048
    grid = (triton.cdiv(plane, block), planes)
    assert grid[1] <= 65535
    _masked_scale_kernel[grid](scores, mask_u8, out, plane, float(scale), BLOCK=block, num_warps=8)
    return out
