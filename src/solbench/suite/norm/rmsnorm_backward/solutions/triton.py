import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_bwd_rows_kernel(g_ptr, x_ptr, w_ptr, dx_ptr, dw_partial_ptr,
                             stride_g, stride_x, stride_dx, num_tokens, hidden, eps,
                             ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # each program handles ROWS consecutive rows: grad_x per row, and a partial
    # grad_weight over its rows kept in fp32 registers
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < hidden
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ROWS):
        row = pid * ROWS + i
        # rows past the end get an empty mask
        mask = cols < hidden * (row < num_tokens).to(tl.int32)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps)
        xhat = x * rstd
        gw = g * w
        c = tl.sum(gw * xhat, axis=0) / hidden
        dx = rstd * (gw - xhat * c)
        tl.store(dx_ptr + row * stride_dx + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += g * xhat
    tl.store(dw_partial_ptr + pid * hidden + cols, dw, mask=col_mask)


@triton.jit
def _sum_partials_kernel(partial_ptr, out_ptr, num_partials, hidden,
                         BLOCK_P: tl.constexpr, BLOCK_H: tl.constexpr):
    # grad_weight[cols] = sum over programs of the partials, in fp32
    pid = tl.program_id(0).to(tl.int64)
    cols = pid * BLOCK_H + tl.arange(0, BLOCK_H)
    col_mask = cols < hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, num_partials, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows[:, None] < num_partials) & col_mask[None, :]
        tile = tl.load(partial_ptr + rows[:, None] * hidden + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=col_mask)


def run(grad_out, x, weight, eps):
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    g2 = grad_out.reshape(-1, hidden)
    num_tokens = x2.shape[0]
    rows = max(4, triton.cdiv(num_tokens, 1024))
    num_progs = triton.cdiv(num_tokens, rows)
    grad_x = torch.empty_like(x2)
    partial = torch.empty((num_progs, hidden), dtype=torch.float32, device=x.device)
    grad_weight = torch.empty((hidden,), dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(hidden)
    num_warps = min(max(block // 256, 1), 16)
    _rmsnorm_bwd_rows_kernel[(num_progs,)](g2, x2, weight, grad_x, partial,
                                           g2.stride(0), x2.stride(0), grad_x.stride(0),
                                           num_tokens, hidden, eps,
                                           ROWS=rows, BLOCK=block, num_warps=num_warps)
    block_h = 128
    _sum_partials_kernel[(triton.cdiv(hidden, block_h),)](partial, grad_weight, num_progs, hidden,
                                                          BLOCK_P=32, BLOCK_H=block_h)
    return grad_x.reshape(x.shape), grad_weight
