"""Stable ascending sort along the last dim: values and the original indices (ties keep their order)."""

import torch


def run(logits):
    values, indices = torch.sort(logits, dim=-1, stable=True)
    return values, indices
