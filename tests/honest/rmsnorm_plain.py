"""Honest: RMSNorm in plain torch, the rsqrt of the mean square per row times the weight."""
import torch


def run(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w
