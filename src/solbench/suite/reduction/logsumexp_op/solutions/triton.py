"""logsumexp over the last dim: bf16 logits [T, V] in, fp32 lse [T] out.

One program per row streams the row once, keeping a running max and a running sum of exp(x - max),
rescaled whenever a block raises the max (online softmax); lse = max + log(sum).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _logsumexp_kernel(x_ptr, out_ptr, V, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    offs = tl.arange(0, BLOCK)
    m = tl.full([], float("-inf"), tl.float32)
    total = tl.full([], 0.0, tl.float32)
    for v0 in range(0, V, BLOCK):
        x = tl.load(x_row + v0 + offs, mask=(v0 + offs) < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # m_new == -inf only while every value so far is -inf; keep the sum 0 then instead of nan
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        total = total * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        m = m_new
    lse = tl.where(m == float("-inf"), m, m + tl.log(total))
    tl.store(out_ptr + row, lse)


def run(logits, lse=None):
    T, V = logits.shape
    if lse is None:
        lse = torch.empty((T,), dtype=torch.float32, device=logits.device)
    if T == 0:
        return lse
    block = min(4096, triton.next_power_of_2(V))
    _logsumexp_kernel[(T,)](logits, lse, V, logits.stride(0), BLOCK=block, num_warps=8)
    return lse
