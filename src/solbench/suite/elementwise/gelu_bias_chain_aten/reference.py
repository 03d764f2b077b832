"""y = gelu(x + bias) * scale with the exact (erf) GELU; math in fp32 (float64 for the anchor), one rounding to
the input dtype at the end."""

import torch
import torch.nn.functional as F


def run(x, bias, scale):
    acc = torch.promote_types(x.dtype, torch.float32)
    h = x.to(acc) + bias.to(acc)
    return (F.gelu(h) * scale.to(acc)).to(x.dtype)
