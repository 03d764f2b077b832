import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_bwd_kernel(g_ptr, x_ptr, dx_ptr, stride_g, stride_x, stride_dx, inter,
                             BLOCK: tl.constexpr):
    # grid: (rows, column blocks of the intermediate dimension); each program writes
    # the matching columns of both halves of grad_x
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + inter + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(gate)
    d_gate = g * up * s * (1.0 + gate * (1.0 - s))
    d_up = g * gate * s
    tl.store(dx_ptr + row * stride_dx + cols, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dx_ptr + row * stride_dx + inter + cols, d_up.to(dx_ptr.dtype.element_ty), mask=mask)


def run(grad_out, x):
    inter = x.shape[-1] // 2
    x2 = x.reshape(-1, x.shape[-1])
    g2 = grad_out.reshape(-1, inter)
    grad_x = torch.empty_like(x2)
    block = 1024
    grid = (x2.shape[0], triton.cdiv(inter, block))
    _silu_and_mul_bwd_kernel[grid](g2, x2, grad_x, g2.stride(0), x2.stride(0), grad_x.stride(0), inter,
                                   BLOCK=block, num_warps=4)
    return grad_x.reshape(x.shape)
