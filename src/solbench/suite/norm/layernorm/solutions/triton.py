import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, stride_x, stride_out, hidden, eps,
                      BLOCK: tl.constexpr):
    # one program per row, two-pass statistics on the row held in registers
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < hidden
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / hidden
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / hidden
    rstd = tl.rsqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(out_ptr + row * stride_out + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, bias, eps):
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(hidden)
    num_warps = min(max(block // 256, 1), 16)
    _layernorm_kernel[(x2.shape[0],)](x2, weight, bias, out, x2.stride(0), out.stride(0), hidden, eps,
                                      BLOCK=block, num_warps=num_warps)
    return out.reshape(x.shape)
