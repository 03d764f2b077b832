import torch
import triton
import triton.language as tl


@triton.jit
def _geglu_bwd_kernel(g_ptr, x_ptr, dx_ptr, stride_g, stride_x, stride_dx, inter, BLOCK: tl.constexpr):
    # grid: (rows, column blocks of intermediate_size); each program writes d_gate and d_up for its columns
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    gate = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + inter + cols, mask=mask, other=0.0).to(tl.float32)
    c = 0.7978845608028654  # sqrt(2 / pi)
    u = c * (gate + 0.044715 * gate * gate * gate)
    # 0.5 * (1 + tanh(u)) == sigmoid(2u) =: s, and 1 - tanh(u)^2 == 4 s (1 - s)
    s = tl.sigmoid(2.0 * u)
    act = gate * s
    dact = s + 2.0 * gate * s * (1.0 - s) * c * (1.0 + 3.0 * 0.044715 * gate * gate)
    out_ty = dx_ptr.dtype.element_ty
    tl.store(dx_ptr + row * stride_dx + cols, (g * up * dact).to(out_ty), mask=mask)
    tl.store(dx_ptr + row * stride_dx + inter + cols, (g * act).to(out_ty), mask=mask)


def run(grad_out, x, grad_x=None):
    if grad_x is None:
        grad_x = torch.empty_like(x)
    inter = x.shape[-1] // 2
    g2 = grad_out.reshape(-1, inter)
    x2 = x.reshape(-1, x.shape[-1])
    dx2 = grad_x.view(-1, grad_x.shape[-1])
    assert g2.stride(1) == 1 and x2.stride(1) == 1 and dx2.stride(1) == 1
    rows = x2.shape[0]
    if rows == 0 or inter == 0:
        return grad_x
    block = 1024
    grid = (rows, triton.cdiv(inter, block))
    _geglu_bwd_kernel[grid](g2, x2, dx2, g2.stride(0), x2.stride(0), dx2.stride(0), inter,
                            BLOCK=block, num_warps=4)
    return grad_x
