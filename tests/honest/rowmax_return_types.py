"""Honest: returns torch.max(x, dim=-1) as torch gives it, a torch.return_types.max (a structseq: a tuple subclass
that torch itself defines, whose iteration runs none of the solution's code)."""
import torch


def run(x):
    return torch.max(x, dim=-1)
