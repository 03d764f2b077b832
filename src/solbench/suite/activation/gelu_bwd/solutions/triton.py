import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_bwd_kernel(g_ptr, x_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    # flat elementwise: one program per BLOCK elements, int64 offsets
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    cdf = 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327  # 1 / sqrt(2 pi)
    tl.store(dx_ptr + offs, (g * (cdf + x * pdf)).to(dx_ptr.dtype.element_ty), mask=mask)


def run(grad_out, x, grad_x=None):
    if grad_x is None:
        grad_x = torch.empty_like(x)
    assert grad_out.is_contiguous() and x.is_contiguous() and grad_x.is_contiguous()
    n = x.numel()
    if n == 0:
        return grad_x
    block = 2048
    _gelu_bwd_kernel[(triton.cdiv(n, block),)](grad_out, x, grad_x, n, BLOCK=block, num_warps=8)
    return grad_x
