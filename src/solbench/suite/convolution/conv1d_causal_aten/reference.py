"""Causal depthwise conv1d + SiLU (Mamba-2's x/B/C convolution):

  out[b, d, l] = silu(bias[d] + sum_{j<K} weight[d, 0, j] * x[b, d, l - K + 1 + j]),  x = 0 for negative positions

written as the aten call: pad K-1 on both sides, keep the first L outputs. Math in fp32 (float64 for the
evaluator's anchor), one rounding to the input dtype at the end.
"""

import torch
import torch.nn.functional as F


def run(x, weight, bias):
    acc = torch.promote_types(x.dtype, torch.float32)
    K = weight.shape[-1]
    L = x.shape[-1]
    y = F.conv1d(x.to(acc), weight.to(acc), bias.to(acc), padding=K - 1, groups=x.shape[1])[..., :L]
    return F.silu(y).to(x.dtype)
