import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(x_ptr, out_ptr, stride_t, stride_h, out_stride_t, out_stride_h, token, num_heads,
                  c, s, BLOCK_H: tl.constexpr, HALF: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, HALF)
    mask = (heads[:, None] < num_heads) & (dims[None, :] < HALF)
    base = x_ptr + token * stride_t + heads[:, None] * stride_h + dims[None, :]
    x1 = tl.load(base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + HALF, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * c[None, :] - x2 * s[None, :]
    o2 = x2 * c[None, :] + x1 * s[None, :]
    obase = out_ptr + token * out_stride_t + heads[:, None] * out_stride_h + dims[None, :]
    tl.store(obase, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(obase + HALF, o2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_neox_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr,
                      stride_qt, stride_qh, stride_kt, stride_kh, stride_cos, stride_sin,
                      stride_qot, stride_qoh, stride_kot, stride_koh,
                      num_q_heads, num_kv_heads,
                      BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, HALF: tl.constexpr):
    # one program per token: cos/sin loaded once, all query and key heads rotated
    token = tl.program_id(0).to(tl.int64)
    dims = tl.arange(0, HALF)
    c = tl.load(cos_ptr + token * stride_cos + dims).to(tl.float32)
    s = tl.load(sin_ptr + token * stride_sin + dims).to(tl.float32)
    _rotate_heads(q_ptr, q_out_ptr, stride_qt, stride_qh, stride_qot, stride_qoh, token, num_q_heads,
                  c, s, BLOCK_HQ, HALF)
    _rotate_heads(k_ptr, k_out_ptr, stride_kt, stride_kh, stride_kot, stride_koh, token, num_kv_heads,
                  c, s, BLOCK_HK, HALF)


def run(q, k, cos, sin):
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    _rope_neox_kernel[(num_tokens,)](
        q, k, cos, sin, q_out, k_out,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos.stride(0), sin.stride(0),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        num_q_heads, num_kv_heads,
        BLOCK_HQ=triton.next_power_of_2(num_q_heads), BLOCK_HK=triton.next_power_of_2(num_kv_heads),
        HALF=head_dim // 2, num_warps=4)
    return q_out, k_out
