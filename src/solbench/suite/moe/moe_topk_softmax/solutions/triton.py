"""Example Triton solution for moe_topk_softmax.

Each program routes BLOCK_T tokens, holding all E logits of a token in registers.
It computes the softmax denominator, then selects k times the largest remaining
logit (lowest expert id among equals), masking it out after each pick, and
finally renormalises the k picked probabilities.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax(g_ptr, w_ptr, id_ptr, T, E, stride_g, K: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    kcols = tl.arange(0, BLOCK_K)
    r_ok = rows < T
    g = tl.load(g_ptr + rows.to(tl.int64)[:, None] * stride_g + cols[None, :],
                mask=r_ok[:, None] & (cols[None, :] < E), other=0.0)
    g = tl.where(cols[None, :] < E, g, float("-inf"))  # padding experts never win
    m = tl.max(g, 1)
    denom = tl.sum(tl.exp(g - m[:, None]), 1)
    weights = tl.zeros((BLOCK_T, BLOCK_K), dtype=tl.float32)
    ids = tl.zeros((BLOCK_T, BLOCK_K), dtype=tl.int32)
    for j in tl.static_range(K):
        best = tl.max(g, 1)
        best_id = tl.min(tl.where(g == best[:, None], cols[None, :], BLOCK_E), 1)
        p = tl.exp(best - m) / denom
        weights = tl.where(kcols[None, :] == j, p[:, None], weights)
        ids = tl.where(kcols[None, :] == j, best_id[:, None], ids)
        g = tl.where(cols[None, :] == best_id[:, None], float("-inf"), g)
    weights = weights / tl.sum(weights, 1)[:, None]
    out_mask = r_ok[:, None] & (kcols[None, :] < K)
    tl.store(w_ptr + rows.to(tl.int64)[:, None] * K + kcols[None, :], weights, mask=out_mask)
    tl.store(id_ptr + rows.to(tl.int64)[:, None] * K + kcols[None, :], ids, mask=out_mask)


def run(gating, top_k):
    T, E = gating.shape
    k = int(top_k)
    weights = torch.empty((T, k), device=gating.device, dtype=torch.float32)
    ids = torch.empty((T, k), device=gating.device, dtype=torch.int32)
    BLOCK_E = triton.next_power_of_2(E)
    BLOCK_T = max(1, min(64, 4096 // BLOCK_E))
    _topk_softmax[(triton.cdiv(T, BLOCK_T),)](gating, weights, ids, T, E, gating.stride(0), K=k,
                                              BLOCK_T=BLOCK_T, BLOCK_E=BLOCK_E,
                                              BLOCK_K=triton.next_power_of_2(k), num_warps=4)
    return weights, ids
