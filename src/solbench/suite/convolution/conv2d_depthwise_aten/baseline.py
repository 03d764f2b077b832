"""Baseline: the same depthwise convolution with channels_last (NHWC) operands, where cuDNN has dedicated
depthwise kernels; the output comes back channels_last (same values and shape)."""

import torch
import torch.nn.functional as F


def run(x, weight, bias):
    xc = x.contiguous(memory_format=torch.channels_last)
    wc = weight.contiguous(memory_format=torch.channels_last)
    return F.conv2d(xc, wc, bias, padding=weight.shape[-1] // 2, groups=x.shape[1])
