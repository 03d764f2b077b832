"""SiLU over the whole fp32 range in plain torch: sigmoid from exp(-|x|), which never overflows, with the branch
for each sign (1 / (1 + e) for x >= 0, e / (1 + e) below), so neither tail loses precision."""
import torch


def run(x):
    e = torch.exp(-x.abs())
    sig = torch.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return x * sig
