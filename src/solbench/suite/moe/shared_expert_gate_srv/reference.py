"""Qwen-MoE shared expert, gated and added to the routed experts' output:

  gate[t]   = sigmoid(hidden[t] . gate_weight)
  out[t]    = routed_out[t] + gate[t] * shared_out[t]

Math in fp32 (float64 for the evaluator's anchor); the output has hidden's dtype.
"""

import torch


def run(hidden, gate_weight, shared_out, routed_out):
    f = torch.promote_types(hidden.dtype, torch.float32)
    logit = torch.matmul(hidden.to(f), gate_weight.to(f).t())           # [T, 1]
    out = routed_out.to(f) + torch.sigmoid(logit) * shared_out.to(f)
    return out.to(hidden.dtype)
