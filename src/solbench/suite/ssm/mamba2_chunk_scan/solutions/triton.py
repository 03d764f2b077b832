"""Example Triton solution for mamba2_chunk_scan: the chunked SSD scan in three kernels.

Chunks of CHUNK steps (the result does not depend on the chunk size):
1. _chunk_state: per (batch x chunk, head) the state the chunk adds at its end,
   sum_j exp(a_last - a_j) dt_j x_j B_j^T, and the chunk's total log-decay.
2. _state_pass: per (batch x head, slice of the P x N state) a sequential pass over
   the chunks giving the state that enters each chunk.
3. _chunk_out: per (batch x chunk, head) the outputs: the causal in-chunk part
   ((C B^T) * exp(a_i - a_j) * dt_j) @ x, the incoming state's part exp(a_i) C h_in^T,
   and the D skip.
All math is fp32 (fp32 dots, tf32 on tensor-core GPUs); a_i is recomputed from dt
and A with a cumulative sum in kernels 1 and 3.
"""

import torch
import triton
import triton.language as tl

CHUNK = 64


@triton.jit
def _chunk_state(x_ptr, dt_ptr, a_ptr, b_ptr, st_ptr, dec_ptr, L, H, G, NC,
                 sx_b, sx_l, sx_h, sdt_b, sdt_l, sb_b, sb_l, sb_g,
                 P: tl.constexpr, N: tl.constexpr, Q: tl.constexpr):
    pid_bc = tl.program_id(0)
    h = tl.program_id(1)
    b = pid_bc // NC
    c = pid_bc % NC
    g = h // (H // G)
    offs_q = tl.arange(0, Q)
    offs_p = tl.arange(0, P)
    offs_n = tl.arange(0, N)
    pos = c * Q + offs_q
    ok = pos < L
    dt = tl.load(dt_ptr + b * sdt_b + pos * sdt_l + h, mask=ok, other=0.0)
    A = tl.load(a_ptr + h)
    a = tl.cumsum(dt * A, 0)
    a_last = tl.sum(dt * A, 0)
    w = tl.exp(a_last - a) * dt
    x = tl.load(x_ptr + b * sx_b + pos[:, None] * sx_l + h * sx_h + offs_p[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    Bm = tl.load(b_ptr + b * sb_b + pos[:, None] * sb_l + g * sb_g + offs_n[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    state = tl.dot(tl.trans(x * w[:, None]), Bm)                        # [P, N]
    base = ((b * NC + c) * H + h).to(tl.int64)
    tl.store(st_ptr + base * (P * N) + offs_p[:, None] * N + offs_n[None, :], state)
    tl.store(dec_ptr + base, a_last)


@triton.jit
def _state_pass(st_ptr, dec_ptr, hin_ptr, H, NC, PN: tl.constexpr, BLOCK: tl.constexpr):
    pid_bh = tl.program_id(0)
    b = pid_bh // H
    h = pid_bh % H
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    run = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(NC):
        base = ((b * NC + c) * H + h).to(tl.int64)
        tl.store(hin_ptr + base * PN + offs, run)
        run = tl.exp(tl.load(dec_ptr + base)) * run + tl.load(st_ptr + base * PN + offs)


@triton.jit
def _chunk_out(x_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, hin_ptr, y_ptr, L, H, G, NC,
               sx_b, sx_l, sx_h, sdt_b, sdt_l, sb_b, sb_l, sb_g,
               P: tl.constexpr, N: tl.constexpr, Q: tl.constexpr):
    pid_bc = tl.program_id(0)
    h = tl.program_id(1)
    b = pid_bc // NC
    c = pid_bc % NC
    g = h // (H // G)
    offs_q = tl.arange(0, Q)
    offs_p = tl.arange(0, P)
    offs_n = tl.arange(0, N)
    pos = c * Q + offs_q
    ok = pos < L
    dt = tl.load(dt_ptr + b * sdt_b + pos * sdt_l + h, mask=ok, other=0.0)
    A = tl.load(a_ptr + h)
    a = tl.cumsum(dt * A, 0)
    bc_off = b * sb_b + pos[:, None] * sb_l + g * sb_g + offs_n[None, :]
    Bm = tl.load(b_ptr + bc_off, mask=ok[:, None], other=0.0).to(tl.float32)
    Cm = tl.load(c_ptr + bc_off, mask=ok[:, None], other=0.0).to(tl.float32)
    x_off = b * sx_b + pos[:, None] * sx_l + h * sx_h + offs_p[None, :]
    x = tl.load(x_ptr + x_off, mask=ok[:, None], other=0.0).to(tl.float32)

    # in-chunk (causal) part
    cb = tl.dot(Cm, tl.trans(Bm))                                       # [Q, Q]
    causal = offs_q[:, None] >= offs_q[None, :]
    decay = tl.exp(tl.where(causal, a[:, None] - a[None, :], float("-inf")))
    y = tl.dot(cb * decay * dt[None, :], x)                             # [Q, P]
    # incoming state
    base = ((b * NC + c) * H + h).to(tl.int64)
    h_in = tl.load(hin_ptr + base * (P * N) + offs_p[:, None] * N + offs_n[None, :])   # [P, N]
    y += tl.dot(Cm, tl.trans(h_in)) * tl.exp(a)[:, None]
    y += tl.load(d_ptr + h) * x
    tl.store(y_ptr + x_off, y.to(y_ptr.dtype.element_ty), mask=ok[:, None])


def run(x, dt, A, B, C, D):
    bsz, L, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    x, dt, B, C = x.contiguous(), dt.contiguous(), B.contiguous(), C.contiguous()
    A, D = A.contiguous(), D.contiguous()
    nc = triton.cdiv(L, CHUNK)
    dev = x.device
    states = torch.empty((bsz, nc, H, P, N), device=dev, dtype=torch.float32)
    decays = torch.empty((bsz, nc, H), device=dev, dtype=torch.float32)
    h_in = torch.empty_like(states)
    y = torch.empty_like(x)
    strides = (x.stride(0), x.stride(1), x.stride(2), dt.stride(0), dt.stride(1),
               B.stride(0), B.stride(1), B.stride(2))
    _chunk_state[(bsz * nc, H)](x, dt, A, B, states, decays, L, H, G, nc, *strides,
                                P=P, N=N, Q=CHUNK, num_warps=4)
    BLOCK = 1024
    _state_pass[(bsz * H, triton.cdiv(P * N, BLOCK))](states, decays, h_in, H, nc, PN=P * N, BLOCK=BLOCK,
                                                      num_warps=4)
    _chunk_out[(bsz * nc, H)](x, dt, A, B, C, D, h_in, y, L, H, G, nc, *strides,
                              P=P, N=N, Q=CHUNK, num_warps=8)
    return y
