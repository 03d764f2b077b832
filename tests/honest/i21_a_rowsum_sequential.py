"""Honest: each row summed left to right in fp32, one running total (a scan's last element): the least
accurate honest order, whose rounding grows with the partial sums."""
import torch


def run(x):
    return torch.cumsum(x, dim=-1)[:, -1].contiguous()
