"""Honest: fp32 accuracy from TF32 products, as tensor cores emulate an fp32 GEMM (3xTF32). Each operand is split
into a TF32 high part (rounded to nearest, 10 explicit mantissa bits) and the TF32 rounding of the remainder;
high x low, low x high and high x high are products of TF32 values (exact in fp32 for each pair, summed in
fp32), the low x low term (about 2^-22 of each product) is dropped, and the three are accumulated per block of
32 along K, one accumulator, as a tensor-core kernel adds them. Emulated here in fp32 on any device."""
import torch

BLOCK_K = 32


def _tf32(x):
    """x rounded to TF32 (round to nearest, ties away: the hardware's conversion)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -8192).view(torch.float32)


def run(a, b):
    a_hi, b_hi = _tf32(a), _tf32(b)
    a_lo, b_lo = _tf32(a - a_hi), _tf32(b - b_hi)
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for k in range(0, a.shape[1], BLOCK_K):
        s = slice(k, k + BLOCK_K)
        acc += a_hi[:, s] @ b_lo[s]
        acc += a_lo[:, s] @ b_hi[s]
        acc += a_hi[:, s] @ b_hi[s]
    return acc
