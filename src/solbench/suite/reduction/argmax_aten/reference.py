"""Greedy token choice: index of the largest logit per row (the first one on a tie)."""

import torch


def run(logits):
    return torch.argmax(logits, dim=-1)
