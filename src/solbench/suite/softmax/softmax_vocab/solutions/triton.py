"""Example Triton solution for softmax_vocab: one program per row, two passes.

Pass 1 streams the row once, keeping a running max and a running sum of
exp(x - max), rescaled whenever a block raises the max (online softmax). Pass 2 streams
it again and writes exp(x - max) / sum.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, V, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x
    y_row = y_ptr + row.to(tl.int64) * stride_y
    offs = tl.arange(0, BLOCK)
    m_row = tl.full([], float("-inf"), tl.float32)
    total = tl.full([], 0.0, tl.float32)
    for v0 in range(0, V, BLOCK):
        x = tl.load(x_row + v0 + offs, mask=(v0 + offs) < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_row, tl.max(x, 0))
        total = total * tl.exp(m_row - m_new) + tl.sum(tl.exp(x - m_new), 0)
        m_row = m_new
    inv = 1.0 / total
    for v0 in range(0, V, BLOCK):
        mask = (v0 + offs) < V
        x = tl.load(x_row + v0 + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + v0 + offs, tl.exp(x - m_row) * inv, mask=mask)


def run(logits):
    T, V = logits.shape
    probs = torch.empty((T, V), device=logits.device, dtype=torch.float32)
    BLOCK = min(4096, triton.next_power_of_2(V))
    _softmax_row[(T,)](logits, probs, V, logits.stride(0), probs.stride(0), BLOCK=BLOCK, num_warps=8)
    return probs
