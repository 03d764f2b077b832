"""Per-token cross-entropy, written out (no reduction):

  loss[t] = m[t] + log(sum_v exp(logits[t, v] - m[t])) - logits[t, labels[t]],   m[t] = max_v logits[t, v]

fp32 math on the bf16 logits (float64 for the evaluator's anchor).
"""

import torch


def _math_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def run(logits, labels):
    x = logits.to(_math_dtype(logits))
    m = x.amax(dim=-1, keepdim=True)
    lse = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(dim=-1))
    target = torch.gather(x, 1, labels.unsqueeze(1)).squeeze(1)
    return lse - target
