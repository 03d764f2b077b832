import torch
import triton
import triton.language as tl


@triton.jit
def _norm_heads(x_ptr, w_ptr, out_ptr, stride_t, stride_h, out_stride_t, out_stride_h,
                token, num_heads, eps, BLOCK_H: tl.constexpr, HEAD_DIM: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, HEAD_DIM)
    mask = (heads[:, None] < num_heads) & (dims[None, :] < HEAD_DIM)
    x = tl.load(x_ptr + token * stride_t + heads[:, None] * stride_h + dims[None, :],
                mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + dims).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / HEAD_DIM + eps)  # one statistic per head
    y = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + token * out_stride_t + heads[:, None] * out_stride_h + dims[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _qk_rmsnorm_kernel(q_ptr, k_ptr, qw_ptr, kw_ptr, q_out_ptr, k_out_ptr,
                       stride_qt, stride_qh, stride_kt, stride_kh,
                       stride_qot, stride_qoh, stride_kot, stride_koh,
                       num_q_heads, num_kv_heads, eps,
                       BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, HEAD_DIM: tl.constexpr):
    # one program per token normalizes all of its query and key heads
    token = tl.program_id(0).to(tl.int64)
    _norm_heads(q_ptr, qw_ptr, q_out_ptr, stride_qt, stride_qh, stride_qot, stride_qoh,
                token, num_q_heads, eps, BLOCK_HQ, HEAD_DIM)
    _norm_heads(k_ptr, kw_ptr, k_out_ptr, stride_kt, stride_kh, stride_kot, stride_koh,
                token, num_kv_heads, eps, BLOCK_HK, HEAD_DIM)


def run(q, k, q_norm_weight, k_norm_weight, eps):
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    _qk_rmsnorm_kernel[(num_tokens,)](
        q, k, q_norm_weight, k_norm_weight, q_out, k_out,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        num_q_heads, num_kv_heads, eps,
        BLOCK_HQ=triton.next_power_of_2(num_q_heads), BLOCK_HK=triton.next_power_of_2(num_kv_heads),
        HEAD_DIM=head_dim, num_warps=4)
    return q_out, k_out
