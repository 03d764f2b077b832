"""Honest: pairwise (tree) summation in fp32: neighbours added level by level, an odd column padded with 0."""
import torch


def run(x):
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = torch.cat([x, x.new_zeros(x.shape[0], 1)], dim=-1)
        x = x[:, 0::2] + x[:, 1::2]
    return x[:, 0].contiguous()
