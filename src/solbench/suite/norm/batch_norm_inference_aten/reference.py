"""BatchNorm in inference mode: normalise with the given running statistics, then the per-channel affine."""

import torch.nn.functional as F


def run(x, running_mean, running_var, weight, bias, eps):
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=False, momentum=0.0, eps=eps)
