"""Elementwise sigmoid binary cross-entropy on logits; the aten operator is the specification, in fp32 (float64 for the anchor)."""

import torch
import torch.nn.functional as F


def run(logits, targets):
    acc = torch.promote_types(torch.promote_types(logits.dtype, targets.dtype), torch.float32)
    return F.binary_cross_entropy_with_logits(logits.to(acc), targets.to(acc), reduction="none")
