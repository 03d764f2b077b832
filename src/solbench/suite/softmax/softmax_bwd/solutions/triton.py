"""Softmax backward over the last dim: grad_x = y * (grad_y - sum_j(grad_y * y)), bf16 in/out, fp32 math.

Short rows (cols <= 4096): each program holds a [ROWS, BLOCK_C] tile of whole rows in registers, so y and
grad_y are read once. Long rows (vocabulary softmax): one program per row, pass 1 accumulates the dot
product block by block, pass 2 re-reads the row and writes grad_x.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_bwd_tile_kernel(y_ptr, g_ptr, out_ptr, rows, cols, stride_y, stride_g, stride_o,
                             ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_C)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    y = tl.load(y_ptr + r[:, None] * stride_y + c[None, :], mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + r[:, None] * stride_g + c[None, :], mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(g * y, axis=1)
    gx = y * (g - dot[:, None])
    tl.store(out_ptr + r[:, None] * stride_o + c[None, :], gx.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_row_kernel(y_ptr, g_ptr, out_ptr, cols, stride_y, stride_g, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    y_row = y_ptr + row * stride_y
    g_row = g_ptr + row * stride_g
    o_row = out_ptr + row * stride_o
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        mask = (c0 + offs) < cols
        y = tl.load(y_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
        acc += g * y
    dot = tl.sum(acc, axis=0)
    for c0 in range(0, cols, BLOCK):
        mask = (c0 + offs) < cols
        y = tl.load(y_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_row + c0 + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_row + c0 + offs, (y * (g - dot)).to(out_ptr.dtype.element_ty), mask=mask)


def run(y, grad_y, grad_x=None):
    cols = y.shape[-1]
    y2 = y.reshape(-1, cols)
    g2 = grad_y.reshape(-1, cols)
    if grad_x is None:
        grad_x = torch.empty_like(y)
    o2 = grad_x.view(-1, cols)
    rows = y2.shape[0]
    if rows == 0:
        return grad_x
    if cols <= 4096:
        block_c = triton.next_power_of_2(cols)
        n_rows = max(1, 4096 // block_c)
        _softmax_bwd_tile_kernel[(triton.cdiv(rows, n_rows),)](
            y2, g2, o2, rows, cols, y2.stride(0), g2.stride(0), o2.stride(0),
            ROWS=n_rows, BLOCK_C=block_c, num_warps=4)
    else:
        _softmax_bwd_row_kernel[(rows,)](y2, g2, o2, cols, y2.stride(0), g2.stride(0), o2.stride(0),
                                         BLOCK=4096, num_warps=8)
    return grad_x
