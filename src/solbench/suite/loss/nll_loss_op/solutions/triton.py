"""Per-sequence mean NLL: loss[b] = mean_s(-log_probs[b, s, labels[b, s]]), log_probs fp32 [B, S, V], labels int64.

Only one log-probability per token is read (a gather). One program per sequence loops over its S tokens in BLOCK
tiles: loads the labels, gathers log_probs[b, s, label] with int64 offsets, accumulates in fp32 and stores
-sum / S. A label equal to nll_loss's default ignore_index (-100) contributes 0 (but still counts in the mean
over S, as in the reference); other out-of-range labels are masked rather than read out of bounds.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _nll_kernel(lp_ptr, lab_ptr, loss_ptr, S, V, stride_b, stride_s, stride_lb, stride_ls, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s0 in range(0, S, BLOCK):
        s = s0 + offs
        m = s < S
        lab = tl.load(lab_ptr + b * stride_lb + s.to(tl.int64) * stride_ls, mask=m, other=-100)
        ok = m & (lab >= 0) & (lab < V)
        p = tl.load(lp_ptr + b * stride_b + s.to(tl.int64) * stride_s + lab, mask=ok, other=0.0)
        acc += p.to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(loss_ptr + b, -total / S)


def run(log_probs, labels, loss=None):
    B, S, V = log_probs.shape
    if loss is None:
        loss = torch.empty((B,), dtype=torch.float32, device=log_probs.device)
    if B == 0:
        return loss
    if log_probs.stride(2) != 1:
        log_probs = log_probs.contiguous()
    block = min(1024, triton.next_power_of_2(S))
    _nll_kernel[(B,)](log_probs, labels, loss, S, V, log_probs.stride(0), log_probs.stride(1),
                      labels.stride(0), labels.stride(1), BLOCK=block, num_warps=4)
    return loss
