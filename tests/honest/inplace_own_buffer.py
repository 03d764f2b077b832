"""Honest: the same in-place chain as the input-mutation exploit, but on a buffer it allocated (x * scale), so
the input is left untouched."""
import torch


def run(x, scale):
    z = x * scale
    z.sub_(z.amax(dim=-1, keepdim=True))
    z.exp_()
    z.div_(z.sum(dim=-1, keepdim=True))
    return z
