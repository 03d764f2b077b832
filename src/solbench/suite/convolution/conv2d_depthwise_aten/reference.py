"""Depthwise 2-D convolution (groups = channels), stride 1, 'same' zero padding (odd K), with bias; in the input
dtype with fp32 accumulation (bf16 here, float64 for the evaluator's anchor)."""

import torch.nn.functional as F


def run(x, weight, bias):
    return F.conv2d(x, weight, bias, padding=weight.shape[-1] // 2, groups=x.shape[1])
