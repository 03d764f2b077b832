"""y = x @ W.T + s * (x @ A.T) @ B.T: x [M, K], W [N, K], A [R, K], B [N, R], y [M, N].

Every product in promote_types(dtype, float32) (fp32 for bf16, float64 for the anchor), one rounding.
"""

import torch


def run(x, W, lora_A, lora_B, scaling):
    acc = torch.promote_types(x.dtype, torch.float32)
    xa = x.to(acc)
    base = torch.matmul(xa, W.to(acc).t())  # [M, N]
    low = torch.matmul(xa, lora_A.to(acc).t())  # [M, R]
    y = base + scaling * torch.matmul(low, lora_B.to(acc).t())
    return y.to(x.dtype)
