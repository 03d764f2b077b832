"""Honest: Kahan-compensated summation over blocks of 256 columns (each block summed by torch in fp32, the
block sums added with compensation): more accurate than the reference."""
import torch

BLOCK = 256


def run(x):
    s = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
    c = torch.zeros_like(s)
    for k in range(0, x.shape[1], BLOCK):
        y = x[:, k:k + BLOCK].sum(dim=-1) - c
        t = s + y
        c = (t - s) - y
        s = t
    return s
