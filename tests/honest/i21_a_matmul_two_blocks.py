"""Honest: C = a @ b with the reduction over K in blocks of 32, each block's product added to an fp32
accumulator in turn (what a tiled kernel's K loop does): every product and sum in fp32, in another order than
the reference's BLAS call."""
import torch

BLOCK_K = 32


def run(a, b):
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for k in range(0, a.shape[1], BLOCK_K):
        acc += a[:, k:k + BLOCK_K] @ b[k:k + BLOCK_K]
    return acc
