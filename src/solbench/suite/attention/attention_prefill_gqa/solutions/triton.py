"""Example Triton solution for attention_prefill_gqa: a flash-attention forward.

One program per (query block, batch, query head). It walks the key blocks up to
the causal diagonal, keeps a running max and sum (online softmax, fp32), and
accumulates P @ V in fp32. Query head h reads KV head h // (Hq // Hkv).
Tensors are read in their [B, S, H, D] layout through strides.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, scale, S, Hq, GROUP,
              sq_b, sq_s, sq_h, sk_b, sk_s, sk_h, so_b, so_s, so_h,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // Hq
    h = pid_bh % Hq
    hk = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    m_ok = offs_m < S

    q = tl.load(q_ptr + b * sq_b + h * sq_h + offs_m[:, None] * sq_s + offs_d[None, :],
                mask=m_ok[:, None], other=0.0)
    k_base = k_ptr + b * sk_b + hk * sk_h
    v_base = v_ptr + b * sk_b + hk * sk_h
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    for n0 in range(0, hi, BLOCK_N):
        cols = n0 + offs_n
        n_ok = cols < S
        k = tl.load(k_base + cols[:, None] * sk_s + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        keep = (cols[None, :] <= offs_m[:, None]) & n_ok[None, :]
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * sk_s + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * so_b + h * so_h + offs_m[:, None] * so_s + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=m_ok[:, None])


def run(q, k, v, scale):
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    BLOCK_M, BLOCK_N = 128, 64
    grid = (triton.cdiv(S, BLOCK_M), B * Hq)
    _attn_fwd[grid](q, k, v, out, float(scale), S, Hq, Hq // Hkv,
                    q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                    out.stride(0), out.stride(1), out.stride(2),
                    D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8, num_stages=2)
    return out
