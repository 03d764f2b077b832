"""argmax over the last dim of fp32 logits [B, V] -> int64 [B], first index on a tie, NaN counting as the largest
value (torch's semantics).

Each row is cut into SPLIT chunks (enough programs to fill the GPU when B is small; SPLIT = 1 for large batches).
Kernel 1, grid (B, SPLIT): a program streams its chunk in BLOCK-wide blocks, keeping per-lane running (value,
index) pairs (a lane sees increasing indices, so a strict comparison keeps the first maximum), then reduces the
lanes with the same (value, index) order. With SPLIT = 1 it writes the int64 answer; otherwise (value, index) goes
to scratch and kernel 2 (one program per row) combines the chunks with the same order.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _better(v1, i1, v2, i2):
    # True where (v1, i1) wins: larger value, NaN beats any number, ties (or two NaNs) go to the smaller index
    n1 = v1 != v1
    n2 = v2 != v2
    same = (v1 == v2) | (n1 & n2)
    return (v1 > v2) | (n1 & (~n2)) | (same & (i1 < i2))


@triton.jit
def _combine(v1, i1, v2, i2):
    b = _better(v1, i1, v2, i2)
    return tl.where(b, v1, v2), tl.where(b, i1, i2)


@triton.jit
def _argmax_chunk_kernel(x_ptr, out_ptr, pv_ptr, pi_ptr, V, stride_x, CHUNK, SPLIT,
                         BLOCK: tl.constexpr, DIRECT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    x_row = x_ptr + row * stride_x
    start = s * CHUNK
    offs = tl.arange(0, BLOCK)
    best_v = tl.full([BLOCK], float("-inf"), tl.float32)
    best_i = tl.full([BLOCK], 2147483647, tl.int32)
    for c0 in range(0, CHUNK, BLOCK):
        idx = start + c0 + offs
        m = (idx < V) & ((c0 + offs) < CHUNK)
        x = tl.load(x_row + idx, mask=m, other=float("-inf")).to(tl.float32)
        idx = tl.where(m, idx, 2147483647)
        b = _better(x, idx, best_v, best_i)
        best_v = tl.where(b, x, best_v)
        best_i = tl.where(b, idx, best_i)
    v, i = tl.reduce((best_v, best_i), 0, _combine)
    if DIRECT:
        tl.store(out_ptr + row, i.to(tl.int64))
    else:
        tl.store(pv_ptr + row * SPLIT + s, v)
        tl.store(pi_ptr + row * SPLIT + s, i)


@triton.jit
def _argmax_combine_kernel(pv_ptr, pi_ptr, out_ptr, SPLIT, SPLIT_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, SPLIT_P2)
    m = offs < SPLIT
    v = tl.load(pv_ptr + row * SPLIT + offs, mask=m, other=float("-inf"))
    i = tl.load(pi_ptr + row * SPLIT + offs, mask=m, other=2147483647)
    _, best = tl.reduce((v, i), 0, _combine)
    tl.store(out_ptr + row, best.to(tl.int64))


def run(logits, token=None):
    B, V = logits.shape
    if token is None:
        token = torch.empty((B,), dtype=torch.int64, device=logits.device)
    if B == 0:
        return token
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    block = min(2048, triton.next_power_of_2(V))
    # about 1024 programs in all, chunks of at least 8192 elements
    split = max(1, min(triton.cdiv(V, 8192), triton.cdiv(1024, B)))
    chunk = triton.cdiv(triton.cdiv(V, split), block) * block
    split = triton.cdiv(V, chunk)
    if split == 1:
        _argmax_chunk_kernel[(B, 1)](logits, token, token, token, V, logits.stride(0), chunk, 1,
                                     BLOCK=block, DIRECT=True, num_warps=8)
        return token
    pv = torch.empty((B, split), dtype=torch.float32, device=logits.device)
    pi = torch.empty((B, split), dtype=torch.int32, device=logits.device)
    _argmax_chunk_kernel[(B, split)](logits, token, pv, pi, V, logits.stride(0), chunk, split,
                                     BLOCK=block, DIRECT=False, num_warps=8)
    _argmax_combine_kernel[(B,)](pv, pi, token, split, SPLIT_P2=triton.next_power_of_2(split), num_warps=1)
    return token
