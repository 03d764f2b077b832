"""Example Triton solution for attention_decode_gqa: split-KV decode attention.

Kernel 1: one program per (batch, KV head, split of the cache). The G query heads
that share a KV head are stacked as the rows of one tile, so each K/V block is
read once and used by all of them (bf16 tensor-core dots, fp32 online softmax).
Each program writes its partial max, sum and unnormalised output.
Kernel 2: per (batch, query head), merges the splits.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_split(q_ptr, k_ptr, v_ptr, m_ptr, l_ptr, acc_ptr, scale, L, GROUP, CHUNK, NSPLIT,
                  sq_b, sq_h, sk_b, sk_t, sk_h, Hkv,
                  D: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_bk = tl.program_id(0)
    split = tl.program_id(1)
    b = pid_bk // Hkv
    hk = pid_bk % Hkv
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = offs_g < GROUP
    heads = hk * GROUP + offs_g
    q = tl.load(q_ptr + b * sq_b + heads[:, None] * sq_h + offs_d[None, :], mask=g_ok[:, None], other=0.0)
    k_base = k_ptr + b * sk_b + hk * sk_h
    v_base = v_ptr + b * sk_b + hk * sk_h
    qk_scale = scale * 1.4426950408889634

    m_i = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, D), dtype=tl.float32)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, L)
    for t0 in range(start, end, BLOCK_N):
        t = t0 + offs_n
        t_ok = t < end
        k = tl.load(k_base + t[:, None] * sk_t + offs_d[None, :], mask=t_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(t_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + t[:, None] * sk_t + offs_d[None, :], mask=t_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    row = (b * Hkv * GROUP + heads) * NSPLIT + split          # index into [B, Hq, NSPLIT]
    tl.store(m_ptr + row, m_i, mask=g_ok)
    tl.store(l_ptr + row, l_i, mask=g_ok)
    tl.store(acc_ptr + row[:, None] * D + offs_d[None, :], acc, mask=g_ok[:, None])


@triton.jit
def _decode_merge(m_ptr, l_ptr, acc_ptr, o_ptr, NSPLIT, so_b, so_h, Hq,
                  D: tl.constexpr, BLOCK_S: tl.constexpr):
    pid = tl.program_id(0)   # b * Hq + h
    b = pid // Hq
    h = pid % Hq
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    s_ok = offs_s < NSPLIT
    m = tl.load(m_ptr + pid * NSPLIT + offs_s, mask=s_ok, other=float("-inf"))
    l = tl.load(l_ptr + pid * NSPLIT + offs_s, mask=s_ok, other=0.0)
    acc = tl.load(acc_ptr + (pid * NSPLIT + offs_s)[:, None] * D + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    m_all = tl.max(m, 0)
    w = tl.where(s_ok, tl.exp2(m - m_all), 0.0)
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + b * so_b + h * so_h + offs_d, out.to(o_ptr.dtype.element_ty))


def run(q, k_cache, v_cache, scale):
    B, Hq, D = q.shape
    L, Hkv = k_cache.shape[1], k_cache.shape[2]
    group = Hq // Hkv
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    BLOCK_N = 64
    # enough splits to give every SM a few programs, none of them empty
    want = max(1, min(triton.cdiv(4 * 132, B * Hkv), triton.cdiv(L, BLOCK_N)))
    chunk = triton.cdiv(triton.cdiv(L, want), BLOCK_N) * BLOCK_N
    nsplit = triton.cdiv(L, chunk)
    dev = q.device
    m_buf = torch.empty((B, Hq, nsplit), device=dev, dtype=torch.float32)
    l_buf = torch.empty((B, Hq, nsplit), device=dev, dtype=torch.float32)
    acc_buf = torch.empty((B, Hq, nsplit, D), device=dev, dtype=torch.float32)
    _decode_split[(B * Hkv, nsplit)](q, k_cache, v_cache, m_buf, l_buf, acc_buf, float(scale), L, group, chunk, nsplit,
                                     q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), Hkv,
                                     D=D, BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_N=BLOCK_N,
                                     num_warps=4, num_stages=3)
    out = torch.empty_like(q)
    _decode_merge[(B * Hq,)](m_buf, l_buf, acc_buf, out, nsplit, out.stride(0), out.stride(1), Hq,
                             D=D, BLOCK_S=triton.next_power_of_2(nsplit), num_warps=4)
    return out
