"""Log-sum-exp over the last dim; the bf16 logits are upcast to fp32 (float64 for the anchor), then the aten operator."""

import torch


def run(logits):
    acc = torch.promote_types(logits.dtype, torch.float32)
    return torch.logsumexp(logits.to(acc), dim=-1)
