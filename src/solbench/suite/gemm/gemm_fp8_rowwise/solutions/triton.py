"""Example Triton solution for gemm_fp8_rowwise: fp8 tensor-core GEMM, fp32 accumulation,
row/column scales applied in the epilogue, bf16 store."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fp8_gemm_kernel(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M, N, K,
                     stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group_size = GROUP_M * num_n
    first_m = (pid // group_size) * GROUP_M
    rows_in_group = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size) % rows_in_group
    pid_n = (pid % group_size) // rows_in_group

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    sa = tl.load(as_ptr + offs_m, mask=m_ok, other=0.0)
    sb = tl.load(bs_ptr + offs_n, mask=n_ok, other=0.0)
    out = acc * sa[:, None] * sb[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, out.to(tl.bfloat16), mask=m_ok[:, None] & n_ok[None, :])


def run(A, B, a_scale, b_scale):
    M, K = A.shape
    N = B.shape[0]
    out = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    if M <= 16:
        BLOCK_M, BLOCK_N, BLOCK_K, warps, stages = 16, 64, 128, 4, 4
    else:
        BLOCK_M, BLOCK_N, BLOCK_K, warps, stages = 128, 128, 128, 8, 3
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _fp8_gemm_kernel[grid](A, B, a_scale, b_scale, out, M, N, K,
                           A.stride(0), A.stride(1), B.stride(0), B.stride(1), out.stride(0), out.stride(1),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8,
                           num_warps=warps, num_stages=stages)
    return out
