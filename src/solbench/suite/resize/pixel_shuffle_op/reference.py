"""Pixel shuffle, upscale factor 2 (the definition's const axis r); the aten operator is the specification."""

import torch.nn.functional as F

UPSCALE = 2


def run(x):
    return F.pixel_shuffle(x, UPSCALE)
