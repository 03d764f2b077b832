"""Row-wise L2 norm, accumulated and returned in fp32 (float64 for the anchor); the aten operator is the specification."""

import torch


def run(x):
    acc = torch.promote_types(x.dtype, torch.float32)
    return torch.linalg.vector_norm(x, ord=2, dim=-1, dtype=acc)
