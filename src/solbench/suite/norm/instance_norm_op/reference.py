"""Instance normalization with affine, batch statistics; the aten operator is the specification (fp32, float64 for the anchor)."""

import torch.nn.functional as F


def run(x, weight, bias, eps):
    return F.instance_norm(x, weight=weight, bias=bias, use_input_stats=True, eps=eps)
