"""log_softmax over the last dim: bf16 logits [T, V] in, fp32 log-probs out.

One program per row, two passes over the row. Pass 1 keeps a running max and a running sum of exp(x - max),
rescaled whenever a block raises the max (online softmax). Pass 2 writes (x - max) - log(sum).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _log_softmax_kernel(x_ptr, out_ptr, V, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_out
    offs = tl.arange(0, BLOCK)
    m = tl.full([], float("-inf"), tl.float32)
    total = tl.full([], 0.0, tl.float32)
    for v0 in range(0, V, BLOCK):
        x = tl.load(x_row + v0 + offs, mask=(v0 + offs) < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    log_total = tl.log(total)
    for v0 in range(0, V, BLOCK):
        mask = (v0 + offs) < V
        x = tl.load(x_row + v0 + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_row + v0 + offs, (x - m) - log_total, mask=mask)


def run(logits, logprobs=None):
    T, V = logits.shape
    if logprobs is None:
        logprobs = torch.empty((T, V), dtype=torch.float32, device=logits.device)
    if T == 0:
        return logprobs
    block = min(4096, triton.next_power_of_2(V))
    _log_softmax_kernel[(T,)](logits, logprobs, V, logits.stride(0), logprobs.stride(0), BLOCK=block, num_warps=8)
    return logprobs
